package kernels

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// csrBuffer lays a CSR matrix out in one region as the core does for a
// plugin interface and returns it as a kernel sees it.
func csrBuffer[T float](nz []T, ci, rp []uint32, fe uint32) kernel.Buffer {
	m, parts, err := csr.Parts(nz, ci, rp, fe)
	if err != nil {
		panic(err)
	}
	return regionBuffer(m.Layout(), m.PartSizes(), parts)
}

// regionBuffer lays a plugin interface's parts out in one 8-byte aligned
// region, as the core does, and returns the read-only buffer a kernel sees.
func regionBuffer(l kernel.Layout, sizes []uint64, parts [][]byte) kernel.Buffer {
	l.Interface = kernel.FirstPluginInterface + 1
	offs, total := iface.PartOffsets(sizes)
	region := bytesOf(make([]float64, (total+7)/8))[:total]
	for i, p := range parts {
		copy(region[offs[i]:], p)
	}
	return kernel.Buffer{Layout: l, Mode: kernel.R, Bytes: region}
}

func vecBuffer[T float](v []T, mode kernel.Mode) kernel.Buffer {
	var z T
	es := uint32(len(bytesOf([]T{z})))
	return kernel.Buffer{Layout: kernel.Layout{Interface: kernel.Vector, ElemSize: es, NX: uint64(len(v))}, Mode: mode, Bytes: bytesOf(v)}
}

// randomCSR is a random nrow x ncol matrix with 0 to 6 entries a row.
func randomCSR[T float](rng *rand.Rand, nrow, ncol int) ([]T, []uint32, []uint32) {
	var nz []T
	var ci []uint32
	rp := []uint32{0}
	for r := 0; r < nrow; r++ {
		for k := rng.Intn(7); k > 0; k-- {
			nz = append(nz, T(rng.Float64()-0.5))
			ci = append(ci, uint32(rng.Intn(ncol)))
		}
		rp = append(rp, uint32(len(nz)))
	}
	return nz, ci, rp
}

func testSpmv[T float](t *testing.T, name string) {
	f := lib(t)[name]
	rng := rand.New(rand.NewSource(3))
	const nrow, ncol = 50, 40
	nz, ci, rp := randomCSR[T](rng, nrow, ncol)
	x := make([]T, ncol)
	for i := range x {
		x[i] = T(rng.Float64())
	}
	want := make([]float64, nrow)
	for r := range want {
		for k := rp[r]; k < rp[r+1]; k++ {
			want[r] += float64(nz[k]) * float64(x[ci[k]])
		}
	}
	check := func(what string, y []T, lo int) {
		t.Helper()
		for r, v := range y {
			if math.Abs(float64(v)-want[lo+r]) > tolerance[T]()*10 {
				t.Fatalf("%s: y[%d] = %g, want %g", what, lo+r, v, want[lo+r])
			}
		}
	}
	// Whole matrix, x in one vector.
	y := make([]T, nrow)
	ctx := &kernel.Context{Buffers: []kernel.Buffer{csrBuffer(nz, ci, rp, 0), vecBuffer(x, kernel.R), vecBuffer(y, kernel.W)}}
	if err := f(ctx); err != nil {
		t.Fatal(err)
	}
	check("whole", y, 0)

	// Row blocks as the rows filter makes them (global rowptr, firstentry =
	// rowptr[lo]), x in three blocks.
	for i := 0; i < 3; i++ {
		lo, hi := csr.RowBlock(nrow, 3, i)
		a, b := rp[lo], rp[hi]
		yb := make([]T, hi-lo)
		ctx := &kernel.Context{Buffers: []kernel.Buffer{
			csrBuffer(nz[a:b], ci[a:b], rp[lo:hi+1], a),
			vecBuffer(x[:7], kernel.R), vecBuffer(x[7:30], kernel.R), vecBuffer(x[30:], kernel.R),
			vecBuffer(yb, kernel.RW),
		}}
		if err := f(ctx); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		check("block", yb, lo)
	}
}

func TestSpmv(t *testing.T) {
	t.Run("f64", func(t *testing.T) { testSpmv[float64](t, csr.SpmvF64) })
	t.Run("f32", func(t *testing.T) { testSpmv[float32](t, csr.SpmvF32) })
}

func TestSpmvErrors(t *testing.T) {
	f := lib(t)[csr.SpmvF64]
	nz, ci, rp := []float64{1, 2, 3}, []uint32{0, 1, 1}, []uint32{0, 2, 3}
	x, y := []float64{1, 1}, []float64{0, 0}
	a := func() kernel.Buffer { return csrBuffer(nz, ci, rp, 0) }
	for _, c := range []struct {
		name string
		bufs func() []kernel.Buffer
		want string
	}{
		{"count", func() []kernel.Buffer { return []kernel.Buffer{a(), vecBuffer(y, kernel.W)} },
			"spmv_csr_f64: got 2 buffers, want a CSR matrix, one or more x vectors and y"},
		{"not csr", func() []kernel.Buffer {
			return []kernel.Buffer{vecBuffer(x, kernel.R), vecBuffer(x, kernel.R), vecBuffer(y, kernel.W)}
		},
			"spmv_csr_f64: buffer 0 (A): buffer is a vector, not a CSR matrix"},
		{"f32 matrix", func() []kernel.Buffer {
			return []kernel.Buffer{csrBuffer([]float32{1, 2, 3}, ci, rp, 0), vecBuffer(x, kernel.R), vecBuffer(y, kernel.W)}
		}, "CSR matrix has 4-byte elements, want 8"},
		{"y mode", func() []kernel.Buffer { return []kernel.Buffer{a(), vecBuffer(x, kernel.R), vecBuffer(y, kernel.R)} },
			"buffer 2 (y) is accessed R but the kernel writes it"},
		{"y length", func() []kernel.Buffer {
			return []kernel.Buffer{a(), vecBuffer(x, kernel.R), vecBuffer(y[:1], kernel.W)}
		},
			"y has 1 elements but A has 2 rows"},
		{"x short", func() []kernel.Buffer {
			return []kernel.Buffer{a(), vecBuffer(x[:1], kernel.R), vecBuffer(y, kernel.W)}
		},
			"colind[1] = 1 but x has 1 elements"},
		{"x block type", func() []kernel.Buffer {
			return []kernel.Buffer{a(), vecBuffer(x[:1], kernel.R), vecBuffer([]float32{1}, kernel.R), vecBuffer(y, kernel.W)}
		}, "buffer 2 (x_1) has 4-byte elements, want 8"},
		{"rowptr", func() []kernel.Buffer {
			b := a()
			v, _ := csr.View[float64](&b)
			v.RowPtr[1] = 7
			return []kernel.Buffer{b, vecBuffer(x, kernel.R), vecBuffer(y, kernel.W)}
		}, "rowptr[0] = 0, rowptr[1] = 7: want non-decreasing values up to firstentry+nnz 3"},
		{"rowptr start", func() []kernel.Buffer {
			b := a()
			v, _ := csr.View[float64](&b)
			v.RowPtr[0] = 4
			return []kernel.Buffer{b, vecBuffer(x, kernel.R), vecBuffer(y, kernel.W)}
		}, "rowptr[0] = 4 outside [firstentry 0, firstentry+nnz 3]"},
	} {
		err := f(&kernel.Context{Buffers: c.bufs()})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
