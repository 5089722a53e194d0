package main

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// TestSoak runs bench soak for 12 rounds with small sizes, a sample after
// each (counts, not times: a loaded machine ran fewer rounds in a fixed
// time, and the verdict had too few samples): every round must verify, the
// expected failures must happen, and the report must carry its samples
// and growth figures.
func TestSoak(t *testing.T) {
	kv := lastLine(t, "bench", "soak", "--rounds", "12",
		"--size", "4096", "--chain", "4", "--tasks", "8", "--matrix", "64", "--tiles", "2")
	if kv["verified"] != "true" || kv["mismatches"] != "0" {
		t.Fatalf("soak did not verify: %v", kv)
	}
	rounds, err := strconv.Atoi(kv["rounds"])
	if err != nil || rounds != 12 {
		t.Fatalf("rounds=%q, want 12", kv["rounds"])
	}
	if kv["failed_tasks"] != kv["rounds"] {
		t.Errorf("failed_tasks=%s, want one per round (%d)", kv["failed_tasks"], rounds)
	}
	if n, err := strconv.Atoi(kv["samples"]); err != nil || n < 8 {
		t.Errorf("samples=%q, want at least 8", kv["samples"])
	}
	for _, k := range []string{"rss_growth_pct", "heap_growth_pct", "plugins_growth_pct", "goroutines_growth_pct", "rss_per_min"} {
		if _, err := strconv.ParseFloat(kv[k], 64); err != nil {
			t.Errorf("%s=%q is not a number", k, kv[k])
		}
	}
	if kv["flat"] != "true" && kv["flat"] != "false" {
		t.Errorf("flat=%q", kv["flat"])
	}
}

// TestSoakGrowth: the verdict compares the last quarter's mean with the
// second quarter's, the first quarter being warm-up.
func TestSoakGrowth(t *testing.T) {
	var ss []soakSample
	for i := range 8 {
		rss := 100.0 // warm-up at 100, then 10, 10, then 11 in the last quarter
		switch {
		case i >= 6:
			rss = 11
		case i >= 2:
			rss = 10
		}
		ss = append(ss, soakSample{at: time.Duration(i) * time.Minute, rss: rss})
	}
	g, ok := growth(ss, func(s soakSample) float64 { return s.rss })
	if !ok || g.from != 10 || g.to != 11 || math.Abs(g.pct-10) > 1e-9 || math.Abs(g.perMin-0.25) > 1e-9 {
		t.Errorf("growth = %+v, %v; want 10 -> 11, +10%%, +0.25/min", g, ok)
	}
	if _, ok := growth(ss[:7], func(s soakSample) float64 { return s.rss }); ok {
		t.Errorf("growth of 7 samples: want too few")
	}
}
