package cudadriver

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// These tests run the whole driver on the GPU, or on the fake libraries
// where there is none (see main_test.go).

// TestConformance runs the driver kit's suite in process and as a plugin
// process. The task scales a vector of 16 floats on the worker's GPU. The
// failing task (real GPU only: the fake's JIT knows two kernel names) is
// a kernel named after the suite's message given a buffer never allocated.
func TestConformance(t *testing.T) {
	need(t)
	h := drivertest.Harness{
		Tasks: 500,
		OK: func(w *drivertest.Worker) drivertest.Task {
			buf := w.Buffer()
			w.OK(w.Alloc(buf, 64))
			return drivertest.Task{Kernel: w.Kernel(blasarg.ScalF32), Arg: blasarg.ScalArg{Alpha: 1}.Encode(),
				Buffers: []wire.BufferDesc{drivertest.Vec(uint8(w.Node), buf, 16, 4, kernel.RW)}}
		},
	}
	if backend == "gpu" {
		h.Fail = func(w *drivertest.Worker, msg string) drivertest.Task {
			src := fmt.Sprintf(`extern "C" __global__ void %s(float *x, unsigned n) { unsigned i = blockIdx.x*blockDim.x + threadIdx.x; if (i < n) x[i] = 0; }`, msg)
			idx, err := w.Driver.LoadKernel(w.Ctx(), driver.KernelSource{Name: msg, Source: src})
			if err != nil {
				w.T.Fatalf("load a kernel named by a %d-byte message: %v", len(msg), err)
			}
			return drivertest.Task{Kernel: idx, Buffers: []wire.BufferDesc{drivertest.Vec(uint8(w.Node), w.Buffer(), 16, 4, kernel.RW)}}
		}
	}
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			h := h
			h.Start = md.start
			drivertest.Run(t, h)
		})
	}
}

// TestFingerprint: units, nodes and kernels under the settings.
func TestFingerprint(t *testing.T) {
	need(t)
	if backend != "fake" {
		t.Skip("counts devices of the fake")
	}
	for _, tc := range []struct {
		name  string
		env   []string
		cfg   base.Config
		units int
		bytes uint64
		note  string
	}{
		{name: "all", env: []string{"CUDA_FAKE_DEVICES=2"}, units: 2, bytes: 80 << 30},
		{name: "NCUDA=1", env: []string{"CUDA_FAKE_DEVICES=2", EnvNDevices + "=1"}, units: 1, bytes: 80 << 30},
		{name: "NCUDA=-1", env: []string{"CUDA_FAKE_DEVICES=3", EnvNDevices + "=-1"}, units: 3, bytes: 80 << 30},
		{name: "limit", env: []string{EnvLimitMem + "=64"}, units: 1, bytes: 64 << 20},
		{name: "config limit", cfg: base.Config{"limit_mem_mib": int64(3)}, units: 1, bytes: 3 << 20},
		{name: "config ndevices 0", cfg: base.Config{"ndevices": int64(0)}, note: "CUDA disabled by the config's ndevices = 0"},
		{name: "no device", env: []string{"CUDA_FAKE_INIT=100"}, note: "cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"},
		{name: "old driver", env: []string{"CUDA_FAKE_VERSION=11040"}, note: "driver version 11.4 is older than the 12.0 this driver needs"},
	} {
		for _, md := range modes {
			t.Run(tc.name+"/"+md.name, func(t *testing.T) {
				a, err := shm.Create(1<<20, 1<<16)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { a.Close() })
				d := md.start(t, a, tc.env)
				if tc.cfg != nil {
					if err := d.SetConfig(context.Background(), tc.cfg); err != nil {
						t.Fatal(err)
					}
				}
				fp, err := d.Fingerprint(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if len(fp.Units) != tc.units || len(fp.Nodes) != tc.units || fp.Note != tc.note {
					t.Fatalf("fingerprint %+v", fp)
				}
				for i, u := range fp.Units {
					want := fmt.Sprintf("CUDA %d: Fake GPU %d (80.0 GiB, compute capability 9.0, driver 13.0)", i, i)
					if u.Name != want || u.Node != i+1 || fp.Nodes[i].Bytes != tc.bytes+uint64(i)*boolU(tc.bytes == 80<<30) {
						t.Errorf("unit %d: %+v, node %+v", i, u, fp.Nodes[i])
					}
				}
				if tc.units > 0 && strings.Join(fp.Kernels, " ") != "scal_f32 axpy_f32 dot_f32 gemm_f32 syrk_f32 trsm_f32 potrf_f32 scal_f64 axpy_f64 dot_f64 gemm_f64 syrk_f64 trsm_f64 potrf_f64" {
					t.Errorf("kernels %v", fp.Kernels)
				}
			})
		}
	}
}

func boolU(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// dense is a column-major matrix held in float64 by the test, its padding
// NaN: it must never be read.
type dense struct {
	nx, ny, ld int
	v          []float64
}

func newDense(nx, ny, pad int, fill func(i, j int) float64) *dense {
	m := &dense{nx: nx, ny: ny, ld: nx + pad, v: make([]float64, (nx+pad)*ny)}
	for j := 0; j < ny; j++ {
		for i := 0; i < m.ld; i++ {
			if i < nx {
				m.v[i+j*m.ld] = fill(i, j)
			} else {
				m.v[i+j*m.ld] = math.NaN()
			}
		}
	}
	return m
}

func (m *dense) at(i, j int) float64 { return m.v[i+j*m.ld] }

func (m *dense) opAt(trans bool, i, j int) float64 {
	if trans {
		return m.at(j, i)
	}
	return m.at(i, j)
}

// blasRig runs library kernels on one worker's GPU.
type blasRig struct {
	*drivertest.Worker
	elem uint32
}

// put copies m to a new device buffer and returns its descriptor.
func (b *blasRig) put(m *dense, mode kernel.Mode) (wire.BufferDesc, base.Span) {
	s := b.RAM(uint64(len(m.v)) * uint64(b.elem))
	for i, v := range m.v {
		if b.elem == 4 {
			b.F32(s)[i] = float32(v)
		} else {
			b.F64(s)[i] = v
		}
	}
	buf := b.Buffer()
	b.OK(b.Alloc(buf, s.Size))
	b.OK(b.Up(s, buf))
	return mat(buf, uint64(m.nx), uint64(m.ny), uint64(m.ld), b.elem, mode), s
}

// get copies a device buffer back into m.
func (b *blasRig) get(d wire.BufferDesc, s base.Span, m *dense) {
	b.OK(b.Down(d.Offset, s))
	for i := range m.v {
		if b.elem == 4 {
			m.v[i] = float64(b.F32(s)[i])
		} else {
			m.v[i] = b.F64(s)[i]
		}
	}
}

func (b *blasRig) kernel(name string) int {
	return b.Kernel(fmt.Sprintf("%s_f%d", name, b.elem*8))
}

func (b *blasRig) close(t *testing.T, what string, got, want, scale float64) {
	t.Helper()
	tol := 1e-11
	if b.elem == 4 {
		tol = 2e-4
	}
	if math.IsNaN(got) || math.Abs(got-want) > tol*max(1, scale) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// TestBLAS checks every library kernel in both precisions against sums
// computed here, on padded matrices, and potrf's failure.
func TestBLAS(t *testing.T) {
	w := startRig(t, modes[0])
	rng := rand.New(rand.NewPCG(1, 2))
	rnd := func(int, int) float64 { return rng.Float64()*2 - 1 }
	for _, elem := range []uint32{4, 8} {
		b := &blasRig{Worker: w, elem: elem}
		t.Run(fmt.Sprintf("f%d", elem*8), func(t *testing.T) {
			t.Run("gemm", func(t *testing.T) {
				for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
					m, n, k := 5, 4, 3
					a := newDense(m, k, 1, rnd)
					if tr[0] {
						a = newDense(k, m, 2, rnd)
					}
					bm := newDense(k, n, 0, rnd)
					if tr[1] {
						bm = newDense(n, k, 1, rnd)
					}
					c := newDense(m, n, 3, rnd)
					arg := blasarg.GemmArg{TransA: tr[0], TransB: tr[1], Alpha: 1.5, Beta: -0.5}
					da, _ := b.put(a, kernel.R)
					db, _ := b.put(bm, kernel.R)
					dc, sc := b.put(c, kernel.RW)
					b.OK(b.Exec(b.kernel("gemm"), arg.Encode(), da, db, dc))
					got := newDense(m, n, 3, rnd)
					b.get(dc, sc, got)
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							s := 0.0
							for l := 0; l < k; l++ {
								s += a.opAt(tr[0], i, l) * bm.opAt(tr[1], l, j)
							}
							b.close(t, fmt.Sprintf("%v C[%d,%d]", tr, i, j), got.at(i, j), 1.5*s-0.5*c.at(i, j), 3)
						}
					}
				}
			})
			t.Run("syrk", func(t *testing.T) {
				for _, tr := range []bool{false, true} {
					n, k := 4, 3
					a := newDense(n, k, 1, rnd)
					if tr {
						a = newDense(k, n, 1, rnd)
					}
					c := newDense(n, n, 2, rnd)
					da, _ := b.put(a, kernel.R)
					dc, sc := b.put(c, kernel.RW)
					b.OK(b.Exec(b.kernel("syrk"), blasarg.SyrkArg{Lower: true, Trans: tr, Alpha: -1, Beta: 1}.Encode(), da, dc))
					got := newDense(n, n, 2, rnd)
					b.get(dc, sc, got)
					for i := 0; i < n; i++ {
						for j := 0; j < n; j++ {
							want := c.at(i, j)
							if i >= j {
								s := 0.0
								for l := 0; l < k; l++ {
									s += a.opAt(tr, i, l) * a.opAt(tr, j, l)
								}
								want -= s
							}
							b.close(t, fmt.Sprintf("trans %v C[%d,%d]", tr, i, j), got.at(i, j), want, 3)
						}
					}
				}
			})
			t.Run("trsm", func(t *testing.T) {
				for _, right := range []bool{false, true} {
					m, n := 4, 3
					order := m
					if right {
						order = n
					}
					a := newDense(order, order, 1, func(i, j int) float64 {
						if i == j {
							return 4
						}
						if i > j {
							return rnd(i, j)
						}
						return math.NaN() // the upper triangle must not be read
					})
					bm := newDense(m, n, 1, rnd)
					arg := blasarg.TrsmArg{Right: right, Lower: true, Trans: true, Alpha: 2}
					da, _ := b.put(a, kernel.R)
					dbuf, sb := b.put(bm, kernel.RW)
					b.OK(b.Exec(b.kernel("trsm"), arg.Encode(), da, dbuf))
					x := newDense(m, n, 1, rnd)
					b.get(dbuf, sb, x)
					// Check op(A)*X = 2B (left) or X*op(A) = 2B (right), op(A) = A^T.
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							s := 0.0
							for l := 0; l < order; l++ {
								if right {
									if l <= j {
										s += x.at(i, l) * a.at(j, l)
									}
								} else if l >= i {
									s += a.at(l, i) * x.at(l, j)
								}
							}
							b.close(t, fmt.Sprintf("right %v B[%d,%d]", right, i, j), s, 2*bm.at(i, j), 10)
						}
					}
				}
			})
			t.Run("potrf", func(t *testing.T) {
				n := 5
				a := newDense(n, n, 2, func(i, j int) float64 {
					v := 1 / float64(i+j+1)
					if i == j {
						v += float64(n)
					}
					return v
				})
				da, sa := b.put(a, kernel.RW)
				b.OK(b.Exec(b.kernel("potrf"), blasarg.PotrfArg{Lower: true}.Encode(), da))
				l := newDense(n, n, 2, rnd)
				b.get(da, sa, l)
				for i := 0; i < n; i++ {
					for j := 0; j <= i; j++ {
						s := 0.0
						for q := 0; q <= j; q++ {
							s += l.at(i, q) * l.at(j, q)
						}
						b.close(t, fmt.Sprintf("LL^T[%d,%d]", i, j), s, a.at(i, j), 10)
					}
				}
				bad := newDense(3, 3, 0, func(i, j int) float64 {
					if i == j && i == 1 {
						return -1
					}
					return float64(boolU(i == j))
				})
				dbad, _ := b.put(bad, kernel.RW)
				msg := b.Failed(b.Exec(b.kernel("potrf"), blasarg.PotrfArg{Lower: true}.Encode(), dbad))
				want := fmt.Sprintf("kernel potrf_f%d: matrix not positive definite: the leading minor of order 2 is not", elem*8)
				if !strings.Contains(msg, want) {
					t.Errorf("non-SPD: %q, want %q", msg, want)
				}
			})
			t.Run("level1", func(t *testing.T) {
				n := 300
				x := newDense(n, 1, 0, rnd)
				y := newDense(n, 1, 0, rnd)
				dx, _ := b.put(x, kernel.RW)
				dy, sy := b.put(y, kernel.RW)
				vx, vy := vec(dx.Offset, uint64(n), elem, kernel.R), vec(dy.Offset, uint64(n), elem, kernel.RW)
				rs := b.RAM(uint64(elem))
				rbuf := b.Buffer()
				b.OK(b.Alloc(rbuf, uint64(elem)))
				res := wire.BufferDesc{Node: 1, Offset: rbuf, Mode: kernel.W, Layout: kernel.Layout{Interface: kernel.Variable, ElemSize: elem}}
				axpy := b.Exec(b.kernel("axpy"), blasarg.AxpyArg{Alpha: 2}.Encode(), vx, vy)
				scal := b.Exec(b.kernel("scal"), blasarg.ScalArg{Alpha: -3}.Encode(), vec(dy.Offset, uint64(n), elem, kernel.RW))
				dot := b.Exec(b.kernel("dot"), nil, vx, vec(dy.Offset, uint64(n), elem, kernel.R), res)
				b.OK(axpy, scal, dot)
				got := newDense(n, 1, 0, rnd)
				b.get(dy, sy, got)
				want := 0.0
				for i := 0; i < n; i++ {
					yi := -3 * (2*x.at(i, 0) + y.at(i, 0))
					b.close(t, fmt.Sprintf("y[%d]", i), got.at(i, 0), yi, 10)
					want += x.at(i, 0) * yi
				}
				b.OK(b.Down(rbuf, rs))
				r := 0.0
				if elem == 4 {
					r = float64(b.F32(rs)[0])
				} else {
					r = b.F64(rs)[0]
				}
				b.close(t, "dot", r, want, float64(n)*10)
			})
		})
	}
	t.Run("errors", func(t *testing.T) {
		buf := w.Buffer()
		w.OK(w.Alloc(buf, 64))
		for _, tc := range []struct {
			id   uint64
			want string
		}{
			{w.Exec(w.Kernel(blasarg.ScalF32), nil, vec(buf, 16, 4, kernel.RW)), "kernel scal_f32: blasarg: ScalArg is 8 bytes, got 0"},
			{w.Exec(w.Kernel(blasarg.ScalF32), blasarg.ScalArg{}.Encode(), vec(buf, 17, 4, kernel.RW)), "kernel scal_f32: buffer 0: its layout spans 68 bytes, device buffer"},
			{w.Exec(w.Kernel(blasarg.ScalF32), blasarg.ScalArg{}.Encode(), vec(buf+1, 16, 4, kernel.RW)), "is not allocated"},
			{w.Exec(w.Kernel(blasarg.ScalF32), blasarg.ScalArg{}.Encode(), drivertest.Vec(0, 0, 16, 4, kernel.RW)), "is on node 0, not on this worker's GPU (node 1)"},
			{w.Exec(9999, nil), "kernel index 9999 out of range"},
		} {
			if msg := w.Failed(tc.id); !strings.Contains(msg, tc.want) {
				t.Errorf("got %q, want %q", msg, tc.want)
			}
		}
	})
}

// TestLoadKernel: CUDA C through NVRTC, PTX as given, the build log in
// the error, one build per source. On the fake, NVRTC makes a "scal" and
// its JIT knows "scal" and "addone".
func TestLoadKernel(t *testing.T) {
	need(t)
	const cuSrc = `extern "C" __global__ void scal(float *x, unsigned n, float a) {
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= a;
}`
	const ptxSrc = `// addone, by hand
.version 8.0
.target sm_90
.address_size 64
.visible .entry addone(.param .u64 x, .param .u32 n)
{
	.reg .pred %p;
	.reg .b32 %r<6>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [x];
	ld.param.u32 %r2, [n];
	mov.u32 %r3, %ctaid.x;
	mov.u32 %r4, %ntid.x;
	mov.u32 %r5, %tid.x;
	mad.lo.s32 %r1, %r3, %r4, %r5;
	setp.ge.u32 %p, %r1, %r2;
	@%p bra DONE;
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
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			w := startRig(t, md)
			ctx := w.Ctx()
			scal, err := w.Driver.LoadKernel(ctx, driver.KernelSource{Name: "scal", Source: cuSrc})
			if err != nil {
				t.Fatal(err)
			}
			again, err := w.Driver.LoadKernel(ctx, driver.KernelSource{Name: "scal", Source: cuSrc})
			if err != nil || again != scal || scal != 14 {
				t.Errorf("index %d then %d (%v), want 14 (after the library) twice", scal, again, err)
			}
			addone, err := w.Driver.LoadKernel(ctx, driver.KernelSource{Name: "addone", Source: ptxSrc})
			if err != nil || addone != scal+1 {
				t.Fatalf("PTX: %d, %v", addone, err)
			}
			n := 1000
			s := w.RAM(uint64(4 * n))
			for i := range w.F32(s) {
				w.F32(s)[i] = float32(i)
			}
			buf := w.Buffer()
			w.OK(w.Alloc(buf, s.Size))
			arg := make([]byte, 4)
			copy(arg, blasargF32(2.5))
			w.OK(w.Up(s, buf), w.Exec(scal, arg, vec(buf, uint64(n), 4, kernel.RW)),
				w.Exec(addone, nil, vec(buf, uint64(n), 4, kernel.RW)), w.Down(buf, s))
			for i, v := range w.F32(s) {
				if want := float32(i)*2.5 + 1; v != want {
					t.Fatalf("x[%d] = %v, want %v", i, v, want)
				}
			}
			_, err = w.Driver.LoadKernel(ctx, driver.KernelSource{Name: "broken", Source: `extern "C" __global__ void broken() { undefined_thing(); }`})
			if err == nil || !strings.Contains(err.Error(), "undefined_thing") || !strings.Contains(err.Error(), "NVRTC") {
				t.Errorf("build error: %v", err)
			}
			_, err = w.Driver.LoadKernel(ctx, driver.KernelSource{Name: "bogus", Source: ".version 8.0\n.target sm_90\nbogus"})
			if err == nil || !strings.Contains(err.Error(), "bogus") {
				t.Errorf("JIT error: %v", err)
			}
			fp, err := w.Driver.Fingerprint(ctx)
			if err != nil || len(fp.Kernels) != 16 || fp.Kernels[14] != "scal" || fp.Kernels[15] != "addone" {
				t.Errorf("kernels after loading: %v %v", fp.Kernels, err)
			}
		})
	}
}

// blasargF32 is a float32's little-endian bytes: the by-value argument of
// the test's scal kernel.
func blasargF32(v float32) []byte {
	b := math.Float32bits(v)
	return []byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24)}
}

// TestMemoryLimit: allocations beyond the node's limit fail with the
// OpenCL driver's wording; freeing makes room again.
func TestMemoryLimit(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			w := startRig(t, md, EnvLimitMem+"=1")
			if b := w.FP.Nodes[0].Bytes; b != 1<<20 {
				t.Fatalf("node of %d bytes", b)
			}
			a, b := w.Buffer(), w.Buffer()
			w.OK(w.Alloc(a, 768<<10))
			msg := w.Failed(w.Alloc(b, 512<<10))
			if want := "out of memory: 786432 of the node's 1048576 bytes in use"; !strings.Contains(msg, want) {
				t.Errorf("got %q, want %q", msg, want)
			}
			w.Free(a)
			w.OK(w.Alloc(b, 1<<20))
			if msg := w.Failed(w.Alloc(b, 0)); !strings.Contains(msg, "allocated already") {
				t.Errorf("double alloc: %q", msg)
			}
			w.OK(w.Alloc(w.Buffer(), 0)) // a zero-byte buffer fits a full node
		})
	}
}

// TestPipeline: chains of tasks on one buffer, flagged asynchronous or
// not, under each pipeline depth, complete in order with the right data;
// pinning the arena changes nothing but the copies' speed.
func TestPipeline(t *testing.T) {
	for _, env := range [][]string{{EnvPipeline + "=0"}, {EnvPipeline + "=1"}, {EnvPipeline + "=4", EnvPin + "=1"}} {
		t.Run(strings.Join(env, ","), func(t *testing.T) {
			w := startRig(t, modes[0], env...)
			n := 64
			s := w.RAM(uint64(4 * n))
			for i := range w.F32(s) {
				w.F32(s)[i] = 1
			}
			buf := w.Buffer()
			w.OK(w.Alloc(buf, s.Size))
			ids := []uint64{w.Up(s, buf)}
			for i := 0; i < 40; i++ {
				task := drivertest.Task{Kernel: w.Kernel(blasarg.ScalF32), Arg: blasarg.ScalArg{Alpha: 1.25}.Encode(),
					Buffers: []wire.BufferDesc{vec(buf, uint64(n), 4, kernel.RW)}}
				if i%3 != 0 {
					task.Flags = wire.ExecAsync
				}
				ids = append(ids, w.Run(task, false))
			}
			ids = append(ids, w.Down(buf, s))
			w.OK(ids...)
			for i := 1; i < len(ids); i++ {
				if !w.Before(ids[i-1], ids[i]) {
					t.Fatalf("completion of %d before %d's", ids[i], ids[i-1])
				}
			}
			want := float32(math.Pow(1.25, 40))
			for i, v := range w.F32(s) {
				if math.Abs(float64(v-want)) > 1e-3*float64(want) {
					t.Fatalf("x[%d] = %v, want %v", i, v, want)
				}
			}
		})
	}
}

// TestDeinitWithWork: Deinit right after many tasks are sent still
// answers every one of them.
func TestDeinitWithWork(t *testing.T) {
	need(t)
	r := drivertest.Start(t, inProcess, drivertest.Env(EnvPipeline+"=2"))
	w := r.W(0)
	buf := w.Buffer()
	w.OK(w.Alloc(buf, 4096))
	var ids []uint64
	for i := 0; i < 300; i++ {
		ids = append(ids, w.Run(drivertest.Task{Kernel: w.Kernel(blasarg.ScalF32), Flags: wire.ExecAsync, Arg: blasarg.ScalArg{Alpha: 1}.Encode(),
			Buffers: []wire.BufferDesc{vec(buf, 1024, 4, kernel.RW)}}, false))
	}
	if err := r.Deinit(); err != nil {
		t.Fatal(err)
	}
	r.OK(ids...)
}
