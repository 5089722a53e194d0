package cldriver

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// TestFingerprint checks units, nodes and Note under the environment and
// config settings, in process and through a plugin process.
func TestFingerprint(t *testing.T) {
	m := needDevice(t)
	if m.cpus == 0 {
		t.Skip("the cases below are about a CPU-type OpenCL device; this machine has none")
	}
	emptyICD := t.TempDir()
	// With CPU devices off, a machine with only CPU-type devices says so.
	cpuNote := ""
	if m.others == 0 {
		cpuNote = fmt.Sprintf("found %d CPU-type OpenCL device", m.cpus)
	}
	cases := []struct {
		name  string
		env   []string
		cfg   base.Config
		units int
		bytes uint64
		note  string // substring; "" means Note must be empty
	}{
		{name: "cpu devices off", env: []string{EnvOnCPUs + "=0"}, units: m.others, note: cpuNote},
		{name: "on cpus", env: []string{EnvOnCPUs + "=1"}, units: m.cpus + m.others, bytes: m.cpuMem},
		{name: "config on_cpus", cfg: base.Config{"on_cpus": true}, env: []string{EnvOnCPUs + "="}, units: m.cpus + m.others, bytes: m.cpuMem},
		{name: "env overrides config", cfg: base.Config{"on_cpus": true}, env: []string{EnvOnCPUs + "=0"}, units: m.others, note: cpuNote},
		{name: "limit", env: []string{EnvOnCPUs + "=1", EnvLimitMem + "=64"}, units: m.cpus + m.others, bytes: 64 << 20},
		{name: "config limit", cfg: base.Config{"limit_mem_mib": int64(3)}, env: []string{EnvOnCPUs + "=1"}, units: m.cpus + m.others, bytes: 3 << 20},
		{name: "NOPENCL=0", env: []string{EnvOnCPUs + "=1", EnvNDevices + "=0"}, note: "OpenCL disabled by STARPU_NOPENCL=0"},
		{name: "config ndevices 0", cfg: base.Config{"ndevices": int64(0)}, env: []string{EnvOnCPUs + "=1"}, note: "OpenCL disabled by the config's ndevices = 0"},
		{name: "NOPENCL=1", env: []string{EnvOnCPUs + "=1", EnvNDevices + "=1"}, units: 1},
	}
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					d := md.start(t, newArena(t), c.env)
					if c.cfg != nil {
						if err := d.SetConfig(ctxT(t), c.cfg); err != nil {
							t.Fatal(err)
						}
					}
					fp, err := d.Fingerprint(ctxT(t))
					if err != nil {
						t.Fatal(err)
					}
					if fp.Arch != driver.OpenCL || len(fp.Units) != c.units || len(fp.Nodes) != c.units {
						t.Fatalf("arch %s, %d units, %d nodes; want %d of each (note %q)", fp.Arch, len(fp.Units), len(fp.Nodes), c.units, fp.Note)
					}
					for i, u := range fp.Units {
						if u.Node != i+1 || !strings.HasPrefix(u.Name, fmt.Sprintf("OpenCL %d: ", i)) {
							t.Errorf("unit %d: %+v", i, u)
						}
					}
					if c.bytes != 0 && m.others == 0 && fp.Nodes[0].Bytes != c.bytes {
						t.Errorf("node bytes %d, want %d", fp.Nodes[0].Bytes, c.bytes)
					}
					if c.note == "" && fp.Note != "" || !strings.Contains(fp.Note, c.note) {
						t.Errorf("note %q, want %q", fp.Note, c.note)
					}
					if c.units == 0 && fp.Note == "" {
						t.Error("no unit and no note")
					}
					for _, k := range []string{blasarg.ScalF32, blasarg.AxpyF32, blasarg.GemmF32, blasarg.SyrkF32, blasarg.TrsmF32} {
						if !slices.Contains(fp.Kernels, k) {
							t.Errorf("kernel %s missing from %v", k, fp.Kernels)
						}
					}
				})
			}
		})
	}
	t.Run("CPU note names the device", func(t *testing.T) {
		if m.cpus != 1 || m.others != 0 {
			t.Skip("needs exactly one OpenCL device, of CPU type")
		}
		fp, err := inProcess(t, newArena(t), []string{EnvOnCPUs + "="}).Fingerprint(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("found 1 CPU-type OpenCL device (%s); set STARPU_OPENCL_ON_CPUS=1 to use it", m.firstCPU)
		if fp.Note != want {
			t.Fatalf("note %q, want %q", fp.Note, want)
		}
	})
	t.Run("no ICD", func(t *testing.T) {
		// ocl-icd reads its vendor list from OCL_ICD_VENDORS: an empty
		// directory is a machine with no OpenCL installed.
		fp, err := launch(t, newArena(t), []string{"OCL_ICD_VENDORS=" + emptyICD, EnvOnCPUs + "=1"}).Fingerprint(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(fp.Units) != 0 || !strings.Contains(fp.Note, "no OpenCL platform") {
			t.Fatalf("units %v, note %q", fp.Units, fp.Note)
		}
	})
	t.Run("bad settings", func(t *testing.T) {
		for _, c := range []struct {
			env, want string
		}{
			{EnvNDevices + "=two", `STARPU_NOPENCL="two": want a number of devices`},
			{EnvOnCPUs + "=yes please", `STARPU_OPENCL_ON_CPUS="yes please": want 0 or 1`},
			{EnvPipeline + "=-1", `STARPU_OPENCL_PIPELINE="-1": want a number of kernels from 0 to 64`},
			{EnvPipeline + "=deep", `STARPU_OPENCL_PIPELINE="deep": want a number of kernels`},
		} {
			_, err := inProcess(t, newArena(t), []string{c.env}).Fingerprint(ctxT(t))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: error %v, want %q", c.env, err, c.want)
			}
			os.Unsetenv(strings.SplitN(c.env, "=", 2)[0])
		}
		d := inProcess(t, newArena(t), nil)
		for cfg, want := range map[string]base.Config{
			`unknown attribute "units"`:              {"units": int64(2)},
			"limit_mem_mib = -1: must be at least 0": {"limit_mem_mib": int64(-1)},
			`attribute "on_cpus": want bool`:         {"on_cpus": "yes"},
			"pipeline = 65: want 0 to 64":            {"pipeline": int64(65)},
		} {
			if err := d.SetConfig(ctxT(t), want); err == nil || !strings.Contains(err.Error(), cfg) {
				t.Errorf("config %v: error %v, want %q", want, err, cfg)
			}
		}
	})
}

// TestLimitMemEnv checks STARPU_LIMIT_OPENCL_MEM: a malformed or negative
// value is an error naming the variable once a device would be capped by
// it, and only a remark in the Note while the driver uses no device (so
// that it cannot abort the runtime's Init on a machine without OpenCL); a
// limit beyond the device's memory leaves it uncapped.
func TestLimitMemEnv(t *testing.T) {
	m := probe(t)
	emptyICD := t.TempDir()
	cases := []struct {
		name   string
		device bool // needs an OpenCL device
		plugin bool // through a plugin process
		env    []string
		units  int    // -1: the device count
		bytes  uint64 // node 0's size; 0: the device's memory
		want   string // error substring; "" means none
		note   string // Note substring
	}{
		{name: "negative, OpenCL disabled", env: []string{EnvNDevices + "=0", EnvLimitMem + "=-1"},
			note: `OpenCL disabled by STARPU_NOPENCL=0; ignored, as no device uses it: environment variable STARPU_LIMIT_OPENCL_MEM="-1": must not be negative`},
		{name: "malformed, OpenCL disabled", env: []string{EnvNDevices + "=0", EnvLimitMem + "=lots"},
			note: `STARPU_LIMIT_OPENCL_MEM="lots": want a whole number of MiB`},
		{name: "negative, no OpenCL platform", plugin: true, env: []string{"OCL_ICD_VENDORS=" + emptyICD, EnvOnCPUs + "=1", EnvLimitMem + "=-1"},
			note: "?; ignored, as no device uses it: environment variable STARPU_LIMIT_OPENCL_MEM=\"-1\""},
		{name: "negative, device used", device: true, env: []string{EnvOnCPUs + "=1", EnvLimitMem + "=-1"},
			want: `driver-opencl: environment variable STARPU_LIMIT_OPENCL_MEM="-1": must not be negative (unset it for no limit)`},
		{name: "negative, device used, plugin", device: true, plugin: true, env: []string{EnvOnCPUs + "=1", EnvLimitMem + "=-1"},
			want: `STARPU_LIMIT_OPENCL_MEM="-1": must not be negative`},
		{name: "malformed, device used", device: true, env: []string{EnvOnCPUs + "=1", EnvLimitMem + "=1.5"},
			want: `STARPU_LIMIT_OPENCL_MEM="1.5": want a whole number of MiB, 0 or more`},
		{name: "spaces", device: true, env: []string{EnvOnCPUs + "=1", EnvLimitMem + "= 64 "}, units: -1, bytes: 64 << 20},
		{name: "2^44 MiB does not wrap to 0", device: true, env: []string{EnvOnCPUs + "=1", EnvLimitMem + "=17592186044416"}, units: -1},
		{name: "beyond int64", device: true, env: []string{EnvOnCPUs + "=1", EnvLimitMem + "=99999999999999999999"}, units: -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.device && m.cpus+m.others == 0 {
				t.Skip("no OpenCL device on this machine (install pocl-opencl-icd for a CPU one)")
			}
			start := inProcess
			if c.plugin {
				start = launch
			}
			fp, err := start(t, newArena(t), c.env).Fingerprint(ctxT(t))
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			units := c.units
			if units < 0 {
				units = m.cpus + m.others
			}
			if len(fp.Nodes) != units || !strings.Contains(fp.Note, c.note) {
				t.Fatalf("%d nodes, note %q; want %d nodes, note %q", len(fp.Nodes), fp.Note, units, c.note)
			}
			if units > 0 && m.others == 0 {
				want := c.bytes
				if want == 0 {
					want = m.cpuMem
				}
				if fp.Nodes[0].Bytes != want {
					t.Errorf("node bytes %d, want %d", fp.Nodes[0].Bytes, want)
				}
			}
		})
	}
}

// TestScal is the round trip: Alloc, Copy up, Exec scal, Copy down.
func TestScal(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			r := startRig(t, md)
			const n = 100003
			for _, p := range []struct {
				kernel string
				elem   uint32
			}{{blasarg.ScalF32, 4}, {blasarg.ScalF64, 8}} {
				if !r.Has(p.kernel) {
					t.Logf("%s skipped: a device lacks cl_khr_fp64", p.kernel)
					continue
				}
				s := r.RAM(n * uint64(p.elem))
				if p.elem == 4 {
					for i, x := 0, r.F32(s); i < n; i++ {
						x[i] = float32(i)
					}
				} else {
					for i, x := 0, r.F64(s); i < n; i++ {
						x[i] = float64(i)
					}
				}
				buf := uint64(p.elem)
				r.OK(r.Alloc(buf, s.Size))
				up := r.Up(s, buf)
				ex := r.Exec(r.Kernel(p.kernel), blasarg.ScalArg{Alpha: -2.5}.Encode(), vec(buf, n, p.elem, kernel.RW))
				r.OK(up, ex)
				// Wipe RAM: the results must come from the device.
				clear(r.Arena.Bytes(s))
				down := r.Down(buf, s)
				r.OK(down)
				if !r.Before(up, ex) || !r.Before(ex, down) {
					t.Fatalf("completions out of order: %v", r.Received())
				}
				if c := r.Got(ex); c.EndNs < c.StartNs || c.StartNs == 0 {
					t.Fatalf("kernel times %d..%d", c.StartNs, c.EndNs)
				}
				for i := 0; i < n; i++ {
					var got float64
					if p.elem == 4 {
						got = float64(r.F32(s)[i])
					} else {
						got = r.F64(s)[i]
					}
					if got != -2.5*float64(i) {
						t.Fatalf("%s: x[%d] = %v, want %v", p.kernel, i, got, -2.5*float64(i))
					}
				}
				r.Free(buf)
			}
		})
	}
}

// TestStridedMatrix copies a matrix with padded columns up as one range per
// column into a packed device buffer, scales it as a vector, and copies it
// down into a matrix of another leading dimension: the pads must be left
// alone.
func TestStridedMatrix(t *testing.T) {
	r := startRig(t, modes[0])
	const nx, ny, ldSrc, ldDst = 37, 23, 41, 50
	src, dst := r.RAM(ldSrc*ny*4), r.RAM(ldDst*ny*4)
	xs, xd := r.F32(src), r.F32(dst)
	for i := range xs {
		xs[i] = float32(i)
	}
	for i := range xd {
		xd[i] = -1
	}
	var upR, downR []wire.CopyRange
	for j := uint64(0); j < ny; j++ {
		upR = append(upR, wire.CopyRange{SrcOffset: j * ldSrc * 4, DstOffset: j * nx * 4, Len: nx * 4})
		downR = append(downR, wire.CopyRange{SrcOffset: j * nx * 4, DstOffset: j * ldDst * 4, Len: nx * 4})
	}
	r.OK(r.Alloc(1, nx*ny*4))
	up := r.Copy(0, 1, src.Offset, 1, upR...)
	ex := r.Exec(r.Kernel(blasarg.ScalF32), blasarg.ScalArg{Alpha: 2}.Encode(), vec(1, nx*ny, 4, kernel.RW))
	down := r.Copy(1, 0, 1, dst.Offset, downR...)
	r.OK(up, ex, down)
	for j := 0; j < ny; j++ {
		for i := 0; i < ldDst; i++ {
			want := float32(-1)
			if i < nx {
				want = 2 * float32(i+j*ldSrc)
			}
			if got := xd[i+j*ldDst]; got != want {
				t.Fatalf("dst(%d, %d) = %v, want %v", i, j, got, want)
			}
		}
	}
}

// TestManyInFlight posts many dependent chains on distinct buffers at once,
// plus a write-after-read on a reused buffer, and checks the numbers and
// that each chain's completions arrive in its order.
func TestManyInFlight(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			r := startRig(t, md)
			const chains, n = 48, 4096
			scal, axpy := r.Kernel(blasarg.ScalF32), r.Kernel(blasarg.AxpyF32)
			type chain struct {
				in, out base.Span
				ids     []uint64
			}
			cs := make([]chain, chains)
			var allocs []uint64
			for c := range cs {
				cs[c].in, cs[c].out = r.RAM(n*4), r.RAM(n*4)
				for i, x := 0, r.F32(cs[c].in); i < n; i++ {
					x[i] = float32(c + i)
				}
				allocs = append(allocs, r.Alloc(uint64(c), n*4))
			}
			// Buffer chains holds x = 1 for the axpy of every chain.
			ones := r.RAM(n * 4)
			for i, x := 0, r.F32(ones); i < n; i++ {
				x[i] = 1
			}
			allocs = append(allocs, r.Alloc(chains, n*4))
			r.OK(allocs...)
			onesUp := r.Up(ones, chains)
			for c := range cs {
				b := uint64(c)
				cs[c].ids = []uint64{
					r.Up(cs[c].in, b),
					r.Exec(scal, blasarg.ScalArg{Alpha: 2}.Encode(), vec(b, n, 4, kernel.RW)),
					r.Exec(axpy, blasarg.AxpyArg{Alpha: float64(c)}.Encode(), vec(chains, n, 4, kernel.R), vec(b, n, 4, kernel.RW)),
					r.Exec(scal, blasarg.ScalArg{Alpha: 3}.Encode(), vec(b, n, 4, kernel.RW)),
					r.Down(b, cs[c].out),
				}
			}
			// Write after read: the copy down of buffer 0 must read it
			// before this copy up overwrites it.
			cs0 := cs[0]
			over := r.Up(ones, 0)
			again := r.Exec(scal, blasarg.ScalArg{Alpha: 5}.Encode(), vec(0, n, 4, kernel.RW))
			last := r.RAM(n * 4)
			lastDown := r.Down(0, last)
			ids := []uint64{onesUp, over, again, lastDown}
			for _, c := range cs {
				ids = append(ids, c.ids...)
			}
			r.OK(ids...)
			for c, ch := range cs {
				for k := 1; k < len(ch.ids); k++ {
					if !r.Before(ch.ids[k-1], ch.ids[k]) {
						t.Fatalf("chain %d: completion %d before %d", c, ch.ids[k], ch.ids[k-1])
					}
				}
				out := r.F32(ch.out)
				for i := 0; i < n; i++ {
					if want := 3 * (2*float32(c+i) + float32(c)); out[i] != want {
						t.Fatalf("chain %d: out[%d] = %v, want %v", c, i, out[i], want)
					}
				}
			}
			if !r.Before(onesUp, cs[0].ids[2]) || !r.Before(cs0.ids[4], over) || !r.Before(over, again) || !r.Before(again, lastDown) {
				t.Fatalf("write-after-read completions out of order: %v", r.Received())
			}
			for i, x := range r.F32(last) {
				if x != 5 {
					t.Fatalf("last[%d] = %v, want 5", i, x)
				}
			}
		})
	}
}

// TestAllocLimit checks allocations against STARPU_LIMIT_OPENCL_MEM and
// the device's largest buffer.
func TestAllocLimit(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			r := startRig(t, md, EnvLimitMem+"=1")
			if got := r.FP.Nodes[0].Bytes; got != 1<<20 {
				t.Fatalf("node bytes %d, want 1 MiB", got)
			}
			r.OK(r.Alloc(1, 768<<10))
			msg := r.Failed(r.Alloc(2, 512<<10))
			want := "alloc of 524288 bytes for buffer 2 on node 1 (OpenCL 0 ("
			if !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, "out of memory: 786432 of the node's 1048576 bytes in use") {
				t.Fatalf("error %q", msg)
			}
			r.Free(1)
			r.OK(r.Alloc(2, 512<<10), r.Alloc(3, 512<<10))
			if msg := r.Failed(r.Alloc(3, 16)); !strings.Contains(msg, "buffer 3 is allocated already") {
				t.Fatalf("error %q", msg)
			}
			if msg := r.Failed(r.Copy(0, 1, r.RAM(64).Offset, 9, wire.CopyRange{Len: 64})); !strings.Contains(msg, "device buffer 9 is not allocated") {
				t.Fatalf("error %q", msg)
			}
			if msg := r.Failed(r.Copy(0, 1, r.RAM(64).Offset, 2, wire.CopyRange{DstOffset: 512 << 10, Len: 1})); !strings.Contains(msg, "outside device buffer 2 of 524288 bytes") {
				t.Fatalf("error %q", msg)
			}
		})
	}
	t.Run("largest buffer", func(t *testing.T) {
		r := startRig(t, modes[0])
		size := r.FP.Nodes[0].Bytes
		msg := r.Failed(r.Alloc(1, size))
		if !strings.Contains(msg, "clCreateBuffer: CL_INVALID_BUFFER_SIZE (-61) (the device's largest buffer is") {
			t.Fatalf("alloc of the whole node (%d bytes): %q", size, msg)
		}
	})
}

// TestLoadKernel builds kernels from source: a good one gets the next
// index and runs with the calling convention (shape arguments, argument
// blob by value); a bad one returns the build log.
func TestLoadKernel(t *testing.T) {
	const src = `
typedef struct { float a; float b; } coef;
kernel void fill(global float *m, uint nx, uint ny, uint ld, coef c) {
	size_t i = get_global_id(0), j = get_global_id(1);
	m[i + j * ld] = c.a * i + c.b * j;
}`
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			r := startRig(t, md)
			nb := len(r.FP.Kernels)
			idx, err := r.Driver.LoadKernel(ctxT(t), driver.KernelSource{Name: "fill", Source: src})
			if err != nil || idx != nb {
				t.Fatalf("LoadKernel = %d, %v; want %d", idx, err, nb)
			}
			if again, err := r.Driver.LoadKernel(ctxT(t), driver.KernelSource{Name: "fill", Source: src}); err != nil || again != idx {
				t.Fatalf("second LoadKernel = %d, %v", again, err)
			}
			if fp, err := r.Driver.Fingerprint(ctxT(t)); err != nil || fp.Kernels[idx] != "fill" {
				t.Fatalf("fingerprint kernels %v, %v", fp.Kernels, err)
			}
			const nx, ny, ld = 9, 5, 12
			s := r.RAM(ld * ny * 4)
			for i, x := 0, r.F32(s); i < len(x); i++ {
				x[i] = -1
			}
			arg := []byte{0, 0, 0x80, 0x3f, 0, 0, 0x20, 0x41} // {1.0f, 10.0f}
			r.OK(r.Alloc(1, s.Size))
			up := r.Up(s, 1)
			ex := r.Exec(idx, arg, mat(1, nx, ny, ld, 4, kernel.RW))
			down := r.Down(1, s)
			r.OK(up, ex, down)
			x := r.F32(s)
			for j := 0; j < ny; j++ {
				for i := 0; i < ld; i++ {
					want := float32(-1)
					if i < nx {
						want = float32(i) + 10*float32(j)
					}
					if x[i+j*ld] != want {
						t.Fatalf("m(%d, %d) = %v, want %v", i, j, x[i+j*ld], want)
					}
				}
			}

			_, err = r.Driver.LoadKernel(ctxT(t), driver.KernelSource{Name: "broken", Source: "kernel void broken(global float *x) { x[0] = no_such_thing; }"})
			if err == nil || !strings.Contains(err.Error(), "clBuildProgram: CL_BUILD_PROGRAM_FAILURE (-11); build log:") || !strings.Contains(err.Error(), "no_such_thing") {
				t.Fatalf("bad source: %v", err)
			}
			if md.name == "plugin" {
				var re *base.RemoteError
				if !errors.As(err, &re) {
					t.Fatalf("error %T, want a *base.RemoteError", err)
				}
			}
			if _, err := r.Driver.LoadKernel(ctxT(t), driver.KernelSource{Name: "absent", Source: src}); err == nil || !strings.Contains(err.Error(), "clCreateKernel: CL_INVALID_KERNEL_NAME (-46)") {
				t.Fatalf("absent kernel: %v", err)
			}
		})
	}
}

// TestTaskErrors checks that what goes wrong with a task becomes its
// error, naming the OpenCL call and code where OpenCL refused.
func TestTaskErrors(t *testing.T) {
	r := startRig(t, modes[1])
	fixed, err := r.Driver.LoadKernel(ctxT(t), driver.KernelSource{Name: "fixed", Source: `
__attribute__((reqd_work_group_size(7, 1, 1)))
kernel void fixed(global float *x, uint n) { x[get_global_id(0)] = 1; }`})
	if err != nil {
		t.Fatal(err)
	}
	r.OK(r.Alloc(1, 40), r.Alloc(2, 4096))
	cases := []struct {
		name string
		id   uint64
		want string
	}{
		{"work-group size", r.Exec(fixed, nil, vec(1, 10, 4, kernel.RW)),
			"kernel fixed: clEnqueueNDRangeKernel: CL_INVALID_WORK_GROUP_SIZE (-54)"},
		{"argument count", r.Exec(fixed, []byte{1, 2, 3, 4}, vec(1, 10, 4, kernel.RW)),
			"kernel fixed: the function takes 2 arguments; the calling convention gives 3 for 1 buffers and a 4-byte argument"},
		{"kernel index", r.Exec(len(r.FP.Kernels)+5, nil, vec(1, 10, 4, kernel.RW)), "out of range"},
		{"unallocated buffer", r.Exec(r.Kernel(blasarg.ScalF32), blasarg.ScalArg{Alpha: 1}.Encode(), vec(3, 10, 4, kernel.RW)),
			"kernel scal_f32: buffer 0: device buffer 3 is not allocated"},
		{"buffer too small", r.Exec(r.Kernel(blasarg.ScalF32), blasarg.ScalArg{Alpha: 1}.Encode(), vec(1, 11, 4, kernel.RW)),
			"its layout spans 44 bytes, device buffer 1 has 40"},
		{"RAM buffer", r.Exec(r.Kernel(blasarg.ScalF32), blasarg.ScalArg{Alpha: 1}.Encode(), wire.BufferDesc{Node: 0, Offset: 4096, Mode: kernel.RW, Layout: kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: 1}}),
			"buffer 0 is on node 0, not on this worker's device (node 1)"},
		{"bad blasarg", r.Exec(r.Kernel(blasarg.ScalF32), []byte{1}, vec(1, 10, 4, kernel.RW)),
			"kernel scal_f32: blasarg: ScalArg is 8 bytes, got 1"},
		{"wrong precision", r.Exec(r.Kernel(blasarg.ScalF64), blasarg.ScalArg{Alpha: 1}.Encode(), vec(1, 10, 4, kernel.RW)),
			"buffer 0 has 4-byte elements, want 8"},
		{"gemm shapes", r.Exec(r.Kernel(blasarg.GemmF32), blasarg.GemmArg{Alpha: 1}.Encode(), mat(2, 4, 5, 4, 4, kernel.R), mat(2, 4, 5, 4, 4, kernel.R), mat(2, 4, 5, 4, 4, kernel.RW)),
			"kernel gemm_f32: op(A) is 4x5, op(B) 4x5, C 4x5: shapes do not multiply"},
		{"copy to another node", r.Copy(0, 2, r.RAM(64).Offset, 1, wire.CopyRange{Len: 4}),
			"copy 0->2: destination: node 2 is neither RAM (0) nor this worker's device (1)"},
		{"copy outside the arena", r.Copy(0, 1, r.Arena.Size()-8, 2, wire.CopyRange{Len: 64}), "copy 0->1: range 0: source:"},
	}
	for _, c := range cases {
		if msg := r.Failed(c.id); !strings.Contains(msg, c.want) {
			t.Errorf("%s: error %q, want %q", c.name, msg, c.want)
		}
	}
	// The worker goes on after errors.
	s := r.RAM(40)
	for i, x := 0, r.F32(s); i < 10; i++ {
		x[i] = 1
	}
	up, ex, down := r.Up(s, 1), r.Exec(r.Kernel(blasarg.ScalF32), blasarg.ScalArg{Alpha: 4}.Encode(), vec(1, 10, 4, kernel.RW)), r.Down(1, s)
	r.OK(up, ex, down)
	if x := r.F32(s); x[9] != 4 {
		t.Fatalf("x[9] = %v after errors, want 4", x[9])
	}
}
