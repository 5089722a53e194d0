package config

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// sizeUnits maps a lower-cased size suffix to its multiplier.
var sizeUnits = map[string]uint64{
	"":    1,
	"b":   1,
	"kb":  1000,
	"mb":  1000 * 1000,
	"gb":  1000 * 1000 * 1000,
	"tb":  1000 * 1000 * 1000 * 1000,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
}

// ParseSize parses a byte count: a non-negative integer, optionally followed
// (with or without a space) by a unit: B, KB, MB, GB, TB (powers of 1000) or
// KiB, MiB, GiB, TiB (powers of 1024). Units are case-insensitive. "8GiB",
// "8 GiB", "512MB" and "4096" are valid; "1.5GiB", "-1", "8GB2" and "8 gigs"
// are not, nor is a size that does not fit in 64 bits.
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("invalid size %q: want a non-negative integer number of bytes, optionally followed by KiB, MiB, GiB, TiB, KB, MB, GB or TB", s)
	}
	n, err := strconv.ParseUint(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: number out of range", s)
	}
	if i < len(t) && t[i] == '.' {
		return 0, fmt.Errorf("invalid size %q: fractional sizes are not supported; use a smaller unit", s)
	}
	unit := strings.TrimSpace(t[i:])
	mult, ok := sizeUnits[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (want B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, unit)
	}
	hi, lo := bits.Mul64(n, mult)
	if hi != 0 {
		return 0, fmt.Errorf("invalid size %q: does not fit in 64 bits", s)
	}
	return lo, nil
}
