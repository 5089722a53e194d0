package shm

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
)

func TestAllocAlignment(t *testing.T) {
	a := newArena(t)
	tests := []struct {
		size  uint64
		align uint64
	}{
		{1, 64}, {63, 64}, {64, 64}, {65, 64}, {1000, 64}, {largeAlloc - 1, 64},
		{largeAlloc, pageSize}, {100000, pageSize}, {1 << 20, pageSize}, {3, 64},
	}
	type iv struct{ lo, hi uint64 }
	var live []iv
	for _, tt := range tests {
		s, err := a.Alloc(tt.size)
		if err != nil {
			t.Fatal(err)
		}
		if s.Size != tt.size || s.Offset%tt.align != 0 || s.Offset < a.ControlSize() || s.Offset+s.Size > a.Size() {
			t.Fatalf("Alloc(%d) = %+v, want alignment %d inside the heap", tt.size, s, tt.align)
		}
		for _, o := range live {
			if s.Offset < o.hi && o.lo < s.Offset+s.Size {
				t.Fatalf("Alloc(%d) = %+v overlaps [%d, %d)", tt.size, s, o.lo, o.hi)
			}
		}
		live = append(live, iv{s.Offset, s.Offset + s.Size})
		if b := a.Bytes(s); uint64(len(b)) != tt.size {
			t.Fatalf("Bytes of %+v has %d bytes", s, len(b))
		}
	}
}

func TestAllocZero(t *testing.T) {
	a := newArena(t)
	s, err := a.Alloc(0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Size != 0 || a.Bytes(s) == nil {
		t.Fatalf("Alloc(0) = %+v", s)
	}
	if err := a.Free(s); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(s); err != nil { // nothing was taken, so nothing to double free
		t.Fatal(err)
	}
	if used, _ := a.HeapStats(); used != 0 {
		t.Fatalf("used %d", used)
	}
}

// TestAllocCoalesce frees three neighbours in the order that needs both
// left and right merging, then takes the whole heap in one span.
func TestAllocCoalesce(t *testing.T) {
	for _, order := range [][]int{{0, 2, 1}, {1, 0, 2}, {2, 1, 0}, {0, 1, 2}} {
		t.Run(strconv.Itoa(order[0])+strconv.Itoa(order[1])+strconv.Itoa(order[2]), func(t *testing.T) {
			a := newArena(t)
			var spans []base.Span
			for i := 0; i < 3; i++ {
				s, err := a.Alloc(1000)
				if err != nil {
					t.Fatal(err)
				}
				spans = append(spans, s)
			}
			if spans[1].Offset != spans[0].Offset+1024 || spans[2].Offset != spans[1].Offset+1024 {
				t.Fatalf("not adjacent: %+v", spans)
			}
			for _, i := range order {
				if err := a.Free(spans[i]); err != nil {
					t.Fatal(err)
				}
			}
			if used, free := a.HeapStats(); used != 0 || free != testHeapSize {
				t.Fatalf("HeapStats = %d, %d", used, free)
			}
			if len(a.free) != 1 {
				t.Fatalf("free list not coalesced: %+v", a.free)
			}
			all, err := a.Alloc(testHeapSize)
			if err != nil {
				t.Fatalf("whole heap after frees: %v", err)
			}
			if err := a.Free(all); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAllocReuse(t *testing.T) {
	a := newArena(t)
	x, err := a.Alloc(5000)
	if err != nil {
		t.Fatal(err)
	}
	y, err := a.Alloc(5000)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Free(x); err != nil {
		t.Fatal(err)
	}
	z, err := a.Alloc(4000) // first fit: the hole x left
	if err != nil {
		t.Fatal(err)
	}
	if z.Offset != x.Offset {
		t.Fatalf("reuse: got offset %d, want %d", z.Offset, x.Offset)
	}
	used, free := a.HeapStats()
	if want := alignUp(5000, 64) + alignUp(4000, 64); used != want || used+free != testHeapSize {
		t.Fatalf("HeapStats = %d, %d; want used %d", used, free, want)
	}
	_ = y
}

func TestAllocErrors(t *testing.T) {
	a := newArena(t)
	s, err := a.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	_, free := a.HeapStats()
	_, err = a.Alloc(testHeapSize)
	if err == nil {
		t.Fatal("allocated more than is free")
	}
	for _, want := range []string{strconv.Itoa(testHeapSize) + " bytes", strconv.FormatUint(free, 10) + " of"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("out-of-space error %q does not say %q", err, want)
		}
	}
	if _, err := a.Alloc(math.MaxUint64); err == nil {
		t.Fatal("Alloc(MaxUint64) succeeded")
	}

	tests := []struct {
		name string
		span base.Span
		want string
	}{
		{"unknown", base.Span{Offset: s.Offset + 64, Size: 10}, "not allocated"},
		{"control region", base.Span{Offset: 0, Size: 10}, "not allocated"},
		{"outside", base.Span{Offset: math.MaxUint64, Size: 10}, "not allocated"},
		{"wrong size", base.Span{Offset: s.Offset, Size: 99}, "allocated with size 100"},
	}
	for _, tt := range tests {
		if err := a.Free(tt.span); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Free(%+v) = %v, want %q", tt.name, tt.span, err, tt.want)
		}
	}
	if err := a.Free(s); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(s); err == nil || !strings.Contains(err.Error(), "double free") {
		t.Fatalf("double free: %v", err)
	}
	if used, free := a.HeapStats(); used != 0 || free != testHeapSize {
		t.Fatalf("HeapStats after errors = %d, %d", used, free)
	}
}

// TestAllocFull fills the heap with small spans, checks the next one fails,
// then frees everything in random order and checks the heap is whole again.
func TestAllocFull(t *testing.T) {
	a, err := Create(pageSize+256<<10, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var spans []base.Span
	for {
		s, err := a.Alloc(1000)
		if err != nil {
			break
		}
		spans = append(spans, s)
	}
	if want := int(a.heapSize() / 1024); len(spans) != want {
		t.Fatalf("%d spans of 1000 bytes, want %d", len(spans), want)
	}
	rand.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
	for _, s := range spans {
		if err := a.Free(s); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.free) != 1 || a.used != 0 {
		t.Fatalf("after freeing all: used %d, free list %+v", a.used, a.free)
	}
}

// fileBytes is how much memory the memfd holds, from st_blocks.
func fileBytes(t *testing.T, a *Arena) uint64 {
	var st unix.Stat_t
	if err := unix.Fstat(int(a.File().Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Blocks) * 512
}

// TestFreePunchesHoles checks that freeing a large span hands its pages back
// (the memfd's block count drops) and that small frees that coalesce into a
// large range do so too.
func TestFreePunchesHoles(t *testing.T) {
	a := newArena(t)
	const big = 4 << 20
	s, err := a.Alloc(big)
	if err != nil {
		t.Fatal(err)
	}
	fill := func(s base.Span) {
		b := a.Bytes(s)
		for i := 0; i < len(b); i += int(pageSize) {
			b[i] = 1
		}
	}
	fill(s)
	before := fileBytes(t, a)
	if before < big {
		t.Fatalf("memfd holds %d bytes after touching %d", before, big)
	}
	if err := a.Free(s); err != nil {
		t.Fatal(err)
	}
	if err := a.PunchErr(); err != nil {
		t.Fatal(err)
	}
	after := fileBytes(t, a)
	if before-after < big {
		t.Fatalf("memfd went from %d to %d bytes after freeing %d", before, after, big)
	}
	if a.Released() < big {
		t.Fatalf("Released = %d", a.Released())
	}
	// Freed pages read as zero when reused.
	s2, err := a.Alloc(big)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range a.Bytes(s2) {
		if b != 0 {
			t.Fatalf("byte %d of a reused span is %d", i, b)
		}
	}
	if err := a.Free(s2); err != nil {
		t.Fatal(err)
	}

	// 32 KiB spans: none large, but together they make a megabyte and more.
	var small []base.Span
	for i := 0; i < 64; i++ {
		s, err := a.Alloc(32 << 10)
		if err != nil {
			t.Fatal(err)
		}
		fill(s)
		small = append(small, s)
	}
	before = fileBytes(t, a)
	for i := 0; i < len(small); i += 2 { // holes first: nothing merges yet
		if err := a.Free(small[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(small); i += 2 {
		if err := a.Free(small[i]); err != nil {
			t.Fatal(err)
		}
	}
	after = fileBytes(t, a)
	if before-after < 64*32<<10-2*pageSize {
		t.Fatalf("memfd went from %d to %d bytes after freeing 64 small spans", before, after)
	}
}

// TestAllocConcurrent allocates, stamps, checks and frees from several
// goroutines; overlapping spans would show as a wrong stamp.
func TestAllocConcurrent(t *testing.T) {
	a := newArena(t)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			var live []base.Span
			for i := 0; i < 2000; i++ {
				if len(live) > 0 && (rng.IntN(2) == 0 || len(live) > 20) {
					k := rng.IntN(len(live))
					s := live[k]
					for j, b := range a.Bytes(s) {
						if b != byte(g) {
							errs <- "span " + strconv.FormatUint(s.Offset, 10) + " byte " + strconv.Itoa(j) + " overwritten"
							return
						}
					}
					if err := a.Free(s); err != nil {
						errs <- err.Error()
						return
					}
					live = append(live[:k], live[k+1:]...)
					continue
				}
				size := uint64(rng.IntN(3000))
				if rng.IntN(50) == 0 {
					size = uint64(64<<10 + rng.IntN(200<<10))
				}
				s, err := a.Alloc(size)
				if err != nil {
					errs <- err.Error()
					return
				}
				b := a.Bytes(s)
				for j := range b {
					b[j] = byte(g)
				}
				live = append(live, s)
			}
			for _, s := range live {
				if err := a.Free(s); err != nil {
					errs <- err.Error()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if used, free := a.HeapStats(); used != 0 || free != testHeapSize {
		t.Fatalf("HeapStats = %d, %d", used, free)
	}
	if len(a.free) != 1 {
		t.Fatalf("free list not coalesced: %d ranges", len(a.free))
	}
}

// AllocZeroed reads as zero even over memory a previous user dirtied, and
// its whole pages take no memory until written.
func TestAllocZeroed(t *testing.T) {
	a := newArena(t)
	for _, size := range []uint64{100, largeAlloc - 8, 200 << 10, 3<<20 + 100} {
		d, err := a.Alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := 0, a.Bytes(d); i < len(b); i++ {
			b[i] = 0xff
		}
		if err := a.Free(d); err != nil {
			t.Fatal(err)
		}
		z, err := a.AllocZeroed(size)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range a.Bytes(z) {
			if v != 0 {
				t.Fatalf("AllocZeroed(%d): byte %d is %#x", size, i, v)
			}
		}
		if err := a.Free(z); err != nil {
			t.Fatal(err)
		}
	}
	const big = 32 << 20
	before, err := a.Committed()
	if err != nil {
		t.Fatal(err)
	}
	z, err := a.AllocZeroed(big)
	if err != nil {
		t.Fatal(err)
	}
	afterAlloc, _ := a.Committed()
	if afterAlloc-before >= big/4 {
		t.Fatalf("AllocZeroed(%d) committed %d bytes at once", big, afterAlloc-before)
	}
	b := a.Bytes(z)
	for i := range b {
		b[i] = 1
	}
	if written, _ := a.Committed(); written-before < big {
		t.Fatalf("writing %d bytes committed only %d", big, written-before)
	}
}

// TestKeepPages: once any process holding the arena calls KeepPages (here
// a second mapping, as a driver that pins the heap would), Free keeps a
// large span's pages and their contents.
func TestKeepPages(t *testing.T) {
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
	if a.PagesKept() {
		t.Fatal("a new arena keeps its pages")
	}
	b.KeepPages()
	if !a.PagesKept() {
		t.Fatal("KeepPages through one mapping is not seen through the other")
	}
	const big = 4 << 20
	s, err := a.Alloc(big)
	if err != nil {
		t.Fatal(err)
	}
	m := a.Bytes(s)
	for i := 0; i < len(m); i += int(pageSize) {
		m[i] = 7
	}
	before := fileBytes(t, a)
	if err := a.Free(s); err != nil {
		t.Fatal(err)
	}
	if after := fileBytes(t, a); after != before || a.Released() != 0 {
		t.Fatalf("memfd went from %d to %d bytes (released %d) with pages kept", before, after, a.Released())
	}
	for i := 0; i < len(m); i += int(pageSize) {
		if m[i] != 7 {
			t.Fatalf("byte %d of a freed span kept in place is %d", i, m[i])
		}
	}
}
