package config

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"0", 0},
		{"4096", 4096},
		{"  4096  ", 4096},
		{"18446744073709551615", 1<<64 - 1},
		{"1B", 1},
		{"1KiB", 1 << 10},
		{"1MiB", 1 << 20},
		{"8GiB", 8 << 30},
		{"2TiB", 2 << 40},
		{"1KB", 1000},
		{"1MB", 1000000},
		{"8GB", 8000000000},
		{"3TB", 3000000000000},
		{"8 GiB", 8 << 30},
		{"8gib", 8 << 30},
		{"16mb", 16000000},
		{"16384KiB", 16384 << 10},
		{"16777215TiB", 16777215 << 40},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "invalid size"},
		{"   ", "invalid size"},
		{"GiB", "invalid size"},
		{"-1", "non-negative"},
		{"+1", "invalid size"},
		{"1.5GiB", "fractional"},
		{"1.", "fractional"},
		{"8 gigs", `unknown unit "gigs"`},
		{"8GB2", `unknown unit "GB2"`},
		{"8 G i B", "unknown unit"},
		{"1_000", "unknown unit"},
		{"0x10", "unknown unit"},
		{"18446744073709551616", "out of range"},
		{"16777216TiB", "64 bits"},
		{"17179869184GiB", "64 bits"},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err == nil {
			t.Errorf("ParseSize(%q) = %d, want error", tt.in, got)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), strconv.Quote(tt.in)) {
			t.Errorf("ParseSize(%q) error %q, want it to contain %q and the input", tt.in, err, tt.want)
		}
	}
}
