package cudadriver

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
	"github.com/starpu-go/starpu/plugins/driver-cuda/cu"
)

// TestFingerprintWithoutCUDA: with no usable driver library the driver
// reports no unit, and its Note is Probe's exact reason, which `starpu
// machine` prints.
func TestFingerprintWithoutCUDA(t *testing.T) {
	for _, tc := range []struct {
		name, lib, prefix string
	}{
		{"absent", "/nonexistent/libcuda.so.1", "/nonexistent/libcuda.so.1 not found (/nonexistent/libcuda.so.1: cannot open shared object file"},
		{"not CUDA", "libm.so.6", "libm.so.6 ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(cu.EnvDriverLibrary, tc.lib)
			_, perr := cu.Probe(cu.Config{})
			if perr == nil {
				t.Fatalf("Probe found a device in %s", tc.lib)
			}
			fp, err := New(nil, nil).Fingerprint(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(fp.Units) != 0 || len(fp.Nodes) != 0 || fp.Arch != driver.CUDA {
				t.Errorf("fingerprint %+v", fp)
			}
			if fp.Note != perr.Error() || !strings.HasPrefix(fp.Note, tc.prefix) {
				t.Errorf("note %q\nwant Probe's %q", fp.Note, perr)
			}
			if err := fp.Check(); err != nil {
				t.Error(err)
			}
			t.Log(fp.Note)
		})
	}
	t.Run("disabled", func(t *testing.T) {
		t.Setenv(EnvNDevices, "0")
		t.Setenv(EnvLimitMem, "lots")
		fp, err := New(nil, nil).Fingerprint(context.Background())
		if err != nil || fp.Note != `CUDA disabled by STARPU_NCUDA=0; ignored, as no GPU uses it: environment variable STARPU_LIMIT_CUDA_MEM="lots": want a whole number of MiB, 0 or more` {
			t.Errorf("%v %+v", err, fp)
		}
	})
}

func TestSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  base.Config
		env  map[string]string
		want settings
		err  string
	}{
		{name: "defaults", want: settings{limitMiB: -1, ndevices: -1, ndevFrom: "ndevices", pipeline: 2}},
		{name: "config", cfg: base.Config{"limit_mem_mib": int64(64), "ndevices": int64(1), "pipeline": int64(0), "pin": true},
			want: settings{limitMiB: 64, ndevices: 1, ndevFrom: "the config's ndevices = 1", pipeline: 0, pin: true}},
		{name: "env wins", cfg: base.Config{"pipeline": int64(5), "pin": true},
			env:  map[string]string{EnvPipeline: " 3 ", EnvNDevices: "-1", EnvLimitMem: "128", EnvPin: "0"},
			want: settings{limitMiB: 128, ndevices: -1, ndevFrom: "STARPU_NCUDA=-1", pipeline: 3}},
		{name: "empty env ignored", env: map[string]string{EnvPipeline: "", EnvNDevices: ""},
			want: settings{limitMiB: -1, ndevices: -1, ndevFrom: "ndevices", pipeline: 2}},
		{name: "huge limit", env: map[string]string{EnvLimitMem: "99999999999999999999999"},
			want: settings{limitMiB: math.MaxInt64, ndevices: -1, ndevFrom: "ndevices", pipeline: 2}},
		{name: "bad NCUDA", env: map[string]string{EnvNDevices: "two"}, err: `driver-cuda: STARPU_NCUDA="two": want a number of GPUs (-1 for all)`},
		{name: "NCUDA below -1", env: map[string]string{EnvNDevices: "-2"}, err: `STARPU_NCUDA="-2"`},
		{name: "bad pipeline", env: map[string]string{EnvPipeline: "65"}, err: `driver-cuda: STARPU_CUDA_PIPELINE="65": want a number of kernels from 0 to 64`},
		{name: "bad pin", env: map[string]string{EnvPin: "maybe"}, err: `driver-cuda: STARPU_CUDA_PIN="maybe": want 0 or 1`},
		{name: "config gpu_direct", cfg: base.Config{"gpu_direct": false},
			want: settings{limitMiB: -1, ndevices: -1, ndevFrom: "ndevices", pipeline: 2, noDirect: true}},
		{name: "env gpu direct wins", cfg: base.Config{"gpu_direct": false}, env: map[string]string{EnvGPUDirect: "1"},
			want: settings{limitMiB: -1, ndevices: -1, ndevFrom: "ndevices", pipeline: 2}},
		{name: "env gpu direct off", env: map[string]string{EnvGPUDirect: " 0"},
			want: settings{limitMiB: -1, ndevices: -1, ndevFrom: "ndevices", pipeline: 2, noDirect: true}},
		{name: "bad gpu direct", env: map[string]string{EnvGPUDirect: "yes please"}, err: `driver-cuda: STARPU_ENABLE_CUDA_GPU_GPU_DIRECT="yes please": want 0 or 1`},
		{name: "config pipeline", cfg: base.Config{"pipeline": int64(-1)}, err: "driver-cuda config: pipeline = -1: want 0 to 64"},
		{name: "config limit", cfg: base.Config{"limit_mem_mib": int64(-1)}, err: "driver-cuda config: limit_mem_mib = -1: must be at least 0"},
		{name: "config ndevices", cfg: base.Config{"ndevices": int64(-2)}, err: "driver-cuda config: ndevices = -2: must be -1 (all) or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := applyConfig(defaultSettings(), tc.cfg)
			if err == nil {
				s, err = withEnv(s, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s != tc.want {
				t.Errorf("got  %+v\nwant %+v", s, tc.want)
			}
		})
	}
	t.Run("malformed limit", func(t *testing.T) {
		s, err := withEnv(defaultSettings(), func(k string) (string, bool) { return map[string]string{EnvLimitMem: "-3"}[k], k == EnvLimitMem })
		if err != nil || s.limitErr == nil || !strings.Contains(s.limitErr.Error(), "must not be negative") {
			t.Errorf("%v, %v", err, s.limitErr)
		}
	})
	t.Run("schema", func(t *testing.T) {
		d := New(nil, nil)
		if err := d.SetConfig(context.Background(), base.Config{"pipeline": "x"}); err == nil {
			t.Error("a string pipeline accepted")
		}
		if err := d.SetConfig(context.Background(), base.Config{"pin": true}); err != nil || !d.cfg.pin {
			t.Errorf("%v %+v", err, d.cfg)
		}
	})
}

func TestCapBytes(t *testing.T) {
	for _, tc := range []struct {
		mem   uint64
		limit int64
		want  uint64
	}{
		{80 << 30, -1, 80 << 30}, {80 << 30, 0, 0}, {80 << 30, 1024, 1 << 30}, {80 << 30, math.MaxInt64, 80 << 30}, {1 << 20, 2, 1 << 20},
	} {
		if got := capBytes(tc.mem, tc.limit); got != tc.want {
			t.Errorf("capBytes(%d, %d) = %d, want %d", tc.mem, tc.limit, got, tc.want)
		}
	}
}

func TestIsPTX(t *testing.T) {
	for src, want := range map[string]bool{
		".version 8.0\n.target sm_90":                   true,
		"  \n// generated\n/* by hand */\n.version 9.0": true,
		".version\t8.5":                                 true,
		".versions 1":                                   false,
		"extern \"C\" __global__ void f(){}":            false,
		"// .version 8.0\nint x;":                       false,
		"/* unterminated .version":                      false,
		"":                                              false,
	} {
		if got := isPTX(src); got != want {
			t.Errorf("isPTX(%q) = %v, want %v", src, got, want)
		}
	}
}

func TestCallingConvention(t *testing.T) {
	for _, tc := range []struct {
		l    kernel.Layout
		want []uint64
	}{
		{kernel.Layout{Interface: kernel.Void}, nil},
		{kernel.Layout{Interface: kernel.Variable, ElemSize: 4}, nil},
		{kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: 7}, []uint64{7}},
		{kernel.Layout{Interface: kernel.Matrix, ElemSize: 4, NX: 3, NY: 5, LD: 4}, []uint64{3, 5, 4}},
		{kernel.Layout{Interface: kernel.Block, ElemSize: 4, NX: 2, NY: 3, NZ: 4, LD: 2, LDZ: 6}, []uint64{2, 3, 4, 2, 6}},
		{kernel.Layout{Interface: kernel.FirstPluginInterface, NX: 9, NY: 1, NZ: 1, LD: 9, LDZ: 9}, []uint64{9, 1, 1, 9, 9}},
	} {
		got, err := shapeArgs(tc.l)
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%v: %v %v, want %v", tc.l.Interface, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%v: %v, want %v", tc.l.Interface, got, tc.want)
			}
		}
	}
	if _, err := shapeArgs(kernel.Layout{Interface: kernel.InterfaceID(17)}); err == nil {
		t.Error("an unknown interface has a shape")
	}
	d := func(x, y, z uint32) cu.Dim3 { return cu.Dim3{X: x, Y: y, Z: z} }
	v := func(n uint64, m kernel.Mode) wire.BufferDesc {
		return wire.BufferDesc{Mode: m, Layout: kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: n}}
	}
	for _, tc := range []struct {
		name        string
		bufs        []wire.BufferDesc
		grid, block cu.Dim3
		empty       bool
		err         string
	}{
		{name: "no buffer", grid: d(1, 1, 1), block: d(1, 1, 1)},
		{name: "vector", bufs: []wire.BufferDesc{v(1000, kernel.RW)}, grid: d(4, 1, 1), block: d(256, 1, 1)},
		{name: "first written", bufs: []wire.BufferDesc{v(10, kernel.R), v(513, kernel.W)}, grid: d(3, 1, 1), block: d(256, 1, 1)},
		{name: "none written", bufs: []wire.BufferDesc{v(10, kernel.R), v(513, kernel.R)}, grid: d(1, 1, 1), block: d(256, 1, 1)},
		{name: "matrix", bufs: []wire.BufferDesc{{Mode: kernel.RW, Layout: kernel.Layout{Interface: kernel.Matrix, ElemSize: 4, NX: 33, NY: 16, LD: 40}}},
			grid: d(3, 1, 1), block: d(16, 16, 1)},
		{name: "block", bufs: []wire.BufferDesc{{Mode: kernel.W, Layout: kernel.Layout{Interface: kernel.Block, ElemSize: 4, NX: 9, NY: 8, NZ: 5, LD: 9, LDZ: 72}}},
			grid: d(2, 1, 2), block: d(8, 8, 4)},
		{name: "variable", bufs: []wire.BufferDesc{{Mode: kernel.RW, Layout: kernel.Layout{Interface: kernel.Variable, ElemSize: 8}}}, grid: d(1, 1, 1), block: d(1, 1, 1)},
		{name: "empty", bufs: []wire.BufferDesc{v(0, kernel.RW)}, empty: true, grid: d(1, 1, 1), block: d(256, 1, 1)},
		{name: "too tall", bufs: []wire.BufferDesc{{Mode: kernel.RW, Layout: kernel.Layout{Interface: kernel.Matrix, ElemSize: 4, NX: 1, NY: 16 * 65536, LD: 1}}},
			err: "exceeds the GPU's grid limits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			grid, block, empty, err := geometry(tc.bufs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || grid != tc.grid || block != tc.block || empty != tc.empty {
				t.Errorf("got %v %v %v %v, want %v %v %v", grid, block, empty, err, tc.grid, tc.block, tc.empty)
			}
		})
	}
}

// TestLibraryChecks: the library refuses what cuBLAS would misread, with
// the OpenCL driver's messages, before anything is queued.
func TestLibraryChecks(t *testing.T) {
	lib := map[string]*builtin{}
	for _, b := range library(true, true) {
		lib[b.fullName()] = b
	}
	if len(lib) != 14 {
		t.Fatalf("%d kernels", len(lib))
	}
	if got := len(library(true, false)); got != 12 {
		t.Errorf("without cuSOLVER: %d kernels", got)
	}
	if got := library(false, true); len(got) != 2 || got[0].fullName() != blasarg.PotrfF32 || got[1].fullName() != blasarg.PotrfF64 {
		t.Errorf("without cuBLAS: %v", got)
	}
	m := func(nx, ny, ld uint64, es uint32) wire.BufferDesc {
		return wire.BufferDesc{Mode: kernel.RW, Layout: kernel.Layout{Interface: kernel.Matrix, ElemSize: es, NX: nx, NY: ny, LD: ld}}
	}
	v := func(n uint64, es uint32) wire.BufferDesc {
		return wire.BufferDesc{Mode: kernel.RW, Layout: kernel.Layout{Interface: kernel.Vector, ElemSize: es, NX: n}}
	}
	r := wire.BufferDesc{Mode: kernel.W, Layout: kernel.Layout{Interface: kernel.Variable, ElemSize: 4}}
	gemm := blasarg.GemmArg{TransB: true, Alpha: 1}.Encode()
	for _, tc := range []struct {
		k    string
		bufs []wire.BufferDesc
		arg  []byte
		err  string
	}{
		{blasarg.ScalF32, []wire.BufferDesc{v(4, 4)}, blasarg.ScalArg{Alpha: 2}.Encode(), ""},
		{blasarg.ScalF32, []wire.BufferDesc{v(4, 4)}, nil, "blasarg: ScalArg is 8 bytes, got 0"},
		{blasarg.ScalF64, []wire.BufferDesc{v(4, 4)}, blasarg.ScalArg{}.Encode(), "buffer 0 has 4-byte elements, want 8"},
		{blasarg.ScalF32, []wire.BufferDesc{m(2, 2, 2, 4)}, blasarg.ScalArg{}.Encode(), "buffer 0 is a matrix, want a vector"},
		{blasarg.AxpyF32, []wire.BufferDesc{v(3, 4), v(4, 4)}, blasarg.AxpyArg{}.Encode(), "x has 3 elements, y 4"},
		{blasarg.DotF32, []wire.BufferDesc{v(3, 4), v(4, 4), r}, nil, "x has 3 elements but y has 4"},
		{blasarg.DotF32, []wire.BufferDesc{v(4, 4), v(4, 4), r}, []byte{1}, "takes no argument, got 1 bytes"},
		{blasarg.DotF32, []wire.BufferDesc{v(4, 4), v(4, 4), r}, nil, ""},
		{blasarg.GemmF32, []wire.BufferDesc{m(4, 3, 4, 4), m(5, 3, 5, 4), m(4, 5, 4, 4)}, gemm, ""},
		{blasarg.GemmF32, []wire.BufferDesc{m(4, 3, 4, 4), m(5, 2, 5, 4), m(4, 5, 4, 4)}, gemm, "op(A) is 4x3, op(B) 2x5, C 4x5: shapes do not multiply"},
		{blasarg.GemmF32, []wire.BufferDesc{m(4, 3, 3, 4), m(5, 3, 5, 4), m(4, 5, 4, 4)}, gemm, "buffer 0: ld 3 below nx 4"},
		{blasarg.GemmF32, []wire.BufferDesc{m(4, 3, 4, 4), m(5, 3, 5, 4)}, gemm, "takes 3 buffers, got 2"},
		{blasarg.SyrkF64, []wire.BufferDesc{m(4, 2, 4, 8), m(4, 3, 4, 8)}, blasarg.SyrkArg{}.Encode(), "op(A) has 4 rows, C is 4x3: want a square C of that order"},
		{blasarg.TrsmF32, []wire.BufferDesc{m(3, 3, 3, 4), m(4, 3, 4, 4)}, blasarg.TrsmArg{Right: true}.Encode(), ""},
		{blasarg.TrsmF32, []wire.BufferDesc{m(3, 3, 3, 4), m(4, 3, 4, 4)}, blasarg.TrsmArg{}.Encode(), "trsm: A is 3x3, B 4x3: want A 4x4"},
		{blasarg.PotrfF32, []wire.BufferDesc{m(3, 4, 3, 4)}, blasarg.PotrfArg{Lower: true}.Encode(), "buffer 0 (A) is 3x4, want a square matrix"},
		{blasarg.PotrfF32, []wire.BufferDesc{m(3, 3, 3, 4)}, []byte{2}, "blasarg: PotrfArg.Lower is byte 2, want 0 or 1"},
		{blasarg.GemmF64, []wire.BufferDesc{m(1<<31, 1, 1<<31, 8), m(1, 1, 1, 8), m(1, 1, 1, 8)}, gemm, "beyond cuBLAS's int range"},
	} {
		err := lib[tc.k].validate(tc.bufs, tc.arg)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.k, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v, want %q", tc.k, err, tc.err)
		}
	}
	if err := potrfStatus("kernel potrf_f32", 3); err == nil || err.Error() != "kernel potrf_f32: matrix not positive definite: the leading minor of order 3 is not (cuSOLVER devInfo 3)" {
		t.Errorf("potrf status: %v", err)
	}
	if err := potrfStatus("k", -4); err == nil || !strings.Contains(err.Error(), "rejected argument 4") {
		t.Errorf("potrf status: %v", err)
	}
}

// TestPipelineZero: a driver asked for a pipeline of 0 runs every task
// synchronously, async-flagged ones included (the rule itself is tested in
// pluginapi/driver).
func TestPipelineZero(t *testing.T) {
	w := newWorker(&Driver{}, &device{}, nil, 0, 0)
	if !w.pipe.Sync(wire.ExecAsync) || !w.noSpin {
		t.Errorf("pipeline 0: %+v", w)
	}
}

// TestPluginParams: a plugin interface's datum reaches a kernel as a
// pointer to each part (0 for an empty one) and its five layout fields as
// 64-bit values; parts outside the buffer are refused.
func TestPluginParams(t *testing.T) {
	w := &worker{node: 1, bufs: map[uint64]*devBuf{7: {ptr: 0x10000, size: 1030}, 8: {ptr: 0x20000, size: 40}}}
	if err := w.setParts(&wire.Parts{Node: 1, Buffer: 7, Parts: []wire.Part{{Offset: 0, Size: 12}, {Offset: 512, Size: 0}, {Offset: 1024, Size: 6}}}); err != nil {
		t.Fatal(err)
	}
	l := kernel.Layout{Interface: kernel.FirstPluginInterface + 2, ElemSize: 4, NX: 3, NY: 1, NZ: 7, LD: 1030, LDZ: 0x31534342 | 2<<32 | 3<<48}
	e := &wire.Exec{Buffers: []wire.BufferDesc{
		{Node: 1, Offset: 7, Mode: kernel.R, Layout: l},
		{Node: 1, Offset: 8, Mode: kernel.W, Layout: kernel.Layout{Interface: kernel.Vector, ElemSize: 4, NX: 10}},
	}}
	w.ptrs = []cu.DevicePtr{0x10000, 0x20000}
	if err := w.setParams(e); err != nil {
		t.Fatal(err)
	}
	if len(w.params) != 3+5+1+1 {
		t.Fatalf("%d parameters, want 10", len(w.params))
	}
	ptr := func(i int) cu.DevicePtr { return *(*cu.DevicePtr)(w.params[i]) }
	if ptr(0) != 0x10000 || ptr(1) != 0 || ptr(2) != 0x10000+1024 || ptr(8) != 0x20000 {
		t.Errorf("pointers %#x %#x %#x, vector %#x", ptr(0), ptr(1), ptr(2), ptr(8))
	}
	for i, want := range []uint64{l.NX, l.NY, l.NZ, l.LD, l.LDZ} {
		if got := *(*uint64)(w.params[3+i]); got != want {
			t.Errorf("shape parameter %d = %#x, want %#x", i, got, want)
		}
	}
	if got := *(*uint32)(w.params[9]); got != 10 {
		t.Errorf("vector nx = %d", got)
	}
	if err := w.setParts(&wire.Parts{Node: 1, Buffer: 7, Parts: []wire.Part{{Offset: 1024, Size: 7}}}); err != nil {
		t.Fatal(err)
	}
	if err := w.bufs[7].partsErr; err == nil || !strings.Contains(err.Error(), "part 0, bytes [1024, +7), lies outside device buffer 7 of 1030 bytes") {
		t.Errorf("part outside the buffer: %v", err)
	}
	if err := w.setParts(&wire.Parts{Node: 1, Buffer: 9}); err == nil {
		t.Error("parts of a buffer that does not exist were taken")
	}
}
