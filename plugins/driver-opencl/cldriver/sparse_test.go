package cldriver

import (
	"math"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-opencl/cl"
	"github.com/starpu-go/starpu/plugins/iface-bcsr/bcsr"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// sparseOnDevice puts a plugin datum of layout l and parts on device
// buffer buf as the core does: Alloc, Parts, then one copy of the region.
func sparseOnDevice(r *drivertest.Worker, buf uint64, l kernel.Layout, parts [][]byte) wire.BufferDesc {
	r.T.Helper()
	sizes := make([]uint64, len(parts))
	for i, p := range parts {
		sizes[i] = uint64(len(p))
	}
	offs, n := iface.PartOffsets(sizes)
	s := r.RAM(n)
	b := r.Bytes(s)
	msg := wire.Parts{Node: 1, Buffer: buf}
	for i, p := range parts {
		copy(b[offs[i]:], p)
		msg.Parts = append(msg.Parts, wire.Part{Offset: offs[i], Size: sizes[i]})
	}
	r.OK(r.Alloc(buf, n))
	r.Send(wire.PartsLen(len(msg.Parts)), msg.Encode)
	r.OK(r.Up(s, buf))
	l.Interface = kernel.FirstPluginInterface
	return wire.BufferDesc{Node: 1, Offset: buf, Mode: kernel.R, Layout: l}
}

// baseAlign is the base-address alignment of the device the rig's worker
// runs on, the machine's first CPU-type device.
func baseAlign(t *testing.T) uint64 {
	t.Helper()
	ps, err := cl.Platforms()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		ds, _ := p.Devices(cl.DeviceCPU)
		for _, d := range ds {
			info, err := d.Info()
			if err != nil {
				t.Fatal(err)
			}
			return info.BaseAlign
		}
	}
	t.Fatal("no CPU-type OpenCL device")
	return 0
}

// vecOnDevice copies xs to a new device buffer.
func vecOnDevice(r *drivertest.Worker, buf uint64, xs []float32, m kernel.Mode) wire.BufferDesc {
	r.T.Helper()
	s := r.RAM(uint64(4 * len(xs)))
	copy(r.F32(s), xs)
	r.OK(r.Alloc(buf, s.Size), r.Up(s, buf))
	return vec(buf, uint64(len(xs)), 4, m)
}

// down reads n floats of device buffer buf.
func down(r *drivertest.Worker, buf uint64, n int) []float32 {
	r.T.Helper()
	s := r.RAM(uint64(4 * n))
	r.OK(r.Down(buf, s))
	return append([]float32(nil), r.F32(s)...)
}

// TestSparseProducts: the library's spmv_csr and spmv_bcsr kernels, given
// a matrix's parts as buffers (wire.Parts), compute y = A*x as a plain
// loop does, on a whole matrix and on a row block with a firstentry; a
// row whose colind points past x is NaN; and what the kernels or the
// parts cannot work with fails the task, saying why.
func TestSparseProducts(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			r := startRig(t, md)
			// 6 x 8, integer values: every sum is exact in float32.
			dense := make([]float32, 6*8)
			for i := range dense {
				if (i*7)%5 < 2 {
					dense[i] = float32(i%9 - 4)
				}
			}
			x := make([]float32, 8)
			for i := range x {
				x[i] = float32(3 - i)
			}
			want := make([]float32, 6)
			for i := range 6 {
				for j := range 8 {
					want[i] += dense[i*8+j] * x[j]
				}
			}
			var val []float32
			var col []uint32
			rowptr := []uint32{0}
			for i := range 6 {
				for j := range 8 {
					if v := dense[i*8+j]; v != 0 {
						val, col = append(val, v), append(col, uint32(j))
					}
				}
				rowptr = append(rowptr, uint32(len(val)))
			}
			xd := vecOnDevice(r, 100, x, kernel.R)
			check := func(name string, got, want []float32) {
				t.Helper()
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s: y = %v, want %v", name, got, want)
					}
				}
			}

			m, parts, err := csr.Parts(val, col, rowptr, 0)
			if err != nil {
				t.Fatal(err)
			}
			a := sparseOnDevice(r, 1, m.Layout(), parts)
			yd := vecOnDevice(r, 2, make([]float32, 6), kernel.W)
			r.OK(r.Exec(r.Kernel(csr.SpmvF32), nil, a, xd, yd))
			check("CSR", down(r, 2, 6), want)

			// Rows 2 to 4 as a row block: rowptr keeps global values.
			lo, hi := rowptr[2], rowptr[5]
			mb, pb, err := csr.Parts(val[lo:hi], col[lo:hi], rowptr[2:6], lo)
			if err != nil {
				t.Fatal(err)
			}
			ab := sparseOnDevice(r, 3, mb.Layout(), pb)
			yb := vecOnDevice(r, 4, make([]float32, 3), kernel.W)
			r.OK(r.Exec(r.Kernel(csr.SpmvF32), nil, ab, xd, yb))
			check("CSR row block", down(r, 4, 3), want[2:5])

			bv, bc, bp, err := bcsr.FromDense(dense, 6, 8, 2, 4)
			if err != nil {
				t.Fatal(err)
			}
			mm, bparts, err := bcsr.Parts(bv, bc, bp, 0, 2, 4)
			if err != nil {
				t.Fatal(err)
			}
			bm := sparseOnDevice(r, 5, mm.Layout(), bparts)
			r.OK(r.Exec(r.Kernel(bcsr.SpmvF32), nil, bm, xd, yd))
			check("BCSR", down(r, 2, 6), want)

			// A column past x: that row is NaN, the others are right.
			bad := append([]uint32(nil), col...)
			bad[len(bad)-1] = 8
			_, badParts, _ := csr.Parts(val, bad, rowptr, 0)
			ad := sparseOnDevice(r, 6, m.Layout(), badParts)
			r.OK(r.Exec(r.Kernel(csr.SpmvF32), nil, ad, xd, yd))
			got := down(r, 2, 6)
			if !math.IsNaN(float64(got[5])) {
				t.Fatalf("row 5 reads x[8] of 8: y[5] = %v, want NaN", got[5])
			}
			check("CSR with a bad last row", got[:5], want[:5])

			// Errors. A buffer the core never described, parts a
			// sub-buffer cannot start at, parts outside the buffer.
			r.OK(r.Alloc(7, a.Layout.LD))
			noParts := a
			noParts.Offset = 7
			align := baseAlign(t)
			cases := []struct {
				name string
				id   uint64
				want string
			}{
				{"no parts", r.Exec(r.Kernel(csr.SpmvF32), nil, noParts, xd, yd), "no Parts message"},
				{"x in blocks", r.Exec(r.Kernel(csr.SpmvF32), nil, a, xd, xd, yd), "takes 3 buffers, got 4"},
				{"short y", r.Exec(r.Kernel(csr.SpmvF32), nil, a, xd, yb), "y has 3 elements but A has 6 rows"},
				{"not BCSR", r.Exec(r.Kernel(bcsr.SpmvF32), nil, a, xd, yd), "buffer 0 (A) is not a BCSR matrix"},
				{"vector as A", r.Exec(r.Kernel(csr.SpmvF32), nil, xd, xd, yd), "buffer 0 is a vector, want a plugin interface's datum"},
			}
			outside := wire.Parts{Node: 1, Buffer: 7, Parts: []wire.Part{{Offset: 0, Size: 8}, {Offset: iface.PartAlign, Size: a.Layout.LD}}}
			r.Send(wire.PartsLen(2), outside.Encode)
			cases = append(cases, struct {
				name string
				id   uint64
				want string
			}{"outside", r.Exec(r.Kernel(csr.SpmvF32), nil, noParts, xd, yd), "part 1, bytes [512, +"})
			if align > 1 {
				odd := wire.Parts{Node: 1, Buffer: 7, Parts: []wire.Part{{Offset: 0, Size: 8}, {Offset: align / 2, Size: 8}, {Offset: align, Size: 8}}}
				r.Send(wire.PartsLen(3), odd.Encode)
				cases = append(cases, struct {
					name string
					id   uint64
					want string
				}{"misaligned", r.Exec(r.Kernel(csr.SpmvF32), nil, noParts, xd, yd), "base address alignment, which a sub-buffer needs"})
			}
			// Parts of a buffer that does not exist are dropped.
			ghost := wire.Parts{Node: 1, Buffer: 99, Parts: []wire.Part{{Size: 8}}}
			r.Send(wire.PartsLen(1), ghost.Encode)
			for _, c := range cases {
				if msg := r.Failed(c.id); !strings.Contains(msg, c.want) {
					t.Errorf("%s: error %q, want %q", c.name, msg, c.want)
				}
			}
			// Reused for another datum, the buffer takes its new parts.
			r.Send(wire.PartsLen(len(parts)), func(b []byte) {
				p := wire.Parts{Node: 1, Buffer: 7}
				offs, _ := iface.PartOffsets(m.PartSizes())
				for i, s := range m.PartSizes() {
					p.Parts = append(p.Parts, wire.Part{Offset: offs[i], Size: s})
				}
				p.Encode(b)
			})
			r.OK(r.Copy(1, 1, 1, 7, wire.CopyRange{Len: a.Layout.LD}))
			r.OK(r.Exec(r.Kernel(csr.SpmvF32), nil, noParts, xd, yd))
			check("CSR in a reused buffer", down(r, 2, 6), want)
			r.Free(7)
		})
	}
}
