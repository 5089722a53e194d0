package shm

// Page warming.
//
// A process that attaches the arena maps the creator's pages through page
// tables of its own, so its first touch of each page faults, even when the
// page holds data already. On most machines that costs a fraction of a
// microsecond. Under shadow paging (a hypervisor that keeps the guest's page
// tables in software, as on the cloud VMs this project is measured on) it
// costs about 10 µs per 4 KiB page, and MADV_POPULATE_WRITE does not help:
// what is slow is the first hardware access through the new mapping. A
// tile of a 4096² single-precision matrix spans 256 pages (one per column),
// so the first kernels on each tile ran 2 to 10 times longer in a CPU
// driver than in the application that had written the matrix, and a
// Cholesky lost a fifth of its speed to it (docs/design/hot-path.md).
//
// A Warmer touches, in a process that attached the arena, the pages of each
// large span the creator allocates, from a thread that runs only when its
// CPU would otherwise be idle (SCHED_IDLE): while the application fills
// its data, or between tasks. Only pages that hold memory already
// (mincore): touching a page gives it memory, and an application may
// allocate much more than it writes. The others are looked at again every
// warmRetry, so the warmer follows the application's writes, until none
// has been written for warmGiveUp. A kernel that reaches a page first
// simply takes the fault itself, as before.
//
// The protocol, in the arena header:
//
//   - The creator logs every Alloc and Free of largeAlloc bytes or more in a
//     ring of logSlots entries. An entry is {stamp, offset, size|free bit};
//     stamp is the entry's index plus one, written last, and zeroed first
//     when the slot is reused, so a reader that sees the same stamp before
//     and after reading offset and size has a whole entry. hdrLogSeq counts
//     entries (modulo 2^32) and is the futex word warmers sleep on.
//   - A warmer claims one of warmerSlots slots {pid, active}. Before it
//     touches a chunk of pages it publishes the chunk in active and then
//     reads the log again; the creator logs a Free before it reads the
//     slots. With sequentially consistent atomics one of the two sees the
//     other (Dekker's handshake): either the warmer sees the Free and skips
//     the span, or the creator sees the chunk and defers punching the pages
//     under it until no warmer is there (retried at the next Alloc or
//     Free). Without it a warmer touching a page just punched would give
//     the page its memory back: a read fault on a hole allocates.
//   - A warmer that falls more than logSlots entries behind, or reads an
//     entry overwritten under it, forgets every span it had queued: it
//     cannot know which of them were freed.
//
// Rejected: polling mincore over the whole heap from each plugin (the heap
// is as large as the machine's memory, and a page resident in the file says
// nothing about this process's page tables); a gRPC call to each driver per
// allocation (80 µs or more, and the core would need to know which drivers
// touch RAM); warming synchronously in Register (the application would pay
// the faults twice instead of once).

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Header layout of the warming protocol (see arena.go for the words before).
const (
	hdrLogSeq   = 40 // uint32: entries logged, modulo 2^32; the futex word
	hdrWarmers  = 64
	warmerSlots = 8
	warmerSize  = 16 // {pid uint64, active uint64}
	hdrLog      = hdrWarmers + warmerSlots*warmerSize
	logSlots    = 160 // the header stays within a page
	logEntry    = 24  // {stamp, offset, size|logFreed}
	logFreed    = 1 << 63

	// warmChunk is how many pages a warmer touches between two looks at
	// the log: about half a millisecond under shadow paging.
	warmChunk = 64
)

// A span's pages that hold no memory yet (allocated, not written) are
// looked at again every warmRetry, until none has been written for
// warmGiveUp.
const (
	warmRetry  = 5 * time.Millisecond
	warmGiveUp = time.Second
)

// logSpan appends an Alloc or a Free of [off, off+size) to the header's log
// and wakes the warmers. The caller holds a.mu.
func (a *Arena) logSpan(off, size uint64, freed bool) {
	slot := hdrLog + int(a.logged%logSlots)*logEntry
	stamp := atomicU64(a.mem, slot)
	stamp.Store(0)
	atomicU64(a.mem, slot+8).Store(off)
	if freed {
		size |= logFreed
	}
	atomicU64(a.mem, slot+16).Store(size)
	a.logged++
	stamp.Store(a.logged)
	seq := atomicU32(a.mem, hdrLogSeq)
	seq.Store(uint32(a.logged))
	if len(a.WarmerPIDs()) > 0 {
		futex(seq, futexWake, math.MaxInt32, nil)
	}
}

// WarmerPIDs lists the processes holding a warmer slot of the arena, for
// statistics and tests.
func (a *Arena) WarmerPIDs() []int {
	var pids []int
	for i := 0; i < warmerSlots; i++ {
		if pid := atomicU64(a.mem, hdrWarmers+i*warmerSize).Load(); pid != 0 {
			pids = append(pids, int(pid))
		}
	}
	return pids
}

// warmed reports whether a warmer is touching pages of [lo, hi) now, in
// which case the creator must not punch them. A slot whose process is gone
// is freed on the way. The caller holds a.mu.
func (a *Arena) warmed(lo, hi uint64) bool {
	for i := 0; i < warmerSlots; i++ {
		pid := atomicU64(a.mem, hdrWarmers+i*warmerSize).Load()
		act := atomicU64(a.mem, hdrWarmers+i*warmerSize+8).Load()
		if pid == 0 || act == 0 {
			continue
		}
		start, n := (act>>16)*pageSize, (act&0xffff)*pageSize
		if start >= hi || start+n <= lo || a.reclaimSlot(i, pid) {
			continue
		}
		return true
	}
	return false
}

// reclaimSlot frees warmer slot i, held by pid, when that process is gone
// (a driver killed and restarted), and reports whether it did.
func (a *Arena) reclaimSlot(i int, pid uint64) bool {
	if !errors.Is(unix.Kill(int(pid), 0), unix.ESRCH) || !atomicU64(a.mem, hdrWarmers+i*warmerSize).CompareAndSwap(pid, 0) {
		return false
	}
	atomicU64(a.mem, hdrWarmers+i*warmerSize+8).Store(0)
	return true
}

// punchFree releases the pages of [lo, hi), a range of free heap, or
// defers that while a warmer is touching some of them. The caller holds
// a.mu. It reports whether the pages were released.
func (a *Arena) punchFree(lo, hi uint64) bool {
	if lo < hi && a.warmed(lo, hi) {
		a.deferred = append(a.deferred, freeRange{off: lo, end: hi})
		return false
	}
	return a.punch(lo, hi)
}

// retryDeferred punches what is still free of the ranges punchFree deferred,
// once no warmer is on them. The caller holds a.mu.
func (a *Arena) retryDeferred() {
	kept := a.deferred[:0]
	for _, d := range a.deferred {
		if a.warmed(d.off, d.end) {
			kept = append(kept, d)
			continue
		}
		for _, f := range a.free {
			lo := max(alignUp(f.off, pageSize), d.off)
			hi := min(alignDown(f.end, pageSize), d.end)
			if lo < hi {
				a.punch(lo, hi)
			}
		}
	}
	a.deferred = kept
}

// Warmer touches, in a process that attached the arena, the pages of the
// large spans the creator allocates, so that kernels find them mapped (see
// the top of warm.go for why and how). Run it on a goroutine of its own;
// Stop ends it.
type Warmer struct {
	a     *Arena
	slot  int
	pid   uint64
	next  uint64 // index of the next log entry to read
	queue []freeRange
	pages atomic.Uint64
	stop  atomic.Bool
	done  chan struct{}
	// later are the ranges of pages found without memory, idle the looks
	// at them since a page was last touched.
	later []freeRange
	idle  int
	// noPopulate is set once MADV_POPULATE_WRITE is refused.
	noPopulate bool
}

// ErrNoWarmerSlot is returned by NewWarmer when every slot of the arena's
// header is taken.
var ErrNoWarmerSlot = errors.New("shm: every warmer slot of the arena is taken")

// NewWarmer claims a warmer slot of an attached arena. The creator's own
// mapping needs no warming (its process wrote the pages), so on the
// creator's arena it returns an error.
func (a *Arena) NewWarmer() (*Warmer, error) {
	if a.creator {
		return nil, errors.New("shm: the arena's creator needs no warmer: its own mapping is the one its pages were written through")
	}
	pid := uint64(os.Getpid())
	for i := 0; i < warmerSlots; i++ {
		slot := atomicU64(a.mem, hdrWarmers+i*warmerSize)
		if old := slot.Load(); old != 0 {
			a.reclaimSlot(i, old)
		}
		if slot.CompareAndSwap(0, pid) {
			w := &Warmer{a: a, slot: i, pid: pid, done: make(chan struct{})}
			// Start with what the log still holds: spans allocated just
			// before, as the application's data is when a driver restarts.
			cur := uint64(atomicU32(a.mem, hdrLogSeq).Load())
			w.next = cur - min(cur, logSlots)
			return w, nil
		}
	}
	return nil, ErrNoWarmerSlot
}

// Pages is the number of pages the warmer has touched so far.
func (w *Warmer) Pages() uint64 { return w.pages.Load() }

// Run warms pages until Stop. It locks its goroutine to a thread of its own
// and makes that thread SCHED_IDLE, or failing that the lowest nice value;
// if neither is allowed it returns an error at once rather than compete
// with the kernels for CPU. The thread exits with Run.
func (w *Warmer) Run() error {
	defer close(w.done)
	defer w.release()
	runtime.LockOSThread() // never unlocked: the thread goes with its priority
	if err := idleThread(); err != nil {
		return err
	}
	seq := atomicU32(w.a.mem, hdrLogSeq)
	vec := make([]byte, warmChunk)
	for !w.stop.Load() {
		w.readLog()
		if len(w.queue) == 0 {
			w.publish(0, 0)
			if w.stop.Load() || uint32(w.next) != seq.Load() {
				continue
			}
			if len(w.later) == 0 {
				futex(seq, futexWait, uint32(w.next), nil)
				continue
			}
			// Pages not written yet: look again in a while, unless
			// nothing has been written for warmGiveUp.
			ts := unix.NsecToTimespec(warmRetry.Nanoseconds())
			futex(seq, futexWait, uint32(w.next), &ts)
			if w.idle++; w.idle > int(warmGiveUp/warmRetry) {
				w.later, w.idle = nil, 0
			}
			w.queue, w.later = w.later, w.queue[:0]
			continue
		}
		sp := &w.queue[0]
		n := min((sp.end-sp.off)/pageSize, warmChunk)
		w.publish(sp.off, n)
		if seq.Load() != uint32(w.next) {
			continue // a Free may concern this chunk: read it first
		}
		w.warmChunk(sp.off, n, vec[:n])
		sp.off += n * pageSize
		if sp.off >= sp.end {
			w.queue = w.queue[1:]
		}
	}
	return nil
}

// warmChunk touches the pages of [off, off+n pages) that hold memory, and
// leaves those that do not for later: touching them would give them
// memory, and an application may allocate far more than it writes.
func (w *Warmer) warmChunk(off, n uint64, vec []byte) {
	chunk := w.a.mem[off : off+n*pageSize]
	// x/sys has no mincore wrapper at this version.
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&chunk[0])), uintptr(len(chunk)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		clear(vec) // cannot tell: touch nothing, look again later
	}
	for i := uint64(0); i < n; {
		j := i + 1
		for j < n && vec[j]&1 == vec[i]&1 {
			j++
		}
		lo, hi := off+i*pageSize, off+j*pageSize
		if vec[i]&1 == 0 {
			if k := len(w.later) - 1; k >= 0 && w.later[k].end == lo {
				w.later[k].end = hi
			} else {
				w.later = append(w.later, freeRange{off: lo, end: hi})
			}
			i = j
			continue
		}
		// The page tables first, in one system call (where the kernel
		// has it): the touches below then cost half as much (7 µs a page
		// instead of 13.5 under shadow paging).
		if !w.noPopulate {
			if err := unix.Madvise(w.a.mem[lo:hi], unix.MADV_POPULATE_WRITE); errors.Is(err, unix.EINVAL) {
				w.noPopulate = true // before Linux 5.14
			}
		}
		// A write, not a read: a page first mapped by a read fault on a
		// hole stayed slow for the kernels after the application wrote
		// it (a gemm pass 2.4x its warm time, against 1.04x); adding 0
		// atomically changes no value whatever another process writes.
		for p := lo; p < hi; p += pageSize {
			atomicU32(w.a.mem, int(p)).Add(0)
		}
		w.pages.Add(j - i)
		w.idle = 0
		i = j
	}
}

// Stop ends Run and waits for it; the warmer's slot is given back.
func (w *Warmer) Stop() {
	w.stop.Store(true)
	// The futex word is the creator's and does not change here, so a wake
	// may come between Run's look at stop and its sleep: wake until it
	// ends.
	for {
		futex(atomicU32(w.a.mem, hdrLogSeq), futexWake, math.MaxInt32, nil)
		select {
		case <-w.done:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// publish announces the chunk of n pages at off the warmer is about to touch
// (n is 0 when it touches none).
func (w *Warmer) publish(off, n uint64) {
	var v uint64
	if n > 0 {
		v = (off/pageSize)<<16 | n
	}
	atomicU64(w.a.mem, hdrWarmers+w.slot*warmerSize+8).Store(v)
}

// release gives the slot back.
func (w *Warmer) release() {
	w.publish(0, 0)
	atomicU64(w.a.mem, hdrWarmers+w.slot*warmerSize).CompareAndSwap(w.pid, 0)
}

// readLog brings the queue up to date with the entries logged since the last
// call: allocations are queued, a Free drops the queued spans it overlaps.
func (w *Warmer) readLog() {
	s := atomicU32(w.a.mem, hdrLogSeq).Load()
	cur := w.next + uint64(s-uint32(w.next))
	if cur == w.next {
		return
	}
	w.idle = 0 // something new: the written pages may be of spans waiting
	if cur-w.next > logSlots {
		w.queue, w.later = nil, nil // some entries are lost, Frees among them perhaps
		w.next = cur - logSlots
	}
	for ; w.next < cur; w.next++ {
		slot := hdrLog + int(w.next%logSlots)*logEntry
		stamp := atomicU64(w.a.mem, slot)
		if stamp.Load() != w.next+1 {
			w.queue, w.later = nil, nil
			continue
		}
		off := atomicU64(w.a.mem, slot+8).Load()
		size := atomicU64(w.a.mem, slot+16).Load()
		if stamp.Load() != w.next+1 {
			w.queue, w.later = nil, nil
			continue
		}
		if size&logFreed == 0 {
			w.queue = append(w.queue, freeRange{off: off, end: alignDown(off+size, pageSize)})
			continue
		}
		end := off + size&^logFreed
		w.queue = without(w.queue, off, end)
		w.later = without(w.later, off, end)
	}
}

// without drops the ranges of rs that overlap [off, end).
func without(rs []freeRange, off, end uint64) []freeRange {
	kept := rs[:0]
	for _, r := range rs {
		if r.off >= end || r.end <= off {
			kept = append(kept, r)
		}
	}
	return kept
}

// idleThread makes the calling thread run only when its CPU is otherwise
// idle: SCHED_IDLE, or nice 19 where that is refused.
func idleThread() error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
	err := unix.SchedSetAttr(0, &attr, 0)
	if err == nil {
		return nil
	}
	if err2 := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19); err2 != nil {
		return fmt.Errorf("shm: warmer thread: SCHED_IDLE refused (%w) and so is nice 19 (%w)", err, err2)
	}
	return nil
}
