package shm

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// attachedPair is a creator and a second mapping of the same arena in this
// process, as a plugin process would have it.
func attachedPair(t *testing.T, size uint64) (creator, attached *Arena) {
	t.Helper()
	c, err := Create(size, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fd, err := unix.Dup(int(c.File().Fd()))
	if err != nil {
		t.Fatal(err)
	}
	at, err := Attach(uintptr(fd))
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	t.Cleanup(func() { at.Close() })
	return c, at
}

// mappedPages counts the pages of b present in this process's page tables
// (/proc/self/pagemap, bit 63).
func mappedPages(t *testing.T, b []byte) int {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skipf("no pagemap: %v", err)
	}
	defer f.Close()
	first := uint64(uintptr(unsafe.Pointer(&b[0]))) / pageSize
	n := uint64(len(b)) / pageSize
	buf := make([]byte, 8*n)
	if _, err := f.ReadAt(buf, int64(first*8)); err != nil {
		t.Fatal(err)
	}
	present := 0
	for i := uint64(0); i < n; i++ {
		if binary.LittleEndian.Uint64(buf[8*i:])&(1<<63) != 0 {
			present++
		}
	}
	return present
}

// waitFor polls cond (an event count, not a duration) for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func startWarmer(t *testing.T, a *Arena) *Warmer {
	t.Helper()
	w, err := a.NewWarmer()
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- w.Run() }()
	t.Cleanup(func() {
		w.Stop()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	})
	return w
}

// A span the creator allocates and writes ends up mapped in the attached
// process without the attached process touching it itself.
func TestWarmerMapsAllocatedSpans(t *testing.T) {
	c, at := attachedPair(t, 64<<20)
	w := startWarmer(t, at)
	const size = 8 << 20
	s, err := c.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	b := c.Bytes(s)
	for i := range b {
		b[i] = byte(i)
	}
	small, err := c.Alloc(4 << 10) // under largeAlloc: not logged
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the warmer to touch the span", func() bool { return w.Pages() >= size/pageSize })
	if got := mappedPages(t, at.Bytes(s)); got != size/int(pageSize) {
		t.Errorf("%d of %d pages of the span mapped in the attached arena after warming", got, size/pageSize)
	}
	if w.Pages() != size/pageSize {
		t.Errorf("warmer touched %d pages, want %d (the small span is not logged)", w.Pages(), size/pageSize)
	}
	if got := mappedPages(t, at.Bytes(base.Span{Offset: small.Offset &^ (pageSize - 1), Size: pageSize})); got != 0 {
		t.Errorf("the small span's page is mapped (%d): only large spans are warmed", got)
	}
	if _, err := c.NewWarmer(); err == nil {
		t.Error("the creator got a warmer")
	}
}

// Spans freed while warmers run keep their pages released: a warmer never
// touches a page Free punched.
func TestWarmerKeepsFreedPagesReleased(t *testing.T) {
	c, at := attachedPair(t, 256<<20)
	w := startWarmer(t, at)
	base0, err := c.Committed()
	if err != nil {
		t.Fatal(err)
	}
	const size = 32 << 20
	for round := 0; round < 10; round++ {
		before := w.Pages()
		s, err := c.Alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		b := c.Bytes(s)
		for i := 0; i < len(b); i += int(pageSize) {
			b[i] = 1
		}
		if round%2 == 1 {
			// Let the warmer get into the span before it is freed.
			// Spin, not sleep: the Free must come while it is in there.
			for deadline := time.Now().Add(time.Minute); w.Pages() <= before; {
				if time.Now().After(deadline) {
					t.Fatal("timed out waiting for the warmer to start on the span")
				}
			}
		}
		if err := c.Free(s); err != nil {
			t.Fatal(err)
		}
	}
	// The warmer is done when the log is read and nothing is queued; an
	// Alloc and Free after that punches what was deferred.
	waitFor(t, "the warmer to go idle", func() bool { return atomicU64(at.mem, hdrWarmers+w.slot*warmerSize+8).Load() == 0 })
	s, err := c.Alloc(largeAlloc)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Free(s); err != nil {
		t.Fatal(err)
	}
	got, err := c.Committed()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("committed %d bytes before, %d after", base0, got)
	if got > base0+256<<10 {
		t.Errorf("%d bytes committed after every span was freed, %d before: a warmer gave freed pages memory again", got, base0)
	}
	if c.PunchErr() != nil {
		t.Skipf("hole punching unavailable: %v", c.PunchErr())
	}
}

// A warmer that falls behind the log forgets its queue rather than warm
// spans that may have been freed, and still warms what comes after.
func TestWarmerOverflow(t *testing.T) {
	c, at := attachedPair(t, 256<<20)
	w, err := at.NewWarmer()
	if err != nil {
		t.Fatal(err)
	}
	var spans []base.Span
	for i := 0; i < logSlots+10; i++ {
		s, err := c.Alloc(largeAlloc)
		if err != nil {
			t.Fatal(err)
		}
		spans = append(spans, s)
	}
	w.next = 0 // as if it had started before the first of them
	w.readLog()
	if len(w.queue) != logSlots {
		t.Errorf("%d spans queued after an overflow, want the %d the log still holds", len(w.queue), logSlots)
	}
	for _, s := range spans[len(spans)-5:] {
		if err := c.Free(s); err != nil {
			t.Fatal(err)
		}
	}
	w.readLog()
	if len(w.queue) != logSlots-5 {
		t.Errorf("%d spans queued after 5 Frees, want %d", len(w.queue), logSlots-5)
	}
	w.release()
	if slots := countSlots(at); slots != 0 {
		t.Errorf("%d warmer slots held after release", slots)
	}
}

func countSlots(a *Arena) int {
	n := 0
	for i := 0; i < warmerSlots; i++ {
		if atomicU64(a.mem, hdrWarmers+i*warmerSize).Load() != 0 {
			n++
		}
	}
	return n
}

// The handshake, step by step: a Free that comes while a warmer has
// published a chunk of the span defers the punch until the warmer is off
// it, so the warmer's touches cannot leave the freed pages holding memory.
func TestWarmerHandshake(t *testing.T) {
	c, at := attachedPair(t, 64<<20)
	w, err := at.NewWarmer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.release()
	base0, err := c.Committed()
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Alloc(2 << 20)
	if err != nil {
		t.Fatal(err)
	}
	clear(c.Bytes(s))
	w.readLog()
	if len(w.queue) != 1 || w.queue[0].off != s.Offset {
		t.Fatalf("queue %+v after one Alloc of %+v", w.queue, s)
	}
	const chunk = 16
	w.publish(s.Offset, chunk)
	if err := c.Free(s); err != nil {
		t.Fatal(err)
	}
	if len(c.deferred) != 1 {
		t.Fatalf("%d ranges deferred by a Free under a published chunk, want 1", len(c.deferred))
	}
	// The warmer had looked at the log before the Free: it touches its chunk.
	var sum byte
	b := at.Bytes(base.Span{Offset: s.Offset, Size: chunk * pageSize})
	for i := 0; i < len(b); i += int(pageSize) {
		sum += b[i]
	}
	w.readLog()
	if len(w.queue) != 0 {
		t.Fatalf("queue %+v after the span's Free", w.queue)
	}
	w.publish(0, 0)
	s2, err := c.Alloc(4 << 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.deferred) != 0 {
		t.Errorf("%d ranges still deferred once the warmer is off them", len(c.deferred))
	}
	if err := c.Free(s2); err != nil {
		t.Fatal(err)
	}
	got, err := c.Committed()
	if err != nil {
		t.Fatal(err)
	}
	if c.PunchErr() != nil {
		t.Skipf("hole punching unavailable: %v", c.PunchErr())
	}
	if got > base0+pageSize {
		t.Errorf("%d bytes committed after the Free, %d before (sum %d): the warmer's touches kept freed pages", got, base0, sum)
	}
}

// Pages allocated but not written are not given memory by the warmer; it
// warms them once the application writes them.
func TestWarmerLeavesUnwrittenPages(t *testing.T) {
	c, at := attachedPair(t, 64<<20)
	w := startWarmer(t, at)
	base0, err := c.Committed()
	if err != nil {
		t.Fatal(err)
	}
	const size = 8 << 20
	s, err := c.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	b := c.Bytes(s)
	half := b[:size/2]
	for i := 0; i < len(half); i += int(pageSize) {
		half[i] = 1
	}
	waitFor(t, "the warmer to touch the written half", func() bool { return w.Pages() >= size/2/pageSize })
	got, err := c.Committed()
	if err != nil {
		t.Fatal(err)
	}
	if got > base0+size/2+64<<10 {
		t.Errorf("%d bytes committed after writing half of an %d-byte span (%d before): the warmer gave the other half memory", got, size, base0)
	}
	if n := mappedPages(t, at.Bytes(base.Span{Offset: s.Offset + size/2, Size: size / 2})); n != 0 {
		t.Errorf("%d pages of the unwritten half mapped in the attached arena", n)
	}
	for i := size / 2; i < len(b); i += int(pageSize) {
		b[i] = 1
	}
	waitFor(t, "the warmer to touch the second half once written", func() bool { return w.Pages() >= size/pageSize })
	if n := mappedPages(t, at.Bytes(s)); n != size/int(pageSize) {
		t.Errorf("%d of %d pages mapped after the whole span was written", n, size/pageSize)
	}
}

// The slot of a warmer whose process is gone is taken back: a driver
// restarted many times still gets one.
func TestWarmerSlotOfDeadProcess(t *testing.T) {
	_, at := attachedPair(t, 1<<20)
	// A process that has exited: this test's own child, reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	dead := uint64(cmd.Process.Pid)
	for i := 0; i < warmerSlots; i++ {
		atomicU64(at.mem, hdrWarmers+i*warmerSize).Store(dead)
		atomicU64(at.mem, hdrWarmers+i*warmerSize+8).Store(1<<16 | 1)
	}
	w, err := at.NewWarmer()
	if err != nil {
		t.Fatalf("NewWarmer with every slot held by a dead process: %v", err)
	}
	defer w.release()
	if got := at.WarmerPIDs(); !slices.Contains(got, os.Getpid()) {
		t.Errorf("warmer slots %v, want this process among them", got)
	}
	if active := atomicU64(at.mem, hdrWarmers+w.slot*warmerSize+8).Load(); active != 0 {
		t.Errorf("the dead process's published chunk %#x stayed in the slot taken back", active)
	}
}

// When every slot is held by a live process, NewWarmer says so.
func TestWarmerNoSlot(t *testing.T) {
	_, at := attachedPair(t, 1<<20)
	for i := 0; i < warmerSlots; i++ {
		if _, err := at.NewWarmer(); err != nil {
			t.Fatalf("warmer %d: %v", i, err)
		}
	}
	if _, err := at.NewWarmer(); !errors.Is(err, ErrNoWarmerSlot) {
		t.Fatalf("NewWarmer with every slot held by this live process: %v, want ErrNoWarmerSlot", err)
	}
}
