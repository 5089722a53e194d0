package cu

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The C files are embedded so that a test binary built with go test -c
// and carried to another machine needs no source tree.
var (
	//go:embed cushim.h
	cushimH string
	//go:embed testdata/fakecuda.c
	fakeCudaC string
	//go:embed testdata/abicheck.c
	abiCheckC string
)

// A library that loads on any glibc machine and is not CUDA.
const notCUDA = "libm.so.6"

func TestLoadAbsentLibrary(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lib   Lib
		names []string
		want  string
	}{
		{"driver", LibDriver, []string{"libcuda-absent.so.1"},
			"libcuda-absent.so.1 not found (libcuda-absent.so.1: cannot open shared object file: No such file or directory)"},
		{"driver by path", LibDriver, []string{"/nonexistent/libcuda.so.1"},
			"/nonexistent/libcuda.so.1 not found (/nonexistent/libcuda.so.1: cannot open shared object file: No such file or directory)"},
		{"cuBLAS, several names", LibBLAS, []string{"libcublas-absent.so.13", "libcublas-absent.so.12"},
			"cuBLAS not found (libcublas-absent.so.13: cannot open shared object file: No such file or directory; " +
				"libcublas-absent.so.12: cannot open shared object file: No such file or directory)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := openLib(tc.lib, tc.names, nil)
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("got %v (%T), want a *LoadError", err, err)
			}
			if err.Error() != tc.want {
				t.Errorf("got  %q\nwant %q", err, tc.want)
			}
			if len(le.Attempts) != len(tc.names) || le.Missing() != nil {
				t.Errorf("attempts %+v", le.Attempts)
			}
		})
	}
}

func TestLoadNotACUDALibrary(t *testing.T) {
	for _, tc := range []struct {
		lib         Lib
		firstMissed string
		what        string
	}{
		{LibDriver, "cuGetErrorName", "is not a usable CUDA driver library"},
		{LibBLAS, "cublasCreate_v2", "is not a usable cuBLAS library"},
		{LibSolver, "cusolverDnCreate", "is not a usable cuSOLVER library"},
		{LibNVRTC, "nvrtcGetErrorString", "is not a usable NVRTC library"},
	} {
		t.Run(tc.lib.String(), func(t *testing.T) {
			_, _, err := openLib(tc.lib, []string{notCUDA}, nil)
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("got %v (%T), want a *LoadError", err, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, notCUDA+" (") || !strings.Contains(msg, tc.what) ||
				!strings.Contains(msg, "it lacks "+tc.firstMissed) || !strings.Contains(msg, "undefined symbol: "+tc.firstMissed) {
				t.Errorf("message %q does not name %s, the library and the missing %s", msg, notCUDA, tc.firstMissed)
			}
			// Every required entry point is reported missing, none optional.
			var required []string
			for _, s := range SymbolNames(tc.lib) {
				if !strings.HasSuffix(s, "?") {
					required = append(required, s)
				}
			}
			if got := le.Missing(); strings.Join(got, " ") != strings.Join(required, " ") {
				t.Errorf("missing %v\nwant    %v", got, required)
			}
			t.Log(msg)
		})
	}
}

func TestProbeWithoutDriver(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		env    string
		prefix string
	}{
		{"absent", Config{DriverNames: []string{"libcuda-absent.so.1"}}, "",
			"libcuda-absent.so.1 not found (libcuda-absent.so.1: cannot open shared object file"},
		{"not CUDA", Config{DriverNames: []string{notCUDA}}, "", notCUDA + " ("},
		{"environment", Config{}, "libcuda-from-env.so.1", "libcuda-from-env.so.1 not found ("},
		{"environment list", Config{}, "libcuda-a.so:libcuda-b.so", "CUDA driver not found (libcuda-a.so: cannot open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvDriverLibrary, tc.env)
			m, err := Probe(tc.cfg)
			if err == nil {
				t.Fatalf("Probe found %v", m)
			}
			if !strings.HasPrefix(err.Error(), tc.prefix) {
				t.Errorf("reason %q, want it to start %q", err, tc.prefix)
			}
			if m == nil || m.Libraries.Driver.Err == nil || m.Libraries.Driver.Loaded() || len(m.Devices) != 0 {
				t.Errorf("machine %+v", m)
			}
			t.Log(err)
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Setenv(EnvDriverLibrary, "")
	t.Setenv(EnvBLASLibrary, "/opt/a/libcublas.so.13:libcublas.so.99")
	t.Setenv(EnvSolverLibrary, "")
	t.Setenv(EnvNVRTCLibrary, "")
	t.Setenv(EnvLibraryDirs, "/opt/cuda/lib64")
	t.Setenv("CUDA_HOME", "/usr/local/cuda-13.0")
	t.Setenv("CUDA_PATH", "")
	c := Config{}.withDefaults()
	for _, tc := range []struct {
		name      string
		got, want []string
	}{
		{"driver", c.DriverNames, []string{"libcuda.so.1"}},
		{"cuBLAS from env", c.BLASNames, []string{"/opt/a/libcublas.so.13", "libcublas.so.99"}},
		{"cuSOLVER", c.SolverNames, DefaultSolverNames},
		{"NVRTC", c.NVRTCNames, DefaultNVRTCNames},
		{"dirs", c.Dirs, []string{"/opt/cuda/lib64", "/usr/local/cuda-13.0/lib64", "/usr/local/cuda/lib64"}},
	} {
		if strings.Join(tc.got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if c.MinDriverVersion != MinDriverVersion {
		t.Errorf("min version %d", c.MinDriverVersion)
	}
	explicit := Config{DriverNames: []string{"x.so"}, Dirs: []string{"/d"}, MinDriverVersion: 13000}.withDefaults()
	if explicit.DriverNames[0] != "x.so" || len(explicit.Dirs) != 1 || explicit.MinDriverVersion != 13000 {
		t.Errorf("explicit fields overridden: %+v", explicit)
	}
}

func TestCandidates(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "libfoo.so.1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := candidates([]string{"libfoo.so.1", "libbar.so", "/abs/libfoo.so.1"}, []string{"/nonexistent", dir})
	want := []string{"libfoo.so.1", filepath.Join(dir, "libfoo.so.1"), "libbar.so", "/abs/libfoo.so.1"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestSymbolNames(t *testing.T) {
	for _, tc := range []struct {
		lib       Lib
		mustHave  []string
		mustNotBe []string
	}{
		{LibDriver, []string{"cuInit", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemGetInfo_v2", "cuDeviceTotalMem_v2",
			"cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuMemHostRegister_v2",
			"cuStreamDestroy_v2", "cuEventDestroy_v2", "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxSetFlags_v2",
			"cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuMemcpyPeerAsync", "cuLaunchKernel", "cuEventElapsedTime_v2"},
			[]string{"cuMemAlloc", "cuMemFree", "cuStreamDestroy", "cuEventDestroy", "cuDevicePrimaryCtxRelease", "cuMemHostRegister"}},
		{LibBLAS, []string{"cublasCreate_v2", "cublasSgemm_v2", "cublasDtrsm_v2", "cublasSetPointerMode_v2", "cublasGetProperty?"},
			[]string{"cublasCreate", "cublasSgemm"}},
		{LibSolver, []string{"cusolverDnCreate", "cusolverDnSpotrf_bufferSize", "cusolverDnDpotrf", "cusolverGetProperty?"}, nil},
		{LibNVRTC, []string{"nvrtcCompileProgram", "nvrtcGetPTX", "nvrtcGetCUBIN?"}, nil},
	} {
		names := SymbolNames(tc.lib)
		have := map[string]bool{}
		for _, n := range names {
			if have[n] {
				t.Errorf("%s: %s listed twice", tc.lib, n)
			}
			have[n] = true
		}
		for _, n := range tc.mustHave {
			if !have[n] {
				t.Errorf("%s does not resolve %s", tc.lib, n)
			}
		}
		for _, n := range tc.mustNotBe {
			if have[n] || have[n+"?"] {
				t.Errorf("%s resolves the unversioned %s", tc.lib, n)
			}
		}
	}
}

func TestNotLoaded(t *testing.T) {
	if current.Load() != nil {
		t.Skip("the package's libraries are already loaded in this process")
	}
	calls := map[string]error{}
	_, calls["DriverVersion"] = DriverVersion()
	_, calls["DeviceCount"] = DeviceCount()
	_, calls["Name"] = Device(0).Name()
	_, calls["MemAlloc"] = MemAlloc(1)
	calls["Synchronize"] = Stream{}.Synchronize()
	_, calls["EventCreate"] = EventCreate(0)
	_, calls["ModuleLoadData"] = ModuleLoadData([]byte("x"))
	_, calls["NewBLAS"] = NewBLAS()
	_, calls["NewSolver"] = NewSolver()
	_, calls["Compile"] = Compile("", "x.cu")
	calls["LaunchKernel"] = LaunchKernel(Function{}, Dim3{}, Dim3{}, 0, Stream{}, nil)
	for name, err := range calls {
		if !errors.Is(err, ErrNotLoaded) {
			t.Errorf("%s before Load: %v", name, err)
		}
	}
}

// cc finds a C compiler, or skips.
func cc(t *testing.T) string {
	t.Helper()
	for _, c := range []string{os.Getenv("CC"), "cc", "gcc", "clang"} {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	t.Skip("no C compiler to build the fake driver")
	return ""
}

// buildFakeDriver compiles testdata/fakecuda.c, a fake driver, cuBLAS,
// cuSOLVER and NVRTC in one library, with weak stubs for any entry point
// it does not define (omit ones excepted), with the extra cc flags.
func buildFakeDriver(t *testing.T, name string, flags []string, omit ...string) string {
	t.Helper()
	compiler := cc(t)
	dir := t.TempDir()
	var stubs strings.Builder
	skip := map[string]bool{}
	for _, o := range omit {
		skip[o] = true
	}
	for _, lib := range []Lib{LibDriver, LibBLAS, LibSolver, LibNVRTC} {
		for _, s := range SymbolNames(lib) {
			if s = strings.TrimSuffix(s, "?"); !skip[s] {
				fmt.Fprintf(&stubs, "__attribute__((weak)) int %s(void) { return 801; }\n", s)
			}
		}
	}
	for file, text := range map[string]string{"cushim.h": cushimH, "fakecuda.c": fakeCudaC, "stubs.c": stubs.String()} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lib := filepath.Join(dir, name)
	args := append([]string{"-shared", "-fPIC", "-O1", "-o", lib}, flags...)
	cmd := exec.Command(compiler, append(args, "fakecuda.c", "stubs.c", "-lm")...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the fake driver: %v\n%s", err, out)
	}
	return lib
}

func TestProbeFakeDriver(t *testing.T) {
	lib := buildFakeDriver(t, "libfakecuda.so.1", nil)
	cfg := Config{DriverNames: []string{lib}, NoOptional: true}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		min     int
		reason  string
		is      error
		devices int
		peers   [][]int
	}{
		{name: "one device", devices: 1, peers: [][]int{nil}},
		{name: "two devices", env: map[string]string{"CUDA_FAKE_DEVICES": "2"}, devices: 2, peers: [][]int{{1}, {0}}},
		{name: "three devices", env: map[string]string{"CUDA_FAKE_DEVICES": "3"}, devices: 3, peers: [][]int{{1, 2}, {0, 2}, {0, 1}}},
		{name: "two devices without peer access", env: map[string]string{"CUDA_FAKE_DEVICES": "2", "CUDA_FAKE_PEER": "0"}, devices: 2, peers: [][]int{nil, nil}},
		{name: "no device", env: map[string]string{"CUDA_FAKE_INIT": "100"},
			reason: "cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected", is: ErrorNoDevice},
		{name: "stub library", env: map[string]string{"CUDA_FAKE_INIT": "34"},
			reason: "cuInit failed: CUDA_ERROR_STUB_LIBRARY (34): CUDA driver is a stub library", is: ErrorStubLibrary},
		{name: "code the driver cannot name", env: map[string]string{"CUDA_FAKE_INIT": "222"},
			reason: "cuInit failed: CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)", is: ErrorUnsupportedPTXVersion},
		{name: "zero devices", env: map[string]string{"CUDA_FAKE_DEVICES": "0"},
			reason: "no CUDA device: cuDeviceGetCount found none", is: ErrorNoDevice},
		{name: "old driver", env: map[string]string{"CUDA_FAKE_VERSION": "11040"},
			reason: "driver version 11.4 is older than the 12.0 this driver needs", is: &VersionError{}},
		{name: "older than asked", min: 13010,
			reason: "driver version 13.0 is older than the 13.1 this driver needs", is: &VersionError{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"CUDA_FAKE_DEVICES", "CUDA_FAKE_INIT", "CUDA_FAKE_VERSION", "CUDA_FAKE_PEER"} {
				t.Setenv(k, tc.env[k])
			}
			c := cfg
			c.MinDriverVersion = tc.min
			m, err := Probe(c)
			if tc.reason != "" {
				if err == nil || err.Error() != tc.reason {
					t.Fatalf("reason %v\nwant   %s", err, tc.reason)
				}
				if ve, ok := tc.is.(*VersionError); ok {
					if !errors.As(err, &ve) {
						t.Errorf("%v is not a *VersionError", err)
					}
				} else if !errors.Is(err, tc.is) {
					t.Errorf("errors.Is(%v, %v) is false", err, tc.is)
				}
				if m == nil || m.Libraries.Driver.Name != lib {
					t.Errorf("machine %+v", m)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Devices) != tc.devices || m.DriverVersion != 13000 || m.DriverVersionString() != "13.0" {
				t.Fatalf("machine %+v", m)
			}
			for i, d := range m.Devices {
				want := DeviceInfo{Ordinal: i, Name: fmt.Sprintf("Fake GPU %d", i), TotalMem: 80<<30 + uint64(i), Major: 9, Minor: 0,
					Multiprocessors: 132, PCIBusID: fmt.Sprintf("0000:%02x:00.0", 0x65+i)}
				if d != want {
					t.Errorf("device %d: %+v\nwant %+v", i, d, want)
				}
			}
			if !reflect.DeepEqual(m.Peers, tc.peers) {
				t.Errorf("peers %v, want %v", m.Peers, tc.peers)
			}
			s := m.String()
			if !strings.Contains(s, "CUDA driver 13.0 (") || !strings.Contains(s, "cuda0: Fake GPU 0, 80.0 GiB, compute capability 9.0, 132 SMs, PCI 0000:65:00.0") {
				t.Errorf("String:\n%s", s)
			}
			if wantPeers := tc.devices == 2 && tc.peers[0] != nil; strings.Contains(s, "peer access: cuda0->cuda1, cuda1->cuda0") != wantPeers {
				t.Errorf("String says peer access %v, want %v:\n%s", !wantPeers, wantPeers, s)
			}
			t.Logf("\n%s", s)
		})
	}
}

func TestProbeFakeDriverOptionalLibraries(t *testing.T) {
	lib := buildFakeDriver(t, "libfakecuda-opt.so.1", nil)
	m, err := Probe(Config{DriverNames: []string{lib}, BLASNames: []string{notCUDA}, SolverNames: []string{"libcusolver-absent.so"},
		NVRTCNames: []string{"libnvrtc-absent.so"}, Dirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lib  Lib
		info LibInfo
		want string
	}{
		{LibBLAS, m.Libraries.BLAS, "is not a usable cuBLAS library: it lacks cublasCreate_v2"},
		{LibSolver, m.Libraries.Solver, "libcusolver-absent.so not found (libcusolver-absent.so: cannot open shared object file"},
		{LibNVRTC, m.Libraries.NVRTC, "libnvrtc-absent.so not found ("},
	} {
		if tc.info.Loaded() || tc.info.Err == nil || !strings.Contains(tc.info.Err.Error(), tc.want) {
			t.Errorf("%s: %+v, want an error containing %q", tc.lib, tc.info, tc.want)
		}
	}
	if s := m.String(); !strings.Contains(s, "no cuBLAS: libm.so.6 (") {
		t.Errorf("String:\n%s", s)
	}
}

func TestProbeDriverLackingEntryPoints(t *testing.T) {
	lib := buildFakeDriver(t, "libfakecuda-old.so.1", []string{"-DFAKE_OLD_DRIVER"}, "cuDevicePrimaryCtxRelease_v2", "cuMemHostRegister_v2")
	for _, tc := range []struct {
		version string
		want    string
	}{
		{"10020", "driver version 10.2 is older than the 12.0 this driver needs (" + lib +
			" is not a usable CUDA driver library: it lacks cuDevicePrimaryCtxRelease_v2 and 1 more entry points ("},
		{"13000", lib + " is not a usable CUDA driver library: it lacks cuDevicePrimaryCtxRelease_v2 and 1 more entry points ("},
	} {
		t.Run(tc.version, func(t *testing.T) {
			t.Setenv("CUDA_FAKE_VERSION", tc.version)
			m, err := Probe(Config{DriverNames: []string{lib}, NoOptional: true})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got  %v\nwant %s...", err, tc.want)
			}
			var le *LoadError
			if !errors.As(err, &le) || strings.Join(le.Missing(), " ") != "cuDevicePrimaryCtxRelease_v2 cuMemHostRegister_v2" {
				t.Errorf("load error %#v", le)
			}
			if m.DriverVersion == 0 {
				t.Errorf("driver version not reported: %+v", m)
			}
			t.Log(err)
		})
	}
}

// TestABI compiles testdata/abicheck.c against NVIDIA's headers (in
// $STARPU_CUDA_INCLUDE or /usr/local/cuda/include), with a header of
// static assertions that every constant of the Go API equals the C one.
func TestABI(t *testing.T) {
	inc := os.Getenv("STARPU_CUDA_INCLUDE")
	if inc == "" {
		inc = "/usr/local/cuda/include"
	}
	if _, err := os.Stat(filepath.Join(inc, "cuda.h")); err != nil {
		t.Skipf("no CUDA headers in %s (set STARPU_CUDA_INCLUDE): %v", inc, err)
	}
	compiler := cc(t)
	dir := t.TempDir()
	var consts strings.Builder
	for _, c := range abiConstants() {
		fmt.Fprintf(&consts, "_Static_assert(%d == %s, \"Go %s is %d, C %s differs\");\n", c.value, c.c, c.goName, c.value, c.c)
	}
	for file, text := range map[string]string{"cushim.h": cushimH, "abicheck.c": abiCheckC, "consts.h": consts.String()} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(compiler, "-std=c11", "-fsyntax-only", "-Werror", "-Wall", "-I", inc, "-I", dir,
		`-DSC_GO_CONSTS="consts.h"`, "abicheck.c")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the package's prototypes or constants differ from %s: %v\n%s", inc, err, out)
	}
	t.Logf("prototypes and %d constants agree with %s", len(abiConstants()), inc)
}

type abiConstant struct {
	goName string
	value  int
	c      string
}

func abiConstants() []abiConstant {
	cs := []abiConstant{
		{"AttrMaxThreadsPerBlock", int(AttrMaxThreadsPerBlock), "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"},
		{"AttrMaxSharedMemoryPerBlock", int(AttrMaxSharedMemoryPerBlock), "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"},
		{"AttrWarpSize", int(AttrWarpSize), "CU_DEVICE_ATTRIBUTE_WARP_SIZE"},
		{"AttrClockRate", int(AttrClockRate), "CU_DEVICE_ATTRIBUTE_CLOCK_RATE"},
		{"AttrMultiprocessorCount", int(AttrMultiprocessorCount), "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"},
		{"AttrIntegrated", int(AttrIntegrated), "CU_DEVICE_ATTRIBUTE_INTEGRATED"},
		{"AttrCanMapHostMemory", int(AttrCanMapHostMemory), "CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY"},
		{"AttrConcurrentKernels", int(AttrConcurrentKernels), "CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS"},
		{"AttrPCIBusID", int(AttrPCIBusID), "CU_DEVICE_ATTRIBUTE_PCI_BUS_ID"},
		{"AttrPCIDeviceID", int(AttrPCIDeviceID), "CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID"},
		{"AttrMemoryClockRate", int(AttrMemoryClockRate), "CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE"},
		{"AttrGlobalMemoryBusWidth", int(AttrGlobalMemoryBusWidth), "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH"},
		{"AttrL2CacheSize", int(AttrL2CacheSize), "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"},
		{"AttrMaxThreadsPerMultiprocessor", int(AttrMaxThreadsPerMultiprocessor), "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"},
		{"AttrAsyncEngineCount", int(AttrAsyncEngineCount), "CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT"},
		{"AttrUnifiedAddressing", int(AttrUnifiedAddressing), "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING"},
		{"AttrPCIDomainID", int(AttrPCIDomainID), "CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID"},
		{"AttrComputeCapabilityMajor", int(AttrComputeCapabilityMajor), "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"},
		{"AttrComputeCapabilityMinor", int(AttrComputeCapabilityMinor), "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"},
		{"AttrStreamPrioritiesSupported", int(AttrStreamPrioritiesSupported), "CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED"},
		{"AttrMaxSharedMemoryPerMultiproc", int(AttrMaxSharedMemoryPerMultiproc), "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"},
		{"AttrManagedMemory", int(AttrManagedMemory), "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY"},
		{"AttrMaxSharedMemoryPerBlockOptin", int(AttrMaxSharedMemoryPerBlockOptin), "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"},
		{"AttrHostRegisterSupported", int(AttrHostRegisterSupported), "CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED"},
		{"CtxSchedAuto", int(CtxSchedAuto), "CU_CTX_SCHED_AUTO"},
		{"CtxSchedSpin", int(CtxSchedSpin), "CU_CTX_SCHED_SPIN"},
		{"CtxSchedYield", int(CtxSchedYield), "CU_CTX_SCHED_YIELD"},
		{"CtxSchedBlockingSync", int(CtxSchedBlockingSync), "CU_CTX_SCHED_BLOCKING_SYNC"},
		{"HostRegisterPortable", int(HostRegisterPortable), "CU_MEMHOSTREGISTER_PORTABLE"},
		{"HostRegisterDeviceMap", int(HostRegisterDeviceMap), "CU_MEMHOSTREGISTER_DEVICEMAP"},
		{"HostRegisterIOMemory", int(HostRegisterIOMemory), "CU_MEMHOSTREGISTER_IOMEMORY"},
		{"HostRegisterReadOnly", int(HostRegisterReadOnly), "CU_MEMHOSTREGISTER_READ_ONLY"},
		{"StreamDefault", int(StreamDefault), "CU_STREAM_DEFAULT"},
		{"StreamNonBlocking", int(StreamNonBlocking), "CU_STREAM_NON_BLOCKING"},
		{"EventDefault", int(EventDefault), "CU_EVENT_DEFAULT"},
		{"EventBlockingSync", int(EventBlockingSync), "CU_EVENT_BLOCKING_SYNC"},
		{"EventDisableTiming", int(EventDisableTiming), "CU_EVENT_DISABLE_TIMING"},
		{"FuncMaxThreadsPerBlock", int(FuncMaxThreadsPerBlock), "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK"},
		{"FuncSharedSizeBytes", int(FuncSharedSizeBytes), "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES"},
		{"FuncConstSizeBytes", int(FuncConstSizeBytes), "CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES"},
		{"FuncLocalSizeBytes", int(FuncLocalSizeBytes), "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES"},
		{"FuncNumRegs", int(FuncNumRegs), "CU_FUNC_ATTRIBUTE_NUM_REGS"},
		{"FuncPTXVersion", int(FuncPTXVersion), "CU_FUNC_ATTRIBUTE_PTX_VERSION"},
		{"FuncBinaryVersion", int(FuncBinaryVersion), "CU_FUNC_ATTRIBUTE_BINARY_VERSION"},
		{"FuncMaxDynamicSharedSizeBytes", int(FuncMaxDynamicSharedSizeBytes), "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"},
		{"NoTrans", int(NoTrans), "CUBLAS_OP_N"},
		{"Trans", int(Trans), "CUBLAS_OP_T"},
		{"ConjTrans", int(ConjTrans), "CUBLAS_OP_C"},
		{"Lower", int(Lower), "CUBLAS_FILL_MODE_LOWER"},
		{"Upper", int(Upper), "CUBLAS_FILL_MODE_UPPER"},
		{"Left", int(Left), "CUBLAS_SIDE_LEFT"},
		{"Right", int(Right), "CUBLAS_SIDE_RIGHT"},
		{"NonUnit", int(NonUnit), "CUBLAS_DIAG_NON_UNIT"},
		{"Unit", int(Unit), "CUBLAS_DIAG_UNIT"},
		{"Success", int(Success), "CUDA_SUCCESS"},
		{"ErrorInvalidValue", int(ErrorInvalidValue), "CUDA_ERROR_INVALID_VALUE"},
		{"ErrorOutOfMemory", int(ErrorOutOfMemory), "CUDA_ERROR_OUT_OF_MEMORY"},
		{"ErrorNotInitialized", int(ErrorNotInitialized), "CUDA_ERROR_NOT_INITIALIZED"},
		{"ErrorDeinitialized", int(ErrorDeinitialized), "CUDA_ERROR_DEINITIALIZED"},
		{"ErrorStubLibrary", int(ErrorStubLibrary), "CUDA_ERROR_STUB_LIBRARY"},
		{"ErrorNoDevice", int(ErrorNoDevice), "CUDA_ERROR_NO_DEVICE"},
		{"ErrorInvalidDevice", int(ErrorInvalidDevice), "CUDA_ERROR_INVALID_DEVICE"},
		{"ErrorInvalidImage", int(ErrorInvalidImage), "CUDA_ERROR_INVALID_IMAGE"},
		{"ErrorInvalidContext", int(ErrorInvalidContext), "CUDA_ERROR_INVALID_CONTEXT"},
		{"ErrorNoBinaryForGPU", int(ErrorNoBinaryForGPU), "CUDA_ERROR_NO_BINARY_FOR_GPU"},
		{"ErrorInvalidPTX", int(ErrorInvalidPTX), "CUDA_ERROR_INVALID_PTX"},
		{"ErrorUnsupportedPTXVersion", int(ErrorUnsupportedPTXVersion), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
		{"ErrorInvalidHandle", int(ErrorInvalidHandle), "CUDA_ERROR_INVALID_HANDLE"},
		{"ErrorNotFound", int(ErrorNotFound), "CUDA_ERROR_NOT_FOUND"},
		{"ErrorNotReady", int(ErrorNotReady), "CUDA_ERROR_NOT_READY"},
		{"ErrorIllegalAddress", int(ErrorIllegalAddress), "CUDA_ERROR_ILLEGAL_ADDRESS"},
		{"ErrorLaunchOutOfResources", int(ErrorLaunchOutOfResources), "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
		{"ErrorPeerAccessAlreadyEnabled", int(ErrorPeerAccessAlreadyEnabled), "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"},
		{"ErrorPeerAccessNotEnabled", int(ErrorPeerAccessNotEnabled), "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"},
		{"ErrorHostMemoryAlreadyRegistered", int(ErrorHostMemoryAlreadyRegistered), "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
		{"ErrorHostMemoryNotRegistered", int(ErrorHostMemoryNotRegistered), "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
		{"ErrorLaunchFailed", int(ErrorLaunchFailed), "CUDA_ERROR_LAUNCH_FAILED"},
		{"ErrorNotSupported", int(ErrorNotSupported), "CUDA_ERROR_NOT_SUPPORTED"},
		{"ErrorSystemDriverMismatch", int(ErrorSystemDriverMismatch), "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
		{"ErrorCompatNotSupportedOnDevice", int(ErrorCompatNotSupportedOnDevice), "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"},
		{"ErrorUnknown", int(ErrorUnknown), "CUDA_ERROR_UNKNOWN"},
	}
	// The name tables, too.
	for _, tab := range []map[int]string{resultNames, blasStatusNames, solverStatusNames, nvrtcResultNames} {
		for code, name := range tab {
			cs = append(cs, abiConstant{"table entry " + name, code, name})
		}
	}
	return cs
}

// TestGPUSuiteOnFakeLibraries runs this binary's GPU tests again in a
// child process whose "CUDA" is testdata/fakecuda.c: host memory for device
// memory, naive BLAS and Cholesky, a JIT that knows the tests' two kernels.
// Every Go wrapper is exercised down to the C entry point, with arguments
// checked as the real libraries check them, on machines without a GPU.
func TestGPUSuiteOnFakeLibraries(t *testing.T) {
	if os.Getenv("STARPU_CUDA_FAKE_CHILD") != "" {
		t.Skip("already the child")
	}
	lib := buildFakeDriver(t, "libfakegpu.so.1", nil)
	cmd := exec.Command(os.Args[0], "-test.run=^TestGPU", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "STARPU_CUDA_FAKE_CHILD=1", "CUDA_FAKE_DEVICES=2", "CUDA_FAKE_INIT=", "CUDA_FAKE_VERSION=",
		EnvDriverLibrary+"="+lib, EnvBLASLibrary+"="+lib, EnvSolverLibrary+"="+lib, EnvNVRTCLibrary+"="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("GPU tests on the fake libraries: %v\n%s", err, out)
	}
	passed := 0
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "--- PASS: TestGPU"):
			passed++
		case strings.HasPrefix(line, "--- SKIP: TestGPU") && !strings.Contains(line, "TestGPUSuiteOnFakeLibraries"):
			t.Errorf("skipped on the fake libraries: %s", line)
		}
	}
	if passed < 12 {
		t.Errorf("only %d GPU tests passed on the fake libraries:\n%s", passed, out)
	}
	if testing.Verbose() {
		t.Logf("child output:\n%s", out)
	}
}
