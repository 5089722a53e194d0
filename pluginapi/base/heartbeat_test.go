package base

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// startHeartbeat beats into the word it is given in a shared file, and
// refuses a slot it cannot use.
func TestStartHeartbeat(t *testing.T) {
	fd, err := unix.MemfdCreate("heartbeat-test", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	page := os.Getpagesize()
	if err := unix.Ftruncate(fd, int64(2*page)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"x", "-8", "12"} {
		if err := startHeartbeat(fd, bad, time.Millisecond); err == nil || !strings.Contains(err.Error(), EnvHeartbeat) {
			t.Errorf("slot %q: %v, want an error naming %s", bad, err, EnvHeartbeat)
		}
	}
	slot := page + 64 // on the second page: the mapping must start at its page
	if err := startHeartbeat(fd, strconv.Itoa(slot), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, 2*page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	word := (*atomic.Int64)(unsafe.Pointer(&mem[slot]))
	first := word.Load()
	if first == 0 {
		t.Fatal("no beat written at once")
	}
	deadline := time.Now().Add(5 * time.Second)
	for word.Load() == first {
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat did not move in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
