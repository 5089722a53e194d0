package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blas"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// team is the kernel context's view of a combined worker of size workers,
// rank rank.
func team(size, rank int) kernel.Team {
	if size == 1 {
		return kernel.Team{}
	}
	t := kernel.Team{Combined: 9, Rank: rank}
	for i := range size {
		t.Members = append(t.Members, i)
	}
	return t
}

// The FORKJOIN gemm gives what the sequential one gives, up to rounding
// (OpenBLAS blocks a narrower product differently), whatever the team's
// size and the operands' transposition, and leaves C's gaps alone.
func TestParGemm(t *testing.T) {
	t.Run("f32", testParGemm[float32])
	t.Run("f64", testParGemm[float64])
}

func testParGemm[T float](t *testing.T) {
	seq, par := lib(t)["gemm"+suffix[T]()], lib(t)["pgemm"+suffix[T]()]
	for _, c := range []struct{ m, n, k, size int }{{33, 50, 17, 2}, {20, 7, 9, 3}, {64, 64, 64, 4}, {5, 3, 4, 8}, {8, 8, 8, 1}, {6, 0, 3, 2}} {
		for _, tr := range []struct{ a, b bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			t.Run(fmt.Sprintf("m%dn%dk%d/size%d/tA=%v,tB=%v", c.m, c.n, c.k, c.size, tr.a, tr.b), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(c.m + c.n + c.k)))
				ar, ac := c.m, c.k
				if tr.a {
					ar, ac = ac, ar
				}
				br, bc := c.k, c.n
				if tr.b {
					br, bc = bc, br
				}
				a := newTmat[T](rng, ar, ac, max(1, ar)+1)
				b := newTmat[T](rng, br, bc, max(1, br)+2)
				cm := newTmat[T](rng, c.m, c.n, c.m+3)
				arg := blasarg.GemmArg{TransA: tr.a, TransB: tr.b, Alpha: -1.5, Beta: 0.5}.Encode()
				want, got := cm.clone(), cm.clone()
				if err := seq(&kernel.Context{Buffers: []kernel.Buffer{a.buf(kernel.R), b.buf(kernel.R), want.buf(kernel.RW)}, Arg: arg}); err != nil {
					t.Fatal(err)
				}
				if err := par(&kernel.Context{Buffers: []kernel.Buffer{a.buf(kernel.R), b.buf(kernel.R), got.buf(kernel.RW)}, Arg: arg, Team: team(c.size, 0)}); err != nil {
					t.Fatal(err)
				}
				check(t, "C", got.d, toF64(want.d), float64(c.k))
			})
		}
	}
	// Its checks are the sequential kernel's.
	a := tmat[T]{2, 3, 2, make([]T, 6)}
	err := par(&kernel.Context{Buffers: []kernel.Buffer{a.buf(kernel.R), a.buf(kernel.R), a.buf(kernel.RW)}, Arg: blasarg.GemmArg{}.Encode(), Team: team(2, 0)})
	if err == nil {
		t.Fatal("a 2x3 times 2x3 product was accepted")
	}
}

// The FORKJOIN potrf factorises as the sequential one does, up to
// rounding (the blocked algorithm adds in another order), on every team
// size, with the triangle it must not touch left alone.
func TestParPotrf(t *testing.T) {
	t.Run("f32", testParPotrf[float32])
	t.Run("f64", testParPotrf[float64])
}

func testParPotrf[T float](t *testing.T) {
	seq, par := lib(t)["potrf"+suffix[T]()], lib(t)["ppotrf"+suffix[T]()]
	for _, c := range []struct {
		n, pad, size int
		lower        bool
	}{{300, 5, 2, true}, {260, 0, 3, true}, {513, 1, 4, true}, {200, 0, 1, true}, {300, 2, 2, false}, {40, 0, 2, true}} {
		t.Run(fmt.Sprintf("n%d/ld+%d/size%d/lower=%v", c.n, c.pad, c.size, c.lower), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(c.n)))
			a := newTmat[T](rng, c.n, c.n, c.n+c.pad)
			for i := 0; i < c.n; i++ {
				for j := 0; j < c.n; j++ {
					if (c.lower && i < j) || (!c.lower && i > j) {
						a.set(i, j, math.NaN())
						continue
					}
					v := 1 / float64(i+j+1)
					if i == j {
						v += float64(c.n)
					}
					a.set(i, j, v)
				}
			}
			arg := blasarg.PotrfArg{Lower: c.lower}.Encode()
			want, got := a.clone(), a.clone()
			if err := seq(&kernel.Context{Buffers: []kernel.Buffer{want.buf(kernel.RW)}, Arg: arg}); err != nil {
				t.Fatal(err)
			}
			if err := par(&kernel.Context{Buffers: []kernel.Buffer{got.buf(kernel.RW)}, Arg: arg, Team: team(c.size, 0)}); err != nil {
				t.Fatal(err)
			}
			check(t, "factor", got.d, toF64(want.d), 1)
		})
	}
	t.Run("not SPD in a later block", func(t *testing.T) {
		const n = 300
		a := tmat[T]{n, n, n, make([]T, n*n)}
		for i := 0; i < n; i++ {
			a.set(i, i, 1)
		}
		a.set(250, 250, -1)
		err := par(&kernel.Context{Buffers: []kernel.Buffer{a.buf(kernel.RW)}, Arg: blasarg.PotrfArg{Lower: true}.Encode(), Team: team(2, 0)})
		var npd *blas.NotPositiveDefiniteError
		if !errors.As(err, &npd) || npd.Column != 251 {
			t.Fatalf("err = %v, want not positive definite at column 251", err)
		}
	})
}

// Each rank of the SPMD scal scales its own part: all ranks together
// scale every element exactly once.
func TestSpmdScal(t *testing.T) {
	lf := lib(t)
	for _, c := range []struct {
		n, size int
		matrix  bool
	}{{10, 3, false}, {2, 4, false}, {1000, 2, false}, {0, 2, false}, {9, 4, true}, {5, 1, true}} {
		t.Run(fmt.Sprintf("n%d/size%d/matrix=%v", c.n, c.size, c.matrix), func(t *testing.T) {
			arg := blasarg.ScalArg{Alpha: 2}.Encode()
			var x []float64
			var buf kernel.Buffer
			if c.matrix {
				m := tmat[float64]{c.n, c.n, c.n + 1, nil}
				m.d = make([]float64, (c.n-1)*(c.n+1)+c.n)
				for i := range m.d {
					m.d[i] = gap
				}
				for j := 0; j < c.n; j++ {
					for i := 0; i < c.n; i++ {
						m.set(i, j, 1)
					}
				}
				x, buf = m.d, m.buf(kernel.RW)
			} else {
				x = make([]float64, c.n)
				for i := range x {
					x[i] = 1
				}
				buf = vecBuf(x, kernel.RW)
			}
			want := make([]float64, len(x))
			for i, v := range x {
				want[i] = v
				if v != gap {
					want[i] = 2
				}
			}
			for r := range c.size {
				if err := lf[blasarg.SpmdScalF64](&kernel.Context{Buffers: []kernel.Buffer{buf}, Arg: arg, Team: team(c.size, r)}); err != nil {
					t.Fatal(err)
				}
			}
			check(t, "x", x, want, 1)
		})
	}
}
