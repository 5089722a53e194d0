package shm

import (
	"errors"
	"fmt"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// freeRange is a free stretch [off, end) of the data heap. clean means every
// whole page inside it has been handed back to the OS, so that freeing a
// neighbour only needs to punch the neighbour's own pages.
type freeRange struct {
	off, end uint64
	clean    bool
}

// allocation is what the heap remembers of a live span: the bytes it really
// took (rounded up) and the size the caller asked for, which Free checks.
type allocation struct {
	size, req uint64
}

// Alloc takes size bytes from the data heap. Spans are 64-byte aligned (a
// cache line, so buffers of different workers never share one) and spans of
// 64 KiB or more are page aligned and page sized, so that their pages can be
// handed back to the OS when freed. A size of 0 gives an empty span that Free
// accepts. The bytes are not zeroed (pages released by Free read as zero,
// others hold what the last user left). Only the creator may allocate.
//
// The heap is first fit over an offset-ordered free list; the arena's users
// allocate few, long-lived buffers, so simplicity wins over speed here.
func (a *Arena) Alloc(size uint64) (base.Span, error) {
	return a.alloc(size, true)
}

// alloc is Alloc; log says whether a large span goes to the warmers' log.
func (a *Arena) alloc(size uint64, log bool) (base.Span, error) {
	if !a.creator {
		return base.Span{}, fmt.Errorf("shm: alloc %d bytes: %w", size, ErrNotCreator)
	}
	if size == 0 {
		return base.Span{Offset: a.controlSize}, nil
	}
	align, rsize := uint64(heapAlign), alignUp(size, heapAlign)
	if size >= largeAlloc {
		align, rsize = pageSize, alignUp(size, pageSize)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return base.Span{}, ErrClosed
	}
	if len(a.deferred) > 0 {
		a.retryDeferred()
	}
	for i, f := range a.free {
		start := alignUp(f.off, align)
		if start >= f.end || rsize > f.end-start {
			continue
		}
		// Keep what is left on either side, in order, as free ranges.
		var rest []freeRange
		if start > f.off {
			rest = append(rest, freeRange{off: f.off, end: start, clean: f.clean})
		}
		if end := start + rsize; end < f.end {
			rest = append(rest, freeRange{off: end, end: f.end, clean: f.clean})
		}
		a.free = append(a.free[:i], append(rest, a.free[i+1:]...)...)
		a.allocated[start] = allocation{size: rsize, req: size}
		a.used += rsize
		if log && size >= largeAlloc {
			a.logSpan(start, rsize, false)
		}
		return base.Span{Offset: start, Size: size}, nil
	}
	var largest uint64
	for _, f := range a.free {
		largest = max(largest, f.end-f.off)
	}
	return base.Span{}, fmt.Errorf("shm: alloc %d bytes: arena heap out of space (%d of %d bytes free, largest free range %d bytes)",
		size, a.heapSize()-a.used, a.heapSize(), largest)
}

// Free gives a span from Alloc back to the heap, merging it with free
// neighbours. When the merged range is 1 MiB or more its pages are released
// to the OS (fallocate PUNCH_HOLE), so a burst of big buffers does not pin
// memory for the arena's lifetime; the bytes read as zero afterwards.
// Freeing a span twice, or one Alloc did not return, is an error and changes
// nothing.
func (a *Arena) Free(s base.Span) error {
	if !a.creator {
		return fmt.Errorf("shm: free span {offset %d, size %d}: %w", s.Offset, s.Size, ErrNotCreator)
	}
	if s.Size == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return ErrClosed
	}
	al, ok := a.allocated[s.Offset]
	if !ok {
		return fmt.Errorf("shm: free span {offset %d, size %d}: not allocated (double free or foreign span)", s.Offset, s.Size)
	}
	if al.req != s.Size {
		return fmt.Errorf("shm: free span {offset %d, size %d}: allocated with size %d", s.Offset, s.Size, al.req)
	}
	delete(a.allocated, s.Offset)
	a.used -= al.size
	if al.req >= largeAlloc {
		// Before any punch: the warmers' handshake (warm.go).
		a.logSpan(s.Offset, al.size, true)
	}
	if len(a.deferred) > 0 {
		a.retryDeferred()
	}

	bs, be := s.Offset, s.Offset+al.size
	i := sort.Search(len(a.free), func(i int) bool { return a.free[i].off >= be })
	r := freeRange{off: bs, end: be}
	// [dirtyLo, dirtyHi) is the part of r whose pages may still be held.
	dirtyLo, dirtyHi := bs, be
	if i < len(a.free) && a.free[i].off == be { // merge right
		r.end = a.free[i].end
		if !a.free[i].clean {
			dirtyHi = r.end
		}
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
	if i > 0 && a.free[i-1].end == bs { // merge left
		i--
		r.off = a.free[i].off
		if !a.free[i].clean {
			dirtyLo = r.off
		}
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
	if r.end-r.off >= punchThreshold {
		// Whole pages of r that touch its dirty part: the clean
		// neighbours' own pages are released already.
		lo := max(alignUp(r.off, pageSize), alignDown(dirtyLo, pageSize))
		hi := min(alignDown(r.end, pageSize), alignUp(dirtyHi, pageSize))
		r.clean = a.punchFree(lo, hi)
	}
	a.free = append(a.free, freeRange{})
	copy(a.free[i+1:], a.free[i:])
	a.free[i] = r
	return nil
}

// punch releases the pages of [lo, hi) to the OS. It is best effort: the
// heap stays correct without it, so a failure is remembered (PunchErr) and
// not returned from Free, which would suggest the span is still allocated.
func (a *Arena) punch(lo, hi uint64) bool {
	if lo >= hi {
		return true
	}
	if a.noPunch || a.PagesKept() {
		return false
	}
	err := unix.Fallocate(int(a.file.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(lo), int64(hi-lo))
	if err != nil {
		if a.punchErr == nil {
			a.punchErr = fmt.Errorf("shm: release arena pages [%d, %d): fallocate punch hole: %w", lo, hi, err)
		}
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
			a.noPunch = true
		}
		return false
	}
	a.released += hi - lo
	return true
}

// HeapStats reports the bytes of the data heap in use (as rounded up by
// Alloc) and free.
func (a *Arena) HeapStats() (used, free uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.used, a.heapSize() - a.used
}

// Released is the number of bytes Free and AllocZeroed have handed back to
// the OS so far,
// for monitoring.
func (a *Arena) Released() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.released
}

// PunchErr is the first failure to hand freed pages back to the OS, or nil.
// Such failures cost memory, not correctness.
func (a *Arena) PunchErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.punchErr
}

func (a *Arena) heapSize() uint64 { return a.size - a.controlSize }

// AllocZeroed is Alloc with bytes that read as zero, and whose whole pages
// take no memory until first written: they are handed back to the OS
// (fallocate PUNCH_HOLE) instead of cleared, so data registered without a
// home is allocated on first write. Only the partial pages at the span's
// edges, if any, are cleared.
func (a *Arena) AllocZeroed(size uint64) (base.Span, error) {
	// Not logged for the warmers: a warmer's touch would give the pages
	// memory, which is what AllocZeroed saves until they are written.
	s, err := a.alloc(size, false)
	if err != nil || size == 0 {
		return s, err
	}
	lo, hi := alignUp(s.Offset, pageSize), (s.Offset+s.Size)/pageSize*pageSize
	a.mu.Lock()
	punched := lo < hi && a.punch(lo, hi)
	a.mu.Unlock()
	b := a.Bytes(s)
	if !punched {
		clear(b)
		return s, nil
	}
	clear(b[:lo-s.Offset])
	clear(b[hi-s.Offset:])
	return s, nil
}

// Committed reports the bytes of the arena's pages that hold memory now
// (st_blocks of the memfd): pages never written or released by Free and
// AllocZeroed do not count.
func (a *Arena) Committed() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(a.file.Fd()), &st); err != nil {
		return 0, fmt.Errorf("shm: arena committed memory: fstat: %w", err)
	}
	return uint64(st.Blocks) * 512, nil
}
