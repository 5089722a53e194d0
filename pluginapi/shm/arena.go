// Package shm is the shared-memory layer between the core and its plugin
// processes: one memfd-backed arena mapped by every process, single-producer
// single-consumer message rings inside it, and futex doorbells to wake a
// sleeping peer. Payloads never cross a pipe or a socket: messages carry
// base.Span values that name bytes of the arena.
//
// The package is Linux-only (memfd_create, futex, fallocate).
//
// Arena layout:
//
//	[ control region: header + Carve'd rings and bells ][ data heap: Alloc/Free ]
//	0                                        controlSize                      size
//
// Only the process that created the arena allocates from it (Carve, Alloc,
// Free): the allocator's bookkeeping lives in that process's memory. Other
// processes Attach and read and write the spans they are given.
package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// ArenaMagic opens the arena header so that Attach can tell a starpu arena
// from any other file descriptor it is handed by mistake.
const ArenaMagic uint64 = 0x414e5241_55505453 // "STPUARNA" little-endian

// ArenaVersion is the version of the arena header layout and of the ring and
// bell formats inside it. Attach refuses an arena of another version.
const ArenaVersion uint32 = 2

// headerSize is the part of the control region the arena header occupies:
// the words below, then the warming protocol's slots and log (warm.go).
// Carve starts after it; a multiple of the cache line keeps the first ring
// aligned.
const headerSize = hdrLog + logSlots*logEntry

// HeaderSize is the control region's bytes the header takes, for whoever
// sizes the control region.
const HeaderSize = headerSize

// Offsets of the header fields (native endian: every process is on the same
// machine).
const (
	hdrMagic       = 0
	hdrVersion     = 8
	hdrSize        = 16
	hdrControlSize = 24
	// hdrKeepPages is set (to 1, atomically, by any process) once the
	// heap's pages must stay where they are: see KeepPages.
	hdrKeepPages = 32
)

// Heap allocation policy.
const (
	heapAlign      = 64       // cache line: no false sharing between buffers
	largeAlloc     = 64 << 10 // from here on allocations are page aligned
	punchThreshold = 1 << 20  // free ranges this large give their pages back
	maxArenaSize   = 1 << 46  // sanity bound, far above any real machine
)

// pageSize is the system page size, the unit of the mapping and of hole
// punching.
var pageSize = uint64(os.Getpagesize())

// ErrNotCreator is returned by Carve, Alloc and Free on an attached arena:
// the allocator state lives only in the creating process, so a second
// allocator would hand out the same bytes twice.
var ErrNotCreator = errors.New("arena was attached: only its creator allocates")

// ErrClosed is returned when an operation needs the mapping after Close.
var ErrClosed = errors.New("shm: arena is closed")

// Arena is one memfd-backed MAP_SHARED mapping used by the core and every
// plugin process. The creator (Create) owns the allocator; plugin processes
// Attach to the descriptor they inherit (base.ArenaFD).
//
// All methods are safe for concurrent use except Close, which must not run
// concurrently with anything else on the arena.
type Arena struct {
	file        *os.File
	mem         []byte
	size        uint64
	controlSize uint64
	creator     bool

	mu        sync.Mutex // guards everything below
	carveNext uint64     // bump pointer in the control region
	free      []freeRange
	allocated map[uint64]allocation
	used      uint64
	released  uint64      // bytes handed back to the OS by hole punching
	punchErr  error       // first hole-punching failure; punching is best effort
	noPunch   bool        // the file system refused hole punching: stop trying
	logged    uint64      // entries written to the header's log (warm.go)
	deferred  []freeRange // free ranges not punched while a warmer was on them
}

// Create makes a new arena of size bytes, the first controlSize of which are
// the control region (rings, bells) and the rest the data heap. Both are
// rounded up to the page size; the control region is at least one page since
// it holds the header.
//
// The memory is an anonymous memfd, never a file in /dev/shm, so nothing is
// left behind when the processes exit. It is sparse: pages cost memory only
// once touched. Its size is sealed once set (F_SEAL_SHRINK, F_SEAL_GROW,
// then F_SEAL_SEAL so that the seals stay as they are): no process holding
// the descriptor, a plugin included, can truncate or resize it under the
// others (ftruncate and growing fallocate fail with EPERM), while Free can
// still release pages by punching holes.
func Create(size, controlSize uint64) (*Arena, error) {
	if size == 0 || size > maxArenaSize {
		return nil, fmt.Errorf("shm: create arena: size %d out of range (1..%d)", size, uint64(maxArenaSize))
	}
	size = alignUp(size, pageSize)
	controlSize = alignUp(max(controlSize, headerSize), pageSize)
	if controlSize > size {
		return nil, fmt.Errorf("shm: create arena: control region (%d bytes) larger than the arena (%d bytes)", controlSize, size)
	}
	fd, err := unix.MemfdCreate("starpu-arena", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: create arena: memfd_create: %w", err)
	}
	file := os.NewFile(uintptr(fd), "starpu-arena")
	fail := func(what string, err error) (*Arena, error) {
		file.Close()
		return nil, fmt.Errorf("shm: create arena of %d bytes: %s: %w", size, what, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	// A plugin that truncated the file would make every process fault with
	// SIGBUS on the lost pages, so fix the size for good. Hole punching is
	// still allowed (only F_SEAL_WRITE forbids it).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("seal size", err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_NORESERVE)
	if err != nil {
		return fail("mmap", err)
	}
	ne := binary.NativeEndian
	ne.PutUint64(mem[hdrMagic:], ArenaMagic)
	ne.PutUint32(mem[hdrVersion:], ArenaVersion)
	ne.PutUint64(mem[hdrSize:], size)
	ne.PutUint64(mem[hdrControlSize:], controlSize)

	a := &Arena{
		file:        file,
		mem:         mem,
		size:        size,
		controlSize: controlSize,
		creator:     true,
		carveNext:   headerSize,
		allocated:   make(map[uint64]allocation),
	}
	if controlSize < size {
		a.free = []freeRange{{off: controlSize, end: size, clean: true}}
	}
	return a, nil
}

// Attach maps the arena behind fd, typically base.ArenaFD in a plugin
// process. On success the arena owns fd and Close closes it; on error fd is
// left open for the caller. The size comes
// from fstat and the layout from the header the creator wrote, which is
// validated so that a wrong descriptor gives a clear error rather than
// garbage.
func Attach(fd uintptr) (*Arena, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return nil, fmt.Errorf("shm: attach arena fd %d: fstat: %w", fd, err)
	}
	size := uint64(st.Size)
	if st.Size < headerSize || size%pageSize != 0 || size > maxArenaSize {
		return nil, fmt.Errorf("shm: attach arena fd %d: size %d is not that of an arena", fd, st.Size)
	}
	mem, err := unix.Mmap(int(fd), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("shm: attach arena fd %d: mmap %d bytes: %w", fd, size, err)
	}
	ne := binary.NativeEndian
	bad := func(format string, args ...any) (*Arena, error) {
		unix.Munmap(mem)
		return nil, fmt.Errorf("shm: attach arena fd %d: %s", fd, fmt.Sprintf(format, args...))
	}
	if m := ne.Uint64(mem[hdrMagic:]); m != ArenaMagic {
		return bad("bad magic %#x (want %#x): not a starpu arena", m, ArenaMagic)
	}
	if v := ne.Uint32(mem[hdrVersion:]); v != ArenaVersion {
		return bad("arena version %d, this build speaks %d", v, ArenaVersion)
	}
	if hs := ne.Uint64(mem[hdrSize:]); hs != size {
		return bad("header says %d bytes but the file has %d", hs, size)
	}
	cs := ne.Uint64(mem[hdrControlSize:])
	if cs < headerSize || cs > size || cs%pageSize != 0 {
		return bad("bad control region size %d for an arena of %d bytes", cs, size)
	}
	return &Arena{
		file:        os.NewFile(fd, "starpu-arena"),
		mem:         mem,
		size:        size,
		controlSize: cs,
	}, nil
}

// File is the arena's memfd, to pass to a plugin process in
// exec.Cmd.ExtraFiles (as the first entry, so that it is base.ArenaFD).
// ExtraFiles duplicates it, so its close-on-exec flag does not matter. The
// file stays owned by the arena: do not close it.
func (a *Arena) File() *os.File { return a.file }

// Size is the arena's size in bytes, control region included.
func (a *Arena) Size() uint64 { return a.size }

// ControlSize is the size of the control region, which is also the offset of
// the data heap.
func (a *Arena) ControlSize() uint64 { return a.controlSize }

// KeepPages stops Free from giving the heap's pages back to the OS, for
// good and for every process: any process may call it, through the shared
// header. A driver calls it before it page-locks the heap for DMA
// (cuMemHostRegister): a punched page would be replaced by a fresh one on
// the next touch while the device kept reading and writing the old one,
// silently.
func (a *Arena) KeepPages() { atomicU32(a.mem, hdrKeepPages).Store(1) }

// PagesKept reports whether KeepPages was called, by any process.
func (a *Arena) PagesKept() bool { return atomicU32(a.mem, hdrKeepPages).Load() != 0 }

// Creator reports whether this process created the arena and so may
// allocate from it.
func (a *Arena) Creator() bool { return a.creator }

// Bytes is the slice of the mapping that s names, or nil if s does not lie
// inside the arena (or the arena is closed). The slice aliases shared
// memory: other processes see writes to it.
func (a *Arena) Bytes(s base.Span) []byte {
	b, _ := a.BytesChecked(s)
	return b
}

// BytesChecked is Bytes with an error saying why the span is refused, for
// spans that come from another process and may be bad.
func (a *Arena) BytesChecked(s base.Span) ([]byte, error) {
	n := uint64(len(a.mem))
	if n == 0 {
		return nil, ErrClosed
	}
	if s.Offset > n || s.Size > n-s.Offset {
		return nil, fmt.Errorf("shm: span {offset %d, size %d} outside the arena of %d bytes", s.Offset, s.Size, n)
	}
	end := s.Offset + s.Size
	return a.mem[s.Offset:end:end], nil
}

// Close unmaps the arena and closes its descriptor. It is idempotent. Rings,
// bells and slices obtained from the arena must not be used afterwards: they
// point into the unmapped memory.
func (a *Arena) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	if a.mem != nil {
		if err := unix.Munmap(a.mem); err != nil {
			errs = append(errs, fmt.Errorf("shm: close arena: munmap: %w", err))
		}
		a.mem = nil
	}
	if a.file != nil {
		if err := a.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("shm: close arena: %w", err))
		}
		a.file = nil
	}
	return errors.Join(errs...)
}

// Carve takes size bytes aligned to align (a power of two; 0 means 8) from
// the control region, for rings and bells. It is a bump allocator: control
// structures live as long as the arena. The bytes are zeroed. Only the
// creator may carve.
func (a *Arena) Carve(size, align uint64) (base.Span, error) {
	if !a.creator {
		return base.Span{}, fmt.Errorf("shm: carve %d bytes: %w", size, ErrNotCreator)
	}
	if align == 0 {
		align = 8
	}
	if align&(align-1) != 0 || align > pageSize {
		return base.Span{}, fmt.Errorf("shm: carve %d bytes: alignment %d is not a power of two up to the page size", size, align)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return base.Span{}, ErrClosed
	}
	off := alignUp(a.carveNext, align)
	if off > a.controlSize || size > a.controlSize-off {
		return base.Span{}, fmt.Errorf("shm: carve %d bytes (align %d): control region full (%d of %d bytes left)",
			size, align, a.controlSize-min(a.carveNext, a.controlSize), a.controlSize)
	}
	a.carveNext = off + size
	clear(a.mem[off : off+size])
	return base.Span{Offset: off, Size: size}, nil
}

// atomicU32 and atomicU64 view a word of shared memory as an atomic. All
// cross-process words are accessed only through sync/atomic.
func atomicU32(b []byte, off int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&b[off])) }
func atomicU64(b []byte, off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[off])) }

// aligned reports whether b starts at an address that is a multiple of n.
func aligned(b []byte, n uintptr) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%n == 0
}

// alignUp rounds v up to a multiple of a (a power of two). It saturates
// instead of wrapping so that absurd sizes fail the range checks.
func alignUp(v, a uint64) uint64 {
	r := (v + a - 1) &^ (a - 1)
	if r < v {
		return ^uint64(0) &^ (a - 1)
	}
	return r
}

func alignDown(v, a uint64) uint64 { return v &^ (a - 1) }
