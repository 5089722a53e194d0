package core

import (
	"fmt"
	"sort"
	"strings"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Mode is a buffer's access mode.
type Mode = kernel.Mode

// Access modes.
const (
	R  = kernel.R
	W  = kernel.W
	RW = kernel.RW
)

// VariableBuffers as Codelet.NBuffers means each task gives its own modes
// (Task.Modes), one per handle.
const VariableBuffers = -1

// Codelet describes a computation: its kernels, named per architecture, and
// how it accesses its buffers. A codelet must not change once a task using it
// has been submitted.
type Codelet struct {
	Name string
	// Kernels names the implementation for each architecture; a driver of
	// that architecture must host a kernel of that name.
	Kernels map[driver.Arch]string
	// NBuffers is the number of buffers, or VariableBuffers. Zero means
	// len(Modes).
	NBuffers int
	// Modes gives each buffer's access mode (fixed-buffer codelets).
	Modes []Mode
}

// codeletInfo is what the runtime resolved about a codelet at its first
// submit: which architectures can run it and the kernel index per driver.
type codeletInfo struct {
	id       uint32
	archMask uint32
	// kernel[d] is the kernel's index in driver d's list, or -1.
	kernel []int32
}

func (cl *Codelet) nbuffers() int {
	if cl.NBuffers == 0 {
		return len(cl.Modes)
	}
	return cl.NBuffers
}

func (cl *Codelet) validate() error {
	if cl.NBuffers < VariableBuffers {
		return fmt.Errorf("%w: codelet %q: NBuffers = %d", ErrInvalidTask, cl.Name, cl.NBuffers)
	}
	if cl.NBuffers > 0 && len(cl.Modes) != cl.NBuffers {
		return fmt.Errorf("%w: codelet %q: NBuffers = %d but %d modes", ErrInvalidTask, cl.Name, cl.NBuffers, len(cl.Modes))
	}
	for i, m := range cl.Modes {
		if !validMode(m) {
			return fmt.Errorf("%w: codelet %q: buffer %d has invalid mode %v", ErrInvalidTask, cl.Name, i, m)
		}
	}
	if len(cl.Kernels) == 0 {
		return fmt.Errorf("%w: codelet %q names no kernel for any architecture", ErrNoWorker, cl.Name)
	}
	return nil
}

func validMode(m Mode) bool { return m == R || m == W || m == RW }

// resolve finds, once per codelet, the drivers that host its kernels.
func (rt *Runtime) resolve(cl *Codelet) (*codeletInfo, error) {
	if v, ok := rt.codelets.Load(cl); ok {
		return v.(*codeletInfo), nil
	}
	if err := cl.validate(); err != nil {
		return nil, err
	}
	info := &codeletInfo{kernel: make([]int32, len(rt.drivers))}
	for d, drv := range rt.drivers {
		info.kernel[d] = -1
		name, ok := cl.Kernels[drv.fp.Arch]
		if !ok || len(drv.workers) == 0 {
			continue
		}
		if k, ok := drv.kernelIndex[name]; ok {
			info.kernel[d] = int32(k)
			info.archMask |= driver.ArchBit(drv.fp.Arch)
		}
	}
	if info.archMask == 0 {
		return nil, fmt.Errorf("%w: codelet %q wants %s; %s", ErrNoWorker, cl.Name, describeKernels(cl.Kernels), rt.describeDrivers())
	}
	rt.clMu.Lock()
	info.id = rt.nextCodelet
	rt.nextCodelet++
	rt.clMu.Unlock()
	v, _ := rt.codelets.LoadOrStore(cl, info)
	return v.(*codeletInfo), nil
}

func describeKernels(k map[driver.Arch]string) string {
	var parts []string
	for a, n := range k {
		parts = append(parts, fmt.Sprintf("%s kernel %q", a, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func (rt *Runtime) describeDrivers() string {
	if len(rt.drivers) == 0 {
		return "no driver is loaded"
	}
	var parts []string
	for _, d := range rt.drivers {
		parts = append(parts, fmt.Sprintf("driver-%s (%s, %d workers) hosts %d kernels", d.name, d.fp.Arch, len(d.workers), len(d.fp.Kernels)))
	}
	return strings.Join(parts, "; ")
}
