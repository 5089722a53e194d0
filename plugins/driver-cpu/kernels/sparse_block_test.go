package kernels

import (
	"math"
	"math/rand"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/iface-bcsr/bcsr"
	"github.com/starpu-go/starpu/plugins/iface-coo/coo"
)

func bcsrBuffer[T float](nz []T, ci, rp []uint32, fe, r, c uint32) kernel.Buffer {
	m, parts, err := bcsr.Parts(nz, ci, rp, fe, r, c)
	if err != nil {
		panic(err)
	}
	return regionBuffer(m.Layout(), m.PartSizes(), parts)
}

func cooBuffer[T float](rows, cols []uint32, vals []T, nx, ny uint32) kernel.Buffer {
	m, parts, err := coo.Parts(rows, cols, vals, nx, ny)
	if err != nil {
		panic(err)
	}
	return regionBuffer(m.Layout(), m.PartSizes(), parts)
}

// denseProduct is a*x for a row-major matrix a of len(x) columns.
func denseProduct[T float](a, x []T) []float64 {
	y := make([]float64, len(a)/len(x))
	for i := range y {
		for j, v := range x {
			y[i] += float64(a[i*len(x)+j]) * float64(v)
		}
	}
	return y
}

func checkNear[T float](t *testing.T, what string, got []T, want []float64) {
	t.Helper()
	for i, v := range got {
		if math.Abs(float64(v)-want[i]) > tolerance[T]()*10 {
			t.Fatalf("%s: y[%d] = %g, want %g", what, i, v, want[i])
		}
	}
}

func testSpmvBCSR[T float](t *testing.T, name string) {
	f := lib(t)[name]
	rng := rand.New(rand.NewSource(4))
	const rows, cols, r, c = 30, 24, 3, 4 // 10 block rows, 6 block columns
	a := make([]T, rows*cols)
	for k := range a {
		if rng.Intn(4) == 0 {
			a[k] = T(rng.Float64() - 0.5)
		}
	}
	x := make([]T, cols)
	for i := range x {
		x[i] = T(rng.Float64())
	}
	want := denseProduct(a, x)
	nz, ci, rp, err := bcsr.FromDense(a, rows, cols, r, c)
	if err != nil {
		t.Fatal(err)
	}
	y := make([]T, rows)
	for i := range y {
		y[i] = 99 // the kernel overwrites y
	}
	ctx := &kernel.Context{Buffers: []kernel.Buffer{bcsrBuffer(nz, ci, rp, 0, r, c), vecBuffer(x, kernel.R), vecBuffer(y, kernel.W)}}
	if err := f(ctx); err != nil {
		t.Fatal(err)
	}
	checkNear(t, "whole", y, want)

	// Block-row ranges as the rows filter makes them (global rowptr,
	// firstentry = rowptr[lo]), x in two blocks.
	for i := 0; i < 3; i++ {
		lo, hi := bcsr.RowBlock(rows/r, 3, i)
		s, e := rp[lo], rp[hi]
		yb := make([]T, (hi-lo)*r)
		ctx := &kernel.Context{Buffers: []kernel.Buffer{
			bcsrBuffer(nz[int(s)*r*c:int(e)*r*c], ci[s:e], rp[lo:hi+1], s, r, c),
			vecBuffer(x[:5], kernel.R), vecBuffer(x[5:], kernel.R), vecBuffer(yb, kernel.RW),
		}}
		if err := f(ctx); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		checkNear(t, "block", yb, want[lo*r:hi*r])
	}
}

func testSpmvAddCOO[T float](t *testing.T, name string) {
	f := lib(t)[name]
	rng := rand.New(rand.NewSource(6))
	const ny, nx, nnz = 13, 9, 60
	rows, cols, vals := make([]uint32, nnz), make([]uint32, nnz), make([]T, nnz)
	a := make([]T, ny*nx)
	for k := range vals {
		rows[k], cols[k], vals[k] = uint32(rng.Intn(ny)), uint32(rng.Intn(nx)), T(rng.Float64()-0.5)
		a[int(rows[k])*nx+int(cols[k])] += vals[k]
	}
	x := make([]T, nx)
	for i := range x {
		x[i] = T(rng.Float64())
	}
	want := denseProduct(a, x)
	// y starts at 1: the kernel adds.
	y := make([]T, ny)
	for i := range y {
		y[i] = 1
		want[i]++
	}
	// Two runs of entries, x in one vector then in three blocks.
	for _, bufs := range [][]kernel.Buffer{
		{cooBuffer(rows[:25], cols[:25], vals[:25], nx, ny), vecBuffer(x, kernel.R), vecBuffer(y, kernel.RW)},
		{cooBuffer(rows[25:], cols[25:], vals[25:], nx, ny), vecBuffer(x[:2], kernel.R), vecBuffer(x[2:3], kernel.R), vecBuffer(x[3:], kernel.R), vecBuffer(y, kernel.RW)},
	} {
		if err := f(&kernel.Context{Buffers: bufs}); err != nil {
			t.Fatal(err)
		}
	}
	checkNear(t, "two runs", y, want)
}

func TestSpmvBlockAndCoordinate(t *testing.T) {
	t.Run("bcsr f64", func(t *testing.T) { testSpmvBCSR[float64](t, bcsr.SpmvF64) })
	t.Run("bcsr f32", func(t *testing.T) { testSpmvBCSR[float32](t, bcsr.SpmvF32) })
	t.Run("coo f64", func(t *testing.T) { testSpmvAddCOO[float64](t, coo.SpmvAddF64) })
	t.Run("coo f32", func(t *testing.T) { testSpmvAddCOO[float32](t, coo.SpmvAddF32) })
}

func TestSpmvBlockAndCoordinateErrors(t *testing.T) {
	// The documentation's 4x4 example in 2x2 blocks.
	nz := []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	ci, rp := []uint32{0, 0, 1}, []uint32{0, 1, 3}
	x, y := []float64{1, 1, 1, 1}, []float64{0, 0, 0, 0}
	a := func() kernel.Buffer { return bcsrBuffer(nz, ci, rp, 0, 2, 2) }
	m := func() kernel.Buffer { return cooBuffer([]uint32{0, 3}, []uint32{1, 2}, []float64{1, 2}, 4, 4) }
	for _, c := range []struct {
		kernel string
		bufs   func() []kernel.Buffer
		want   string
	}{
		{bcsr.SpmvF64, func() []kernel.Buffer { return []kernel.Buffer{a(), vecBuffer(y, kernel.W)} },
			"spmv_bcsr_f64: got 2 buffers, want a BCSR matrix, one or more x vectors and y"},
		{bcsr.SpmvF64, func() []kernel.Buffer { return []kernel.Buffer{m(), vecBuffer(x, kernel.R), vecBuffer(y, kernel.W)} },
			"spmv_bcsr_f64: buffer 0 (A): buffer is a iface#65, not a BCSR matrix"},
		{bcsr.SpmvF64, func() []kernel.Buffer {
			return []kernel.Buffer{a(), vecBuffer(x, kernel.R), vecBuffer(y[:3], kernel.W)}
		},
			"spmv_bcsr_f64: y has 3 elements but A has 2 block rows of 2"},
		{bcsr.SpmvF64, func() []kernel.Buffer {
			return []kernel.Buffer{a(), vecBuffer(x[:3], kernel.R), vecBuffer(y, kernel.W)}
		},
			"spmv_bcsr_f64: colind[2] = 1, block columns of 2, but x has 3 elements"},
		{bcsr.SpmvF64, func() []kernel.Buffer {
			b := a()
			v, _ := bcsr.View[float64](&b)
			v.RowPtr[1] = 4
			return []kernel.Buffer{b, vecBuffer(x, kernel.R), vecBuffer(y, kernel.W)}
		}, "spmv_bcsr_f64: bcsr: rowptr[0..1] = 0..4 outside [firstentry 0, firstentry+nnz 3]"},
		{coo.SpmvAddF64, func() []kernel.Buffer { return []kernel.Buffer{a(), vecBuffer(x, kernel.R), vecBuffer(y, kernel.RW)} },
			"spmv_add_coo_f64: buffer 0 (A): buffer is a iface#65, not a COO matrix"},
		{coo.SpmvAddF64, func() []kernel.Buffer { return []kernel.Buffer{m(), vecBuffer(x, kernel.R), vecBuffer(y, kernel.R)} },
			"spmv_add_coo_f64: buffer 2 (y) is accessed R but the kernel writes it"},
		{coo.SpmvAddF64, func() []kernel.Buffer {
			return []kernel.Buffer{m(), vecBuffer(x, kernel.R), vecBuffer(y[:3], kernel.RW)}
		},
			"spmv_add_coo_f64: x has 4 elements and y 3 but A is 4x4"},
		{coo.SpmvAddF64, func() []kernel.Buffer {
			b := m()
			v, _ := coo.View[float64](&b)
			v.Rows[1] = 4
			return []kernel.Buffer{b, vecBuffer(x, kernel.R), vecBuffer(y, kernel.RW)}
		}, "spmv_add_coo_f64: entry 1 at (4, 2), outside the 4x4 matrix"},
	} {
		err := lib(t)[c.kernel](&kernel.Context{Buffers: c.bufs()})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.kernel, err, c.want)
		}
	}
}
