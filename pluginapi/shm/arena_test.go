package shm

import (
	"errors"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
)

const (
	testArenaSize    = 64 << 20
	testControlSize  = 1 << 20
	testHeapSize     = testArenaSize - testControlSize
	testRingCapacity = 64 << 10
)

func newArena(t testing.TB) *Arena {
	t.Helper()
	a, err := Create(testArenaSize, testControlSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func TestCreateSizes(t *testing.T) {
	ps := pageSize
	tests := []struct {
		name              string
		size, control     uint64
		wantSize, wantCtl uint64
		wantErr           string
	}{
		{"rounded", 10*ps + 1, ps + 1, 11 * ps, 2 * ps, ""},
		{"control at least a page", 4 * ps, 0, 4 * ps, ps, ""},
		{"no heap", 2 * ps, 2 * ps, 2 * ps, 2 * ps, ""},
		{"zero size", 0, 0, 0, 0, "out of range"},
		{"control too big", 2 * ps, 3 * ps, 0, 0, "larger than the arena"},
		{"absurd", math.MaxUint64, 0, 0, 0, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Create(tt.size, tt.control)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if a.Size() != tt.wantSize || a.ControlSize() != tt.wantCtl {
				t.Fatalf("size %d control %d, want %d %d", a.Size(), a.ControlSize(), tt.wantSize, tt.wantCtl)
			}
			if used, free := a.HeapStats(); used != 0 || free != tt.wantSize-tt.wantCtl {
				t.Fatalf("HeapStats = %d, %d", used, free)
			}
		})
	}
}

func TestBytesBounds(t *testing.T) {
	a := newArena(t)
	n := a.Size()
	tests := []struct {
		span base.Span
		ok   bool
	}{
		{base.Span{Offset: 0, Size: n}, true},
		{base.Span{Offset: n, Size: 0}, true},
		{base.Span{Offset: 100, Size: 28}, true},
		{base.Span{Offset: n, Size: 1}, false},
		{base.Span{Offset: n + 1, Size: 0}, false},
		{base.Span{Offset: 1, Size: n}, false},
		{base.Span{Offset: math.MaxUint64 - 1, Size: 10}, false},
		{base.Span{Offset: 10, Size: math.MaxUint64}, false},
	}
	for _, tt := range tests {
		b, err := a.BytesChecked(tt.span)
		if tt.ok != (err == nil) || tt.ok != (a.Bytes(tt.span) != nil) {
			t.Errorf("%+v: err %v, want ok=%v", tt.span, err, tt.ok)
			continue
		}
		if tt.ok && (uint64(len(b)) != tt.span.Size || uint64(cap(b)) != tt.span.Size) {
			t.Errorf("%+v: len %d cap %d", tt.span, len(b), cap(b))
		}
	}
}

func TestCloseIdempotent(t *testing.T) {
	a, err := Create(1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if a.Bytes(base.Span{Size: 1}) != nil {
		t.Fatal("Bytes after Close")
	}
	if _, err := a.Alloc(8); !errors.Is(err, ErrClosed) {
		t.Fatalf("Alloc after Close: %v", err)
	}
	if _, err := a.Carve(8, 8); !errors.Is(err, ErrClosed) {
		t.Fatalf("Carve after Close: %v", err)
	}
}

func TestCarve(t *testing.T) {
	// The header takes most of the first page; the 4096-aligned carve
	// needs a page after it.
	a, err := Create(1<<20, 3*pageSize)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Dirty the control region to see that Carve zeroes.
	for i := range a.Bytes(base.Span{Offset: headerSize, Size: a.ControlSize() - headerSize}) {
		a.mem[headerSize+i] = 0xff
	}
	var prevEnd uint64
	for _, c := range []struct{ size, align uint64 }{{10, 0}, {1, 1}, {100, 64}, {BellSize, 64}, {3, 4096}, {7, 8}} {
		s, err := a.Carve(c.size, c.align)
		if err != nil {
			t.Fatal(err)
		}
		align := max(c.align, 1)
		if c.align == 0 {
			align = 8
		}
		if s.Offset%align != 0 || s.Offset < prevEnd || s.Offset < headerSize || s.Size != c.size {
			t.Fatalf("Carve(%d, %d) = %+v after %d", c.size, c.align, s, prevEnd)
		}
		for _, b := range a.Bytes(s) {
			if b != 0 {
				t.Fatalf("Carve(%d, %d) not zeroed", c.size, c.align)
			}
		}
		prevEnd = s.Offset + s.Size
	}
	if _, err := a.Carve(8, 3); err == nil {
		t.Fatal("alignment 3 accepted")
	}
	_, err = a.Carve(a.ControlSize(), 8)
	if err == nil || !strings.Contains(err.Error(), "control region full") {
		t.Fatalf("overfull carve: %v", err)
	}
	if _, err := a.Carve(math.MaxUint64, 8); err == nil {
		t.Fatal("huge carve accepted")
	}
	if hdr := a.Bytes(base.Span{Size: 8}); string(hdr) != "STPUARNA" {
		t.Fatalf("header magic %q", hdr)
	}
}

// TestAttachSameProcess attaches a dup of the memfd in the same process:
// the two mappings must see each other's writes.
func TestAttachSameProcess(t *testing.T) {
	a := newArena(t)
	fd, err := unix.Dup(int(a.File().Fd()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Attach(uintptr(fd))
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	defer b.Close()
	if b.Size() != a.Size() || b.ControlSize() != a.ControlSize() || b.Creator() {
		t.Fatalf("attached size %d control %d creator %v", b.Size(), b.ControlSize(), b.Creator())
	}
	s, err := a.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	copy(a.Bytes(s), "hello from the creator")
	if got := string(b.Bytes(s)[:22]); got != "hello from the creator" {
		t.Fatalf("attached sees %q", got)
	}
	copy(b.Bytes(s), "HELLO")
	if got := string(a.Bytes(s)[:5]); got != "HELLO" {
		t.Fatalf("creator sees %q", got)
	}
	for _, err := range []error{
		func() error { _, err := b.Alloc(1); return err }(),
		b.Free(s),
		func() error { _, err := b.Carve(8, 8); return err }(),
	} {
		if !errors.Is(err, ErrNotCreator) {
			t.Fatalf("allocation on attached arena: %v", err)
		}
	}
}

func TestAttachErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(content []byte, size int64) uintptr {
		f, err := os.CreateTemp(dir, "x")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(content); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		return uintptr(fd)
	}
	good, err := Create(1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	header := slices.Clone(good.Bytes(base.Span{Size: headerSize}))
	good.Close()
	badVersion := slices.Clone(header)
	badVersion[hdrVersion] = 99
	badControl := slices.Clone(header)
	badControl[hdrControlSize] = 1

	tests := []struct {
		name string
		fd   uintptr
		want string
	}{
		{"closed fd", 1 << 20, "fstat"},
		{"empty file", file(nil, 0), "not that of an arena"},
		{"garbage", file([]byte("definitely not an arena header"), int64(pageSize)), "bad magic"},
		{"zeros", file(nil, 1<<20), "bad magic"},
		{"wrong version", file(badVersion, 1<<20), "version 99"},
		{"truncated copy", file(header, 2*int64(pageSize)), "header says"},
		{"bad control size", file(badControl, 1<<20), "control region size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Attach(tt.fd)
			if err == nil {
				a.Close()
				t.Fatal("attached")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			unix.Close(int(tt.fd))
		})
	}
}

// TestAttachChildProcess passes the memfd to a real child process as fd 3;
// the child checks what the parent wrote and writes an answer back.
func TestAttachChildProcess(t *testing.T) {
	a := newArena(t)
	data, err := a.Alloc(3 << 20) // several pages, page aligned
	if err != nil {
		t.Fatal(err)
	}
	reply, err := a.Alloc(5000)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Bytes(data) {
		a.Bytes(data)[i] = pattern(i)
	}
	c := startChild(t, a, "arena", data.Offset, data.Size, reply.Offset, reply.Size)
	c.wait(t)
	for i, b := range a.Bytes(reply) {
		if b != ^pattern(i) {
			t.Fatalf("reply[%d] = %d, want %d", i, b, ^pattern(i))
		}
	}
}

// TestNoDevShm checks that an arena is a memfd and leaves nothing in
// /dev/shm.
func TestNoDevShm(t *testing.T) {
	list := func() []string {
		ents, err := os.ReadDir("/dev/shm")
		if err != nil {
			t.Skipf("no /dev/shm: %v", err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	before := list()
	a := newArena(t)
	if _, err := a.Alloc(1 << 20); err != nil {
		t.Fatal(err)
	}
	after := list()
	for _, n := range after {
		if !slices.Contains(before, n) {
			t.Errorf("new entry in /dev/shm: %s", n)
		}
	}
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(a.File().Fd())))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link, "/memfd:starpu-arena") {
		t.Errorf("arena fd is %q, want a memfd", link)
	}
}
