package shm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// sealHelperEnv selects TestSealHelperProcess in a child: it tries to
// resize the arena it got on base.ArenaFD and prints what each try gave.
const sealHelperEnv = "STARPU_SHM_SEAL_HELPER"

// resizeTries tries to shrink, grow and extend (fallocate past the end) the
// file behind fd, and says what each gave.
func resizeTries(fd int, size int64) string {
	res := func(err error) string {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return unix.ErrnoName(errno)
		}
		if err == nil {
			return "ok"
		}
		return err.Error()
	}
	return strings.Join([]string{
		"shrink=" + res(unix.Ftruncate(fd, size/2)),
		"truncate0=" + res(unix.Ftruncate(fd, 0)),
		"grow=" + res(unix.Ftruncate(fd, size*2)),
		"extend=" + res(unix.Fallocate(fd, 0, size, int64(pageSize))),
		"unseal=" + res(func() error { _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE); return err }()),
	}, " ")
}

const sealedTries = "shrink=EPERM truncate0=EPERM grow=EPERM extend=EPERM unseal=EPERM"

// TestSealHelperProcess is not a test: it is the child of TestArenaSealed.
func TestSealHelperProcess(t *testing.T) {
	if os.Getenv(sealHelperEnv) == "" {
		t.Skip("helper process for TestArenaSealed")
	}
	var st unix.Stat_t
	if err := unix.Fstat(base.ArenaFD, &st); err != nil {
		fmt.Println("fstat:", err)
		os.Exit(1)
	}
	fmt.Println(resizeTries(base.ArenaFD, st.Size))
	os.Exit(0)
}

// The arena's size is sealed: no process holding its memfd (a plugin) can
// shrink it, which would make every process fault on the lost pages, or
// grow it; releasing pages by punching holes still works.
func TestArenaSealed(t *testing.T) {
	a, err := Create(4<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	fd := int(a.File().Fd())
	size := int64(a.Size())
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL; seals&want != want || seals&unix.F_SEAL_WRITE != 0 {
		t.Errorf("seals %#x, want shrink, grow and seal (%#x) and not write", seals, want)
	}

	t.Run("this process", func(t *testing.T) {
		if got := resizeTries(fd, size); got != sealedTries {
			t.Fatalf("got %s, want %s", got, sealedTries)
		}
	})
	t.Run("reopened", func(t *testing.T) {
		f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if got := resizeTries(int(f.Fd()), size); got != sealedTries {
			t.Fatalf("got %s, want %s", got, sealedTries)
		}
	})
	t.Run("another process", func(t *testing.T) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSealHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), sealHelperEnv+"=1")
		cmd.ExtraFiles = []*os.File{a.File()}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != sealedTries {
			t.Fatalf("got %s, want %s", got, sealedTries)
		}
	})
	t.Run("size and hole punching", func(t *testing.T) {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Size != size {
			t.Fatalf("size %d (%v), want %d", st.Size, err, size)
		}
		b := a.Bytes(base.Span{Offset: a.ControlSize(), Size: uint64(pageSize)})
		b[0] = 1
		if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(a.ControlSize()), int64(pageSize)); err != nil {
			t.Fatalf("punch hole: %v", err)
		}
		if b[0] != 0 {
			t.Fatal("punched page not zero")
		}
	})
}
