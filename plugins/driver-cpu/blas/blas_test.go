package blas

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// gap is what the padding between a matrix's columns (ld > rows) holds; the
// routines must leave it untouched.
const gap = -777.25

// mat is a column-major rows x cols float64 matrix with leading dimension ld.
type mat struct {
	rows, cols, ld int
	d              []float64
}

func newMat(rng *rand.Rand, rows, cols, ld int) mat {
	m := mat{rows, cols, ld, nil}
	n := 0
	if rows > 0 && cols > 0 {
		n = (cols-1)*ld + rows
	}
	m.d = make([]float64, n)
	for i := range m.d {
		m.d[i] = gap
	}
	for j := 0; j < cols; j++ {
		for i := 0; i < rows; i++ {
			m.d[i+j*ld] = rng.Float64()*2 - 1
		}
	}
	return m
}

func (m mat) at(i, j int) float64     { return m.d[i+j*m.ld] }
func (m mat) set(i, j int, v float64) { m.d[i+j*m.ld] = v }
func (m mat) clone() mat              { m.d = append([]float64(nil), m.d...); return m }

// opAt is element (i, j) of op(m).
func (m mat) opAt(trans bool, i, j int) float64 {
	if trans {
		return m.at(j, i)
	}
	return m.at(i, j)
}

// precision runs the routines in one precision on float64 data: the float32
// variant rounds the inputs, converts, calls the S routine and converts back.
type precision struct {
	name  string
	tol   float64
	round func([]float64)
	gemm  func(ta, tb bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error
	syrk  func(lower, trans bool, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int) error
	trsm  func(right, lower, trans, unit bool, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) error
	potrf func(lower bool, n int, a []float64, lda int) error
	scal  func(n int, alpha float64, x []float64, inc int) error
	axpy  func(n int, alpha float64, x []float64, incx int, y []float64, incy int) error
	dot   func(n int, x []float64, incx int, y []float64, incy int) (float64, error)
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

func back(dst []float64, x []float32) {
	for i, v := range x {
		dst[i] = float64(v)
	}
}

var precisions = []precision{
	{
		name:  "f64",
		tol:   1e-11,
		round: func([]float64) {},
		gemm:  Dgemm,
		syrk:  Dsyrk,
		trsm:  Dtrsm,
		potrf: Dpotrf,
		scal:  Dscal,
		axpy:  Daxpy,
		dot:   Ddot,
	},
	{
		name: "f32",
		tol:  2e-4,
		round: func(x []float64) {
			for i, v := range x {
				x[i] = float64(float32(v))
			}
		},
		gemm: func(ta, tb bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error {
			c32 := to32(c)
			err := Sgemm(ta, tb, m, n, k, float32(alpha), to32(a), lda, to32(b), ldb, float32(beta), c32, ldc)
			back(c, c32)
			return err
		},
		syrk: func(lower, trans bool, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int) error {
			c32 := to32(c)
			err := Ssyrk(lower, trans, n, k, float32(alpha), to32(a), lda, float32(beta), c32, ldc)
			back(c, c32)
			return err
		},
		trsm: func(right, lower, trans, unit bool, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) error {
			b32 := to32(b)
			err := Strsm(right, lower, trans, unit, m, n, float32(alpha), to32(a), lda, b32, ldb)
			back(b, b32)
			return err
		},
		potrf: func(lower bool, n int, a []float64, lda int) error {
			a32 := to32(a)
			err := Spotrf(lower, n, a32, lda)
			back(a, a32)
			return err
		},
		scal: func(n int, alpha float64, x []float64, inc int) error {
			x32 := to32(x)
			err := Sscal(n, float32(alpha), x32, inc)
			back(x, x32)
			return err
		},
		axpy: func(n int, alpha float64, x []float64, incx int, y []float64, incy int) error {
			y32 := to32(y)
			err := Saxpy(n, float32(alpha), to32(x), incx, y32, incy)
			back(y, y32)
			return err
		},
		dot: func(n int, x []float64, incx int, y []float64, incy int) (float64, error) {
			d, err := Sdot(n, to32(x), incx, to32(y), incy)
			return float64(d), err
		},
	},
}

// near compares got against want with a tolerance relative to scale.
func near(got, want, tol, scale float64) bool {
	if got == want {
		return true
	}
	return math.Abs(got-want) <= tol*math.Max(1, scale)
}

// compare checks every element of got against want (gaps included, which
// must be bit-identical, i.e. untouched).
func compare(t *testing.T, what string, got, want mat, tol, scale float64) {
	t.Helper()
	if len(got.d) != len(want.d) {
		t.Fatalf("%s: length %d, want %d", what, len(got.d), len(want.d))
	}
	bad := 0
	for idx := range got.d {
		g, w := got.d[idx], want.d[idx]
		if w == gap || math.IsNaN(w) {
			if g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
				t.Errorf("%s: untouchable element %d changed: %v -> %v", what, idx, w, g)
				bad++
			}
		} else if !near(g, w, tol, scale) {
			t.Errorf("%s: element (%d,%d) = %v, want %v", what, idx%got.ld, idx/got.ld, g, w)
			bad++
		}
		if bad > 5 {
			t.FailNow()
		}
	}
}

func TestGemm(t *testing.T) {
	type tc struct {
		m, n, k        int
		ta, tb         bool
		alpha, beta    float64
		pada, padb, pc int // extra leading dimension
	}
	var cases []tc
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			cases = append(cases,
				tc{5, 7, 3, ta, tb, 1, 0, 0, 0, 0},
				tc{5, 7, 3, ta, tb, 1.5, -0.5, 2, 3, 4},
				tc{17, 9, 13, ta, tb, -0.75, 1, 1, 0, 5},
				tc{1, 1, 1, ta, tb, 2, 3, 3, 3, 3},
				tc{6, 4, 0, ta, tb, 1, 2, 1, 1, 1}, // k == 0: C = beta*C
			)
		}
	}
	for _, p := range precisions {
		for _, c := range cases {
			name := fmt.Sprintf("%s/m%dn%dk%d/tA=%v,tB=%v/ld+%d,%d,%d", p.name, c.m, c.n, c.k, c.ta, c.tb, c.pada, c.padb, c.pc)
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(c.m*1000 + c.n*100 + c.k)))
				ar, ac := c.m, c.k
				if c.ta {
					ar, ac = c.k, c.m
				}
				br, bc := c.k, c.n
				if c.tb {
					br, bc = c.n, c.k
				}
				a := newMat(rng, ar, ac, max(1, ar)+c.pada)
				b := newMat(rng, br, bc, max(1, br)+c.padb)
				cm := newMat(rng, c.m, c.n, c.m+c.pc)
				p.round(a.d)
				p.round(b.d)
				p.round(cm.d)
				want := cm.clone()
				for i := 0; i < c.m; i++ {
					for j := 0; j < c.n; j++ {
						s := 0.0
						for l := 0; l < c.k; l++ {
							s += a.opAt(c.ta, i, l) * b.opAt(c.tb, l, j)
						}
						want.set(i, j, c.alpha*s+c.beta*cm.at(i, j))
					}
				}
				got := cm.clone()
				if err := p.gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.d, a.ld, b.d, b.ld, c.beta, got.d, got.ld); err != nil {
					t.Fatal(err)
				}
				compare(t, "C", got, want, p.tol, float64(c.k))
			})
		}
	}
}

func TestSyrk(t *testing.T) {
	type tc struct {
		n, k         int
		lower, trans bool
		alpha, beta  float64
		pada, padc   int
	}
	var cases []tc
	for _, lower := range []bool{false, true} {
		for _, trans := range []bool{false, true} {
			cases = append(cases,
				tc{4, 3, lower, trans, 1, 0, 0, 0},
				tc{9, 5, lower, trans, -1.25, 0.5, 3, 2},
				tc{7, 11, lower, trans, 0.5, 1, 1, 4},
				tc{5, 0, lower, trans, 1, -2, 1, 1},
			)
		}
	}
	for _, p := range precisions {
		for _, c := range cases {
			name := fmt.Sprintf("%s/n%dk%d/lower=%v,trans=%v/ld+%d,%d", p.name, c.n, c.k, c.lower, c.trans, c.pada, c.padc)
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(c.n*100 + c.k)))
				ar, ac := c.n, c.k
				if c.trans {
					ar, ac = c.k, c.n
				}
				a := newMat(rng, ar, ac, max(1, ar)+c.pada)
				cm := newMat(rng, c.n, c.n, c.n+c.padc)
				p.round(a.d)
				p.round(cm.d)
				// The other triangle must be neither read nor written: NaN
				// there makes both visible.
				for i := 0; i < c.n; i++ {
					for j := 0; j < c.n; j++ {
						if (c.lower && i < j) || (!c.lower && i > j) {
							cm.set(i, j, math.NaN())
						}
					}
				}
				want := cm.clone()
				for i := 0; i < c.n; i++ {
					for j := 0; j < c.n; j++ {
						if (c.lower && i < j) || (!c.lower && i > j) {
							continue
						}
						s := 0.0
						for l := 0; l < c.k; l++ {
							s += a.opAt(c.trans, i, l) * a.opAt(c.trans, j, l)
						}
						want.set(i, j, c.alpha*s+c.beta*cm.at(i, j))
					}
				}
				got := cm.clone()
				if err := p.syrk(c.lower, c.trans, c.n, c.k, c.alpha, a.d, a.ld, c.beta, got.d, got.ld); err != nil {
					t.Fatal(err)
				}
				compare(t, "C", got, want, p.tol, float64(c.k))
			})
		}
	}
}

func TestTrsm(t *testing.T) {
	type tc struct {
		m, n                     int
		right, lower, trans, unt bool
		alpha                    float64
		pada, padb               int
	}
	var cases []tc
	for _, right := range []bool{false, true} {
		for _, lower := range []bool{false, true} {
			for _, trans := range []bool{false, true} {
				for _, unit := range []bool{false, true} {
					cases = append(cases,
						tc{6, 4, right, lower, trans, unit, 1, 0, 0},
						tc{7, 9, right, lower, trans, unit, -1.5, 2, 3},
					)
				}
			}
		}
	}
	for _, p := range precisions {
		for _, c := range cases {
			name := fmt.Sprintf("%s/m%dn%d/right=%v,lower=%v,trans=%v,unit=%v/ld+%d,%d",
				p.name, c.m, c.n, c.right, c.lower, c.trans, c.unt, c.pada, c.padb)
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(c.m*100 + c.n)))
				an := c.m
				if c.right {
					an = c.n
				}
				a := newMat(rng, an, an, an+c.pada)
				// A well-conditioned triangle; NaN in the other one (and on
				// the diagonal when unit) proves those are not read.
				for i := 0; i < an; i++ {
					for j := 0; j < an; j++ {
						switch {
						case i == j && c.unt:
							a.set(i, j, math.NaN())
						case i == j:
							a.set(i, j, 2+rng.Float64())
						case (c.lower && i < j) || (!c.lower && i > j):
							a.set(i, j, math.NaN())
						default:
							a.set(i, j, a.at(i, j)*0.5)
						}
					}
				}
				b := newMat(rng, c.m, c.n, c.m+c.padb)
				p.round(a.d)
				p.round(b.d)
				x := b.clone()
				if err := p.trsm(c.right, c.lower, c.trans, c.unt, c.m, c.n, c.alpha, a.d, a.ld, x.d, x.ld); err != nil {
					t.Fatal(err)
				}
				// The effective triangular matrix T = op(A) with its
				// implicit zeros and unit diagonal.
				tAt := func(i, j int) float64 {
					if c.trans {
						i, j = j, i
					}
					if i == j && c.unt {
						return 1
					}
					if (c.lower && i < j) || (!c.lower && i > j) {
						return 0
					}
					return a.at(i, j)
				}
				// Check op(A) X = alpha B or X op(A) = alpha B.
				want := b.clone()
				got := x.clone()
				for i := 0; i < c.m; i++ {
					for j := 0; j < c.n; j++ {
						want.set(i, j, c.alpha*b.at(i, j))
						s := 0.0
						if c.right {
							for l := 0; l < c.n; l++ {
								s += x.at(i, l) * tAt(l, j)
							}
						} else {
							for l := 0; l < c.m; l++ {
								s += tAt(i, l) * x.at(l, j)
							}
						}
						got.set(i, j, s)
					}
				}
				compare(t, "op(A)X", got, want, p.tol*10, float64(an))
			})
		}
	}
}

// spd returns an n x n symmetric positive definite M M^T + n I with leading
// dimension ld.
func spd(rng *rand.Rand, n, ld int) mat {
	m := newMat(rng, n, n, n)
	a := newMat(rng, n, n, ld)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for l := 0; l < n; l++ {
				s += m.at(i, l) * m.at(j, l)
			}
			if i == j {
				s += float64(n)
			}
			a.set(i, j, s)
		}
	}
	return a
}

func TestPotrf(t *testing.T) {
	for _, p := range precisions {
		for _, lower := range []bool{false, true} {
			for _, c := range []struct{ n, pad int }{{1, 0}, {4, 0}, {10, 3}, {33, 1}} {
				t.Run(fmt.Sprintf("%s/n%d/lower=%v/ld+%d", p.name, c.n, lower, c.pad), func(t *testing.T) {
					rng := rand.New(rand.NewSource(int64(c.n)))
					a := spd(rng, c.n, c.n+c.pad)
					p.round(a.d)
					other := func(i, j int) bool { return (lower && i < j) || (!lower && i > j) }
					for i := 0; i < c.n; i++ {
						for j := 0; j < c.n; j++ {
							if other(i, j) {
								a.set(i, j, math.NaN()) // neither read nor written
							}
						}
					}
					f := a.clone()
					if err := p.potrf(lower, c.n, f.d, f.ld); err != nil {
						t.Fatal(err)
					}
					// L L^T (or U^T U) must rebuild A's triangle.
					fac := func(i, j int) float64 { // the factor's L(i,j)
						if i < j {
							return 0
						}
						if !lower {
							i, j = j, i // L = U^T
						}
						return f.at(i, j)
					}
					got := f.clone()
					for i := 0; i < c.n; i++ {
						for j := 0; j < c.n; j++ {
							if other(i, j) {
								continue
							}
							s := 0.0
							for l := 0; l < c.n; l++ {
								s += fac(i, l) * fac(j, l)
							}
							got.set(i, j, s)
						}
					}
					compare(t, "LL^T", got, a, p.tol*10, float64(c.n)*float64(c.n))
				})
			}
		}
	}
}

func TestPotrfNotSPD(t *testing.T) {
	for _, p := range precisions {
		for _, lower := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lower=%v", p.name, lower), func(t *testing.T) {
				// diag(4, 1, -1, 5): the minor of order 3 is the first that
				// is not positive definite.
				n := 4
				a := mat{n, n, n, make([]float64, n*n)}
				for i, v := range []float64{4, 1, -1, 5} {
					a.set(i, i, v)
				}
				err := p.potrf(lower, n, a.d, a.ld)
				var npd *NotPositiveDefiniteError
				if !errors.As(err, &npd) {
					t.Fatalf("err = %v, want a NotPositiveDefiniteError", err)
				}
				if npd.Column != 3 {
					t.Errorf("column = %d, want 3", npd.Column)
				}
				if want := "matrix not positive definite at column 3"; err.Error() != want {
					t.Errorf("error %q, want %q", err, want)
				}
			})
		}
	}
}

func TestLevel1(t *testing.T) {
	for _, p := range precisions {
		for _, c := range []struct{ n, incx, incy int }{{0, 1, 1}, {1, 1, 1}, {10, 1, 1}, {37, 2, 3}, {8, 5, 1}} {
			t.Run(fmt.Sprintf("%s/n%d/inc%d,%d", p.name, c.n, c.incx, c.incy), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(c.n)))
				mk := func(inc int) []float64 {
					l := 0
					if c.n > 0 {
						l = (c.n-1)*inc + 1
					}
					v := make([]float64, l)
					for i := range v {
						if i%inc == 0 {
							v[i] = rng.Float64()*2 - 1
						} else {
							v[i] = gap
						}
					}
					p.round(v)
					return v
				}
				x, y := mk(c.incx), mk(c.incy)
				asMat := func(v []float64) mat { return mat{len(v), 1, max(1, len(v)), v} }

				// scal
				got := append([]float64(nil), x...)
				want := append([]float64(nil), x...)
				for i := 0; i < c.n; i++ {
					want[i*c.incx] *= -2.5
				}
				if err := p.scal(c.n, -2.5, got, c.incx); err != nil {
					t.Fatal(err)
				}
				compare(t, "scal", asMat(got), asMat(want), p.tol, 1)

				// axpy
				got = append([]float64(nil), y...)
				want = append([]float64(nil), y...)
				for i := 0; i < c.n; i++ {
					want[i*c.incy] += 0.75 * x[i*c.incx]
				}
				if err := p.axpy(c.n, 0.75, x, c.incx, got, c.incy); err != nil {
					t.Fatal(err)
				}
				compare(t, "axpy", asMat(got), asMat(want), p.tol, 1)

				// dot
				s := 0.0
				for i := 0; i < c.n; i++ {
					s += x[i*c.incx] * y[i*c.incy]
				}
				d, err := p.dot(c.n, x, c.incx, y, c.incy)
				if err != nil {
					t.Fatal(err)
				}
				if !near(d, s, p.tol, float64(c.n)) {
					t.Errorf("dot = %v, want %v", d, s)
				}
			})
		}
	}
}

func TestArgumentErrors(t *testing.T) {
	a := make([]float64, 12)
	a32 := make([]float32, 12)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"gemm short A", Dgemm(false, false, 3, 3, 4, 1, a[:11], 3, a, 4, 0, a, 3), "A (3x4, ld 3) needs 12 elements, slice has 11"},
		{"gemm short C", Sgemm(false, false, 4, 3, 1, 1, a32, 4, a32, 1, 0, a32[:10], 4), "C (4x3, ld 4) needs 12 elements, slice has 10"},
		{"gemm small ldb", Dgemm(false, true, 2, 3, 2, 1, a, 2, a, 2, 0, a, 2), "ldB = 2, want >= max(1, 3 rows)"},
		{"gemm negative k", Dgemm(false, false, 2, 2, -1, 1, a, 2, a, 1, 0, a, 2), "k = -1 is negative"},
		{"gemm transA short", Sgemm(true, false, 2, 2, 5, 1, a32[:9], 5, a32, 5, 0, a32, 2), "A (5x2, ld 5) needs 10 elements"},
		{"syrk short C", Dsyrk(true, false, 4, 1, 1, a, 4, 0, a[:11], 3), "ldC = 3, want >= max(1, 4 rows)"},
		{"syrk trans short A", Ssyrk(true, true, 3, 5, 1, a32, 5, 0, a32, 3), "A (5x3, ld 5) needs 15 elements, slice has 12"},
		{"trsm right short A", Dtrsm(true, true, false, false, 2, 4, 1, a, 4, a, 2), "A (4x4, ld 4) needs 16 elements, slice has 12"},
		{"trsm short B", Strsm(false, true, false, false, 3, 4, 1, a32, 3, a32[:11], 3), "B (3x4, ld 3) needs 12 elements, slice has 11"},
		{"potrf short", Dpotrf(true, 4, a[:11], 4), "A (4x4, ld 4) needs 16 elements"},
		{"potrf ld", Spotrf(true, 2, a32, 1), "ldA = 1, want >= max(1, 2 rows)"},
		{"scal short", Dscal(5, 1, a, 3), "x (n 5, inc 3) needs 13 elements, slice has 12"},
		{"scal inc", Sscal(2, 1, a32, 0), "incx = 0, want a positive increment"},
		{"axpy short y", Daxpy(12, 1, a, 1, a[:5], 1), "y (n 12, inc 1) needs 12 elements, slice has 5"},
		{"axpy negative n", Saxpy(-1, 1, a32, 1, a32, 1), "n = -1 is negative"},
		{"dot short x", func() error { _, err := Ddot(7, a, 2, a, 1); return err }(), "x (n 7, inc 2) needs 13 elements"},
		{"sdot inc", func() error { _, err := Sdot(2, a32, 1, a32, -1); return err }(), "incy = -1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", c.err, c.want)
			}
		})
	}
}

func TestEmptyIsNoop(t *testing.T) {
	c := []float64{1, 2, 3}
	// m or n zero: nothing is read or written, empty slices are fine.
	if err := Dgemm(false, false, 0, 3, 2, 1, nil, 1, []float64{1, 2, 3, 4, 5, 6}, 2, 0, nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := Sgemm(true, true, 2, 0, 0, 1, nil, 1, nil, 1, 0, nil, 2); err != nil {
		t.Fatal(err)
	}
	if err := Dsyrk(false, false, 0, 0, 1, nil, 1, 0, nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := Strsm(true, false, false, false, 0, 0, 1, nil, 1, nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := Dpotrf(true, 0, nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := Dscal(0, 5, nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := Saxpy(0, 5, nil, 1, nil, 1); err != nil {
		t.Fatal(err)
	}
	if d, err := Sdot(0, nil, 1, nil, 1); err != nil || d != 0 {
		t.Fatal(d, err)
	}
	// k == 0 with an empty A and B scales C by beta.
	if err := Dgemm(false, false, 3, 1, 0, 1, nil, 3, nil, 1, 2, c, 3); err != nil {
		t.Fatal(err)
	}
	if c[0] != 2 || c[1] != 4 || c[2] != 6 {
		t.Fatalf("C = %v, want [2 4 6]", c)
	}
}

func TestThreads(t *testing.T) {
	old := NumThreads()
	defer SetNumThreads(old)
	SetNumThreads(1)
	if got := NumThreads(); got != 1 {
		t.Fatalf("NumThreads = %d after SetNumThreads(1)", got)
	}
	SetNumThreads(0)
	if got := NumThreads(); got < 1 {
		t.Fatalf("NumThreads = %d after SetNumThreads(0)", got)
	}
}

func BenchmarkSgemm256(b *testing.B) {
	const n = 256
	old := NumThreads()
	SetNumThreads(1)
	defer SetNumThreads(old)
	rng := rand.New(rand.NewSource(1))
	mk := func() []float32 {
		x := make([]float32, n*n)
		for i := range x {
			x[i] = rng.Float32()
		}
		return x
	}
	a, bb, c := mk(), mk(), mk()
	b.ResetTimer()
	for b.Loop() {
		if err := Sgemm(false, false, n, n, n, 1, a, n, bb, n, 0, c, n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFlop/s")
}
