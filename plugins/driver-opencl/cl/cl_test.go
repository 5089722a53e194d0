package cl

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// device is the first OpenCL device of any type, with a context and a
// profiling queue; the test is skipped when the machine has none.
type device struct {
	dev  Device
	info DeviceInfo
	ctx  Context
	q    Queue
}

func openDevice(tb testing.TB) *device {
	tb.Helper()
	ps, err := Platforms()
	if err != nil || len(ps) == 0 {
		tb.Skipf("no OpenCL platform (install an ICD such as pocl-opencl-icd): %v", err)
	}
	for _, p := range ps {
		ds, err := p.Devices(DeviceAll)
		if err != nil {
			tb.Fatal(err)
		}
		if len(ds) == 0 {
			continue
		}
		d := &device{dev: ds[0]}
		if d.info, err = ds[0].Info(); err != nil {
			tb.Fatal(err)
		}
		if d.ctx, err = CreateContext(ds[0]); err != nil {
			tb.Fatal(err)
		}
		if d.q, err = d.ctx.CreateQueue(ds[0], true); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			d.q.Release()
			d.ctx.Release()
		})
		return d
	}
	tb.Skip("no OpenCL device on any platform")
	return nil
}

// hostBytes is n bytes of memory Go does not manage, as non-blocking
// transfers need.
func hostBytes(tb testing.TB, n int) []byte {
	tb.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Munmap(b) })
	return b
}

func floats(b []byte) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4) }

const scalSrc = `kernel void scal(global float *x, uint n, float a) {
	size_t i = get_global_id(0);
	if (i < n) x[i] *= a;
}`

func TestDeviceInfo(t *testing.T) {
	d := openDevice(t)
	if d.info.Name == "" || d.info.GlobalMemSize == 0 || d.info.MaxAllocSize == 0 || d.info.MaxWorkGroupSize == 0 {
		t.Fatalf("incomplete info %+v", d.info)
	}
	if d.info.MaxAllocSize > d.info.GlobalMemSize {
		t.Fatalf("max alloc %d above global memory %d", d.info.MaxAllocSize, d.info.GlobalMemSize)
	}
	if s := d.info.Type.String(); s == "" || strings.HasPrefix(s, "type(") {
		t.Fatalf("device type %q", s)
	}
	t.Logf("%s (%s), %s, %d MiB, max alloc %d MiB", d.info.Name, d.info.Vendor, d.info.Type, d.info.GlobalMemSize>>20, d.info.MaxAllocSize>>20)
}

// scalKernel builds scalSrc's kernel on d, released at the test's end.
func scalKernel(tb testing.TB, d *device) Kernel {
	tb.Helper()
	prog, err := d.ctx.BuildProgram(scalSrc, []Device{d.dev}, "")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { prog.Release() })
	k, err := prog.CreateKernel("scal")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { k.Release() })
	return k
}

// scaleThrough writes host into m, scales n floats of arg (m or a
// sub-buffer of it) by alpha and reads m back into host, each step
// waiting for the previous one's event; it returns the three events,
// complete.
func scaleThrough(t *testing.T, d *device, k Kernel, m, arg Mem, n uint32, alpha float32, host []byte) (w, kev, r Event) {
	t.Helper()
	w, err := d.q.EnqueueWrite(m, false, 0, host, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, set := range []error{k.SetArgMem(0, arg), k.SetArgUint32(1, n), k.SetArgFloat32(2, alpha)} {
		if set != nil {
			t.Fatalf("arg %d: %v", i, set)
		}
	}
	kev, err = d.q.EnqueueNDRange(k, []uint64{uint64(n)}, nil, []Event{w}, true)
	if err != nil {
		t.Fatal(err)
	}
	r, err = d.q.EnqueueRead(m, false, 0, host, []Event{kev}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	return w, kev, r
}

// TestScal writes, scales and reads back a vector through events only.
func TestScal(t *testing.T) {
	d := openDevice(t)
	const n = 1 << 16
	host := hostBytes(t, 4*n)
	x := floats(host)
	for i := range x {
		x[i] = float32(i)
	}
	k := scalKernel(t, d)
	if na, err := k.NumArgs(); err != nil || na != 3 {
		t.Fatalf("NumArgs = %d, %v", na, err)
	}
	m, err := d.ctx.CreateBuffer(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	w, kev, r := scaleThrough(t, d, k, m, m, n, 3, host)
	for _, e := range []Event{w, kev, r} {
		if s, err := e.Status(); err != nil || s != Complete {
			t.Fatalf("status %d, %v", s, err)
		}
	}
	start, end, err := kev.ProfilingTimes()
	if err != nil || end < start {
		t.Fatalf("profiling %d..%d, %v", start, end, err)
	}
	for _, e := range []Event{w, kev, r} {
		e.Release()
	}
	for i, v := range x {
		if v != 3*float32(i) {
			t.Fatalf("x[%d] = %v, want %v", i, v, 3*float32(i))
		}
	}
}

// TestSubBuffer: a kernel given a sub-buffer sees the bytes from its
// origin on, in the parent buffer's memory; an origin off the device's
// base alignment is refused by name.
func TestSubBuffer(t *testing.T) {
	d := openDevice(t)
	align := d.info.BaseAlign
	if align == 0 || align&(align-1) != 0 {
		t.Fatalf("base alignment %d bytes, want a power of two", align)
	}
	const n = 64 // floats in the sub-buffer
	host := hostBytes(t, int(align)+4*n)
	x := floats(host)
	for i := range x {
		x[i] = float32(i)
	}
	m, err := d.ctx.CreateBuffer(uint64(len(host)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	sub, err := m.SubBuffer(align, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Release()
	k := scalKernel(t, d)
	w, kev, r := scaleThrough(t, d, k, m, sub, n, -1, host)
	for _, e := range []Event{w, kev, r} {
		e.Release()
	}
	before := int(align / 4)
	for i, v := range x {
		want := float32(i)
		if i >= before {
			want = -want
		}
		if v != want {
			t.Fatalf("x[%d] = %v, want %v (the sub-buffer starts at float %d)", i, v, want, before)
		}
	}
	if align > 1 {
		_, err := m.SubBuffer(align/2, 4)
		if !errors.Is(err, &Error{Code: -13}) || !strings.Contains(err.Error(), "clCreateSubBuffer: CL_MISALIGNED_SUB_BUFFER_OFFSET") {
			t.Errorf("sub-buffer at %d bytes: %v, want CL_MISALIGNED_SUB_BUFFER_OFFSET", align/2, err)
		}
	}
	t.Logf("base address alignment: %d bytes", align)
}

func TestErrors(t *testing.T) {
	d := openDevice(t)
	t.Run("build log", func(t *testing.T) {
		_, err := d.ctx.BuildProgram("kernel void broken(global float *x) { x[0] = undeclared_name; }", []Device{d.dev}, "")
		var be *BuildError
		if !errors.As(err, &be) {
			t.Fatalf("error %v (%T), want a *BuildError", err, err)
		}
		if !strings.Contains(err.Error(), "clBuildProgram: CL_BUILD_PROGRAM_FAILURE (-11); build log:") || !strings.Contains(be.Log, "undeclared_name") {
			t.Fatalf("error %q lacks the call or the log", err)
		}
		if !errors.Is(err, &Error{Code: BuildProgramFailure}) {
			t.Fatal("errors.Is by code fails")
		}
	})
	t.Run("work group size", func(t *testing.T) {
		prog, err := d.ctx.BuildProgram(`__attribute__((reqd_work_group_size(7, 1, 1)))
kernel void fixed(global float *x) { x[get_global_id(0)] = 1; }`, []Device{d.dev}, "")
		if err != nil {
			t.Fatal(err)
		}
		defer prog.Release()
		k, err := prog.CreateKernel("fixed")
		if err != nil {
			t.Fatal(err)
		}
		defer k.Release()
		m, err := d.ctx.CreateBuffer(64)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Release()
		if err := k.SetArgMem(0, m); err != nil {
			t.Fatal(err)
		}
		_, err = d.q.EnqueueNDRange(k, []uint64{10}, nil, nil, false)
		if err == nil || err.Error() != "clEnqueueNDRangeKernel: CL_INVALID_WORK_GROUP_SIZE (-54)" {
			t.Fatalf("err = %v", err)
		}
		if err := k.SetArgUint32(5, 1); !errors.Is(err, &Error{Call: "clSetKernelArg", Code: InvalidArgIndex}) {
			t.Fatalf("bad arg index: %v", err)
		}
		if _, err := prog.CreateKernel("missing"); err == nil || !strings.Contains(err.Error(), `kernel "missing": clCreateKernel: CL_INVALID_KERNEL_NAME (-46)`) {
			t.Fatalf("missing kernel: %v", err)
		}
	})
	t.Run("buffer size", func(t *testing.T) {
		_, err := d.ctx.CreateBuffer(d.info.MaxAllocSize + 1)
		if !errors.Is(err, &Error{Call: "clCreateBuffer", Code: InvalidBufferSize}) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("names", func(t *testing.T) {
		for code, want := range map[int32]string{-1001: "CL_PLATFORM_NOT_FOUND_KHR", -5: "CL_OUT_OF_RESOURCES", -12345: "unknown OpenCL error"} {
			if got := CodeName(code); got != want {
				t.Errorf("CodeName(%d) = %q, want %q", code, got, want)
			}
		}
	})
}

// TestOnComplete checks every registered event reports once, with its tag.
func TestOnComplete(t *testing.T) {
	d := openDevice(t)
	const n = 64
	host := hostBytes(t, 4096)
	m, err := d.ctx.CreateBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	var mu sync.Mutex
	got := map[uint64]int32{}
	all := make(chan struct{})
	s, err := NewSink(func(tag uint64, status int32) {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := got[tag]; dup {
			status = 99 // reported twice: fails the check below
		}
		got[tag] = status
		if len(got) == n {
			close(all)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var evs []Event
	for i := 0; i < n; i++ {
		e, err := d.q.EnqueueWrite(m, false, uint64(i*64), host[i*64:(i+1)*64], nil, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.OnComplete(s, MaxTag-uint64(i)); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	d.q.Flush()
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		t.Fatal("callbacks missing")
	}
	for i := 0; i < n; i++ {
		if st, ok := got[MaxTag-uint64(i)]; !ok || st != Complete {
			t.Fatalf("tag %d: status %d, reported %v", i, st, ok)
		}
	}
	for _, e := range evs {
		e.Release()
	}
	if err := (Event{}).OnComplete(s, MaxTag+1); err == nil {
		t.Fatal("tag above MaxTag accepted")
	}
}

const benchBytes = 64 << 20

func benchTransfer(b *testing.B, write bool) {
	d := openDevice(b)
	host := hostBytes(b, benchBytes)
	for i := range host {
		host[i] = byte(i)
	}
	m, err := d.ctx.CreateBuffer(benchBytes)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release()
	// First touch of the device buffer outside the timing.
	if _, err := d.q.EnqueueWrite(m, true, 0, host, nil, false); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var e Event
		if write {
			e, err = d.q.EnqueueWrite(m, false, 0, host, nil, true)
		} else {
			e, err = d.q.EnqueueRead(m, false, 0, host, nil, true)
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Wait(); err != nil {
			b.Fatal(err)
		}
		e.Release()
	}
}

// BenchmarkWrite64MiB is host-to-device bandwidth (MB/s column).
func BenchmarkWrite64MiB(b *testing.B) { benchTransfer(b, true) }

// BenchmarkRead64MiB is device-to-host bandwidth (MB/s column).
func BenchmarkRead64MiB(b *testing.B) { benchTransfer(b, false) }

// BenchmarkScal64MiB scales a 64 MiB float vector already on the device:
// the kernel alone, the baseline for the runtime's scal task.
func BenchmarkScal64MiB(b *testing.B) {
	d := openDevice(b)
	const n = benchBytes / 4
	k := scalKernel(b, d)
	m, err := d.ctx.CreateBuffer(benchBytes)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release()
	host := hostBytes(b, benchBytes)
	x := floats(host)
	for i := range x {
		x[i] = 1
	}
	if _, err := d.q.EnqueueWrite(m, true, 0, host, nil, false); err != nil {
		b.Fatal(err)
	}
	k.SetArgMem(0, m)
	k.SetArgUint32(1, n)
	k.SetArgFloat32(2, 1.0000001)
	run := func() {
		e, err := d.q.EnqueueNDRange(k, []uint64{n}, nil, nil, true)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Wait(); err != nil {
			b.Fatal(err)
		}
		e.Release()
	}
	run() // pocl compiles the work-group function at the first launch
	b.SetBytes(benchBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
	b.StopTimer()
	if _, err := d.q.EnqueueRead(m, true, 0, host, nil, false); err != nil {
		b.Fatal(err)
	}
	if want := float32(math.Pow(1.0000001, float64(b.N+1))); math.Abs(float64(x[n-1]-want)) > 1e-5 {
		b.Fatalf("x = %v after %d scalings, want %v", x[n-1], b.N+1, want)
	}
}

// TestUserEvent holds a command back on a user event, then fails it.
func TestUserEvent(t *testing.T) {
	d := openDevice(t)
	u, err := d.ctx.CreateUserEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer u.Release()
	host := hostBytes(t, 64)
	m, err := d.ctx.CreateBuffer(64)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	w, err := d.q.EnqueueWrite(m, false, 0, host, []Event{u}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	d.q.Flush()
	time.Sleep(10 * time.Millisecond)
	if s, err := w.Status(); err != nil || s == Complete {
		t.Fatalf("write ran before its user event: status %d, %v", s, err)
	}
	if err := u.SetUserStatus(OutOfResources); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(); err == nil {
		t.Fatal("write waiting on a failed event succeeded")
	}
	if s, err := w.Status(); err != nil || s >= 0 {
		t.Fatalf("status %d, %v; want an error status", s, err)
	}
}

// BenchmarkScalSmall is one tiny kernel launch and wait: pocl's own
// per-kernel latency, the floor under the driver's per-task overhead.
func BenchmarkScalSmall(b *testing.B) {
	d := openDevice(b)
	k := scalKernel(b, d)
	m, err := d.ctx.CreateBuffer(64)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release()
	k.SetArgMem(0, m)
	k.SetArgUint32(1, 16)
	k.SetArgFloat32(2, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e, err := d.q.EnqueueNDRange(k, []uint64{16}, nil, nil, true)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Wait(); err != nil {
			b.Fatal(err)
		}
		e.Release()
	}
}
