package cpudriver

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// whereKernel writes the thread it runs on into its int64 buffer.
var whereKernel = kernel.Kernel{Name: "where", Func: func(ctx *kernel.Context) error {
	ctx.Buffers[0].Int64s()[0] = int64(syscall.Gettid())
	return nil
}}

// TestAppWorker: a held worker runs only when RunOnce is called, one task
// per call, on the caller's thread, while a launched worker beside it runs
// by itself; Refuse fails a task with its text without running it; Idle
// returns for a task or a Wake; after Deinit, RunOnce refuses.
func TestAppWorker(t *testing.T) {
	r, d := newRig(t, 2, whereKernel)
	held, launched := r.W(0), r.W(1)
	if err := d.Hold([]int{held.Spec.ID}); err != nil {
		t.Fatal(err)
	}
	r.Init()
	if _, err := d.AppWorker(launched.Spec.ID); err == nil {
		t.Fatal("AppWorker of a launched worker: no error")
	}
	aw, err := d.AppWorker(held.Spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	slot := func() (uint64, func() int64) {
		s := r.RAM(8)
		return s.Offset, func() int64 { return int64(binary.LittleEndian.Uint64(r.Bytes(s))) }
	}
	// The launched worker needs nobody.
	off, got := slot()
	r.OK(launched.Exec(0, nil, drivertest.Vec(0, off, 1, 8, kernel.W)))
	if got() == 0 {
		t.Fatal("the launched worker's task did not write its thread")
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := int64(syscall.Gettid())
	offA, gotA := slot()
	offB, gotB := slot()
	a := held.Exec(0, nil, drivertest.Vec(0, offA, 1, 8, kernel.W))
	b := held.ExecSched(0, nil, drivertest.Vec(0, offB, 1, 8, kernel.W))
	time.Sleep(20 * time.Millisecond)
	if gotA() != 0 || gotB() != 0 {
		t.Fatal("a held worker ran a task before RunOnce was called")
	}
	if !aw.HasWork() {
		t.Fatal("HasWork = false with two tasks waiting")
	}
	for i, want := range []struct {
		ran          bool
		doneA, doneB bool
	}{{true, true, false}, {true, true, true}, {false, true, true}} {
		ran, err := aw.RunOnce()
		if err != nil {
			t.Fatal(err)
		}
		if ran != want.ran || (gotA() != 0) != want.doneA || (gotB() != 0) != want.doneB {
			t.Fatalf("RunOnce %d: ran %v, task a done %v, b done %v; want %v, %v, %v", i, ran, gotA() != 0, gotB() != 0, want.ran, want.doneA, want.doneB)
		}
	}
	r.OK(a, b)
	if gotA() != tid || gotB() != tid {
		t.Fatalf("the held worker's tasks ran on threads %d and %d; RunOnce's caller is %d", gotA(), gotB(), tid)
	}

	offC, gotC := slot()
	c := held.Exec(0, nil, drivertest.Vec(0, offC, 1, 8, kernel.W))
	if !aw.Idle(func() bool { return false }, 5*time.Second) {
		t.Fatal("Idle did not return for a waiting task")
	}
	if ran, err := aw.Refuse(errors.New("nobody runs worker 0")); !ran || err != nil {
		t.Fatalf("Refuse = %v, %v", ran, err)
	}
	if msg := r.Failed(c); !strings.Contains(msg, "nobody runs worker 0") {
		t.Fatalf("refused task failed with %q", msg)
	}
	if gotC() != 0 {
		t.Fatal("a refused task ran")
	}

	var wake atomic.Bool
	woke := make(chan bool)
	go func() { woke <- aw.Idle(wake.Load, 5*time.Second) }()
	time.Sleep(10 * time.Millisecond)
	wake.Store(true)
	aw.Wake()
	select {
	case ok := <-woke:
		if !ok {
			t.Fatal("Idle woken by Wake reports a timeout")
		}
	case <-time.After(time.Second):
		t.Fatal("Wake did not end Idle")
	}

	if err := r.Deinit(); err != nil {
		t.Fatal(err)
	}
	if _, err := aw.RunOnce(); err == nil || !strings.Contains(err.Error(), "deinitialised") {
		t.Fatalf("RunOnce after Deinit: %v", err)
	}
}

// TestHoldErrors: Hold names workers Init must start, and comes before it.
func TestHoldErrors(t *testing.T) {
	r, d := newRig(t, 2, whereKernel)
	if err := d.Hold([]int{99}); err != nil {
		t.Fatal(err)
	}
	req := &driver.InitRequest{Workers: []driver.WorkerSpec{r.W(0).Spec, r.W(1).Spec}}
	if err := d.Init(context.Background(), req); err == nil || !strings.Contains(err.Error(), "worker 99 is held") {
		t.Fatalf("Init without a held worker: %v", err)
	}
	if err := d.Hold(nil); err != nil {
		t.Fatal(err)
	}
	r.Init()
	if err := d.Hold([]int{r.W(0).Spec.ID}); err == nil {
		t.Fatal("Hold after Init: no error")
	}
	if _, err := d.AppWorker(r.W(0).Spec.ID); err == nil {
		t.Fatal("AppWorker of a worker never held: no error")
	}
}
