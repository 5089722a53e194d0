package core_test

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/iface-bcsr/bcsr"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// sparseFormat is how a test registers a dense matrix in one of the
// sparse plugin interfaces, and the product kernel both drivers host
// under one name.
type sparseFormat struct {
	name, filter, spmv string
	// rowsPer is how many rows of the matrix (elements of y) a row of
	// the format holds: 1 for CSR, the block height for BCSR.
	rowsPer int
	// parts registers dense (nrow x ncol, row-major); the values and
	// the row structure are the slices it returns.
	parts func(dense []float32, nrow, ncol int) (meta []byte, parts [][]byte, val []float32, err error)
}

var sparseFormats = []sparseFormat{
	{csr.Name, csr.RowsFilter, csr.SpmvF32, 1, func(dense []float32, nrow, ncol int) ([]byte, [][]byte, []float32, error) {
		var val []float32
		var col []uint32
		rowptr := []uint32{0}
		for i := range nrow {
			for j := range ncol {
				if v := dense[i*ncol+j]; v != 0 {
					val, col = append(val, v), append(col, uint32(j))
				}
			}
			rowptr = append(rowptr, uint32(len(val)))
		}
		m, parts, err := csr.Parts(val, col, rowptr, 0)
		return m.Encode(), parts, val, err
	}},
	{bcsr.Name, bcsr.RowsFilter, bcsr.SpmvF32, 3, func(dense []float32, nrow, ncol int) ([]byte, [][]byte, []float32, error) {
		val, col, rowptr, err := bcsr.FromDense(dense, nrow, ncol, 3, 2)
		if err != nil {
			return nil, nil, nil, err
		}
		m, parts, err := bcsr.Parts(val, col, rowptr, 0, 3, 2)
		return m.Encode(), parts, val, err
	}},
}

// sparseDense is an nrow x ncol matrix with about a fifth of its elements
// set, to values of many magnitudes: products that sum them in another
// order or with fused multiply-adds round differently.
func sparseDense(rng *rand.Rand, nrow, ncol int) []float32 {
	d := make([]float32, nrow*ncol)
	for i := range d {
		if rng.Intn(5) == 0 {
			d[i] = (rng.Float32() - 0.5) * float32(int(1)<<rng.Intn(12))
		}
	}
	return d
}

// TestSparseOnOpenCL: CSR and BCSR matrices, whole or as row blocks, are
// used by tasks on the OpenCL worker: their parts are allocated and copied
// there by the interface's copy plan, the library's product kernel gets
// them as buffers, and y = A*x is bit for bit what the CPU kernel gives.
// A change the application makes to the matrix in RAM reaches the device
// (its copy there is invalidated), and a kernel that writes the matrix on
// the device has its result written back, through eviction when the
// device is full and at Unregister.
func TestSparseOnOpenCL(t *testing.T) {
	dir := buildPlugins(t, "iface-csr", "iface-bcsr", "driver-opencl")
	t.Setenv("STARPU_OPENCL_ON_CPUS", "1")
	t.Setenv("STARPU_LIMIT_OPENCL_MEM", "4")
	cfg := testConfig(dir)
	cfg.NCPU = 1
	rt := start(t, core.Options{Config: cfg})
	if len(rt.Workers()) != 2 || rt.Workers()[1].Arch != driver.OpenCL {
		t.Fatalf("workers %+v, want one CPU and one OpenCL worker (is pocl installed?)", rt.Workers())
	}
	const cpu, ocl = 0, 1
	rng := rand.New(rand.NewSource(3))
	for _, f := range sparseFormats {
		t.Run(f.name, func(t *testing.T) {
			const nrow, ncol = 99, 64
			meta, parts, val, err := f.parts(sparseDense(rng, nrow, ncol), nrow, ncol)
			if err != nil {
				t.Fatal(err)
			}
			a, err := rt.RegisterInterface(f.name, meta, parts)
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float32, ncol)
			for i := range x {
				x[i] = rng.Float32()*4 - 2
			}
			xh, _ := core.RegisterVector(rt, x)
			spmv := &core.Codelet{Name: "spmv-" + f.name, Modes: []core.Mode{core.R, core.R, core.W},
				Kernels: map[driver.Arch]string{driver.CPU: f.spmv, driver.OpenCL: f.spmv}}
			// product runs y = A*x on worker w, A whole or in nblocks row
			// blocks (y in matching vector blocks), and returns y.
			product := func(w, nblocks int) []float32 {
				t.Helper()
				y := make([]float32, nrow)
				yh, _ := core.RegisterVector(rt, y)
				as, ys := []*core.Handle{a}, []*core.Handle{yh}
				if nblocks > 1 {
					if as, err = a.Partition(core.PluginFilter(f.filter, nblocks)); err != nil {
						t.Fatal(err)
					}
					// Row blocks of the format cut y at the same places.
					var lens []int
					for i := range nblocks {
						lo, hi := csr.RowBlock(nrow/f.rowsPer, nblocks, i)
						lens = append(lens, (hi-lo)*f.rowsPer)
					}
					if ys, err = yh.Partition(core.VectorList(lens...)); err != nil {
						t.Fatal(err)
					}
				}
				for i := range as {
					submit(t, rt, &core.Task{Codelet: spmv, Handles: []*core.Handle{as[i], xh, ys[i]}, ExecuteOnWorker: true, Worker: w})
				}
				if nblocks > 1 {
					if err := yh.Unpartition(); err != nil {
						t.Fatal(err)
					}
					if err := a.Unpartition(); err != nil {
						t.Fatal(err)
					}
				}
				if err := yh.Unregister(); err != nil {
					t.Fatal(err)
				}
				return y
			}
			same := func(what string, got, want []float32) {
				t.Helper()
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s: y[%d] = %v, want the CPU kernel's %v", what, i, got[i], want[i])
					}
				}
			}
			want := product(cpu, 1)
			same("whole matrix on OpenCL", product(ocl, 1), want)
			same("3 row blocks on OpenCL", product(ocl, 3), want)

			// The application changes A in RAM: the device's copy is
			// stale and the next product there must fetch it again.
			if err := a.Acquire(core.RW); err != nil {
				t.Fatal(err)
			}
			for i := range val {
				val[i] *= -2
			}
			if err := a.Release(); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				want[i] *= -2
			}
			same("after the application's change", product(ocl, 1), want)
			same("CPU kernel after the change", product(cpu, 1), want)
			if err := a.Unregister(); err != nil {
				t.Fatal(err)
			}
			if err := xh.Unregister(); err != nil {
				t.Fatal(err)
			}
		})
	}

	// A kernel that writes CSR matrices on the device, on more of them
	// than the device holds (4 MiB): the dirty ones evicted are written
	// back by their copy plan, the others at Unregister.
	t.Run("write-back", func(t *testing.T) {
		const src = `kernel void csr_scale(global float *val, global uint *col, global uint *rowptr,
		ulong nnz, ulong nrow, ulong first, ulong ld, ulong tag, float alpha) {
	for (ulong k = 0; k < nnz; k++) val[k] *= alpha;
}`
		scale := &core.Codelet{Name: "csr_scale", Modes: []core.Mode{core.RW},
			Kernels: map[driver.Arch]string{driver.OpenCL: "csr_scale"}, Sources: map[driver.Arch]string{driver.OpenCL: src}}
		const n, nnz = 6, 120000 // 6 matrices of about 1 MiB
		var hs []*core.Handle
		var vals [][]float32
		for m := range n {
			val := make([]float32, nnz)
			col := make([]uint32, nnz)
			rowptr := []uint32{0}
			for k := range val {
				val[k], col[k] = float32(k%97+m), uint32(k%50)
				if k%100 == 99 {
					rowptr = append(rowptr, uint32(k+1))
				}
			}
			meta, parts, err := csr.Parts(val, col, rowptr, 0)
			if err != nil {
				t.Fatal(err)
			}
			h, err := rt.RegisterInterface(csr.Name, meta.Encode(), parts)
			if err != nil {
				t.Fatal(err)
			}
			hs, vals = append(hs, h), append(vals, val)
		}
		alpha := binary.LittleEndian.AppendUint32(nil, math.Float32bits(3))
		for _, h := range hs {
			submit(t, rt, &core.Task{Codelet: scale, Handles: []*core.Handle{h}, Arg: alpha})
		}
		if err := rt.WaitForAll(); err != nil {
			t.Fatal(err)
		}
		for m, h := range hs {
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
			for k, v := range vals[m] {
				if want := 3 * float32(k%97+m); v != want {
					t.Fatalf("matrix %d: val[%d] = %v, want %v", m, k, v, want)
				}
			}
		}
	})
}

// noPlanDir is a plugin directory with the OpenCL and CPU drivers, the
// scheduler, and this test binary as the interface plugin iface-garbage
// (plugin_faults_test.go), whose "no-plan" data have no copy plan and
// "half-plan" data a plan that moves 8 of their 12 bytes.
func noPlanDir(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	links := map[string]string{"iface-garbage": exe}
	for _, p := range []string{"driver-cpu", "driver-opencl", "sched-ws"} {
		links[p] = filepath.Join(openclDir, p)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDataWithoutCopyPlanStaysInRAM: a datum whose interface gives no copy
// plan, or one that moves less than the datum's size, cannot have a
// device copy: a task that may run on the OpenCL worker is refused at
// submit, naming the handle and why, and so are the application's
// requests for it on the device; a task kept to CPU workers runs.
func TestDataWithoutCopyPlanStaysInRAM(t *testing.T) {
	t.Setenv(garbageIfaceEnv, "1")
	t.Setenv("STARPU_OPENCL_ON_CPUS", "1")
	cfg := testConfig(noPlanDir(t))
	cfg.NCPU = 1
	rt := start(t, core.Options{Config: cfg})
	if len(rt.Workers()) != 2 || rt.Workers()[1].Arch != driver.OpenCL {
		t.Fatalf("workers %+v, want one CPU and one OpenCL worker (is pocl installed?)", rt.Workers())
	}
	const src = `kernel void touch(global uchar *a, global uchar *b, ulong nx, ulong ny, ulong nz, ulong ld, ulong ldz) {}`
	both := &core.Codelet{Name: "touch", Modes: []core.Mode{core.RW},
		Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty, driver.OpenCL: "touch"}, Sources: map[driver.Arch]string{driver.OpenCL: src}}
	cpuOnly := &core.Codelet{Name: "touch-cpu", Modes: []core.Mode{core.RW}, Kernels: map[driver.Arch]string{driver.CPU: blasarg.Empty}}
	for _, c := range []struct{ meta, why string }{
		{"no-plan", `interface "garbage" gives no copy plan for its 12 bytes of data`},
		{"half-plan", `the copy plan of interface "garbage" moves 8 of its 12 bytes of data`},
	} {
		t.Run(c.meta, func(t *testing.T) {
			h, err := rt.RegisterInterface("garbage", []byte(c.meta), [][]byte{make([]byte, 8), make([]byte, 4)})
			if err != nil {
				t.Fatal(err)
			}
			node := rt.MemoryNodes()[1].Kind
			for _, task := range []*core.Task{
				{Codelet: both, Handles: []*core.Handle{h}},
				{Codelet: both, Handles: []*core.Handle{h}, ExecuteOnWorker: true, Worker: 1},
			} {
				err := rt.Submit(task)
				if !errors.Is(err, core.ErrNoWorker) || !strings.Contains(err.Error(), h.String()) || !strings.Contains(err.Error(), c.why) ||
					!strings.Contains(err.Error(), "worker 1, which computes on "+node) {
					t.Errorf("task that may run on the OpenCL worker: %v;\nwant ErrNoWorker naming %s, worker 1 on %s and %q", err, h, node, c.why)
				}
			}
			// Kept to the CPU, the same codelet runs; so does a CPU one.
			submit(t, rt, &core.Task{Codelet: both, Handles: []*core.Handle{h}, Where: core.WhereCPU},
				&core.Task{Codelet: cpuOnly, Handles: []*core.Handle{h}})
			if err := rt.WaitForAll(); err != nil {
				t.Fatal(err)
			}
			for what, err := range map[string]error{
				"FetchOnNode":   h.FetchOnNode(1),
				"AcquireOnNode": h.AcquireOnNode(1, core.R),
				"SetWTMask":     h.SetWTMask(1 << 1),
			} {
				if !errors.Is(err, core.ErrInvalidData) || !strings.Contains(err.Error(), c.why) {
					t.Errorf("%s on the device: %v, want ErrInvalidData saying %q", what, err, c.why)
				}
			}
			if err := h.SetWTMask(^uint64(0)); err != nil || h.WTMask() != 1 {
				t.Errorf("SetWTMask(all nodes) = %v, mask %#x; want RAM only", err, h.WTMask())
			}
			if err := h.Unregister(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
