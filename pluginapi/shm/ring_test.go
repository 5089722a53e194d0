package shm

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// ringMem is memory for a ring of the given capacity, from the Go heap (so
// that the race detector sees the ring's plain accesses) or from an arena.
func ringMem(t testing.TB, where string, capacity uint64) []byte {
	t.Helper()
	switch where {
	case "heap":
		return make([]byte, RingBytes(capacity))
	case "arena":
		a := newArena(t)
		s, err := a.Carve(RingBytes(capacity), 64)
		if err != nil {
			t.Fatal(err)
		}
		return a.Bytes(s)
	}
	t.Fatalf("bad backing %q", where)
	return nil
}

// msgByte is the content of byte j of message i in the ring tests.
func msgByte(i, j int) byte { return byte(i*131 + j) }

func TestRingBytes(t *testing.T) {
	tests := []struct{ capacity, want uint64 }{
		{0, ringHeaderSize + 4096},
		{4096, ringHeaderSize + 4096},
		{4097, ringHeaderSize + 8192},
		{1 << 20, ringHeaderSize + 1<<20},
		{1 << 40, ringHeaderSize + maxRingCapacity},
	}
	for _, tt := range tests {
		if got := RingBytes(tt.capacity); got != tt.want {
			t.Errorf("RingBytes(%d) = %d, want %d", tt.capacity, got, tt.want)
		}
	}
	for _, c := range []uint64{4096, 5000, 1 << 16} {
		r, err := InitRing(make([]byte, RingBytes(c)))
		if err != nil {
			t.Fatal(err)
		}
		if r.Capacity() != ringCapacity(c) {
			t.Errorf("capacity %d, want %d", r.Capacity(), ringCapacity(c))
		}
		if MaxMessage(r) != int(r.Capacity()/2-8) {
			t.Errorf("MaxMessage = %d", MaxMessage(r))
		}
	}
}

func TestRingInitOpenErrors(t *testing.T) {
	if _, err := InitRing(make([]byte, 4000)); err == nil {
		t.Fatal("InitRing of 4000 bytes")
	}
	if _, err := OpenRing(make([]byte, 4000)); err == nil {
		t.Fatal("OpenRing of 4000 bytes")
	}
	if _, err := InitRing(make([]byte, RingBytes(4096)+1)[1:]); err == nil || !strings.Contains(err.Error(), "aligned") {
		t.Fatalf("misaligned InitRing: %v", err)
	}
	if _, err := OpenRing(make([]byte, RingBytes(4096))); err == nil || !strings.Contains(err.Error(), "magic") {
		t.Fatalf("OpenRing of zeros: %v", err)
	}
	mem := make([]byte, RingBytes(8192))
	if _, err := InitRing(mem); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRing(mem[:RingBytes(4096)]); err == nil || !strings.Contains(err.Error(), "capacity") {
		t.Fatalf("OpenRing of a truncated ring: %v", err)
	}
	binary.NativeEndian.PutUint64(mem[ringHeadOff:], 1<<20)
	if _, err := OpenRing(mem); !errors.Is(err, ErrRingCorrupt) {
		t.Fatalf("OpenRing with head far ahead: %v", err)
	}
	binary.NativeEndian.PutUint64(mem[ringHeadOff:], 0)
	binary.NativeEndian.PutUint32(mem[ringVersionOff:], 7)
	if _, err := OpenRing(mem); err == nil || !strings.Contains(err.Error(), "version 7") {
		t.Fatalf("OpenRing of another version: %v", err)
	}
}

// TestRingWrapAround pushes 1e5 messages of random sizes through a small
// ring, producing in bursts until it is full and consuming in bursts, and
// checks every message's length, content and order.
func TestRingWrapAround(t *testing.T) {
	for _, where := range []string{"heap", "arena"} {
		t.Run(where, func(t *testing.T) {
			mem := ringMem(t, where, 4096)
			p, err := InitRing(mem)
			if err != nil {
				t.Fatal(err)
			}
			c, err := OpenRing(mem)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			const total = 100000
			var sizes []int // produced, not yet consumed
			sent, got, fulls := 0, 0, 0
			for got < total {
				for burst := rng.IntN(40); burst > 0 && sent < total; burst-- {
					n := rng.IntN(300)
					if rng.IntN(100) == 0 {
						n = rng.IntN(MaxMessage(p) + 1)
					}
					b := p.Reserve(n)
					if b == nil {
						fulls++
						break
					}
					if len(b) != n {
						t.Fatalf("Reserve(%d) gave %d bytes", n, len(b))
					}
					for j := range b {
						b[j] = msgByte(sent, j)
					}
					p.Commit()
					sizes = append(sizes, n)
					sent++
				}
				for burst := rng.IntN(40); burst > 0; burst-- {
					m := c.Peek()
					if m == nil {
						if !c.Empty() || len(sizes) != 0 {
							t.Fatalf("Peek nil with %d messages pending (err %v)", len(sizes), c.Err())
						}
						break
					}
					if c.Empty() {
						t.Fatal("Empty with a message to peek")
					}
					if len(m) != sizes[0] {
						t.Fatalf("message %d: %d bytes, want %d", got, len(m), sizes[0])
					}
					for j, v := range m {
						if v != msgByte(got, j) {
							t.Fatalf("message %d byte %d: %d, want %d", got, j, v, msgByte(got, j))
						}
					}
					c.Release()
					sizes = sizes[1:]
					got++
				}
			}
			if !c.Empty() || c.Peek() != nil {
				t.Fatal("ring not empty at the end")
			}
			if fulls == 0 {
				t.Fatal("the ring never filled up: the test does not test wrap-around under pressure")
			}
		})
	}
}

// TestRingFull fills a ring with fixed-size messages and checks that it
// refuses the next one, and that after one is consumed a message that needs
// padding at the end of the buffer fits.
func TestRingFull(t *testing.T) {
	r, err := InitRing(make([]byte, RingBytes(4096)))
	if err != nil {
		t.Fatal(err)
	}
	const n = 100 // records of 8 + 104 bytes: 36 fit in 4096, 64 bytes left
	count := 0
	for r.Reserve(n) != nil {
		r.Commit()
		count++
	}
	if count != 4096/112 {
		t.Fatalf("%d messages fit, want %d", count, 4096/112)
	}
	if r.Reserve(n) != nil || r.Reserve(57) != nil {
		t.Fatal("full ring still reserves")
	}
	if r.Reserve(56) == nil { // 64 bytes left: exactly one 56-byte message
		t.Fatal("the last 64 bytes are not usable")
	}
	r.Reserve(n) // replaces the pending 56-byte reservation with a failure
	r.Commit()   // so this publishes nothing
	if r.Peek() == nil {
		t.Fatal("no message")
	}
	r.Release()
	// Now 112 bytes free at the start and 64 at the end: the message must
	// go to the start behind a padding record.
	b := r.Reserve(n)
	if b == nil {
		t.Fatal("no room after a release")
	}
	copy(b, "after padding")
	r.Commit()
	for i := 1; i < count; i++ {
		if m := r.Peek(); len(m) != n {
			t.Fatalf("message %d: %d bytes", i, len(m))
		}
		r.Release()
	}
	if m := r.Peek(); len(m) != n || string(m[:13]) != "after padding" {
		t.Fatalf("message after padding: %q", m)
	}
	r.Release()
	if !r.Empty() {
		t.Fatal("not empty")
	}
}

// TestRingMaxMessage checks the size limit: MaxMessage fits at every
// position of an empty ring, one more byte never does.
func TestRingMaxMessage(t *testing.T) {
	r, err := InitRing(make([]byte, RingBytes(4096)))
	if err != nil {
		t.Fatal(err)
	}
	max := MaxMessage(r)
	for _, n := range []int{-1, max + 1, 1 << 30} {
		if r.Reserve(n) != nil {
			t.Fatalf("Reserve(%d) on an empty ring", n)
		}
		if _, err := r.ReserveWait(n, nil); err == nil {
			t.Fatalf("ReserveWait(%d) without error", n)
		}
	}
	for step := 0; step < 4096/8; step++ {
		b := r.Reserve(max)
		if b == nil {
			t.Fatalf("Reserve(MaxMessage) fails on an empty ring at %d", r.prodHead)
		}
		r.Commit()
		if len(r.Peek()) != max {
			t.Fatal("wrong message")
		}
		r.Release()
		r.Reserve(0) // move one record along
		r.Commit()
		r.Peek()
		r.Release()
	}
}

func TestRingPeekRelease(t *testing.T) {
	r, err := InitRing(make([]byte, RingBytes(4096)))
	if err != nil {
		t.Fatal(err)
	}
	r.Commit()  // nothing reserved: no-op
	r.Release() // nothing peeked: no-op
	if !r.Empty() || r.Peek() != nil {
		t.Fatal("empty ring has a message")
	}
	copy(r.Reserve(3), "abc")
	if !r.Empty() {
		t.Fatal("reserved but uncommitted message visible")
	}
	r.Commit()
	copy(r.Reserve(3), "def")
	r.Commit()
	first, second := string(r.Peek()), string(r.Peek())
	if first != "abc" || second != "abc" {
		t.Fatal("Peek twice does not return the same message")
	}
	r.Release()
	r.Release() // second Release without Peek: no-op
	if string(r.Peek()) != "def" {
		t.Fatal("second message lost")
	}
	r.Release()
	if m := r.Reserve(0); m == nil || len(m) != 0 {
		t.Fatal("Reserve(0)")
	}
	r.Commit()
	if m := r.Peek(); m == nil || len(m) != 0 {
		t.Fatalf("empty message peeked as %v", m)
	}
}

func TestRingBacklog(t *testing.T) {
	r, err := InitRing(make([]byte, RingBytes(4096)))
	if err != nil {
		t.Fatal(err)
	}
	if r.Backlog() != 0 || r.Released() != 0 {
		t.Fatalf("new ring: backlog %d, released %d", r.Backlog(), r.Released())
	}
	for _, n := range []int{3, 16, 0} {
		r.Reserve(n)
		r.Commit()
	}
	// Records are an 8-byte header and the message rounded up to 8.
	if got := r.Backlog(); got != 16+24+8 {
		t.Fatalf("backlog of 3 messages = %d bytes, want 48", got)
	}
	r.Peek()
	if r.Backlog() != 48 {
		t.Fatal("Peek changed the backlog")
	}
	r.Release()
	if r.Backlog() != 32 || r.Released() != 16 {
		t.Fatalf("after one release: backlog %d, released %d; want 32, 16", r.Backlog(), r.Released())
	}
	for r.Peek() != nil {
		r.Release()
	}
	if r.Backlog() != 0 || r.Released() != 48 {
		t.Fatalf("drained: backlog %d, released %d; want 0, 48", r.Backlog(), r.Released())
	}
}

// TestRingPositions follows messages by where they were reserved, across
// the padding at the buffer's end: each is shown to the consumer (Peeked
// above its position) only once it is the one Peek returns, and consumed
// only once released; the consumer side reads these from another handle.
func TestRingPositions(t *testing.T) {
	mem := make([]byte, RingBytes(4096))
	prod, err := InitRing(mem)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := OpenRing(mem)
	if err != nil {
		t.Fatal(err)
	}
	cons.PublishPeeks()
	watch, err := OpenRing(mem)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{1000, 1500, 1200, 1000, 8, 1900} // the fourth and the sixth wrap
	for round := 0; round < 3; round++ {
		var at []uint64
		for _, n := range sizes {
			if prod.Reserve(n) == nil {
				t.Fatalf("round %d: no room for %d bytes", round, n)
			}
			at = append(at, prod.ReservedAt())
			prod.Commit()
			if len(at) == 3 {
				break // room for three at a time
			}
		}
		for i, p := range at {
			if watch.Peeked() > p {
				t.Fatalf("round %d: message %d at %d shown before Peek (peeked %d)", round, i, p, watch.Peeked())
			}
			msg := cons.Peek()
			if msg == nil || len(msg) != sizes[i] {
				t.Fatalf("round %d: message %d: %d bytes, want %d", round, i, len(msg), sizes[i])
			}
			cons.Peek() // again: the same message
			if pk := watch.Peeked(); pk <= p || (i+1 < len(at) && pk > at[i+1]) {
				t.Fatalf("round %d: message %d at %d peeked: Peeked %d", round, i, p, pk)
			}
			if c := watch.Consumed(); c != p {
				t.Fatalf("round %d: message %d at %d at the head: Consumed %d", round, i, p, c)
			}
			cons.Release()
			if c := watch.Consumed(); c <= p {
				t.Fatalf("round %d: message %d at %d released: Consumed %d", round, i, p, c)
			}
		}
		sizes = append(sizes[3:], sizes[:3]...)
	}
}

func TestRingCorrupt(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(mem []byte)
	}{
		{"huge record", func(mem []byte) { binary.NativeEndian.PutUint32(mem[ringHeaderSize:], 1<<20) }},
		{"record past head", func(mem []byte) { binary.NativeEndian.PutUint32(mem[ringHeaderSize:], 100) }},
		{"head too far", func(mem []byte) { binary.NativeEndian.PutUint64(mem[ringHeadOff:], 1<<20) }},
		{"head misaligned", func(mem []byte) { binary.NativeEndian.PutUint64(mem[ringHeadOff:], 13) }},
		{"lone padding", func(mem []byte) { binary.NativeEndian.PutUint32(mem[ringHeaderSize:], ringPadding) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := make([]byte, RingBytes(4096))
			p, err := InitRing(mem)
			if err != nil {
				t.Fatal(err)
			}
			c, err := OpenRing(mem)
			if err != nil {
				t.Fatal(err)
			}
			p.Reserve(8)
			p.Commit() // a 16-byte record
			tt.break_(mem)
			if m := c.Peek(); m != nil {
				t.Fatalf("Peek of a corrupt ring = %v", m)
			}
			if !errors.Is(c.Err(), ErrRingCorrupt) {
				t.Fatalf("Err = %v", c.Err())
			}
		})
	}
}

// TestRingBadTail: a consumer that publishes a tail ahead of the head must
// not make the producer believe it has more room than the ring.
func TestRingBadTail(t *testing.T) {
	mem := make([]byte, RingBytes(4096))
	r, err := InitRing(mem)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		r.Reserve(100)
		r.Commit()
	}
	for _, tail := range []uint64{1 << 40, r.prodHead + 8} {
		binary.NativeEndian.PutUint64(mem[ringTailOff:], tail)
		r.prodTail = 0 // force a reload
		if r.Reserve(1000) != nil {
			t.Fatalf("Reserve with tail %d (head %d) succeeded", tail, r.prodHead)
		}
	}
}

func TestReserveWaitDeadConsumer(t *testing.T) {
	r, err := InitRing(make([]byte, RingBytes(4096)))
	if err != nil {
		t.Fatal(err)
	}
	for r.Reserve(1000) != nil {
		r.Commit()
	}
	calls := 0
	_, err = r.ReserveWait(1000, func() bool { calls++; return calls < 5 })
	if err == nil || !strings.Contains(err.Error(), "consumer gone") {
		t.Fatalf("ReserveWait on a full ring with a dead consumer: %v", err)
	}
}

// TestRingStress runs a producer and a consumer goroutine on one ring, the
// consumer sleeping on a bell, with ReserveWait on the producer side.
func TestRingStress(t *testing.T) {
	for _, where := range []string{"heap", "arena"} {
		t.Run(where, func(t *testing.T) {
			mem := ringMem(t, where, 8192)
			p, err := InitRing(mem)
			if err != nil {
				t.Fatal(err)
			}
			c, err := OpenRing(mem)
			if err != nil {
				t.Fatal(err)
			}
			bell, err := NewBell(make([]byte, BellSize))
			if err != nil {
				t.Fatal(err)
			}
			const total = 50000
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(3, 4))
				for i := 0; i < total; i++ {
					n := rng.IntN(200)
					b, err := p.ReserveWait(n, nil)
					if err != nil {
						t.Error(err)
						return
					}
					for j := range b {
						b[j] = msgByte(i, j)
					}
					p.Commit()
					bell.Ring()
				}
			}()
			rng := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < total; i++ {
				if !bell.Wait(func() bool { return !c.Empty() }, 50, 10*time.Second) {
					t.Fatalf("message %d: no wake-up within 10s", i)
				}
				m := c.Peek()
				if n := rng.IntN(200); len(m) != n {
					t.Fatalf("message %d: %d bytes, want %d", i, len(m), n)
				}
				for j, v := range m {
					if v != msgByte(i, j) {
						t.Fatalf("message %d byte %d: %d", i, j, v)
					}
				}
				c.Release()
			}
			wg.Wait()
		})
	}
}

// TestRingCrossProcess streams messages of random sizes to a child, which
// hashes them and sends the hash back on a second ring.
func TestRingCrossProcess(t *testing.T) {
	a := newArena(t)
	d, e := newDuplex(t, a, 8192)
	const total = 20000
	c := startChild(t, a, "ringsum", append(d.args(), total)...)
	h := fnv.New64a()
	var lenBuf [4]byte
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < total; i++ {
		n := rng.IntN(500)
		if rng.IntN(1000) == 0 {
			n = MaxMessage(e.send)
		}
		b, err := e.send.ReserveWait(n, c.alive)
		if err != nil {
			t.Fatalf("message %d: %v\n%s", i, err, c.stderr.String())
		}
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		binary.LittleEndian.PutUint32(lenBuf[:], uint32(n))
		h.Write(lenBuf[:])
		h.Write(b)
		e.send.Commit()
		e.sendBell.Ring()
	}
	if !e.recvBell.Wait(func() bool { return !e.recv.Empty() }, 100, 10*time.Second) {
		t.Fatalf("no checksum from the child\n%s", c.stderr.String())
	}
	m := e.recv.Peek()
	if len(m) != 16 {
		t.Fatalf("reply %x", m)
	}
	if n, sum := binary.LittleEndian.Uint64(m), binary.LittleEndian.Uint64(m[8:]); n != total || sum != h.Sum64() {
		t.Fatalf("child got %d messages hashing to %x; sent %d hashing to %x", n, sum, total, h.Sum64())
	}
	e.recv.Release()
	c.wait(t)
}
