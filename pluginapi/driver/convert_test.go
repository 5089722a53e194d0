package driver

import (
	"reflect"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// TestFingerprintConvert: a Fingerprint survives fingerprintToProto then
// fingerprintFromProto unchanged, but for empty unit and node lists, which
// come back nil.
func TestFingerprintConvert(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *Fingerprint
		// want is what comes back, when it is not in.
		want *Fingerprint
	}{
		{"zero", &Fingerprint{}, nil},
		{"no unit", &Fingerprint{Arch: OpenCL, Note: "no OpenCL platform"}, nil},
		{"empty lists",
			&Fingerprint{Arch: CPU, Units: []Unit{}, Nodes: []MemoryNode{}, Kernels: []string{}},
			&Fingerprint{Arch: CPU, Kernels: []string{}}},
		{"CPU", &Fingerprint{Arch: CPU, Units: []Unit{{Name: "core0"}, {Name: "core1"}}, Kernels: []string{"scal", "gemm"}, SchedRing: true, Parallel: true}, nil},
		{"device", &Fingerprint{
			Arch:    CUDA,
			Units:   []Unit{{Name: "gpu0", Node: 1}, {Name: "gpu1", Node: 2}},
			Nodes:   []MemoryNode{{Name: "gpu0", Bytes: 16 << 30, Peers: []int{2}}, {Name: "gpu1", Bytes: 1<<64 - 1}},
			Kernels: []string{"k"},
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = tc.in
			}
			if got := fingerprintFromProto(fingerprintToProto(tc.in)); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip gave %+v, want %+v", got, want)
			}
		})
	}
}

// TestKernelSourceConvert: a KernelSource survives kernelSourceToProto then
// kernelSourceFromProto unchanged.
func TestKernelSourceConvert(t *testing.T) {
	for _, in := range []KernelSource{
		{},
		{Name: "scal"},
		{Name: "scal", Source: "__kernel void scal(__global float *x) { x[get_global_id(0)] *= 2; }"},
	} {
		if got := kernelSourceFromProto(kernelSourceToProto(in)); got != in {
			t.Errorf("round trip of %+v gave %+v", in, got)
		}
	}
}

// TestInitConvert: an InitRequest survives initToProto then initFromProto
// unchanged; a nil request comes back empty.
func TestInitConvert(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *InitRequest
		// want is what comes back, when it is not in.
		want *InitRequest
	}{
		{"nil", nil, &InitRequest{}},
		{"empty", &InitRequest{}, nil},
		{"zero worker", &InitRequest{Workers: []WorkerSpec{{}}}, nil},
		{"workers", &InitRequest{SpinIters: 1000, Workers: []WorkerSpec{
			{ID: 0, Unit: 0, Dispatch: base.Span{Offset: 0, Size: 4096}, Completion: base.Span{Offset: 4096, Size: 4096}, Bell: 1, CoreBell: 2},
			{ID: 5, Unit: 1, Dispatch: base.Span{Offset: 8192, Size: 4096}, Completion: base.Span{Offset: 12288, Size: 4096},
				Bell: 3, CoreBell: 2, SchedRing: base.Span{Offset: 16384, Size: 4096}},
		}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = tc.in
			}
			if got := initFromProto(initToProto(tc.in)); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip gave %+v, want %+v", got, want)
			}
		})
	}
}
