package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"
)

// Ring memory layout. The producer's and the consumer's positions sit on
// cache lines of their own so that the two sides do not bounce one line
// between cores on every message.
const (
	ringMagicOff    = 0   // uint64, stored last by InitRing
	ringVersionOff  = 8   // uint32
	ringCapOff      = 16  // uint64, data bytes, a power of two
	ringHeadOff     = 64  // uint64, producer position (bytes ever written)
	ringTailOff     = 128 // uint64, consumer position (bytes ever released)
	ringPeekOff     = 136 // uint64, end of the record the consumer peeked last
	ringHeaderSize  = 192 // data follows, 64-byte aligned
	ringRecordHdr   = 8   // uint32 length + 4 spare bytes keeps records 8-aligned
	ringPadding     = ^uint32(0)
	ringMagic       = 0x474e4952_55505453 // "STPURING" little-endian
	ringVersion     = 2                   // 2: the consumer publishes what it peeked
	minRingCapacity = 4096
	maxRingCapacity = 1 << 31 // lengths are uint32
)

// ErrRingCorrupt is reported (through Ring.Err) when the consumer finds a
// record or position that the producer cannot have written: a bug or a
// crashed process on the other side.
var ErrRingCorrupt = errors.New("shm: ring corrupt")

// Ring is a single-producer single-consumer ring of variable-length
// messages in shared memory, used between two processes (or goroutines).
// One side produces (Reserve, Commit), the other consumes (Peek, Release);
// the same *Ring may serve both sides from two goroutines, but each side
// must be driven by one goroutine at a time.
//
// Positions are byte counts that only grow, published with atomic stores and
// read with atomic loads, which order the plain writes of message bytes
// before them (release/acquire in the Go memory model). A message is never
// split: when the end of the buffer is too short, the producer writes a
// padding record there and the message at the start.
type Ring struct {
	mem  []byte
	data []byte
	head *atomic.Uint64
	tail *atomic.Uint64
	peek *atomic.Uint64
	cap  uint64
	mask uint64

	_         [64]byte // the sides' local state on different cache lines too
	prodHead  uint64   // producer: head as this side last published it
	prodTail  uint64   // producer: last tail seen; refreshed when short of room
	prodAdv   uint64   // producer: bytes the reserved message advances head
	_         [64]byte
	consPos   uint64 // consumer: position of the next record
	consHead  uint64 // consumer: last head seen; refreshed when out of messages
	consNext  uint64 // consumer: position after the message Peek returned
	consValid bool   // consumer: consNext belongs to an un-released Peek
	// consPublish: Peek publishes what it shows (PublishPeeks).
	consPublish bool
	err         error
}

// RingBytes is the number of arena bytes a ring with capacity data bytes
// needs: header plus buffer. capacity is rounded up to a power of two of at
// least 4096 bytes. Carve the result with 64-byte alignment.
func RingBytes(capacity uint64) uint64 {
	return ringHeaderSize + ringCapacity(capacity)
}

func ringCapacity(c uint64) uint64 {
	c = max(c, minRingCapacity)
	if c > maxRingCapacity {
		return maxRingCapacity
	}
	return 1 << bits.Len64(c-1)
}

// InitRing formats mem as an empty ring and returns its creator-side handle.
// The capacity is the largest power of two that fits in mem after the
// header; mem must be 8-byte aligned (64 is better) and hold at least
// RingBytes(4096) bytes. mem must not be in use by another process yet.
func InitRing(mem []byte) (*Ring, error) {
	if len(mem) < ringHeaderSize+minRingCapacity {
		return nil, fmt.Errorf("shm: init ring: %d bytes, need at least %d", len(mem), ringHeaderSize+minRingCapacity)
	}
	if !aligned(mem, 8) {
		return nil, errors.New("shm: init ring: memory not 8-byte aligned")
	}
	capacity := uint64(1) << (bits.Len64(uint64(len(mem)-ringHeaderSize)) - 1)
	capacity = min(capacity, maxRingCapacity)
	clear(mem[:ringHeaderSize])
	binary.NativeEndian.PutUint32(mem[ringVersionOff:], ringVersion)
	binary.NativeEndian.PutUint64(mem[ringCapOff:], capacity)
	// The magic goes last and atomically, so an opener that sees it also
	// sees the rest of the header.
	atomicU64(mem, ringMagicOff).Store(ringMagic)
	return newRing(mem, capacity), nil
}

// OpenRing attaches to a ring that InitRing formatted, possibly in another
// process, after checking its header.
func OpenRing(mem []byte) (*Ring, error) {
	if len(mem) < ringHeaderSize+minRingCapacity {
		return nil, fmt.Errorf("shm: open ring: %d bytes, need at least %d", len(mem), ringHeaderSize+minRingCapacity)
	}
	if !aligned(mem, 8) {
		return nil, errors.New("shm: open ring: memory not 8-byte aligned")
	}
	if m := atomicU64(mem, ringMagicOff).Load(); m != ringMagic {
		return nil, fmt.Errorf("shm: open ring: bad magic %#x: not an initialised ring", m)
	}
	if v := binary.NativeEndian.Uint32(mem[ringVersionOff:]); v != ringVersion {
		return nil, fmt.Errorf("shm: open ring: version %d, this build speaks %d", v, ringVersion)
	}
	capacity := binary.NativeEndian.Uint64(mem[ringCapOff:])
	if capacity < minRingCapacity || capacity > maxRingCapacity || capacity&(capacity-1) != 0 ||
		capacity > uint64(len(mem)-ringHeaderSize) {
		return nil, fmt.Errorf("shm: open ring: bad capacity %d for %d bytes of memory", capacity, len(mem))
	}
	r := newRing(mem, capacity)
	if h, t := r.head.Load(), r.tail.Load(); h-t > capacity || h&7 != 0 || t&7 != 0 {
		return nil, fmt.Errorf("shm: open ring: %w: head %d, tail %d, capacity %d", ErrRingCorrupt, h, t, capacity)
	}
	return r, nil
}

func newRing(mem []byte, capacity uint64) *Ring {
	r := &Ring{
		mem:  mem,
		data: mem[ringHeaderSize : ringHeaderSize+capacity],
		head: atomicU64(mem, ringHeadOff),
		tail: atomicU64(mem, ringTailOff),
		peek: atomicU64(mem, ringPeekOff),
		cap:  capacity,
		mask: capacity - 1,
	}
	r.prodHead = r.head.Load()
	r.prodTail = r.tail.Load()
	r.consPos = r.tail.Load()
	r.consHead = r.head.Load()
	return r
}

// Capacity is the size of the ring's buffer in bytes.
func (r *Ring) Capacity() uint64 { return r.cap }

// MaxMessage is the largest message the ring accepts: half its capacity
// less the 8-byte record header. Half, because a message may need to skip
// the end of the buffer, and must still fit once the consumer catches up.
func MaxMessage(r *Ring) int { return int(r.cap/2 - ringRecordHdr) }

// Reserve returns an n-byte slot for the producer's next message, or nil if
// the ring lacks room right now (or ever: n < 0 or n > MaxMessage). The
// message becomes visible to the consumer on Commit; a second Reserve before
// Commit replaces the first.
func (r *Ring) Reserve(n int) []byte {
	r.prodAdv = 0
	if n < 0 || n > MaxMessage(r) {
		return nil
	}
	rec := ringRecordHdr + alignUp(uint64(n), 8)
	pos := r.prodHead & r.mask
	need := rec
	if contiguous := r.cap - pos; contiguous < rec {
		need += contiguous // padding record to the end of the buffer
	}
	if used := r.prodHead - r.prodTail; used > r.cap || r.cap-used < need {
		r.prodTail = r.tail.Load() // acquire: the consumer is done with the bytes
		// A tail ahead of head or beyond capacity can only come from a
		// broken consumer: report no room rather than overwrite.
		if used := r.prodHead - r.prodTail; used > r.cap || r.cap-used < need {
			return nil
		}
	}
	if need != rec {
		binary.NativeEndian.PutUint32(r.data[pos:], ringPadding)
		pos = 0
	}
	binary.NativeEndian.PutUint32(r.data[pos:], uint32(n))
	r.prodAdv = need
	start := pos + ringRecordHdr
	return r.data[start : start+uint64(n) : start+uint64(n)]
}

// Commit publishes the message last reserved. Without a pending Reserve it
// does nothing.
func (r *Ring) Commit() {
	if r.prodAdv == 0 {
		return
	}
	r.prodHead += r.prodAdv
	r.prodAdv = 0
	r.head.Store(r.prodHead) // release: the message bytes are visible first
}

// ReservedAt is where the consumer stands when the message reserved last
// is its next one: once Consumed passes it, the consumer has released that
// message; while the two are equal, the message is the consumer's next.
// Producer side, between Reserve and Commit.
func (r *Ring) ReservedAt() uint64 { return r.prodHead }

// PublishPeeks makes the consumer's Peek publish the end of each message
// it shows, for Peeked; without it Peeked stays 0. It costs an atomic store
// per message, so only rings whose consumer's peeks mean something to
// another process publish them (a worker's dispatch and scheduler rings).
// Consumer side, before the first Peek.
func (r *Ring) PublishPeeks() { r.consPublish = true }

// Peeked is the end of the message the consumer's Peek returned last, as
// it published it (PublishPeeks): a message reserved at position p (ReservedAt) has been
// shown to the consumer once Peeked is above p. A consumer that runs a
// message between Peek and Release, as a CPU worker runs its tasks, says
// by it which one it runs. Any process, any goroutine.
func (r *Ring) Peeked() uint64 { return r.peek.Load() }

// Consumed is the consumer's position as it last published it: how many
// bytes it has ever released. Any process with the ring open may ask, from
// any goroutine: it reads one word of the shared header.
func (r *Ring) Consumed() uint64 { return r.tail.Load() }

// ReserveWait is Reserve that waits for room: it spins, then yields the
// processor, then sleeps 20 to 200 µs at a time, checking alive (when not
// nil) between attempts so that a dead consumer ends the wait with an error.
// n > MaxMessage is an error at once.
func (r *Ring) ReserveWait(n int, alive func() bool) ([]byte, error) {
	if n < 0 || n > MaxMessage(r) {
		return nil, fmt.Errorf("shm: ring reserve %d bytes: messages are 0..%d bytes in a ring of %d", n, MaxMessage(r), r.cap)
	}
	sleep := 20 * time.Microsecond
	for i := 0; ; i++ {
		if b := r.Reserve(n); b != nil {
			return b, nil
		}
		switch {
		case i < 128:
			cpuPause()
			continue
		case i < 256:
			runtime.Gosched()
		default:
			time.Sleep(sleep)
			sleep = min(2*sleep, 200*time.Microsecond)
		}
		if alive != nil && !alive() {
			return nil, fmt.Errorf("shm: ring reserve %d bytes: consumer gone while the ring was full", n)
		}
	}
}

// Peek returns the consumer's next message, exactly as long as reserved, or
// nil if there is none. The slice aliases the ring: it is valid until
// Release. Peek again without Release returns the same message. If the ring
// is found corrupt Peek returns nil from then on and Err says why.
func (r *Ring) Peek() []byte {
	if r.err != nil {
		return nil
	}
	pos := r.consPos
	if r.consHead == pos {
		r.consHead = r.head.Load() // acquire: message bytes written before it
		if r.consHead == pos {
			return nil
		}
	}
	avail := r.consHead - pos
	if avail > r.cap || avail&7 != 0 {
		return r.corrupt("head %d is %d bytes ahead of the consumer at %d", r.consHead, avail, pos)
	}
	off := pos & r.mask
	n := binary.NativeEndian.Uint32(r.data[off:])
	if n == ringPadding {
		skip := r.cap - off
		if avail <= skip {
			return r.corrupt("padding at %d without a message after it", pos)
		}
		pos += skip
		avail -= skip
		off = 0
		n = binary.NativeEndian.Uint32(r.data[0:])
	}
	rec := ringRecordHdr + alignUp(uint64(n), 8)
	if n > uint32(MaxMessage(r)) || rec > avail || rec > r.cap-off {
		return r.corrupt("record of %d bytes at %d with %d bytes published", n, pos, avail)
	}
	if r.consPublish && !r.consValid {
		// A message the consumer has not been shown yet: publish that it
		// has now (Peeked).
		r.peek.Store(pos + rec)
	}
	r.consNext = pos + rec
	r.consValid = true
	start := off + ringRecordHdr
	return r.data[start : start+uint64(n) : start+uint64(n)]
}

// Release drops the message Peek returned, giving its room back to the
// producer. Without a preceding Peek it does nothing.
func (r *Ring) Release() {
	if !r.consValid {
		return
	}
	r.consValid = false
	r.consPos = r.consNext
	r.tail.Store(r.consPos) // release: we are done reading before the producer reuses
}

// Empty reports whether the consumer has no message to Peek. It belongs to
// the consumer side; !Empty() is the ready condition a consumer passes to
// Bell.Wait.
func (r *Ring) Empty() bool {
	if r.consHead != r.consPos {
		return false
	}
	r.consHead = r.head.Load()
	return r.consHead == r.consPos
}

// Drained reports whether the consumer has released every message the
// producer has published. Unlike Empty it reads only the shared header, so
// any process may ask, from a handle opened on the ring for the purpose:
// the core asks it of a scheduler ring whose producer has died.
func (r *Ring) Drained() bool { return r.head.Load() == r.tail.Load() }

// Backlog is how many bytes of published messages the consumer has not
// released yet, the one Peek returned included. Consumer side.
func (r *Ring) Backlog() uint64 { return r.head.Load() - r.consPos }

// Released is how many bytes the consumer has ever released: the
// difference of two readings is what it consumed between them, in the
// units of Backlog. Consumer side.
func (r *Ring) Released() uint64 { return r.consPos }

// Err is the reason the consumer stopped, if it found the ring corrupt.
func (r *Ring) Err() error { return r.err }

func (r *Ring) corrupt(format string, args ...any) []byte {
	r.err = fmt.Errorf("%w: %s", ErrRingCorrupt, fmt.Sprintf(format, args...))
	return nil
}
