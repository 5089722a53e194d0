package cldriver

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// dense is a column-major matrix held in float64 by the test.
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
				m.v[i+j*m.ld] = math.NaN() // padding must never be read
			}
		}
	}
	return m
}

func (m *dense) at(i, j int) float64 { return m.v[i+j*m.ld] }

// opAt is op(M)(i, j).
func (m *dense) opAt(trans bool, i, j int) float64 {
	if trans {
		return m.at(j, i)
	}
	return m.at(i, j)
}

// blasRig runs the library's matrix kernels on the device.
type blasRig struct {
	*drivertest.Worker
	elem uint32
	next uint64
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
	b.next++
	b.OK(b.Alloc(b.next, s.Size))
	b.OK(b.Up(s, b.next))
	return mat(b.next, uint64(m.nx), uint64(m.ny), uint64(m.ld), b.elem, mode), s
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

func (b *blasRig) tol() float64 {
	if b.elem == 4 {
		return 2e-4
	}
	return 1e-11
}

func (b *blasRig) check(t *testing.T, what string, got, want float64, scale float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-want) > b.tol()*max(1, scale) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// TestBLAS checks gemm, syrk and trsm in both precisions and every
// transposition, side and triangle against sums computed here.
func TestBLAS(t *testing.T) {
	r := startRig(t, modes[0])
	rnd := rand.New(rand.NewPCG(1, 2))
	uniform := func(int, int) float64 { return rnd.Float64() - 0.5 }
	for _, elem := range []uint32{4, 8} {
		sfx := map[uint32]string{4: "_f32", 8: "_f64"}[elem]
		if !r.Has("gemm" + sfx) {
			t.Logf("%s kernels skipped: a device lacks cl_khr_fp64", sfx)
			continue
		}
		b := &blasRig{Worker: r, elem: elem, next: uint64(elem) << 20}
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, beta := range []float64{0, -0.5} {
					t.Run(fmt.Sprintf("gemm%s/ta=%v/tb=%v/beta=%v", sfx, ta, tb, beta), func(t *testing.T) {
						const m, n, k = 37, 29, 19
						a := map[bool]*dense{false: newDense(m, k, 3, uniform), true: newDense(k, m, 1, uniform)}[ta]
						bm := map[bool]*dense{false: newDense(k, n, 0, uniform), true: newDense(n, k, 2, uniform)}[tb]
						fillC := uniform
						if beta == 0 {
							// As in BLAS, C is not read when beta is 0.
							fillC = func(int, int) float64 { return math.NaN() }
						}
						c := newDense(m, n, 5, fillC)
						ad, _ := b.put(a, kernel.R)
						bd, _ := b.put(bm, kernel.R)
						cd, cs := b.put(c, kernel.RW)
						const alpha = 1.5
						b.OK(b.Exec(b.Kernel("gemm"+sfx), blasarg.GemmArg{TransA: ta, TransB: tb, Alpha: alpha, Beta: beta}.Encode(), ad, bd, cd))
						got := &dense{nx: m, ny: n, ld: c.ld, v: make([]float64, len(c.v))}
						b.get(cd, cs, got)
						for j := 0; j < n; j++ {
							for i := 0; i < m; i++ {
								want := 0.0
								if beta != 0 {
									want = beta * c.at(i, j)
								}
								for p := 0; p < k; p++ {
									want += alpha * a.opAt(ta, i, p) * bm.opAt(tb, p, j)
								}
								b.check(t, fmt.Sprintf("C(%d, %d)", i, j), got.at(i, j), want, k)
							}
						}
					})
				}
			}
		}
		for _, lower := range []bool{false, true} {
			for _, trans := range []bool{false, true} {
				t.Run(fmt.Sprintf("syrk%s/lower=%v/trans=%v", sfx, lower, trans), func(t *testing.T) {
					const n, k = 33, 21
					a := map[bool]*dense{false: newDense(n, k, 2, uniform), true: newDense(k, n, 0, uniform)}[trans]
					c := newDense(n, n, 1, uniform)
					ad, _ := b.put(a, kernel.R)
					cd, cs := b.put(c, kernel.RW)
					const alpha, beta = -1, 1
					b.OK(b.Exec(b.Kernel("syrk"+sfx), blasarg.SyrkArg{Lower: lower, Trans: trans, Alpha: alpha, Beta: beta}.Encode(), ad, cd))
					got := &dense{nx: n, ny: n, ld: c.ld, v: make([]float64, len(c.v))}
					b.get(cd, cs, got)
					for j := 0; j < n; j++ {
						for i := 0; i < n; i++ {
							want := c.at(i, j) // the other triangle is left alone
							if lower && i >= j || !lower && i <= j {
								want = beta * c.at(i, j)
								for p := 0; p < k; p++ {
									want += alpha * a.opAt(trans, i, p) * a.opAt(trans, j, p)
								}
							}
							b.check(t, fmt.Sprintf("C(%d, %d)", i, j), got.at(i, j), want, k)
						}
					}
				})
			}
		}
		for mask := 0; mask < 16; mask++ {
			right, lower, trans, unit := mask&1 != 0, mask&2 != 0, mask&4 != 0, mask&8 != 0
			t.Run(fmt.Sprintf("trsm%s/right=%v/lower=%v/trans=%v/unit=%v", sfx, right, lower, trans, unit), func(t *testing.T) {
				const m, n = 31, 17
				order := map[bool]int{false: m, true: n}[right]
				// A triangular, well conditioned; the other triangle
				// (and the diagonal when unit) holds values that must
				// not be read.
				a := newDense(order, order, 2, func(i, j int) float64 {
					switch {
					case i == j && unit:
						return 1e3
					case i == j:
						return float64(order) + rnd.Float64()
					case lower && i < j || !lower && i > j:
						return 1e3
					}
					return rnd.Float64() - 0.5
				})
				bm := newDense(m, n, 3, uniform)
				ad, _ := b.put(a, kernel.R)
				bd, bs := b.put(bm, kernel.RW)
				const alpha = 2
				b.OK(b.Exec(b.Kernel("trsm"+sfx), blasarg.TrsmArg{Right: right, Lower: lower, Trans: trans, UnitDiag: unit, Alpha: alpha}.Encode(), ad, bd))
				x := &dense{nx: m, ny: n, ld: bm.ld, v: make([]float64, len(bm.v))}
				b.get(bd, bs, x)
				// triangular A as the solver sees it
				ta := func(i, j int) float64 {
					if trans {
						i, j = j, i
					}
					switch {
					case i == j && unit:
						return 1
					case lower && i < j || !lower && i > j:
						return 0
					}
					return a.at(i, j)
				}
				for j := 0; j < n; j++ {
					for i := 0; i < m; i++ {
						var got float64
						if right { // (X*op(A))(i, j)
							for p := 0; p < n; p++ {
								got += x.at(i, p) * ta(p, j)
							}
						} else { // (op(A)*X)(i, j)
							for p := 0; p < m; p++ {
								got += ta(i, p) * x.at(p, j)
							}
						}
						b.check(t, fmt.Sprintf("op(A)X(%d, %d)", i, j), got, alpha*bm.at(i, j), float64(order))
					}
				}
			})
		}
	}
}
