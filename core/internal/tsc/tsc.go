// Package tsc reads the clock the runtime's processes share
// (CLOCK_MONOTONIC: pluginapi/wire.Now) from the processor's time-stamp
// counter, for the trace's submit times.
//
// Why. With a trace on, the submitting goroutine reads the clock once per
// task (its submit record's time). Through the vDSO that costs about 24 ns
// on the development machine, nearly half of what the trace costs that
// goroutine, which a pipeline of fine-grained tasks waits for
// (docs/design/tracing.md, Cost); the counter reads in about 10.
//
// Design. The kernel computes CLOCK_MONOTONIC from the same counter when
// its clocksource is "tsc" (it checked the counter is invariant and
// synchronised across CPUs), as base + (counter - last) × mult. A Clock
// does the same with its own anchor (a counter value, the clock's value
// read with it, and the slope): the slope is measured between the first
// anchor and the latest, at least 10 ms apart, so that the error of one
// reading does not count; the anchor is taken again every 250 µs of
// counter, so that the kernel's adjustments of its slope (NTP's, 500 ppm
// at most) cannot put the two clocks more than about 0.1 µs apart. Each
// anchor reads the counter around the clock and is not taken when the two
// readings are far apart (the goroutine was preempted between them). A
// slope that moved by more than 0.1% from the previous one (the counter
// jumped: a virtual machine migrated) starts the calibration over. Until
// the first slope, and where the counter is not the kernel's clocksource
// or the architecture has none this package reads, Now reads the clock.
//
// Rejected: the kernel's own slope and base from the vDSO data page (not
// an interface the kernel promises, and its layout changes between
// versions); a clock read every N submissions with the times between
// interpolated by count (wrong by as much as the submitter's pauses);
// CLOCK_MONOTONIC_COARSE (a resolution of milliseconds).
package tsc

import (
	"math/bits"
	"os"
	"strings"
	"sync/atomic"
)

// Anchoring parameters, in nanoseconds: the slope's shortest base, how
// often the anchor is taken again, and the longest gap between the two
// counter readings around the clock's; before the slope is known, the
// longest gap in ticks (a few µs at the usual frequencies).
const (
	calibrateNs  = 10_000_000
	reanchorNs   = 250_000
	maxGapNs     = 2_000
	maxGapTicks  = 10_000
	restartTries = 4
)

// Clock reads the clock now names from the counter where it can. Safe for
// concurrent use.
type Clock struct {
	now func() int64
	// tick reads the counter when anchoring (counter, but for tests).
	tick func() uint64
	ok   bool
	// first is the slope's base, cur the anchor Now counts from.
	first atomic.Pointer[anchor]
	cur   atomic.Pointer[anchor]
}

// anchor is a counter value and the clock's at that moment, with the
// slope, mult: nanoseconds per tick as a 32.32 fixed-point number (0: not
// yet measured), and the ticks after which to anchor again.
type anchor struct {
	tsc   uint64
	ns    int64
	mult  uint64
	limit uint64
}

// clocksource is where Linux says what its clocks count.
const clocksource = "/sys/devices/system/clocksource/clocksource0/current_clocksource"

// New returns a Clock for now, which must be CLOCK_MONOTONIC (wire.Now):
// it reads the counter when the kernel's clocksource is it, and now
// otherwise.
func New(now func() int64) *Clock {
	b, err := os.ReadFile(clocksource)
	return newClock(now, counter, hasCounter && err == nil && strings.TrimSpace(string(b)) == "tsc")
}

func newClock(now func() int64, tick func() uint64, ok bool) *Clock {
	c := &Clock{now: now, tick: tick, ok: ok}
	if ok {
		c.restart()
	}
	return c
}

// Counting says whether c reads the counter: the clocksource is the
// counter and the slope is measured.
func (c *Clock) Counting() bool {
	return c.ok && c.cur.Load().mult != 0
}

// Now is the clock's value, as now would read it.
func (c *Clock) Now() int64 {
	if !c.ok {
		return c.now()
	}
	return c.at(counter())
}

// at is the clock's value when the counter reads t.
func (c *Clock) at(t uint64) int64 {
	a := c.cur.Load()
	// A counter before the anchor wraps to a large d: anchor again.
	if d := t - a.tsc; a.mult != 0 && d < a.limit {
		return a.ns + int64(d*a.mult>>32)
	}
	return c.anchor()
}

// anchor reads the clock and the counter around it, makes them the
// anchor, with the slope since the first anchor once that is calibrateNs
// old, and returns the clock's value.
func (c *Clock) anchor() int64 {
	t0 := c.tick()
	ns := c.now()
	t1 := c.tick()
	f, a := c.first.Load(), c.cur.Load()
	t := t0 + (t1-t0)/2
	dns := ns - f.ns
	switch {
	case t1 < t0 || t < f.tsc || dns < 0:
		c.restart() // the counter or the clock went back
		return ns
	case dns < calibrateNs:
		return ns
	}
	mult := slope(dns, t-f.tsc)
	switch {
	case mult == 0 || (t1-t0)*mult>>32 > maxGapNs:
		// Preempted between the readings, or a counter slower than the
		// clock: next time.
	case a.mult != 0 && (mult > a.mult+a.mult>>10 || mult < a.mult-a.mult>>10):
		c.restart() // the counter jumped against the clock
	default:
		c.cur.Store(&anchor{tsc: t, ns: ns, mult: mult, limit: (reanchorNs << 32) / mult})
	}
	return ns
}

// slope is dns/dt as a 32.32 fixed-point number, 0 when it does not fit.
func slope(dns int64, dt uint64) uint64 {
	hi, lo := uint64(dns)>>32, uint64(dns)<<32
	if dt == 0 || hi >= dt {
		return 0
	}
	q, _ := bits.Div64(hi, lo, dt)
	return q
}

// restart makes the present the first anchor, the slope to be measured
// again from it: a reading of the clock with the counter read close
// around it, after a few tries.
func (c *Clock) restart() {
	var a *anchor
	for range restartTries {
		t0 := c.tick()
		ns := c.now()
		t1 := c.tick()
		a = &anchor{tsc: t0 + (t1-t0)/2, ns: ns}
		if t1 >= t0 && t1-t0 <= maxGapTicks {
			break
		}
	}
	c.first.Store(a)
	c.cur.Store(a)
}
