package kernels

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// TestZero checks zero clears the elements of each interface and leaves the
// gaps of strided matrices and blocks alone.
func TestZero(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	m := newTmat[float64](rng, 3, 4, 5)
	want := toF64(m.d)
	for j := 0; j < 4; j++ {
		for i := 0; i < 3; i++ {
			want[i+j*5] = 0
		}
	}
	run(t, blasarg.Zero, &kernel.Context{Buffers: []kernel.Buffer{m.buf(kernel.W)}})
	check(t, "matrix", m.d, want, 1)

	v := []float32{1, 2, 3}
	run(t, blasarg.Zero, &kernel.Context{Buffers: []kernel.Buffer{vecBuf(v, kernel.W)}})
	check(t, "vector", v, []float64{0, 0, 0}, 1)

	x := 7.5
	run(t, blasarg.Zero, &kernel.Context{Buffers: []kernel.Buffer{varBuf(&x, kernel.RW)}})
	if x != 0 {
		t.Errorf("variable = %v after zero", x)
	}

	// A 2x2x2 block with LD 3 and LDZ 7: the gaps keep their value.
	b := make([]float64, 7+3+2)
	for i := range b {
		b[i] = gap
	}
	bwant := toF64(b)
	for k := 0; k < 2; k++ {
		for j := 0; j < 2; j++ {
			for i := 0; i < 2; i++ {
				b[i+j*3+k*7] = 1
				bwant[i+j*3+k*7] = 0
			}
		}
	}
	blk := kernel.Buffer{Layout: kernel.Layout{Interface: kernel.Block, ElemSize: 8, NX: 2, NY: 2, NZ: 2, LD: 3, LDZ: 7}, Mode: kernel.W, Bytes: bytesOf(b)}
	run(t, blasarg.Zero, &kernel.Context{Buffers: []kernel.Buffer{blk}})
	check(t, "block", b, bwant, 1)
}

func TestAdd(t *testing.T) {
	t.Run("f32", testAdd[float32])
	t.Run("f64", testAdd[float64])
}

func testAdd[T float](t *testing.T) {
	name := "add" + suffix[T]()
	rng := rand.New(rand.NewSource(2))
	// Matrices with different leading dimensions.
	dst := newTmat[T](rng, 3, 2, 4)
	src := newTmat[T](rng, 3, 2, 3)
	want := toF64(dst.d)
	for j := 0; j < 2; j++ {
		for i := 0; i < 3; i++ {
			want[i+j*4] = dst.at(i, j) + src.at(i, j)
		}
	}
	run(t, name, &kernel.Context{Buffers: []kernel.Buffer{dst.buf(kernel.RW), src.buf(kernel.R)}})
	check(t, "matrix", dst.d, want, 1)

	dv, sv := []T{1, 2, 3}, []T{10, 20, 30}
	run(t, name, &kernel.Context{Buffers: []kernel.Buffer{vecBuf(dv, kernel.RW), vecBuf(sv, kernel.R)}})
	check(t, "vector", dv, []float64{11, 22, 33}, 1)

	var dx, sx T = 1.5, 2
	run(t, name, &kernel.Context{Buffers: []kernel.Buffer{varBuf(&dx, kernel.RW), varBuf(&sx, kernel.R)}})
	if dx != 3.5 {
		t.Errorf("variable = %v, want 3.5", dx)
	}
}

func TestReduceErrors(t *testing.T) {
	f64 := func(n int) []float64 { return make([]float64, n) }
	var x float64
	cases := []struct {
		kernel string
		bufs   []kernel.Buffer
		want   string
	}{
		{"zero", nil, "zero: got 0 buffers, want 1"},
		{"zero", []kernel.Buffer{vecBuf(f64(2), kernel.R)}, "zero: buffer 0 is accessed R but the kernel writes it"},
		{"zero", []kernel.Buffer{{Layout: kernel.Layout{Interface: kernel.Void}, Mode: kernel.W}}, "zero: buffer 0 is a void"},
		{"add_f64", []kernel.Buffer{vecBuf(f64(2), kernel.RW)}, "add_f64: got 1 buffers, want 2"},
		{"add_f64", []kernel.Buffer{vecBuf(f64(2), kernel.RW), vecBuf(f64(3), kernel.R)}, "add_f64: dst is 2x1 but src is 3x1"},
		{"add_f64", []kernel.Buffer{vecBuf(f64(2), kernel.R), vecBuf(f64(2), kernel.R)}, "add_f64: buffer 0 (dst) is accessed R but the kernel writes it"},
		{"add_f64", []kernel.Buffer{vecBuf(f64(2), kernel.RW), varBuf(&x, kernel.R)}, "add_f64: buffer 1 (src) is a variable, want a vector"},
		{"add_f32", []kernel.Buffer{vecBuf(f64(2), kernel.RW), vecBuf(f64(2), kernel.R)}, "add_f32: buffer 0 (dst) has 8-byte elements, want 4"},
	}
	m := lib(t)
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			err := m[c.kernel](&kernel.Context{Buffers: c.bufs})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}
