package shm

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestBellOffsets(t *testing.T) {
	a := newArena(t)
	s, err := a.Carve(BellSize, 64)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		off uint64
		ok  bool
	}{
		{s.Offset, true},
		{s.Offset + 8, true},
		{s.Offset + 4, false},
		{a.Size() - BellSize, true},
		{a.Size() - 8, false},
		{a.Size(), false},
		{^uint64(0) &^ 7, false},
	}
	for _, tt := range tests {
		b, err := a.BellChecked(tt.off)
		if tt.ok != (err == nil) || tt.ok != (a.Bell(tt.off) != nil) || tt.ok != (b != nil) {
			t.Errorf("Bell(%d): %v, want ok=%v", tt.off, err, tt.ok)
		}
	}
	if _, err := NewBell(make([]byte, 4)); err == nil {
		t.Error("NewBell of 4 bytes")
	}
	if _, err := NewBell(make([]byte, 16)[4:]); err == nil {
		t.Error("NewBell of misaligned memory")
	}
}

func TestBellWait(t *testing.T) {
	a := newArena(t)
	s, err := a.Carve(BellSize, 64)
	if err != nil {
		t.Fatal(err)
	}
	b := a.Bell(s.Offset)
	yes := func() bool { return true }
	no := func() bool { return false }
	if !b.Wait(yes, 0, time.Second) || !b.Wait(yes, 100, 0) {
		t.Fatal("Wait on a ready condition")
	}
	if b.Wait(nil, 10, time.Millisecond) {
		t.Fatal("Wait(nil) returned true")
	}
	for _, spin := range []int{0, 1000} {
		start := time.Now()
		if b.Wait(no, spin, 20*time.Millisecond) {
			t.Fatal("Wait on a false condition returned true")
		}
		if el := time.Since(start); el < 20*time.Millisecond || el > 2*time.Second {
			t.Fatalf("spin %d: 20ms timeout took %v", spin, el)
		}
	}
	b.Ring() // nobody waits: must not block or fail
	if n := atomicU32(a.Bytes(s), bellSleepersOff).Load(); n != 0 {
		t.Fatalf("%d sleepers left after timeouts", n)
	}
}

func TestBellUrgent(t *testing.T) {
	b, err := NewBell(make([]byte, BellSize))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		delta int32
		want  bool
	}{{1, true}, {1, true}, {-1, true}, {-1, false}}
	if b.Urgent() {
		t.Fatal("new bell urgent")
	}
	for i, st := range steps {
		b.AddUrgent(st.delta)
		if b.Urgent() != st.want {
			t.Fatalf("step %d (%+d): Urgent() = %v, want %v", i, st.delta, !st.want, st.want)
		}
	}
	seq := b.Seq()
	b.Ring()
	if b.Seq() != seq+1 {
		t.Fatalf("Seq after a ring = %d, want %d", b.Seq(), seq+1)
	}
}

// TestSpinner: a waiter polls while its waits are short, sleeps at once
// after long ones, and polls again once they are short again.
func TestSpinner(t *testing.T) {
	b, err := NewBell(make([]byte, BellSize))
	if err != nil {
		t.Fatal(err)
	}
	s := Spinner{Spin: 500}
	yes := func() bool { return true }
	no := func() bool { return false }
	if s.polls() != 500 {
		t.Fatalf("new spinner polls %d times, want 500", s.polls())
	}
	for i := 0; i < 4; i++ {
		if s.Wait(b, no, 2*time.Millisecond) {
			t.Fatal("Wait on a false condition returned true")
		}
	}
	if s.polls() != 0 {
		t.Fatalf("after 2 ms waits the spinner polls %d times, want 0", s.polls())
	}
	for i := 0; i < 40; i++ {
		if !s.Wait(b, yes, time.Second) {
			t.Fatal("Wait on a true condition returned false")
		}
	}
	if s.polls() != 500 {
		t.Fatalf("after immediate waits the spinner polls %d times, want 500", s.polls())
	}
}

// TestBellWakesSleepers: several goroutines sleep on one bell (spin 0, no
// timeout) and one Ring, or one RingHandoff, must wake them all.
func TestBellWakesSleepers(t *testing.T) {
	for _, tt := range []struct {
		name string
		ring func(*Bell)
	}{
		{"Ring", (*Bell).Ring},
		{"RingHandoff", (*Bell).RingHandoff},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := newArena(t)
			s, err := a.Carve(BellSize, 64)
			if err != nil {
				t.Fatal(err)
			}
			b := a.Bell(s.Offset)
			var flag atomic.Bool
			done := make(chan bool)
			for i := 0; i < 4; i++ {
				go func() { done <- b.Wait(flag.Load, 0, 0) }()
			}
			time.Sleep(20 * time.Millisecond) // let them reach the futex
			flag.Store(true)
			tt.ring(b)
			for i := 0; i < 4; i++ {
				select {
				case ok := <-done:
					if !ok {
						t.Fatal("Wait without timeout returned false")
					}
				case <-time.After(5 * time.Second):
					t.Fatal("sleeper not woken")
				}
			}
			if n := atomicU32(a.Bytes(s), bellSleepersOff).Load(); n != 0 {
				t.Fatalf("%d sleepers left after the ring", n)
			}
			tt.ring(b) // nobody sleeps: must not block or fail
		})
	}
}

// TestBellPingPongCrossProcess bounces 10000 messages off a child process
// through two rings and two bells; a lost wake-up shows as a 10 s stall.
// spin 0 sends every wait through the futex.
func TestBellPingPongCrossProcess(t *testing.T) {
	for _, spin := range []int{0, 1000} {
		t.Run(fmt.Sprintf("spin=%d", spin), func(t *testing.T) {
			a := newArena(t)
			d, e := newDuplex(t, a, 4096)
			c := startChild(t, a, "pingpong", append(d.args(), uint64(spin))...)
			start := time.Now()
			pingPong(t, e, c, spin, 10000)
			t.Logf("10000 round trips in %v", time.Since(start))
			stopPingPong(t, e, c)
		})
	}
}
