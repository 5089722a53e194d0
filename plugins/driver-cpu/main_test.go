package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// TestConformance runs the driver kit's conformance suite on the
// driver-cpu binary as the runtime starts it, with its BLAS library: the
// tasks scale 1024 floats by 1 through OpenBLAS. The failing-kernel
// scenario runs in cpudriver's tests, whose test plugin hosts a kernel
// that fails with the suite's message.
func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Harness{
		Start:  drivertest.Plugin(drivertest.Build(t, ".", t.TempDir(), "cpu")),
		Config: base.Config{"bind": false, "units": int64(2)},
		OK: func(w *drivertest.Worker) drivertest.Task {
			s := w.RAM(4 << 10)
			return drivertest.Task{Kernel: w.Kernel(blasarg.ScalF32), Arg: blasarg.ScalArg{Alpha: 1}.Encode(),
				Buffers: []wire.BufferDesc{drivertest.Vec(0, s.Offset, 1<<10, 4, kernel.RW)}}
		},
	})
}

// The driver process maps the spans the core allocates ahead of the
// kernels (shm.Warmer): after an Alloc, the span's pages appear in the
// plugin's own page tables without any task touching them; with
// warm_pages = false the driver takes no warmer slot.
func TestWarmPages(t *testing.T) {
	bin := drivertest.Build(t, ".", t.TempDir(), "cpu")
	off := drivertest.Start(t, drivertest.Plugin(bin), drivertest.Config(base.Config{"bind": false, "warm_pages": false}))
	if pids := off.Arena.WarmerPIDs(); len(pids) != 0 {
		t.Errorf("warm_pages = false: warmer slots held by %v", pids)
	}
	r := drivertest.Start(t, drivertest.Plugin(bin), drivertest.Config(base.Config{"bind": false}))
	pids := r.Arena.WarmerPIDs()
	if len(pids) != 1 {
		t.Fatalf("warmer slots held by %v, want the driver's process", pids)
	}
	const size = 4 << 20
	s, err := r.Arena.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	b := r.Arena.Bytes(s)
	for i := range b {
		b[i] = byte(i)
	}
	page := uint64(os.Getpagesize())
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Millisecond) {
		n, err := mappedIn(pids[0], r.Arena.Bytes(s), page)
		if err != nil {
			t.Skipf("cannot read the plugin's page map: %v", err)
		}
		if n == size/page {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pages of a fresh span mapped in the driver process after a minute", n, size/page)
		}
	}
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d is %d after warming, want %d", i, b[i], byte(i))
		}
	}
}

// mappedIn counts the pages of the arena bytes b (this process's view) that
// the same file's mapping in process pid has in its page tables. The file
// and b's offset in it come from this process's /proc/self/maps, the other
// process's mapping of that file from its own.
func mappedIn(pid int, b []byte, page uint64) (uint64, error) {
	at := uint64(uintptr(unsafe.Pointer(&b[0])))
	start, inode, err := mapping(os.Getpid(), func(lo, hi uint64, _ string) bool { return lo <= at && at < hi })
	if err != nil {
		return 0, err
	}
	other, _, err := mapping(pid, func(_, _ uint64, ino string) bool { return ino == inode })
	if err != nil {
		return 0, err
	}
	addr := at - start + other
	f, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := uint64(len(b)) / page
	buf := make([]byte, 8*n)
	if _, err := f.ReadAt(buf, int64(addr/page*8)); err != nil {
		return 0, err
	}
	var present uint64
	for i := uint64(0); i < n; i++ {
		if binary.LittleEndian.Uint64(buf[8*i:])&(1<<63) != 0 {
			present++
		}
	}
	return present, nil
}

// mapping finds in /proc/PID/maps the arena mapping (a starpu-arena memfd
// mapped from offset 0) that match accepts, and returns its start address
// and inode.
func mapping(pid int, match func(lo, hi uint64, inode string) bool) (uint64, string, error) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, "", err
	}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[5], "/memfd:starpu-arena") || f[2] != "00000000" {
			continue
		}
		los, his, _ := strings.Cut(f[0], "-")
		lo, err1 := strconv.ParseUint(los, 16, 64)
		hi, err2 := strconv.ParseUint(his, 16, 64)
		if err1 == nil && err2 == nil && match(lo, hi, f[4]) {
			return lo, f[4], nil
		}
	}
	return 0, "", fmt.Errorf("no matching starpu-arena mapping in /proc/%d/maps", pid)
}
