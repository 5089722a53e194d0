package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blas"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

const gap = -777.25 // padding between columns; must stay untouched

func lib(t *testing.T) map[string]kernel.Func {
	t.Helper()
	m := map[string]kernel.Func{}
	for _, k := range Library() {
		if _, dup := m[k.Name]; dup {
			t.Fatalf("kernel %q listed twice", k.Name)
		}
		if k.Func == nil {
			t.Fatalf("kernel %q has no Func", k.Name)
		}
		m[k.Name] = k.Func
	}
	return m
}

func TestLibraryNames(t *testing.T) {
	m := lib(t)
	for _, name := range []string{
		blasarg.Empty,
		blasarg.ScalF32, blasarg.ScalF64, blasarg.AxpyF32, blasarg.AxpyF64,
		blasarg.DotF32, blasarg.DotF64, blasarg.GemmF32, blasarg.GemmF64,
		blasarg.SyrkF32, blasarg.SyrkF64, blasarg.TrsmF32, blasarg.TrsmF64,
		blasarg.SyrkGemmF32, blasarg.SyrkGemmF64,
		blasarg.PotrfF32, blasarg.PotrfF64,
		blasarg.Zero, blasarg.AddF32, blasarg.AddF64,
		blasarg.ParGemmF32, blasarg.ParGemmF64, blasarg.ParPotrfF32, blasarg.ParPotrfF64,
		blasarg.SpmdScalF32, blasarg.SpmdScalF64,
	} {
		if m[name] == nil {
			t.Errorf("kernel %q missing", name)
		}
	}
	if len(m) != 26+len(sparseKernels()) {
		t.Errorf("%d kernels, want %d", len(m), 24+len(sparseKernels()))
	}
}

// suffix is the kernel name suffix of T.
func suffix[T float]() string {
	var z T
	if unsafe.Sizeof(z) == 4 {
		return "_f32"
	}
	return "_f64"
}

func tolerance[T float]() float64 {
	var z T
	if unsafe.Sizeof(z) == 4 {
		return 2e-4
	}
	return 1e-11
}

// bytesOf views d's storage as bytes, as the arena does.
func bytesOf[T float](d []T) []byte {
	if len(d) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), len(d)*int(unsafe.Sizeof(z)))
}

func esize[T float]() uint32 {
	var z T
	return uint32(unsafe.Sizeof(z))
}

// tmat is a test matrix: its buffer and the data behind it.
type tmat[T float] struct {
	rows, cols, ld int
	d              []T
}

func newTmat[T float](rng *rand.Rand, rows, cols, ld int) tmat[T] {
	m := tmat[T]{rows, cols, ld, nil}
	n := 0
	if rows > 0 && cols > 0 {
		n = (cols-1)*ld + rows
	}
	m.d = make([]T, n)
	for i := range m.d {
		m.d[i] = gap
	}
	for j := 0; j < cols; j++ {
		for i := 0; i < rows; i++ {
			m.d[i+j*ld] = T(rng.Float64()*2 - 1)
		}
	}
	return m
}

func (m tmat[T]) at(i, j int) float64 { return float64(m.d[i+j*m.ld]) }
func (m tmat[T]) set(i, j int, v float64) {
	m.d[i+j*m.ld] = T(v)
}
func (m tmat[T]) opAt(trans bool, i, j int) float64 {
	if trans {
		return m.at(j, i)
	}
	return m.at(i, j)
}
func (m tmat[T]) clone() tmat[T] { m.d = append([]T(nil), m.d...); return m }

func (m tmat[T]) buf(mode kernel.Mode) kernel.Buffer {
	return kernel.Buffer{
		Layout: kernel.Layout{Interface: kernel.Matrix, ElemSize: esize[T](),
			NX: uint64(m.rows), NY: uint64(m.cols), LD: uint64(m.ld)},
		Mode:  mode,
		Bytes: bytesOf(m.d),
	}
}

func vecBuf[T float](d []T, mode kernel.Mode) kernel.Buffer {
	return kernel.Buffer{
		Layout: kernel.Layout{Interface: kernel.Vector, ElemSize: esize[T](), NX: uint64(len(d))},
		Mode:   mode,
		Bytes:  bytesOf(d),
	}
}

func varBuf[T float](p *T, mode kernel.Mode) kernel.Buffer {
	return kernel.Buffer{
		Layout: kernel.Layout{Interface: kernel.Variable, ElemSize: esize[T]()},
		Mode:   mode,
		Bytes:  bytesOf(unsafe.Slice(p, 1)),
	}
}

// check compares got with want element by element; gap and NaN elements of
// want must be left exactly as they were.
func check[T float](t *testing.T, what string, got []T, want []float64, scale float64) {
	t.Helper()
	tol := tolerance[T]()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		g, w := float64(got[i]), want[i]
		if w == gap || math.IsNaN(w) {
			if g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
				t.Errorf("%s: untouchable element %d changed: %v -> %v", what, i, w, g)
				bad++
			}
		} else if math.Abs(g-w) > tol*math.Max(1, scale) {
			t.Errorf("%s: element %d = %v, want %v", what, i, g, w)
			bad++
		}
		if bad > 5 {
			t.FailNow()
		}
	}
}

func toF64[T float](d []T) []float64 {
	r := make([]float64, len(d))
	for i, v := range d {
		r[i] = float64(v)
	}
	return r
}

func run(t *testing.T, name string, ctx *kernel.Context) {
	t.Helper()
	if err := lib(t)[name](ctx); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestGemm(t *testing.T) {
	t.Run("f32", testGemm[float32])
	t.Run("f64", testGemm[float64])
}

func testGemm[T float](t *testing.T) {
	name := "gemm" + suffix[T]()
	type tc struct {
		m, n, k     int
		ta, tb      bool
		alpha, beta float64
		pa, pb, pc  int
	}
	var cases []tc
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			cases = append(cases,
				tc{4, 5, 6, ta, tb, 1, 0, 0, 0, 0},
				tc{7, 3, 5, ta, tb, -1.5, 0.25, 2, 1, 3},
				tc{16, 16, 16, ta, tb, 1, 1, 0, 4, 0},
				tc{3, 2, 0, ta, tb, 1, 2, 1, 1, 1},
			)
		}
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("m%dn%dk%d/tA=%v,tB=%v/ld+%d,%d,%d", c.m, c.n, c.k, c.ta, c.tb, c.pa, c.pb, c.pc), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(c.m*100 + c.n*10 + c.k)))
			ar, ac := c.m, c.k
			if c.ta {
				ar, ac = c.k, c.m
			}
			br, bc := c.k, c.n
			if c.tb {
				br, bc = c.n, c.k
			}
			a := newTmat[T](rng, ar, ac, max(1, ar)+c.pa)
			b := newTmat[T](rng, br, bc, max(1, br)+c.pb)
			cm := newTmat[T](rng, c.m, c.n, c.m+c.pc)
			want := toF64(cm.d)
			for i := 0; i < c.m; i++ {
				for j := 0; j < c.n; j++ {
					s := 0.0
					for l := 0; l < c.k; l++ {
						s += a.opAt(c.ta, i, l) * b.opAt(c.tb, l, j)
					}
					want[i+j*cm.ld] = c.alpha*s + c.beta*cm.at(i, j)
				}
			}
			got := cm.clone()
			run(t, name, &kernel.Context{
				Buffers: []kernel.Buffer{a.buf(kernel.R), b.buf(kernel.R), got.buf(kernel.RW)},
				Arg:     blasarg.GemmArg{TransA: c.ta, TransB: c.tb, Alpha: c.alpha, Beta: c.beta}.Encode(),
			})
			check(t, "C", got.d, want, float64(c.k))
		})
	}
}

func TestSyrk(t *testing.T) {
	t.Run("f32", func(t *testing.T) { testSyrk[float32](t, "syrk") })
	t.Run("f64", func(t *testing.T) { testSyrk[float64](t, "syrk") })
	// The GEMM variant writes both triangles: both are checked.
	t.Run("gemm/f32", func(t *testing.T) { testSyrk[float32](t, "syrk_gemm") })
	t.Run("gemm/f64", func(t *testing.T) { testSyrk[float64](t, "syrk_gemm") })
}

func testSyrk[T float](t *testing.T, kind string) {
	name := kind + suffix[T]()
	whole := kind == "syrk_gemm"
	for _, lower := range []bool{false, true} {
		for _, trans := range []bool{false, true} {
			for _, c := range []struct {
				n, k        int
				alpha, beta float64
				pa, pc      int
			}{{5, 3, 1, 0, 0, 0}, {8, 12, -0.5, 1.5, 3, 2}} {
				t.Run(fmt.Sprintf("n%dk%d/lower=%v,trans=%v", c.n, c.k, lower, trans), func(t *testing.T) {
					rng := rand.New(rand.NewSource(int64(c.n + c.k)))
					ar, ac := c.n, c.k
					if trans {
						ar, ac = c.k, c.n
					}
					a := newTmat[T](rng, ar, ac, ar+c.pa)
					cm := newTmat[T](rng, c.n, c.n, c.n+c.pc)
					other := func(i, j int) bool { return !whole && ((lower && i < j) || (!lower && i > j)) }
					for i := 0; i < c.n; i++ {
						for j := 0; j < c.n; j++ {
							if other(i, j) {
								cm.set(i, j, math.NaN())
							}
						}
					}
					want := toF64(cm.d)
					for i := 0; i < c.n; i++ {
						for j := 0; j < c.n; j++ {
							if other(i, j) {
								continue
							}
							s := 0.0
							for l := 0; l < c.k; l++ {
								s += a.opAt(trans, i, l) * a.opAt(trans, j, l)
							}
							want[i+j*cm.ld] = c.alpha*s + c.beta*cm.at(i, j)
						}
					}
					got := cm.clone()
					run(t, name, &kernel.Context{
						Buffers: []kernel.Buffer{a.buf(kernel.R), got.buf(kernel.RW)},
						Arg:     blasarg.SyrkArg{Lower: lower, Trans: trans, Alpha: c.alpha, Beta: c.beta}.Encode(),
					})
					check(t, "C", got.d, want, float64(c.k))
				})
			}
		}
	}
}

func TestTrsm(t *testing.T) {
	t.Run("f32", testTrsm[float32])
	t.Run("f64", testTrsm[float64])
}

func testTrsm[T float](t *testing.T) {
	name := "trsm" + suffix[T]()
	for mask := 0; mask < 16; mask++ {
		arg := blasarg.TrsmArg{Right: mask&1 != 0, Lower: mask&2 != 0, Trans: mask&4 != 0, UnitDiag: mask&8 != 0, Alpha: 1.25}
		t.Run(fmt.Sprintf("%+v", arg), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(mask)))
			m, n := 6, 4
			an := m
			if arg.Right {
				an = n
			}
			a := newTmat[T](rng, an, an, an+2)
			for i := 0; i < an; i++ {
				for j := 0; j < an; j++ {
					switch {
					case i == j && arg.UnitDiag:
						a.set(i, j, math.NaN())
					case i == j:
						a.set(i, j, 2+rng.Float64())
					case (arg.Lower && i < j) || (!arg.Lower && i > j):
						a.set(i, j, math.NaN())
					default:
						a.set(i, j, a.at(i, j)*0.5)
					}
				}
			}
			// The triangular matrix T = op(A) as the kernel must see it.
			tri := func(i, j int) float64 {
				if arg.Trans {
					i, j = j, i
				}
				if i == j && arg.UnitDiag {
					return 1
				}
				if (arg.Lower && i < j) || (!arg.Lower && i > j) {
					return 0
				}
				return a.at(i, j)
			}
			// Pick the solution X and build B = T X / alpha (or X T / alpha).
			x := newTmat[float64](rng, m, n, m+3)
			b := newTmat[T](rng, m, n, m+3)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					s := 0.0
					if arg.Right {
						for l := 0; l < n; l++ {
							s += x.at(i, l) * tri(l, j)
						}
					} else {
						for l := 0; l < m; l++ {
							s += tri(i, l) * x.at(l, j)
						}
					}
					b.set(i, j, s/arg.Alpha)
				}
			}
			run(t, name, &kernel.Context{
				Buffers: []kernel.Buffer{a.buf(kernel.R), b.buf(kernel.RW)},
				Arg:     arg.Encode(),
			})
			check(t, "X", b.d, x.d, 10)
		})
	}
}

func TestPotrf(t *testing.T) {
	t.Run("f32", testPotrf[float32])
	t.Run("f64", testPotrf[float64])
}

func testPotrf[T float](t *testing.T) {
	name := "potrf" + suffix[T]()
	for _, lower := range []bool{false, true} {
		for _, c := range []struct{ n, pad int }{{1, 0}, {5, 0}, {12, 3}} {
			t.Run(fmt.Sprintf("n%d/lower=%v/ld+%d", c.n, lower, c.pad), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(c.n)))
				// A = M M^T + n I, symmetric positive definite; NaN in the
				// triangle the kernel must not touch.
				mm := newTmat[float64](rng, c.n, c.n, c.n)
				a := newTmat[T](rng, c.n, c.n, c.n+c.pad)
				other := func(i, j int) bool { return (lower && i < j) || (!lower && i > j) }
				for i := 0; i < c.n; i++ {
					for j := 0; j < c.n; j++ {
						if other(i, j) {
							a.set(i, j, math.NaN())
							continue
						}
						s := 0.0
						for l := 0; l < c.n; l++ {
							s += mm.at(i, l) * mm.at(j, l)
						}
						if i == j {
							s += float64(c.n)
						}
						a.set(i, j, s)
					}
				}
				want := toF64(a.d)
				f := a.clone()
				run(t, name, &kernel.Context{
					Buffers: []kernel.Buffer{f.buf(kernel.RW)},
					Arg:     blasarg.PotrfArg{Lower: lower}.Encode(),
				})
				l := func(i, j int) float64 { // the factor as L: L L^T = A
					if i < j {
						return 0
					}
					if !lower {
						i, j = j, i
					}
					return f.at(i, j)
				}
				got := append([]T(nil), f.d...)
				for i := 0; i < c.n; i++ {
					for j := 0; j < c.n; j++ {
						if other(i, j) {
							continue
						}
						s := 0.0
						for k := 0; k < c.n; k++ {
							s += l(i, k) * l(j, k)
						}
						got[i+j*f.ld] = T(s)
					}
				}
				check(t, "LL^T", got, want, float64(c.n*c.n))
			})
		}
	}
	t.Run("not SPD", func(t *testing.T) {
		a := tmat[T]{3, 3, 3, []T{1, 2, 0, 2, 1, 0, 0, 0, 1}} // eigenvalues 3, -1, 1
		err := lib(t)[name](&kernel.Context{
			Buffers: []kernel.Buffer{a.buf(kernel.RW)},
			Arg:     blasarg.PotrfArg{Lower: true}.Encode(),
		})
		var npd *blas.NotPositiveDefiniteError
		if !errors.As(err, &npd) || npd.Column != 2 {
			t.Fatalf("err = %v, want not positive definite at column 2", err)
		}
		if want := name + ": matrix not positive definite at column 2"; err.Error() != want {
			t.Errorf("err = %q, want %q", err, want)
		}
	})
}

func TestLevel1(t *testing.T) {
	t.Run("f32", testLevel1[float32])
	t.Run("f64", testLevel1[float64])
}

func testLevel1[T float](t *testing.T) {
	for _, n := range []int{0, 1, 7, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(n)))
			x := newTmat[T](rng, n, 1, max(1, n)).d
			y := newTmat[T](rng, n, 1, max(1, n)).d

			got := append([]T(nil), x...)
			want := toF64(x)
			for i := range want {
				want[i] *= -3
			}
			run(t, "scal"+suffix[T](), &kernel.Context{
				Buffers: []kernel.Buffer{vecBuf(got, kernel.RW)},
				Arg:     blasarg.ScalArg{Alpha: -3}.Encode(),
			})
			check(t, "scal", got, want, 1)

			got = append([]T(nil), y...)
			want = toF64(y)
			for i := range want {
				want[i] += 0.5 * float64(x[i])
			}
			run(t, "axpy"+suffix[T](), &kernel.Context{
				Buffers: []kernel.Buffer{vecBuf(x, kernel.R), vecBuf(got, kernel.RW)},
				Arg:     blasarg.AxpyArg{Alpha: 0.5}.Encode(),
			})
			check(t, "axpy", got, want, 1)

			s := 0.0
			for i := range x {
				s += float64(x[i]) * float64(y[i])
			}
			var r T = 42
			run(t, "dot"+suffix[T](), &kernel.Context{
				Buffers: []kernel.Buffer{vecBuf(x, kernel.R), vecBuf(y, kernel.R), varBuf(&r, kernel.W)},
			})
			check(t, "dot", []T{r}, []float64{s}, float64(n))
		})
	}
}

func TestEmpty(t *testing.T) {
	f := lib(t)[blasarg.Empty]
	d := make([]float64, 4)
	for _, ctx := range []*kernel.Context{
		{},
		{Buffers: []kernel.Buffer{vecBuf(d, kernel.RW)}, Arg: []byte("anything")},
		{Buffers: []kernel.Buffer{{}, {}, {}, vecBuf(d, kernel.R), {Layout: kernel.Layout{Interface: kernel.Matrix}}}},
	} {
		if err := f(ctx); err != nil {
			t.Errorf("empty with %d buffers: %v", len(ctx.Buffers), err)
		}
	}
	if d[0] != 0 {
		t.Error("empty wrote its buffer")
	}
}

// TestErrors checks the kernels reject malformed tasks with an error that
// names the kernel and the problem.
func TestErrors(t *testing.T) {
	f64 := func(n int) []float64 { return make([]float64, n) }
	f32 := func(n int) []float32 { return make([]float32, n) }
	m64 := func(rows, cols, ld int) kernel.Buffer {
		return tmat[float64]{rows, cols, ld, f64(max(0, (cols-1)*ld+rows))}.buf(kernel.RW)
	}
	m32 := func(rows, cols, ld int) kernel.Buffer {
		return tmat[float32]{rows, cols, ld, f32(max(0, (cols-1)*ld+rows))}.buf(kernel.RW)
	}
	gemm := blasarg.GemmArg{Alpha: 1}.Encode()
	gemmTA := blasarg.GemmArg{TransA: true, Alpha: 1}.Encode()
	gemmTB := blasarg.GemmArg{TransB: true, Alpha: 1}.Encode()
	short := m64(4, 4, 4)
	short.Bytes = short.Bytes[:len(short.Bytes)-8]
	badLD := m64(4, 4, 4)
	badLD.LD = 3
	ro := m64(3, 3, 3)
	ro.Mode = kernel.R
	misaligned := vecBuf(f64(5), kernel.RW)
	misaligned.Bytes = misaligned.Bytes[4:36]
	misaligned.NX = 4
	var r64 float64
	var r32 float32

	cases := []struct {
		kernel string
		bufs   []kernel.Buffer
		arg    []byte
		want   string
	}{
		{"gemm_f64", []kernel.Buffer{m64(2, 2, 2), m64(2, 2, 2)}, gemm, "gemm_f64: got 2 buffers, want 3"},
		{"gemm_f64", []kernel.Buffer{m64(2, 3, 2), m64(3, 2, 3), m64(2, 2, 2)}, gemm[:5], "gemm_f64: blasarg: GemmArg is 18 bytes, got 5"},
		{"gemm_f64", []kernel.Buffer{m64(2, 3, 2), m64(4, 2, 4), m64(2, 2, 2)}, gemm, "gemm_f64: op(A) is 2x3 but op(B) is 4x2: inner dimensions differ"},
		{"gemm_f64", []kernel.Buffer{m64(3, 3, 3), m64(3, 2, 3), m64(2, 2, 2)}, gemm, "gemm_f64: op(A) is 3x3 but C is 2x2: op(A) must have C's 2 rows"},
		{"gemm_f32", []kernel.Buffer{m32(2, 3, 2), m32(3, 4, 3), m32(2, 2, 2)}, gemm, "gemm_f32: op(B) is 3x4 but C is 2x2: op(B) must have C's 2 columns"},
		{"gemm_f32", []kernel.Buffer{m32(2, 3, 2), m32(3, 2, 3), m32(2, 2, 2)}, gemmTA, "gemm_f32: op(A) is 3x2 but C is 2x2"},
		{"gemm_f32", []kernel.Buffer{m32(2, 3, 2), m32(3, 2, 3), m32(2, 2, 2)}, gemmTB, "gemm_f32: op(B) is 2x3 but C is 2x2"},
		{"gemm_f32", []kernel.Buffer{m64(2, 2, 2), m32(2, 2, 2), m32(2, 2, 2)}, gemm, "gemm_f32: buffer 0 (A) has 8-byte elements, want 4"},
		{"gemm_f64", []kernel.Buffer{m64(2, 2, 2), vecBuf(f64(4), kernel.R), m64(2, 2, 2)}, gemm, "gemm_f64: buffer 1 (B) is a vector, want a matrix"},
		{"gemm_f64", []kernel.Buffer{m64(3, 3, 3), m64(3, 3, 3), ro}, gemm, "gemm_f64: buffer 2 (C) is accessed R but the kernel writes it"},
		{"gemm_f64", []kernel.Buffer{m64(4, 4, 4), short, m64(4, 4, 4)}, gemm, "gemm_f64: buffer 1 (B) has 120 bytes, its layout needs 128"},
		{"gemm_f64", []kernel.Buffer{badLD, m64(4, 4, 4), m64(4, 4, 4)}, gemm, "gemm_f64: buffer 0 (A) has LD 3 < NX 4"},
		{"syrk_f64", []kernel.Buffer{m64(3, 2, 3), m64(3, 4, 3)}, blasarg.SyrkArg{}.Encode(), "syrk_f64: C is 3x4, want a square matrix"},
		{"syrk_f64", []kernel.Buffer{m64(3, 2, 3), m64(2, 2, 2)}, blasarg.SyrkArg{}.Encode(), "syrk_f64: op(A) is 3x2 but C is 2x2"},
		{"syrk_f32", []kernel.Buffer{m32(3, 2, 3), m32(3, 3, 3)}, blasarg.SyrkArg{Trans: true}.Encode(), "syrk_f32: op(A) is 2x3 but C is 3x3"},
		{"syrk_f32", []kernel.Buffer{m32(3, 2, 3), m32(3, 3, 3)}, nil, "syrk_f32: blasarg: SyrkArg is 18 bytes, got 0"},
		{"trsm_f64", []kernel.Buffer{m64(3, 2, 3), m64(3, 3, 3)}, blasarg.TrsmArg{}.Encode(), "trsm_f64: A is 3x2, want a square matrix"},
		{"trsm_f64", []kernel.Buffer{m64(3, 3, 3), m64(4, 3, 4)}, blasarg.TrsmArg{}.Encode(), "trsm_f64: A is 3x3 but B is 4x3: solving on the left, A must be 4x4"},
		{"trsm_f32", []kernel.Buffer{m32(3, 3, 3), m32(3, 4, 3)}, blasarg.TrsmArg{Right: true}.Encode(), "trsm_f32: A is 3x3 but B is 3x4: solving on the right, A must be 4x4"},
		{"potrf_f64", []kernel.Buffer{m64(3, 4, 3)}, blasarg.PotrfArg{}.Encode(), "potrf_f64: A is 3x4, want a square matrix"},
		{"potrf_f64", []kernel.Buffer{m64(3, 3, 3)}, []byte{2}, "potrf_f64: blasarg: PotrfArg.Lower is byte 2"},
		{"potrf_f32", []kernel.Buffer{vecBuf(f32(9), kernel.RW)}, blasarg.PotrfArg{}.Encode(), "potrf_f32: buffer 0 (A) is a vector, want a matrix"},
		{"scal_f64", []kernel.Buffer{vecBuf(f64(3), kernel.R)}, blasarg.ScalArg{}.Encode(), "scal_f64: buffer 0 (x) is accessed R but the kernel writes it"},
		{"scal_f64", []kernel.Buffer{misaligned}, blasarg.ScalArg{}.Encode(), "scal_f64: buffer 0 (x) is not aligned to its 8-byte elements"},
		{"scal_f32", []kernel.Buffer{}, blasarg.ScalArg{}.Encode(), "scal_f32: got 0 buffers, want 1"},
		{"scal_f32", []kernel.Buffer{vecBuf(f32(3), kernel.RW)}, []byte{1, 2, 3}, "scal_f32: blasarg: ScalArg is 8 bytes, got 3"},
		{"axpy_f64", []kernel.Buffer{vecBuf(f64(3), kernel.R), vecBuf(f64(4), kernel.RW)}, blasarg.AxpyArg{}.Encode(), "axpy_f64: x has 3 elements but y has 4"},
		{"axpy_f32", []kernel.Buffer{vecBuf(f32(3), kernel.R), vecBuf(f64(3), kernel.RW)}, blasarg.AxpyArg{}.Encode(), "axpy_f32: buffer 1 (y) has 8-byte elements, want 4"},
		{"dot_f64", []kernel.Buffer{vecBuf(f64(3), kernel.R), vecBuf(f64(2), kernel.R), varBuf(&r64, kernel.W)}, nil, "dot_f64: x has 3 elements but y has 2"},
		{"dot_f32", []kernel.Buffer{vecBuf(f32(3), kernel.R), vecBuf(f32(3), kernel.R), varBuf(&r64, kernel.W)}, nil, "dot_f32: buffer 2 (result) has 8-byte elements, want 4"},
		{"dot_f32", []kernel.Buffer{vecBuf(f32(3), kernel.R), vecBuf(f32(3), kernel.R), vecBuf(f32(1), kernel.W)}, nil, "dot_f32: buffer 2 (result) is a vector, want a variable"},
		{"dot_f32", []kernel.Buffer{vecBuf(f32(3), kernel.R), vecBuf(f32(3), kernel.R), varBuf(&r32, kernel.R)}, nil, "dot_f32: buffer 2 (result) is accessed R but the kernel writes it"},
	}
	m := lib(t)
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			err := m[c.kernel](&kernel.Context{Buffers: c.bufs, Arg: c.arg})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestEmptyShapes checks empty operands are accepted and leave C alone (m or
// n zero) or scale it by beta (k zero).
func TestEmptyShapes(t *testing.T) {
	m := lib(t)
	empty := tmat[float64]{0, 3, 0, nil}
	c := tmat[float64]{2, 2, 2, []float64{1, 2, 3, 4}}
	kA := tmat[float64]{2, 0, 2, nil}
	kB := tmat[float64]{0, 2, 0, nil}
	err := m["gemm_f64"](&kernel.Context{
		Buffers: []kernel.Buffer{kA.buf(kernel.R), kB.buf(kernel.R), c.buf(kernel.RW)},
		Arg:     blasarg.GemmArg{Alpha: 1, Beta: 2}.Encode(),
	})
	if err != nil || c.d[3] != 8 {
		t.Fatalf("k = 0 gemm: %v, C = %v", err, c.d)
	}
	if err := m["potrf_f64"](&kernel.Context{
		Buffers: []kernel.Buffer{tmat[float64]{0, 0, 0, nil}.buf(kernel.RW)},
		Arg:     blasarg.PotrfArg{}.Encode(),
	}); err != nil {
		t.Fatal(err)
	}
	if err := m["gemm_f64"](&kernel.Context{
		Buffers: []kernel.Buffer{empty.buf(kernel.R), tmat[float64]{3, 5, 3, make([]float64, 15)}.buf(kernel.R), tmat[float64]{0, 5, 0, nil}.buf(kernel.RW)},
		Arg:     blasarg.GemmArg{Alpha: 1}.Encode(),
	}); err != nil {
		t.Fatal(err)
	}
}
