package cldriver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-opencl/cl"
)

// pluginPath is the driver-opencl binary TestMain builds, for the tests
// that run the driver as a real plugin process.
var pluginPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "driver-opencl-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginPath = filepath.Join(dir, "driver-opencl")
	out, err := exec.Command("go", "build", "-o", pluginPath, "github.com/starpu-go/starpu/plugins/driver-opencl").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build driver-opencl: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// machine is what the test machine's OpenCL offers, found through the
// binding rather than the driver.
type machine struct {
	cpus, others int // CPU-type devices, GPU and accelerator devices
	firstCPU     string
	cpuMem       uint64
}

func probe(t testing.TB) machine {
	t.Helper()
	var m machine
	ps, err := cl.Platforms()
	if err != nil {
		return m
	}
	for _, p := range ps {
		pname, _ := p.Name()
		ds, err := p.Devices(cl.DeviceAll)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			info, err := d.Info()
			if err != nil {
				t.Fatal(err)
			}
			if info.Type&(cl.DeviceGPU|cl.DeviceAccelerator) != 0 {
				m.others++
				continue
			}
			if m.cpus == 0 {
				m.firstCPU, m.cpuMem = pname+": "+info.Name, info.GlobalMemSize
			}
			m.cpus++
		}
	}
	return m
}

// needDevice skips a test on a machine without any OpenCL device.
func needDevice(t testing.TB) machine {
	t.Helper()
	m := probe(t)
	if m.cpus+m.others == 0 {
		t.Skip("no OpenCL device on this machine (install pocl-opencl-icd for a CPU one)")
	}
	return m
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newArena makes an arena for tests that start a driver without a rig.
func newArena(t testing.TB) *shm.Arena {
	t.Helper()
	a, err := shm.Create(512<<20, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// launch starts the driver as a plugin process with env added to the
// test's environment, as the core's loader does: arena on fd 3, go-plugin
// handshake, gRPC.
func launch(t testing.TB, a *shm.Arena, env []string) driver.Driver {
	t.Helper()
	return drivertest.StartPlugin(t, pluginPath, a, env...)
}

// inProcess returns a driver in this process, with env set for the test.
var inProcess = drivertest.InProcess(func(a *shm.Arena) driver.Driver {
	return New(a, hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}))
})

// mode is one way of running the driver.
type mode struct {
	name  string
	start drivertest.Starter
}

var modes = []mode{{"in-process", inProcess}, {"plugin", launch}}

// startRig starts the driver with one worker on unit 0, OpenCL on CPUs
// allowed, and returns the worker.
func startRig(t testing.TB, m mode, env ...string) *drivertest.Worker {
	t.Helper()
	needDevice(t)
	r := drivertest.Start(t, m.start, drivertest.Env(append([]string{EnvOnCPUs + "=1"}, env...)...), drivertest.Timeout(time.Minute))
	return r.W(0)
}

// vec describes a vector on the worker's device, node 1.
func vec(buf, n uint64, elem uint32, m kernel.Mode) wire.BufferDesc {
	return drivertest.Vec(1, buf, n, elem, m)
}

// mat describes a matrix on the worker's device, node 1.
func mat(buf, nx, ny, ld uint64, elem uint32, m kernel.Mode) wire.BufferDesc {
	return drivertest.Mat(1, buf, nx, ny, ld, elem, m)
}
