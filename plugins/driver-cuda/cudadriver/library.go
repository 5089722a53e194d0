package cudadriver

import (
	"fmt"
	"math"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cuda/cu"
)

// builtin is a kernel of the library: its blasarg name, its buffers'
// interfaces, how it checks their shapes against each other and the
// decoded argument, and how it queues itself on the worker's kernel
// stream through cuBLAS or cuSOLVER.
type builtin struct {
	name   string
	f64    bool
	ifaces []kernel.InterfaceID
	// check validates the shapes and the argument; nothing is queued for
	// a task it refuses, and the library never reads outside a buffer.
	check func(b []wire.BufferDesc, arg []byte) error
	// run queues the routine; p are the buffers' device pointers. It runs
	// after check, so the argument decodes.
	run func(w *worker, b []wire.BufferDesc, p []cu.DevicePtr, arg []byte, f *flight) error
}

// library lists the kernels the loaded libraries provide, f32 then f64:
// their index in this order is their kernel index. The names and argument
// encodings are the CPU driver's (package blasarg), so one codelet names
// one kernel for every architecture.
func library(withBLAS, withSolver bool) []*builtin {
	var out []*builtin
	for _, f64 := range []bool{false, true} {
		if withBLAS {
			out = append(out,
				&builtin{name: "scal", f64: f64, ifaces: []kernel.InterfaceID{kernel.Vector}, check: checkScal, run: runScal},
				&builtin{name: "axpy", f64: f64, ifaces: []kernel.InterfaceID{kernel.Vector, kernel.Vector}, check: blasarg.CheckAxpy, run: runAxpy},
				&builtin{name: "dot", f64: f64, ifaces: []kernel.InterfaceID{kernel.Vector, kernel.Vector, kernel.Variable}, check: checkDot, run: runDot},
				&builtin{name: "gemm", f64: f64, ifaces: []kernel.InterfaceID{kernel.Matrix, kernel.Matrix, kernel.Matrix}, check: blasarg.CheckGemm, run: runGemm},
				&builtin{name: "syrk", f64: f64, ifaces: []kernel.InterfaceID{kernel.Matrix, kernel.Matrix}, check: blasarg.CheckSyrk, run: runSyrk},
				&builtin{name: "trsm", f64: f64, ifaces: []kernel.InterfaceID{kernel.Matrix, kernel.Matrix}, check: blasarg.CheckTrsm, run: runTrsm},
			)
		}
		if withSolver {
			out = append(out, &builtin{name: "potrf", f64: f64, ifaces: []kernel.InterfaceID{kernel.Matrix}, check: checkPotrf, run: runPotrf})
		}
	}
	return out
}

// fullName is the kernel's name, as in blasarg ("scal_f32").
func (b *builtin) fullName() string {
	if b.f64 {
		return b.name + "_f64"
	}
	return b.name + "_f32"
}

func (b *builtin) elemSize() uint32 {
	if b.f64 {
		return 8
	}
	return 4
}

// validate checks the buffers' number, interfaces, element sizes and
// dimensions (cuBLAS takes int), then the kernel's own shape rules.
func (b *builtin) validate(bufs []wire.BufferDesc, arg []byte) error {
	if len(bufs) != len(b.ifaces) {
		return fmt.Errorf("takes %d buffers, got %d", len(b.ifaces), len(bufs))
	}
	for i, bd := range bufs {
		l := bd.Layout
		if l.Interface != b.ifaces[i] {
			return fmt.Errorf("buffer %d is a %s, want a %s", i, l.Interface, b.ifaces[i])
		}
		if l.ElemSize != b.elemSize() {
			return fmt.Errorf("buffer %d has %d-byte elements, want %d", i, l.ElemSize, b.elemSize())
		}
		if l.NX > math.MaxInt32 || (l.Interface == kernel.Matrix && (l.NY > math.MaxInt32 || l.LD > math.MaxInt32)) {
			return fmt.Errorf("buffer %d is %dx%d with ld %d, beyond cuBLAS's int range", i, l.NX, l.NY, l.LD)
		}
		if l.Interface == kernel.Matrix && l.LD < l.NX {
			return fmt.Errorf("buffer %d: ld %d below nx %d", i, l.LD, l.NX)
		}
	}
	return b.check(bufs, arg)
}

// ld is a matrix's leading dimension as cuBLAS wants it: at least 1, even
// for an empty matrix.
func ld(l kernel.Layout) int { return int(max(l.LD, 1)) }

func checkScal(_ []wire.BufferDesc, arg []byte) error {
	_, err := blasarg.DecodeScalArg(arg)
	return err
}

func runScal(w *worker, b []wire.BufferDesc, p []cu.DevicePtr, arg []byte, _ *flight) error {
	a, _ := blasarg.DecodeScalArg(arg)
	n := int(b[0].Layout.NX)
	if b[0].Layout.ElemSize == 8 {
		return w.blas.Dscal(n, a.Alpha, p[0], 1)
	}
	return w.blas.Sscal(n, float32(a.Alpha), p[0], 1)
}

func runAxpy(w *worker, b []wire.BufferDesc, p []cu.DevicePtr, arg []byte, _ *flight) error {
	a, _ := blasarg.DecodeAxpyArg(arg)
	n := int(b[1].Layout.NX)
	if b[0].Layout.ElemSize == 8 {
		return w.blas.Daxpy(n, a.Alpha, p[0], 1, p[1], 1)
	}
	return w.blas.Saxpy(n, float32(a.Alpha), p[0], 1, p[1], 1)
}

func checkDot(b []wire.BufferDesc, arg []byte) error {
	if len(arg) != 0 {
		return fmt.Errorf("takes no argument, got %d bytes", len(arg))
	}
	if b[0].Layout.NX != b[1].Layout.NX {
		return fmt.Errorf("x has %d elements but y has %d", b[0].Layout.NX, b[1].Layout.NX)
	}
	if b[2].Mode&kernel.W == 0 {
		return fmt.Errorf("buffer 2 (result) is accessed %v but the kernel writes it", b[2].Mode)
	}
	return nil
}

// runDot writes the result straight to the variable's device memory
// (cuBLAS's device pointer mode): nothing waits for the GPU.
func runDot(w *worker, b []wire.BufferDesc, p []cu.DevicePtr, _ []byte, _ *flight) error {
	n := int(b[0].Layout.NX)
	if b[0].Layout.ElemSize == 8 {
		return w.blas.Ddot(n, p[0], 1, p[1], 1, p[2])
	}
	return w.blas.Sdot(n, p[0], 1, p[1], 1, p[2])
}

func trans(t bool) cu.Op {
	if t {
		return cu.Trans
	}
	return cu.NoTrans
}

func fill(lower bool) cu.Fill {
	if lower {
		return cu.Lower
	}
	return cu.Upper
}

func runGemm(w *worker, b []wire.BufferDesc, p []cu.DevicePtr, arg []byte, _ *flight) error {
	a, _ := blasarg.DecodeGemmArg(arg)
	_, k := blasarg.Op(b[0].Layout, a.TransA)
	c := b[2].Layout
	m, n := int(c.NX), int(c.NY)
	if c.ElemSize == 8 {
		return w.blas.Dgemm(trans(a.TransA), trans(a.TransB), m, n, int(k), a.Alpha, p[0], ld(b[0].Layout), p[1], ld(b[1].Layout), a.Beta, p[2], ld(c))
	}
	return w.blas.Sgemm(trans(a.TransA), trans(a.TransB), m, n, int(k), float32(a.Alpha), p[0], ld(b[0].Layout), p[1], ld(b[1].Layout), float32(a.Beta), p[2], ld(c))
}

func runSyrk(w *worker, b []wire.BufferDesc, p []cu.DevicePtr, arg []byte, _ *flight) error {
	a, _ := blasarg.DecodeSyrkArg(arg)
	n, k := blasarg.Op(b[0].Layout, a.Trans)
	if b[0].Layout.ElemSize == 8 {
		return w.blas.Dsyrk(fill(a.Lower), trans(a.Trans), int(n), int(k), a.Alpha, p[0], ld(b[0].Layout), a.Beta, p[1], ld(b[1].Layout))
	}
	return w.blas.Ssyrk(fill(a.Lower), trans(a.Trans), int(n), int(k), float32(a.Alpha), p[0], ld(b[0].Layout), float32(a.Beta), p[1], ld(b[1].Layout))
}

func runTrsm(w *worker, b []wire.BufferDesc, p []cu.DevicePtr, arg []byte, _ *flight) error {
	a, _ := blasarg.DecodeTrsmArg(arg)
	side, diag := cu.Left, cu.NonUnit
	if a.Right {
		side = cu.Right
	}
	if a.UnitDiag {
		diag = cu.Unit
	}
	bl := b[1].Layout
	m, n := int(bl.NX), int(bl.NY)
	if bl.ElemSize == 8 {
		return w.blas.Dtrsm(side, fill(a.Lower), trans(a.Trans), diag, m, n, a.Alpha, p[0], ld(b[0].Layout), p[1], ld(bl))
	}
	return w.blas.Strsm(side, fill(a.Lower), trans(a.Trans), diag, m, n, float32(a.Alpha), p[0], ld(b[0].Layout), p[1], ld(bl))
}

func checkPotrf(b []wire.BufferDesc, arg []byte) error {
	if _, err := blasarg.DecodePotrfArg(arg); err != nil {
		return err
	}
	if l := b[0].Layout; l.NX != l.NY {
		return fmt.Errorf("buffer 0 (A) is %dx%d, want a square matrix", l.NX, l.NY)
	}
	if b[0].Mode&kernel.W == 0 {
		return fmt.Errorf("buffer 0 (A) is accessed %v but the kernel writes it", b[0].Mode)
	}
	return nil
}

// runPotrf queues cuSOLVER's potrf with the worker's workspace, and the
// copy of its devInfo to pinned host memory behind it; the flight checks
// devInfo when its event reports, so nothing waits for the GPU here.
func runPotrf(w *worker, b []wire.BufferDesc, p []cu.DevicePtr, arg []byte, f *flight) error {
	a, _ := blasarg.DecodePotrfArg(arg)
	l := b[0].Layout
	n := int(l.NX)
	if n == 0 {
		return nil
	}
	f64 := l.ElemSize == 8
	var lwork int
	var err error
	if f64 {
		lwork, err = w.solver.DpotrfBufferSize(fill(a.Lower), n, p[0], ld(l))
	} else {
		lwork, err = w.solver.SpotrfBufferSize(fill(a.Lower), n, p[0], ld(l))
	}
	if err != nil {
		return err
	}
	work, err := w.workspace(uint64(max(lwork, 1)) * uint64(l.ElemSize))
	if err != nil {
		return err
	}
	slot, err := w.infoSlot()
	if err != nil {
		return err
	}
	devInfo := w.devInfo.Offset(uint64(slot) * 4)
	if f64 {
		err = w.solver.Dpotrf(fill(a.Lower), n, p[0], ld(l), work, lwork, devInfo)
	} else {
		err = w.solver.Spotrf(fill(a.Lower), n, p[0], ld(l), work, lwork, devInfo)
	}
	if err == nil {
		err = cu.MemcpyDtoHAsyncBytes(w.hostInfo[slot*4:slot*4+4], devInfo, w.streams[kernelS])
	}
	if err != nil {
		w.freeInfo = append(w.freeInfo, slot)
		return err
	}
	f.info = slot
	return nil
}
