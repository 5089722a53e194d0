package core_test

import (
	"math/rand"
	"testing"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// rowSumCSR is an OpenCL kernel over a float CSR matrix or row block, by
// the calling convention (its parts nzval, colind and rowptr, then nnz,
// nrow, firstentry, the region's length and the tag): y[i] is the sum of
// row i.
const rowSumCSR = `
kernel void rowsum(global const float *val, global const uint *colind, global const uint *rowptr,
		ulong nnz, ulong nrow, ulong first, ulong ld, ulong tag, global float *y, uint n) {
	size_t i = get_global_id(0);
	if (i >= n || i >= nrow) return;
	float s = 0;
	for (uint k = rowptr[i] - first; k < rowptr[i + 1] - first; k++) s += val[k];
	y[i] = s;
}`

// The allocation cache of a device node reuses a freed region for any
// datum of the same length: device regions are bytes whose layout every
// Exec and Copy carries, so a region that held one shape serves another.
// Each workload runs steps that allocate the same number of regions; only
// the first step's are new. Partitioned vectors repeat their shapes; CSR
// matrices whose sparsity changes at each step have row blocks of other
// shapes (nnz) but the same region length, which a cache keyed by the
// parts' sizes (StarPU's alloc footprint) would not reuse. The results
// are checked, so a reused region that kept a stale layout would show.
func TestAllocationCacheReuse(t *testing.T) {
	dir := buildPlugins(t, "iface-csr", "driver-opencl")
	t.Setenv("STARPU_OPENCL_ON_CPUS", "1")
	t.Setenv("STARPU_LIMIT_OPENCL_MEM", "16")
	const steps, nparts = 10, 4
	for _, c := range []struct {
		name string
		// step runs one step's tasks on the device, on nparts new
		// regions, and checks their results.
		step func(t *testing.T, rt *core.Runtime, i int)
	}{
		{"partitioned vector", func() func(*testing.T, *core.Runtime, int) {
			scal := &core.Codelet{Name: "scal_ocl", Kernels: map[driver.Arch]string{driver.OpenCL: blasarg.ScalF32}, Modes: []core.Mode{core.RW}}
			x := make([]float32, 1001) // blocks of 251 and 250 elements
			var h *core.Handle
			return func(t *testing.T, rt *core.Runtime, i int) {
				if h == nil {
					var err error
					if h, err = core.RegisterVector(rt, x); err != nil {
						t.Fatal(err)
					}
				}
				blocks, err := h.Partition(core.VectorBlocks(nparts, 0))
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range blocks {
					if err := rt.Submit(&core.Task{Codelet: scal, Handles: []*core.Handle{b}, Arg: blasarg.ScalArg{Alpha: 1}.Encode()}); err != nil {
						t.Fatal(err)
					}
				}
				if err := h.Unpartition(); err != nil {
					t.Fatal(err)
				}
			}
		}()},
		{"CSR of changing sparsity", func() func(*testing.T, *core.Runtime, int) {
			rowsum := &core.Codelet{Name: "rowsum", Modes: []core.Mode{core.R, core.W},
				Kernels: map[driver.Arch]string{driver.OpenCL: "rowsum"}, Sources: map[driver.Arch]string{driver.OpenCL: rowSumCSR}}
			const rows = 8 // per block
			ys := make([][]float32, nparts)
			var yh []*core.Handle
			rng := rand.New(rand.NewSource(1))
			regions := map[uint64]bool{}
			shapes := map[uint64]bool{}
			return func(t *testing.T, rt *core.Runtime, step int) {
				if yh == nil {
					for i := range ys {
						ys[i] = make([]float32, rows)
						h, err := core.RegisterVector(rt, ys[i])
						if err != nil {
							t.Fatal(err)
						}
						yh = append(yh, h)
					}
				}
				// Each block gets 17 to 32 non-zeros: its region has the
				// same length, its parts other sizes.
				var val []float32
				var col []uint32
				rowptr := []uint32{0}
				want := make([]float32, nparts*rows)
				for b := 0; b < nparts; b++ {
					nnz := 17 + rng.Intn(16)
					sizes := []uint64{uint64(4 * nnz), uint64(4 * nnz), 4 * (rows + 1)}
					_, n := iface.PartOffsets(sizes)
					regions[n] = true
					shapes[uint64(nnz)] = true
					for r := 0; r < rows; r++ {
						k := nnz / rows
						if r < nnz%rows {
							k++
						}
						for e := 0; e < k; e++ {
							v := float32(rng.Intn(9) + 1)
							val, col = append(val, v), append(col, uint32(e))
							want[b*rows+r] += v
						}
						rowptr = append(rowptr, uint32(len(val)))
					}
				}
				m, parts, err := csr.Parts(val, col, rowptr, 0)
				if err != nil {
					t.Fatal(err)
				}
				a, err := rt.RegisterInterface(csr.Name, m.Encode(), parts)
				if err != nil {
					t.Fatal(err)
				}
				blocks, err := a.Partition(core.PluginFilter(csr.RowsFilter, nparts))
				if err != nil {
					t.Fatal(err)
				}
				for i, b := range blocks {
					if err := rt.Submit(&core.Task{Codelet: rowsum, Handles: []*core.Handle{b, yh[i]}}); err != nil {
						t.Fatal(err)
					}
				}
				for i, h := range yh {
					if err := h.Acquire(core.R); err != nil {
						t.Fatal(err)
					}
					for r, v := range ys[i] {
						if v != want[i*rows+r] {
							t.Errorf("step %d, block %d, row %d: %v, want %v", step, i, r, v, want[i*rows+r])
						}
					}
					h.Release()
				}
				if err := a.Unpartition(); err != nil {
					t.Fatal(err)
				}
				if err := a.Unregister(); err != nil {
					t.Fatal(err)
				}
				if step == steps-1 && (len(regions) != 1 || len(shapes) < 2*nparts) {
					t.Fatalf("the blocks had %d region lengths and %d shapes: want one length, many shapes", len(regions), len(shapes))
				}
			}
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(dir)
			cfg.NCPU = 1
			cfg.ModelDir = t.TempDir()
			rt := start(t, core.Options{Config: cfg})
			if len(rt.Workers()) != 2 || rt.Workers()[1].Arch != driver.OpenCL {
				t.Fatalf("workers %+v, want one CPU and one OpenCL worker (is pocl installed?)", rt.Workers())
			}
			before := rt.DeviceAllocations()
			var first uint64
			for i := 0; i < steps; i++ {
				c.step(t, rt, i)
				if err := rt.WaitForAll(); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = rt.DeviceAllocations() - before
				}
			}
			news := rt.DeviceAllocations() - before
			t.Logf("the first step allocated %d regions; the next %d steps needed %d new ones and allocated %d",
				first, steps-1, (steps-1)*nparts, news-first)
			if news != first || first < nparts {
				t.Errorf("%d allocations, %d in the first step: want the later steps to reuse the first's %d regions", news, first, nparts)
			}
		})
	}
}
