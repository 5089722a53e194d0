package cldriver

import (
	_ "embed"
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-opencl/cl"
	"github.com/starpu-go/starpu/plugins/iface-bcsr/bcsr"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

//go:embed library.cl
var librarySource string

// gemmTile is GEMM_TILE of library.cl: gemm runs in square work-groups of
// this side.
const gemmTile = 16

// precision is one build of library.cl.
type precision struct {
	suffix   string // kernel name suffix, "f32"
	elemSize uint32
	options  string // compiler options
}

var (
	f32 = precision{"f32", 4, "-DREAL=float -DSFX=f32"}
	f64 = precision{"f64", 8, "-DREAL=double -DSFX=f64 -DUSE_FP64"}
)

// builtin is a kernel of the library: its blasarg name, how it checks its
// buffers, how it turns the task's argument blob into scalar arguments, and
// its NDRange when the default rule does not fit.
type builtin struct {
	name string
	prec precision
	// ifaces are the buffers' interfaces, in order; FirstPluginInterface
	// stands for any plugin interface (check tells them apart by tag).
	ifaces []kernel.InterfaceID
	// check validates the buffers' shapes against each other and the
	// decoded argument; a kernel must never index outside a buffer.
	check func(b []wire.BufferDesc, arg []byte) error
	// setArgs sets the scalar arguments from index i on.
	setArgs func(k cl.Kernel, i int, arg []byte, p precision) error
	// nargs is the number of scalar arguments setArgs sets.
	nargs int
	// ndrange is the global and local size; nil means the default rule.
	ndrange func(b []wire.BufferDesc, arg []byte) (global, local []uint64)
}

// library lists the built-in kernels, f32 then (when every device has
// cl_khr_fp64) f64: their index in this order is their kernel index.
func library(withF64 bool) []*builtin {
	precs := []precision{f32}
	if withF64 {
		precs = append(precs, f64)
	}
	var out []*builtin
	for _, p := range precs {
		out = append(out,
			&builtin{name: "scal", prec: p, ifaces: []kernel.InterfaceID{kernel.Vector},
				check:   func(_ []wire.BufferDesc, arg []byte) error { _, err := blasarg.DecodeScalArg(arg); return err },
				setArgs: setScal, nargs: 1},
			&builtin{name: "axpy", prec: p, ifaces: []kernel.InterfaceID{kernel.Vector, kernel.Vector},
				check: blasarg.CheckAxpy, setArgs: setAxpy, nargs: 1},
			&builtin{name: "gemm", prec: p, ifaces: []kernel.InterfaceID{kernel.Matrix, kernel.Matrix, kernel.Matrix},
				check: blasarg.CheckGemm, setArgs: setGemm, nargs: 4, ndrange: gemmRange},
			&builtin{name: "syrk", prec: p, ifaces: []kernel.InterfaceID{kernel.Matrix, kernel.Matrix},
				check: blasarg.CheckSyrk, setArgs: setSyrk, nargs: 4},
			&builtin{name: "trsm", prec: p, ifaces: []kernel.InterfaceID{kernel.Matrix, kernel.Matrix},
				check: blasarg.CheckTrsm, setArgs: setTrsm, nargs: 5, ndrange: trsmRange},
			&builtin{name: "spmv_csr", prec: p, ifaces: []kernel.InterfaceID{kernel.FirstPluginInterface, kernel.Vector, kernel.Vector},
				check: checkSpmvCSR, setArgs: noArgs},
			&builtin{name: "spmv_bcsr", prec: p, ifaces: []kernel.InterfaceID{kernel.FirstPluginInterface, kernel.Vector, kernel.Vector},
				check: checkSpmvBCSR, setArgs: noArgs},
		)
	}
	return out
}

// fullName is the kernel's name, as in blasarg ("scal_f32").
func (b *builtin) fullName() string { return b.name + "_" + b.prec.suffix }

// validate checks the buffers' number, interfaces and element sizes, then
// the kernel's own shape rules.
func (b *builtin) validate(bufs []wire.BufferDesc, arg []byte) error {
	if len(bufs) != len(b.ifaces) {
		return fmt.Errorf("takes %d buffers, got %d", len(b.ifaces), len(bufs))
	}
	for i, bd := range bufs {
		if want := b.ifaces[i]; want == kernel.FirstPluginInterface {
			if bd.Layout.Interface < kernel.FirstPluginInterface {
				return fmt.Errorf("buffer %d is a %s, want a plugin interface's datum", i, bd.Layout.Interface)
			}
		} else if bd.Layout.Interface != want {
			return fmt.Errorf("buffer %d is a %s, want a %s", i, bd.Layout.Interface, want)
		}
		if bd.Layout.ElemSize != b.prec.elemSize {
			return fmt.Errorf("buffer %d has %d-byte elements, want %d", i, bd.Layout.ElemSize, b.prec.elemSize)
		}
		if bd.Layout.Interface == kernel.Matrix && bd.Layout.LD < bd.Layout.NX {
			return fmt.Errorf("buffer %d: ld %d below nx %d", i, bd.Layout.LD, bd.Layout.NX)
		}
	}
	return b.check(bufs, arg)
}

// setReal sets a floating-point argument in the kernel's precision.
func setReal(k cl.Kernel, i int, v float64, p precision) error {
	if p.elemSize == 4 {
		return k.SetArgFloat32(i, float32(v))
	}
	return k.SetArgFloat64(i, v)
}

func setFlags(k cl.Kernel, i int, flags ...bool) error {
	for j, f := range flags {
		v := int32(0)
		if f {
			v = 1
		}
		if err := k.SetArgInt32(i+j, v); err != nil {
			return err
		}
	}
	return nil
}

func setScal(k cl.Kernel, i int, arg []byte, p precision) error {
	a, err := blasarg.DecodeScalArg(arg)
	if err != nil {
		return err
	}
	return setReal(k, i, a.Alpha, p)
}

func setAxpy(k cl.Kernel, i int, arg []byte, p precision) error {
	a, err := blasarg.DecodeAxpyArg(arg)
	if err != nil {
		return err
	}
	return setReal(k, i, a.Alpha, p)
}

func setGemm(k cl.Kernel, i int, arg []byte, p precision) error {
	a, err := blasarg.DecodeGemmArg(arg)
	if err != nil {
		return err
	}
	if err := setFlags(k, i, a.TransA, a.TransB); err != nil {
		return err
	}
	if err := setReal(k, i+2, a.Alpha, p); err != nil {
		return err
	}
	return setReal(k, i+3, a.Beta, p)
}

func roundUp(v, to uint64) uint64 { return (v + to - 1) / to * to }

func gemmRange(b []wire.BufferDesc, _ []byte) (global, local []uint64) {
	c := b[2].Layout
	return []uint64{roundUp(c.NX, gemmTile), roundUp(c.NY, gemmTile)}, []uint64{gemmTile, gemmTile}
}

func setSyrk(k cl.Kernel, i int, arg []byte, p precision) error {
	a, err := blasarg.DecodeSyrkArg(arg)
	if err != nil {
		return err
	}
	if err := setFlags(k, i, a.Lower, a.Trans); err != nil {
		return err
	}
	if err := setReal(k, i+2, a.Alpha, p); err != nil {
		return err
	}
	return setReal(k, i+3, a.Beta, p)
}

func setTrsm(k cl.Kernel, i int, arg []byte, p precision) error {
	a, err := blasarg.DecodeTrsmArg(arg)
	if err != nil {
		return err
	}
	if err := setFlags(k, i, a.Right, a.Lower, a.Trans, a.UnitDiag); err != nil {
		return err
	}
	return setReal(k, i+4, a.Alpha, p)
}

// trsmRange is one work item per column of B (left) or per row (right).
// The argument was validated by check.
func trsmRange(b []wire.BufferDesc, arg []byte) (global, local []uint64) {
	if a, _ := blasarg.DecodeTrsmArg(arg); a.Right {
		return []uint64{b[1].Layout.NX}, nil
	}
	return []uint64{b[1].Layout.NY}, nil
}

// noArgs is setArgs for kernels without scalar arguments.
func noArgs(cl.Kernel, int, []byte, precision) error { return nil }

// checkSpmvCSR checks spmv_csr's buffers, [A, x, y]: A a CSR matrix (by
// its layout tag, csr.LayoutTag), y one element per row. Unlike the CPU
// kernel it takes x whole, not in blocks: an OpenCL kernel has a fixed
// number of arguments.
func checkSpmvCSR(b []wire.BufferDesc, arg []byte) error {
	a := b[0].Layout
	if a.LDZ != csr.LayoutTag {
		return fmt.Errorf("buffer 0 (A) is not a CSR matrix (layout tag %#x)", a.LDZ)
	}
	if y := b[2].Layout; y.NX != a.NY {
		return fmt.Errorf("y has %d elements but A has %d rows", y.NX, a.NY)
	}
	return noArg(arg)
}

// checkSpmvBCSR checks spmv_bcsr's buffers, [A, x, y]: A a BCSR matrix
// (bcsr.LayoutTag, its block size r x c in the tag's high bits), y r
// elements per block row.
func checkSpmvBCSR(b []wire.BufferDesc, arg []byte) error {
	a := b[0].Layout
	if uint32(a.LDZ) != bcsr.LayoutTag {
		return fmt.Errorf("buffer 0 (A) is not a BCSR matrix (layout tag %#x)", uint32(a.LDZ))
	}
	r, c := a.LDZ>>32&0xffff, a.LDZ>>48
	if r == 0 || c == 0 {
		return fmt.Errorf("buffer 0 (A): blocks of %d x %d", r, c)
	}
	if y := b[2].Layout; y.NX != a.NY*r {
		return fmt.Errorf("y has %d elements but A has %d block rows of %d", y.NX, a.NY, r)
	}
	return noArg(arg)
}

func noArg(arg []byte) error {
	if len(arg) != 0 {
		return fmt.Errorf("takes no argument, got %d bytes", len(arg))
	}
	return nil
}
