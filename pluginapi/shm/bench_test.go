package shm

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkPingPongCrossProcess measures one round trip per op between this
// process and a child: an 8-byte message down one ring, rung on one bell,
// echoed up the other. spin is how many polls each side makes before it
// sleeps on the futex.
func BenchmarkPingPongCrossProcess(b *testing.B) {
	for _, spin := range []int{0, 200, 2000, 5000} {
		b.Run(fmt.Sprintf("spin=%d", spin), func(b *testing.B) {
			a := newArena(b)
			d, e := newDuplex(b, a, 4096)
			c := startChild(b, a, "pingpong", append(d.args(), uint64(spin))...)
			pingPong(b, e, c, spin, 100) // warm up: child started and spinning
			b.ResetTimer()
			pingPong(b, e, c, spin, b.N)
			b.StopTimer()
			stopPingPong(b, e, c)
		})
	}
}

// BenchmarkRingThroughput streams 64-byte messages between two goroutines
// of one process, the consumer spinning briefly then sleeping on a bell.
func BenchmarkRingThroughput(b *testing.B) {
	r, err := InitRing(make([]byte, RingBytes(64<<10)))
	if err != nil {
		b.Fatal(err)
	}
	bell, err := NewBell(make([]byte, BellSize))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(64)
	b.ResetTimer()
	done := make(chan error, 1)
	go func() {
		for i := 0; i < b.N; i++ {
			m, err := r.ReserveWait(64, nil)
			if err != nil {
				done <- err
				return
			}
			m[0] = byte(i)
			r.Commit()
			bell.Ring()
		}
		done <- nil
	}()
	ready := func() bool { return !r.Empty() }
	for i := 0; i < b.N; i++ {
		if !bell.Wait(ready, 1000, 10*time.Second) {
			b.Fatalf("message %d: no wake-up", i)
		}
		if m := r.Peek(); len(m) != 64 || m[0] != byte(i) {
			b.Fatalf("message %d: %v", i, m)
		}
		r.Release()
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
