package cu

// Tests that need a GPU. They skip, saying why, when Probe finds no usable
// device; on the GPU machine they run from a `go test -c` binary with no
// source tree: everything they need is in this file.

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var (
	gpuOnce    sync.Once
	gpuSkip    string
	gpuErr     error
	gpuMachine *Machine
	gpuDev     Device
	gpuCtx     Context
)

// gpu locks the test's goroutine to its thread, makes device 0's primary
// context current on it, or skips the test when the machine has no usable
// CUDA device.
func gpu(t *testing.T) {
	t.Helper()
	gpuOnce.Do(func() {
		m, err := Probe(Config{})
		if err != nil {
			gpuSkip = "no usable CUDA device: " + err.Error()
			return
		}
		gpuMachine = m
		if gpuErr = Init(); gpuErr != nil {
			return
		}
		if gpuDev, gpuErr = DeviceGet(0); gpuErr != nil {
			return
		}
		gpuCtx, gpuErr = gpuDev.PrimaryCtxRetain()
	})
	if gpuSkip != "" {
		t.Skip(gpuSkip)
	}
	if gpuErr != nil {
		t.Fatalf("Probe found a device but: %v", gpuErr)
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	if err := gpuCtx.SetCurrent(); err != nil {
		t.Fatal(err)
	}
}

// hostMem is n bytes of mmapped memory (Go does not manage it), as
// asynchronous copies need; registered with the driver when pinned.
func hostMem(t *testing.T, n int, pinned bool) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	if pinned {
		if err := MemHostRegisterBytes(b, HostRegisterPortable); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if pinned {
			if err := MemHostUnregister(unsafe.Pointer(&b[0])); err != nil {
				t.Error(err)
			}
		}
		unix.Munmap(b)
	})
	return b
}

func f32s(b []byte) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4) }
func f64s(b []byte) []float64 { return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8) }

// devAlloc allocates n bytes freed at the end of the test.
func devAlloc(t *testing.T, n uint64) DevicePtr {
	t.Helper()
	p, err := MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := MemFree(p); err != nil {
			t.Error(err)
		}
	})
	return p
}

func newStream(t *testing.T) Stream {
	t.Helper()
	s, err := StreamCreate(StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Destroy(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestGPUDevice(t *testing.T) {
	gpu(t)
	t.Logf("\n%s", gpuMachine)
	if v, err := DriverVersion(); err != nil || v < MinDriverVersion || v != gpuMachine.DriverVersion {
		t.Errorf("DriverVersion %d, %v (probe said %d)", v, err, gpuMachine.DriverVersion)
	}
	n, err := DeviceCount()
	must(t, err)
	if n != len(gpuMachine.Devices) {
		t.Errorf("DeviceCount %d, Probe found %d", n, len(gpuMachine.Devices))
	}
	info, err := gpuDev.Info()
	must(t, err)
	if info != gpuMachine.Devices[0] {
		t.Errorf("Info %+v, Probe %+v", info, gpuMachine.Devices[0])
	}
	if info.Name == "" || info.TotalMem < 1<<30 || info.Major < 5 || info.Multiprocessors < 1 || !strings.Contains(info.PCIBusID, ":") {
		t.Errorf("implausible device %+v", info)
	}
	major, minor, err := gpuDev.ComputeCapability()
	must(t, err)
	sms, err := gpuDev.MultiprocessorCount()
	must(t, err)
	if major != info.Major || minor != info.Minor || sms != info.Multiprocessors {
		t.Errorf("cc %d.%d sms %d vs %+v", major, minor, sms, info)
	}
	for _, a := range []DeviceAttribute{AttrWarpSize, AttrMaxThreadsPerBlock, AttrAsyncEngineCount, AttrUnifiedAddressing, AttrHostRegisterSupported} {
		v, err := gpuDev.Attribute(a)
		must(t, err)
		t.Logf("attribute %d = %d", a, v)
	}
	if w, _ := gpuDev.Attribute(AttrWarpSize); w != 32 {
		t.Errorf("warp size %d", w)
	}
	if cur, err := gpuCtx.IsCurrent(); err != nil || !cur {
		t.Errorf("context not current after SetCurrent: %v %v", cur, err)
	}
	free, total, err := MemGetInfo()
	must(t, err)
	if total == 0 || free > total || total > info.TotalMem {
		t.Errorf("MemGetInfo free %d total %d (device %d)", free, total, info.TotalMem)
	}
	libs := Loaded()
	t.Logf("libraries: driver %+v\n cuBLAS %+v\n cuSOLVER %+v\n NVRTC %+v", libs.Driver, libs.BLAS, libs.Solver, libs.NVRTC)
}

func TestGPUTransfers(t *testing.T) {
	gpu(t)
	const n = 4 << 20
	s := newStream(t)
	src := hostMem(t, n, true)
	dst := hostMem(t, n, true)
	unpinned := hostMem(t, n, false)
	for i := range src {
		src[i] = byte(i*7 + i>>12)
	}
	a := devAlloc(t, n)
	b := devAlloc(t, n)
	must(t, MemsetD8Async(b, 0xAB, n, s))
	must(t, MemcpyHtoDAsyncBytes(a, src, s))
	// Copy the second half to the first half of b, then all of a over b's
	// second half: b = a[n/2:] ++ a[:n/2].
	must(t, MemcpyDtoDAsync(b, a.Offset(n/2), n/2, s))
	must(t, MemcpyDtoDAsync(b.Offset(n/2), a, n/2, s))
	must(t, MemcpyDtoHAsyncBytes(dst, b, s))
	must(t, MemcpyDtoHAsync(unsafe.Pointer(&unpinned[0]), a, n, s))
	must(t, s.Synchronize())
	for i := 0; i < n; i++ {
		want := src[(i+n/2)%n]
		if dst[i] != want {
			t.Fatalf("byte %d: %#x, want %#x", i, dst[i], want)
		}
		if unpinned[i] != src[i] {
			t.Fatalf("unpinned byte %d: %#x, want %#x", i, unpinned[i], src[i])
		}
	}
	// Memset then read back.
	must(t, MemsetD8Async(a, 0x5C, 1000, s))
	must(t, MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), a, 1000, s))
	must(t, s.Synchronize())
	for i := 0; i < 1000; i++ {
		if dst[i] != 0x5C {
			t.Fatalf("memset byte %d: %#x", i, dst[i])
		}
	}
	// Registering twice is reported as such.
	err := MemHostRegisterBytes(src, HostRegisterPortable)
	if !errors.Is(err, ErrorHostMemoryAlreadyRegistered) {
		t.Errorf("second registration: %v", err)
	}
	// Bandwidth, for the record.
	big := 64 << 20
	h := hostMem(t, big, true)
	d := devAlloc(t, uint64(big))
	e0, err := EventCreate(EventDefault)
	must(t, err)
	e1, err := EventCreate(EventDefault)
	must(t, err)
	defer e0.Destroy()
	defer e1.Destroy()
	must(t, e0.Record(s))
	must(t, MemcpyHtoDAsyncBytes(d, h, s))
	must(t, e1.Record(s))
	must(t, e1.Synchronize())
	el, err := Elapsed(e0, e1)
	must(t, err)
	t.Logf("HtoD 64 MiB from registered memory: %v, %.1f GB/s", el, float64(big)/el.Seconds()/1e9)
}

func TestGPUOutOfMemory(t *testing.T) {
	gpu(t)
	_, err := MemAlloc(1 << 50)
	if !errors.Is(err, ErrorOutOfMemory) {
		t.Fatalf("allocating 1 PiB: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)") {
		t.Errorf("message %q", err)
	}
	t.Log(err)
}

func TestGPUStreamsEvents(t *testing.T) {
	gpu(t)
	s1 := newStream(t)
	s2 := newStream(t)
	const n = 256 << 20
	a := devAlloc(t, n)
	b := devAlloc(t, n)
	host := hostMem(t, 4096, true)
	start, err := EventCreate(EventDefault)
	must(t, err)
	defer start.Destroy()
	done, err := EventCreate(EventDefault)
	must(t, err)
	defer done.Destroy()
	ev, err := EventCreate(EventDisableTiming | EventBlockingSync)
	must(t, err)
	defer ev.Destroy()

	if ok, err := done.Query(); !ok || err != nil {
		t.Errorf("unrecorded event: done %v, %v", ok, err)
	}
	must(t, start.Record(s1))
	for i := 0; i < 8; i++ {
		must(t, MemsetD8Async(a, byte(i+1), n, s1))
	}
	must(t, done.Record(s1))
	// s2 waits for s1's work on the device, then copies a (all 8s) to b.
	must(t, s2.WaitEvent(done))
	must(t, MemcpyDtoDAsync(b, a, n, s2))
	must(t, MemcpyDtoHAsync(unsafe.Pointer(&host[0]), b.Offset(n-4096), 4096, s2))
	must(t, ev.Record(s2))
	idle, err := s2.Query()
	must(t, err)
	t.Logf("s2 done right after queueing: %v", idle)
	must(t, ev.Synchronize())
	if ok, err := ev.Query(); !ok || err != nil {
		t.Errorf("after Synchronize: done %v, %v", ok, err)
	}
	if ok, err := s2.Query(); !ok || err != nil {
		t.Errorf("stream after its last event: done %v, %v", ok, err)
	}
	for i, v := range host {
		if v != 8 {
			t.Fatalf("byte %d is %d: s2 did not wait for s1", i, v)
		}
	}
	el, err := Elapsed(start, done)
	must(t, err)
	if el <= 0 || el > 10*time.Second {
		t.Errorf("elapsed %v", el)
	}
	t.Logf("8 memsets of 256 MiB: %v (%.0f GB/s)", el, 8*float64(n)/el.Seconds()/1e9)
	if _, err := Elapsed(start, ev); !errors.Is(err, ErrorInvalidHandle) {
		t.Errorf("elapsed to an event without timing: %v, want CUDA_ERROR_INVALID_HANDLE", err)
	}
	must(t, Synchronize())
}

const scalSource = `
extern "C" __global__ void scal(float *x, int n, float a)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= a;
}
`

// addonePTX adds 1 to n floats; PTX ISA 7.8 for sm_75 and later.
const addonePTX = `
.version 7.8
.target sm_75
.address_size 64

.visible .entry addone(
	.param .u64 addone_x,
	.param .u32 addone_n
)
{
	.reg .pred %p<2>;
	.reg .f32 %f<3>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [addone_x];
	ld.param.u32 %r2, [addone_n];
	mov.u32 %r3, %ctaid.x;
	mov.u32 %r4, %ntid.x;
	mov.u32 %r5, %tid.x;
	mad.lo.s32 %r1, %r3, %r4, %r5;
	setp.ge.u32 %p1, %r1, %r2;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd2, %rd1;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	ld.global.f32 %f1, [%rd4];
	add.f32 %f2, %f1, 0f3F800000;
	st.global.f32 [%rd4], %f2;
DONE:
	ret;
}
`

// runFloatKernel fills n floats with i, runs f over them with params built
// by args(x), and returns the result.
func runFloatKernel(t *testing.T, f Function, n int, args func(x *DevicePtr, n *int32) []unsafe.Pointer) []float32 {
	t.Helper()
	s := newStream(t)
	h := hostMem(t, 4*n, true)
	for i := range f32s(h) {
		f32s(h)[i] = float32(i)
	}
	x := devAlloc(t, uint64(4*n))
	must(t, MemcpyHtoDAsyncBytes(x, h, s))
	nn := int32(n)
	block := uint32(256)
	if max, err := f.Attribute(FuncMaxThreadsPerBlock); err != nil || max < 256 {
		t.Fatalf("max threads per block %d, %v", max, err)
	}
	must(t, LaunchKernel(f, Dim3{X: (uint32(n) + block - 1) / block}, Dim3{X: block}, 0, s, args(&x, &nn)))
	must(t, MemcpyDtoHAsyncBytes(h, x, s))
	must(t, s.Synchronize())
	return append([]float32(nil), f32s(h)...)
}

func TestGPUNVRTC(t *testing.T) {
	gpu(t)
	if !Loaded().NVRTC.Loaded() {
		t.Skipf("no NVRTC: %v", Loaded().NVRTC.Err)
	}
	major, minor, err := NVRTCVersion()
	must(t, err)
	t.Logf("NVRTC %d.%d, driver %s", major, minor, VersionString(gpuMachine.DriverVersion))
	info := gpuMachine.Devices[0]
	for _, arch := range []string{fmt.Sprintf("compute_%d%d", info.Major, info.Minor), fmt.Sprintf("sm_%d%d", info.Major, info.Minor)} {
		t.Run(arch, func(t *testing.T) {
			gpu(t)
			p, err := Compile(scalSource, "scal.cu", "--gpu-architecture="+arch, "-default-device")
			must(t, err)
			if strings.HasPrefix(arch, "sm_") != (len(p.CUBIN) > 0) {
				t.Errorf("%s: PTX %d bytes, CUBIN %d bytes", arch, len(p.PTX), len(p.CUBIN))
			}
			if strings.HasPrefix(arch, "compute_") && !strings.Contains(string(p.PTX), ".entry scal") {
				t.Errorf("PTX lacks the kernel:\n%s", p.PTX)
			}
			m, err := ModuleLoadData(p.Image())
			must(t, err)
			defer m.Unload()
			f, err := m.Function("scal")
			must(t, err)
			const n = 100000
			a := float32(2.5)
			got := runFloatKernel(t, f, n, func(x *DevicePtr, n *int32) []unsafe.Pointer {
				return []unsafe.Pointer{unsafe.Pointer(x), unsafe.Pointer(n), unsafe.Pointer(&a)}
			})
			for i, v := range got {
				if v != float32(i)*a {
					t.Fatalf("x[%d] = %v, want %v", i, v, float32(i)*a)
				}
			}
		})
	}
	t.Run("compile error", func(t *testing.T) {
		_, err := Compile("extern \"C\" __global__ void k(float *x) { x[0] = undefined_thing; }", "bad.cu",
			fmt.Sprintf("--gpu-architecture=compute_%d%d", info.Major, info.Minor))
		var be *BuildError
		if !errors.As(err, &be) || be.Err.Code != 6 || !strings.Contains(be.Log, "undefined_thing") {
			t.Fatalf("got %v", err)
		}
		t.Log(err)
	})
	t.Run("bad option", func(t *testing.T) {
		_, err := Compile(scalSource, "scal.cu", "--no-such-option")
		if err == nil || !errors.Is(err, &Error{Lib: LibNVRTC, Code: 5}) {
			t.Fatalf("got %v, want NVRTC_ERROR_INVALID_OPTION", err)
		}
		t.Log(err)
	})
}

func TestGPUPTX(t *testing.T) {
	gpu(t)
	m, err := ModuleLoadData([]byte(addonePTX))
	must(t, err)
	defer m.Unload()
	f, err := m.Function("addone")
	must(t, err)
	const n = 5000
	got := runFloatKernel(t, f, n, func(x *DevicePtr, n *int32) []unsafe.Pointer {
		return []unsafe.Pointer{unsafe.Pointer(x), unsafe.Pointer(n)}
	})
	for i, v := range got {
		if v != float32(i)+1 {
			t.Fatalf("x[%d] = %v, want %v", i, v, float32(i)+1)
		}
	}
	if _, err := m.Function("nosuchkernel"); !errors.Is(err, ErrorNotFound) {
		t.Errorf("missing kernel: %v", err)
	}
	_, err = ModuleLoadData([]byte(".version 7.8\n.target sm_75\n.address_size 64\n.visible .entry broken( { bogus; }"))
	if !errors.Is(err, ErrorInvalidPTX) {
		t.Errorf("broken PTX: %v (%T), want CUDA_ERROR_INVALID_PTX", err, err)
	}
	var be *BuildError
	if !errors.As(err, &be) {
		t.Logf("no JIT error log came with %v", err)
	}
	t.Log(err)
}

// colMajor is an m×n column-major matrix with leading dimension ld.
type colMajor struct {
	m, n, ld int
	v        []float64
}

func randMatrix(r *rand.Rand, m, n, ld int) colMajor {
	a := colMajor{m, n, ld, make([]float64, ld*n)}
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			a.v[i+j*ld] = r.Float64()*2 - 1
		}
	}
	return a
}

func (a colMajor) at(i, j int, trans bool) float64 {
	if trans {
		return a.v[j+i*a.ld]
	}
	return a.v[i+j*a.ld]
}

// toDevice copies a (as float32 or float64) to new device memory.
func toDevice(t *testing.T, s Stream, a colMajor, f32 bool) DevicePtr {
	t.Helper()
	size := 8
	if f32 {
		size = 4
	}
	h := hostMem(t, len(a.v)*size, true)
	for i, v := range a.v {
		if f32 {
			f32s(h)[i] = float32(v)
		} else {
			f64s(h)[i] = v
		}
	}
	d := devAlloc(t, uint64(len(h)))
	must(t, MemcpyHtoDAsyncBytes(d, h, s))
	must(t, s.Synchronize())
	return d
}

func fromDevice(t *testing.T, s Stream, d DevicePtr, n int, f32 bool) []float64 {
	t.Helper()
	size := 8
	if f32 {
		size = 4
	}
	h := hostMem(t, n*size, false)
	must(t, MemcpyDtoHAsyncBytes(h, d, s))
	must(t, s.Synchronize())
	out := make([]float64, n)
	for i := range out {
		if f32 {
			out[i] = float64(f32s(h)[i])
		} else {
			out[i] = f64s(h)[i]
		}
	}
	return out
}

func newBLAS(t *testing.T, s Stream) *BLAS {
	t.Helper()
	if !Loaded().BLAS.Loaded() {
		t.Skipf("no cuBLAS: %v", Loaded().BLAS.Err)
	}
	b, err := NewBLAS()
	must(t, err)
	t.Cleanup(func() {
		if err := b.Destroy(); err != nil {
			t.Error(err)
		}
	})
	must(t, b.SetStream(s))
	return b
}

func tol(f32 bool) float64 {
	if f32 {
		return 1e-4
	}
	return 1e-12
}

func TestGPUGemm(t *testing.T) {
	gpu(t)
	s := newStream(t)
	b := newBLAS(t, s)
	v, err := b.Version()
	must(t, err)
	t.Logf("cuBLAS version %d", v)
	r := rand.New(rand.NewSource(1))
	for _, tc := range []struct {
		f32         bool
		ta, tb      Op
		m, n, k     int
		alpha, beta float64
	}{
		{true, NoTrans, NoTrans, 65, 33, 47, 1.5, 0.5},
		{true, Trans, NoTrans, 64, 64, 64, 1, 0},
		{true, NoTrans, Trans, 17, 129, 31, -1, 1},
		{false, NoTrans, NoTrans, 65, 33, 47, 1.5, 0.5},
		{false, Trans, Trans, 40, 20, 30, 2, -1},
		{false, Trans, NoTrans, 19, 23, 29, 1, 1},
		{false, NoTrans, Trans, 23, 19, 7, -0.5, 0},
	} {
		name := fmt.Sprintf("f32=%v/%v%v/%dx%dx%d", tc.f32, tc.ta, tc.tb, tc.m, tc.n, tc.k)
		t.Run(name, func(t *testing.T) {
			gpu(t)
			ar, ac := tc.m, tc.k
			if tc.ta == Trans {
				ar, ac = tc.k, tc.m
			}
			br, bc := tc.k, tc.n
			if tc.tb == Trans {
				br, bc = tc.n, tc.k
			}
			a := randMatrix(r, ar, ac, ar+3)
			bm := randMatrix(r, br, bc, br+1)
			c := randMatrix(r, tc.m, tc.n, tc.m+2)
			da, db, dc := toDevice(t, s, a, tc.f32), toDevice(t, s, bm, tc.f32), toDevice(t, s, c, tc.f32)
			if tc.f32 {
				must(t, b.Sgemm(tc.ta, tc.tb, tc.m, tc.n, tc.k, float32(tc.alpha), da, a.ld, db, bm.ld, float32(tc.beta), dc, c.ld))
			} else {
				must(t, b.Dgemm(tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, da, a.ld, db, bm.ld, tc.beta, dc, c.ld))
			}
			got := fromDevice(t, s, dc, len(c.v), tc.f32)
			for j := 0; j < tc.n; j++ {
				for i := 0; i < c.ld; i++ {
					want := c.v[i+j*c.ld]
					if i < tc.m {
						sum := 0.0
						for l := 0; l < tc.k; l++ {
							sum += a.at(i, l, tc.ta == Trans) * bm.at(l, j, tc.tb == Trans)
						}
						want = tc.alpha*sum + tc.beta*want
					}
					if math.Abs(got[i+j*c.ld]-want) > tol(tc.f32)*float64(tc.k+1) {
						t.Fatalf("C[%d,%d] = %v, want %v", i, j, got[i+j*c.ld], want)
					}
				}
			}
		})
	}
}

func TestGPULevel1(t *testing.T) {
	gpu(t)
	s := newStream(t)
	b := newBLAS(t, s)
	r := rand.New(rand.NewSource(2))
	const n = 1000
	for _, f32 := range []bool{true, false} {
		x := randMatrix(r, n, 1, n)
		y := randMatrix(r, n, 1, n)
		dx, dy := toDevice(t, s, x, f32), toDevice(t, s, y, f32)
		res := devAlloc(t, 8)
		dot := 0.0
		for i := 0; i < n; i++ {
			dot += x.v[i] * y.v[i]
		}
		if f32 {
			must(t, b.Sdot(n, dx, 1, dy, 1, res))
			must(t, b.Saxpy(n, 2, dx, 1, dy, 1)) // y = 2x + y
			must(t, b.Sscal(n/2, -3, dx, 2))     // every other x *= -3
		} else {
			must(t, b.Ddot(n, dx, 1, dy, 1, res))
			must(t, b.Daxpy(n, 2, dx, 1, dy, 1))
			must(t, b.Dscal(n/2, -3, dx, 2))
		}
		gotDot := fromDevice(t, s, res, 1, f32)[0]
		if math.Abs(gotDot-dot) > tol(f32)*n {
			t.Errorf("f32=%v dot %v, want %v", f32, gotDot, dot)
		}
		gx, gy := fromDevice(t, s, dx, n, f32), fromDevice(t, s, dy, n, f32)
		for i := 0; i < n; i++ {
			wx := x.v[i]
			if i%2 == 0 {
				wx *= -3
			}
			if math.Abs(gx[i]-wx) > tol(f32)*4 || math.Abs(gy[i]-(2*x.v[i]+y.v[i])) > tol(f32)*4 {
				t.Fatalf("f32=%v i=%d x %v want %v, y %v want %v", f32, i, gx[i], wx, gy[i], 2*x.v[i]+y.v[i])
			}
		}
		// Level-3 calls after a dot must be back in host pointer mode.
		c := devAlloc(t, 8)
		if f32 {
			must(t, b.Sgemm(NoTrans, NoTrans, 1, 1, 1, 1, dx, 1, dx, 1, 0, c, 1))
		} else {
			must(t, b.Dgemm(NoTrans, NoTrans, 1, 1, 1, 1, dx, 1, dx, 1, 0, c, 1))
		}
		if got := fromDevice(t, s, c, 1, f32)[0]; math.Abs(got-gx[0]*gx[0]) > tol(f32)*4 {
			t.Errorf("f32=%v gemm after dot: %v, want %v", f32, got, gx[0]*gx[0])
		}
	}
}

// spd is a symmetric positive definite n×n matrix.
func spd(r *rand.Rand, n int) colMajor {
	m := randMatrix(r, n, n, n)
	a := colMajor{n, n, n, make([]float64, n*n)}
	for j := 0; j < n; j++ {
		for i := 0; i < n; i++ {
			sum := 0.0
			for l := 0; l < n; l++ {
				sum += m.at(i, l, false) * m.at(j, l, false)
			}
			if i == j {
				sum += float64(n)
			}
			a.v[i+j*n] = sum
		}
	}
	return a
}

func TestGPUSyrk(t *testing.T) {
	gpu(t)
	s := newStream(t)
	b := newBLAS(t, s)
	r := rand.New(rand.NewSource(3))
	for _, tc := range []struct {
		f32   bool
		uplo  Fill
		trans Op
	}{{true, Lower, NoTrans}, {true, Upper, Trans}, {false, Lower, Trans}, {false, Upper, NoTrans}} {
		const n, k, alpha, beta = 37, 23, -1.0, 0.5
		rows, cols := n, k // A is n×k, or k×n transposed
		if tc.trans == Trans {
			rows, cols = k, n
		}
		a := randMatrix(r, rows, cols, rows+1)
		c := randMatrix(r, n, n, n+2)
		da, dc := toDevice(t, s, a, tc.f32), toDevice(t, s, c, tc.f32)
		if tc.f32 {
			must(t, b.Ssyrk(tc.uplo, tc.trans, n, k, alpha, da, a.ld, beta, dc, c.ld))
		} else {
			must(t, b.Dsyrk(tc.uplo, tc.trans, n, k, alpha, da, a.ld, beta, dc, c.ld))
		}
		got := fromDevice(t, s, dc, len(c.v), tc.f32)
		for j := 0; j < n; j++ {
			for i := 0; i < c.ld; i++ {
				want := c.v[i+j*c.ld]
				if i < n && (tc.uplo == Lower && i >= j || tc.uplo == Upper && i <= j) {
					sum := 0.0
					for l := 0; l < k; l++ {
						sum += a.at(i, l, tc.trans == Trans) * a.at(j, l, tc.trans == Trans)
					}
					want = alpha*sum + beta*want
				}
				if math.Abs(got[i+j*c.ld]-want) > tol(tc.f32)*k {
					t.Fatalf("%+v: C[%d,%d] = %v, want %v", tc, i, j, got[i+j*c.ld], want)
				}
			}
		}
	}
}

func TestGPUTrsm(t *testing.T) {
	gpu(t)
	s := newStream(t)
	b := newBLAS(t, s)
	r := rand.New(rand.NewSource(5))
	for _, tc := range []struct {
		f32   bool
		side  Side
		uplo  Fill
		trans Op
		diag  Diag
	}{
		{true, Left, Lower, NoTrans, NonUnit},
		{true, Right, Upper, NoTrans, NonUnit},
		{true, Left, Upper, Trans, Unit},
		{true, Right, Lower, Trans, NonUnit},
		{false, Left, Lower, NoTrans, NonUnit},
		{false, Right, Lower, Trans, Unit},
		{false, Left, Upper, NoTrans, NonUnit},
	} {
		// B is m×n; A is na×na, triangular per uplo, well conditioned.
		// The other triangle (and a unit diagonal) hold values the routine
		// must not read.
		const m, n, alpha = 29, 11, 2.0
		na := m
		if tc.side == Right {
			na = n
		}
		a := randMatrix(r, na, na, na+2)
		stored := func(p, q int) bool { return tc.uplo == Lower && p >= q || tc.uplo == Upper && p <= q }
		for q := 0; q < na; q++ {
			for p := 0; p < na; p++ {
				switch {
				case p == q && tc.diag == Unit:
					a.v[p+q*a.ld] = 1000
				case p == q:
					a.v[p+q*a.ld] = 4 + float64(p%3)
				case stored(p, q):
					a.v[p+q*a.ld] *= 0.1
				default:
					a.v[p+q*a.ld] = 1e6
				}
			}
		}
		eff := func(i, j int) float64 { // op(A) as the routine sees it
			p, q := i, j
			if tc.trans == Trans {
				p, q = j, i
			}
			switch {
			case p == q && tc.diag == Unit:
				return 1
			case stored(p, q):
				return a.v[p+q*a.ld]
			}
			return 0
		}
		x := randMatrix(r, m, n, m)
		bb := colMajor{m, n, m + 1, make([]float64, (m+1)*n)}
		for j := 0; j < n; j++ {
			for i := 0; i < m; i++ {
				sum := 0.0
				for q := 0; q < na; q++ {
					if tc.side == Left {
						sum += eff(i, q) * x.v[q+j*m]
					} else {
						sum += x.v[i+q*m] * eff(q, j)
					}
				}
				bb.v[i+j*bb.ld] = sum / alpha
			}
		}
		da, db := toDevice(t, s, a, tc.f32), toDevice(t, s, bb, tc.f32)
		if tc.f32 {
			must(t, b.Strsm(tc.side, tc.uplo, tc.trans, tc.diag, m, n, alpha, da, a.ld, db, bb.ld))
		} else {
			must(t, b.Dtrsm(tc.side, tc.uplo, tc.trans, tc.diag, m, n, alpha, da, a.ld, db, bb.ld))
		}
		got := fromDevice(t, s, db, len(bb.v), tc.f32)
		for j := 0; j < n; j++ {
			for i := 0; i < m; i++ {
				if v, want := got[i+j*bb.ld], x.v[i+j*m]; math.Abs(v-want) > tol(tc.f32)*10 {
					t.Fatalf("%+v: X[%d,%d] = %v, want %v", tc, i, j, v, want)
				}
			}
		}
	}
}

func TestGPUPotrf(t *testing.T) {
	gpu(t)
	if !Loaded().Solver.Loaded() {
		t.Skipf("no cuSOLVER: %v", Loaded().Solver.Err)
	}
	s := newStream(t)
	sv, err := NewSolver()
	must(t, err)
	defer sv.Destroy()
	must(t, sv.SetStream(s))
	r := rand.New(rand.NewSource(4))
	for _, tc := range []struct {
		f32  bool
		uplo Fill
	}{{true, Lower}, {true, Upper}, {false, Lower}, {false, Upper}} {
		f32 := tc.f32
		const n, lda = 50, 53
		sq := spd(r, n)
		a := colMajor{n, n, lda, make([]float64, lda*n)}
		for j := 0; j < n; j++ {
			for i := 0; i < lda; i++ {
				if i < n {
					a.v[i+j*lda] = sq.v[i+j*n]
				} else {
					a.v[i+j*lda] = -7 // padding, must survive
				}
			}
		}
		da := toDevice(t, s, a, f32)
		info := devAlloc(t, 4)
		var lwork int
		if f32 {
			lwork, err = sv.SpotrfBufferSize(tc.uplo, n, da, lda)
		} else {
			lwork, err = sv.DpotrfBufferSize(tc.uplo, n, da, lda)
		}
		must(t, err)
		size := uint64(8)
		if f32 {
			size = 4
		}
		work := devAlloc(t, uint64(lwork+1)*size)
		if f32 {
			must(t, sv.Spotrf(tc.uplo, n, da, lda, work, lwork, info))
		} else {
			must(t, sv.Dpotrf(tc.uplo, n, da, lda, work, lwork, info))
		}
		hi := hostMem(t, 4, false)
		must(t, MemcpyDtoHAsyncBytes(hi, info, s))
		got := fromDevice(t, s, da, len(a.v), f32)
		if devInfo := *(*int32)(unsafe.Pointer(&hi[0])); devInfo != 0 {
			t.Fatalf("%+v: devInfo %d", tc, devInfo)
		}
		// L·Lᵀ (or Uᵀ·U, U = Lᵀ) must give back A.
		l := func(i, q int) float64 {
			if tc.uplo == Upper {
				i, q = q, i
			}
			return got[i+q*lda]
		}
		for j := 0; j < n; j++ {
			for i := j; i < n; i++ {
				sum := 0.0
				for q := 0; q <= j; q++ {
					sum += l(i, q) * l(j, q)
				}
				if math.Abs(sum-sq.v[i+j*n]) > tol(f32)*float64(n)*10 {
					t.Fatalf("%+v: (L·Lᵀ)[%d,%d] = %v, want %v", tc, i, j, sum, sq.v[i+j*n])
				}
			}
			for i := n; i < lda; i++ {
				if got[i+j*lda] != -7 {
					t.Fatalf("%+v: padding A[%d,%d] overwritten: %v", tc, i, j, got[i+j*lda])
				}
			}
		}
		t.Logf("%+v: potrf n=%d lwork=%d ok", tc, n, lwork)

		// A matrix that is not positive definite: devInfo > 0.
		bad := colMajor{2, 2, 2, []float64{1, 2, 2, 1}}
		db := toDevice(t, s, bad, f32)
		if f32 {
			must(t, sv.Spotrf(tc.uplo, 2, db, 2, work, lwork, info))
		} else {
			must(t, sv.Dpotrf(tc.uplo, 2, db, 2, work, lwork, info))
		}
		must(t, MemcpyDtoHAsyncBytes(hi, info, s))
		must(t, s.Synchronize())
		if devInfo := *(*int32)(unsafe.Pointer(&hi[0])); devInfo != 2 {
			t.Errorf("%+v: not positive definite: devInfo %d, want 2", tc, devInfo)
		}
	}
}

func TestGPUPeer(t *testing.T) {
	gpu(t)
	n, err := DeviceCount()
	must(t, err)
	if n < 2 {
		t.Skipf("one GPU only: no peer to copy to")
	}
	d1, err := DeviceGet(1)
	must(t, err)
	can, err := gpuDev.CanAccessPeer(d1)
	must(t, err)
	ctx1, err := d1.PrimaryCtxRetain()
	must(t, err)
	defer ctx1.Release()
	if can {
		must(t, EnablePeerAccess(ctx1))
		must(t, EnablePeerAccess(ctx1)) // twice is fine
	}
	const size = 1 << 20
	s := newStream(t)
	a := devAlloc(t, size)
	must(t, ctx1.SetCurrent())
	b, err := MemAlloc(size)
	must(t, err)
	must(t, gpuCtx.SetCurrent())
	must(t, MemsetD8Async(a, 0x3D, size, s))
	must(t, MemcpyPeerAsync(b, ctx1, a, gpuCtx, size, s))
	h := hostMem(t, size, false)
	must(t, MemcpyPeerAsync(a, gpuCtx, b, ctx1, size, s))
	must(t, MemcpyDtoHAsyncBytes(h, a, s))
	must(t, s.Synchronize())
	for i, v := range h {
		if v != 0x3D {
			t.Fatalf("byte %d: %#x", i, v)
		}
	}
	must(t, ctx1.SetCurrent())
	must(t, MemFree(b))
	must(t, gpuCtx.SetCurrent())
	t.Logf("peer access %v; copies through MemcpyPeerAsync ok", can)
}

func TestGPUContextPerThread(t *testing.T) {
	gpu(t)
	// A thread with no current context cannot allocate; pushing the
	// context makes it current there.
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := ClearCurrent(); err != nil {
			done <- err
			return
		}
		if _, err := MemAlloc(16); !errors.Is(err, ErrorInvalidContext) {
			done <- fmt.Errorf("MemAlloc on a thread with no context: %v, want CUDA_ERROR_INVALID_CONTEXT", err)
			return
		}
		if err := gpuCtx.PushCurrent(); err != nil {
			done <- err
			return
		}
		p, err := MemAlloc(16)
		if err == nil {
			err = MemFree(p)
		}
		if err == nil {
			err = PopCurrent()
		}
		done <- err
	}()
	must(t, <-done)
}
