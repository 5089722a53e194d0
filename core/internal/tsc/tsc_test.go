package tsc

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Where the kernel counts CLOCK_MONOTONIC with the counter, a Clock reads
// the counter once calibrated, and never strays from the clock by more
// than a microsecond, read from several goroutines at once; elsewhere it
// reads the clock.
func TestFollowsMonotonic(t *testing.T) {
	c := New(wire.Now)
	end := wire.Now() + 3*calibrateNs
	const readers = 3
	worst := make([]int64, readers)
	var wg sync.WaitGroup
	for g := range readers {
		wg.Go(func() {
			for wire.Now() < end {
				before := wire.Now()
				v := c.Now()
				after := wire.Now()
				worst[g] = max(worst[g], before-v, v-after)
			}
		})
	}
	wg.Wait()
	w := slices.Max(worst)
	t.Logf("%v at most outside the clock's readings around it; counting: %v", time.Duration(w), c.Counting())
	if w > 1000 {
		t.Errorf("a reading %v outside the clock's readings around it", time.Duration(w))
	}
	if c.ok && !c.Counting() {
		t.Errorf("the counter is the clocksource, but after %v the clock still reads the clock", time.Duration(3*calibrateNs))
	}
}

// BenchmarkNow is a reading of the Clock, BenchmarkWireNow one of the
// clock it follows.
func BenchmarkNow(b *testing.B) {
	c := New(wire.Now)
	for range b.N {
		sink += c.Now()
	}
}

func BenchmarkWireNow(b *testing.B) {
	for range b.N {
		sink += wire.Now()
	}
}

var sink int64

// fake is a clock and a counter that the tests set: 2 ticks per ns, plus
// skew.
type fake struct {
	ns   int64
	skew int64
}

func (f *fake) now() int64         { return f.ns }
func (f *fake) tick() uint64       { return f.at(f.ns) }
func (f *fake) at(ns int64) uint64 { return uint64(1_000_000_000 + 2*ns + f.skew) }

// The anchor logic, on a counter and a clock the test sets: the clock is
// read until the first anchor is calibrateNs old, then the slope counts
// from the last anchor, taken again past its reach; a counter gone back
// or a slope that moved starts the calibration over.
func TestAnchors(t *testing.T) {
	f := &fake{ns: 1_000_000}
	c := newClock(f.now, f.tick, true)
	const unread = -1 // a clock that shows when it is read
	for _, step := range []struct {
		why      string
		clock    int64 // the clock, unread if the step must not read it
		counter  int64 // the time the counter says, skew aside
		skew     int64 // the counter's from this step on
		want     int64
		counting bool
	}{
		{"calibrating: the clock", 6_000_000, 6_000_000, 0, 6_000_000, false},
		{"calibrated: an anchor", 11_000_000, 11_000_000, 0, 11_000_000, true},
		{"between anchors: the slope, not the clock", unread, 11_100_000, 0, 11_100_000, true},
		{"past the anchor's reach: the clock again", 11_250_100, 11_250_100, 0, 11_250_100, true},
		{"the slope from the new anchor", unread, 11_300_000, 0, 11_300_000, true},
		{"the counter went back: over from the start", 11_400_000, 11_400_000, -100_000_000, 11_400_000, false},
		{"calibrating again", 15_000_000, 15_000_000, -100_000_000, 15_000_000, false},
		{"calibrated again", 21_400_000, 21_400_000, -100_000_000, 21_400_000, true},
		{"the counter 2% ahead: over from the start", 21_700_000, 21_700_000, -100_000_000 + 434_000, 21_700_000, false},
	} {
		f.ns, f.skew = step.clock, step.skew
		got := c.at(f.at(step.counter))
		if got != step.want || c.Counting() != step.counting {
			t.Fatalf("%s: %d, counting %v; want %d, %v", step.why, got, c.Counting(), step.want, step.counting)
		}
	}
}

// Where the counter is not the kernel's clocksource, a Clock reads the
// clock and never the counter.
func TestWithoutCounter(t *testing.T) {
	f := &fake{ns: 7_000}
	c := newClock(f.now, func() uint64 { t.Fatal("the counter was read"); return 0 }, false)
	for _, ns := range []int64{7_000, 20_000_000, 20_000_001} {
		f.ns = ns
		if got := c.Now(); got != ns || c.Counting() {
			t.Fatalf("clock at %d: Now %d, counting %v; want the clock, not counting", ns, got, c.Counting())
		}
	}
}
