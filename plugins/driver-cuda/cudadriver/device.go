package cudadriver

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/starpu-go/starpu/plugins/driver-cuda/cu"
)

// device is an opened GPU: its primary context and the kernels it runs.
// Its buffers, streams and library handles belong to its worker.
type device struct {
	index int
	name  string
	unit  unit
	dev   cu.Device
	ctx   cu.Context

	// mu guards modules; LoadKernel builds while the worker runs.
	mu sync.Mutex
	// modules are the loaded modules by source hash: two kernels of one
	// source share one module.
	modules map[[32]byte]cu.Module
	// kernels is indexed by kernel index; replaced whole (copy on write)
	// so that the worker reads it without a lock.
	kernels atomic.Pointer[[]*devKernel]
}

// devKernel is a kernel a device runs: a library routine (lib) or a
// function of a loaded module.
type devKernel struct {
	name string
	lib  *builtin
	fn   cu.Function
}

func openDevice(index int, u unit, builtins []*builtin) (*device, error) {
	d := &device{index: index, name: fmt.Sprintf("CUDA %d (%s)", index, u.info.Name), unit: u, modules: map[[32]byte]cu.Module{}}
	var err error
	if d.dev, err = cu.DeviceGet(u.info.Ordinal); err != nil {
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	if d.ctx, err = d.dev.PrimaryCtxRetain(); err != nil {
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	ks := make([]*devKernel, len(builtins))
	for i, b := range builtins {
		ks[i] = &devKernel{name: b.fullName(), lib: b}
	}
	d.kernels.Store(&ks)
	return d, nil
}

// withContext runs f with the device's context current on a locked
// thread.
func (d *device) withContext(f func() error) error { return lockedContext(d.ctx, f) }

// isPTX reports whether a kernel source is PTX rather than CUDA C: its
// first token, after comments and white space, is a .version directive.
func isPTX(src string) bool {
	s := src
	for {
		s = strings.TrimLeft(s, " \t\r\n\f\v")
		switch {
		case strings.HasPrefix(s, "//"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return false
			}
			s = s[i+1:]
		case strings.HasPrefix(s, "/*"):
			i := strings.Index(s[2:], "*/")
			if i < 0 {
				return false
			}
			s = s[i+4:]
		default:
			return strings.HasPrefix(s, ".version") && (len(s) == 8 || strings.ContainsRune(" \t\r\n", rune(s[8])))
		}
	}
}

// image is what the device loads for a kernel source: the PTX as given,
// or the source compiled by NVRTC for the device's compute capability (a
// cubin, or PTX where NVRTC cannot make a cubin for it).
func (d *device) image(lk loadedKernel) ([]byte, error) {
	if isPTX(lk.source) {
		return []byte(lk.source), nil
	}
	file := lk.name + ".cu"
	sm := fmt.Sprintf("--gpu-architecture=sm_%d%d", d.unit.info.Major, d.unit.info.Minor)
	p, err := cu.Compile(lk.source, file, sm, "-default-device")
	var ce *cu.Error
	if errors.As(err, &ce) && ce.Lib == cu.LibNVRTC && ce.Code == nvrtcInvalidOption {
		// An NVRTC older than the GPU knows no sm_ for it: PTX for the
		// newest it knows is JIT-compiled by the driver instead.
		compute := fmt.Sprintf("--gpu-architecture=compute_%d%d", d.unit.info.Major, d.unit.info.Minor)
		p, err = cu.Compile(lk.source, file, compute, "-default-device")
	}
	if err != nil {
		return nil, fmt.Errorf("NVRTC (%s): %w", sm, err)
	}
	return p.Image(), nil
}

// nvrtcInvalidOption is NVRTC_ERROR_INVALID_OPTION.
const nvrtcInvalidOption = 5

// build loads a kernel's module (compiled once per source and device)
// into the device's context and finds the kernel's function.
func (d *device) build(lk loadedKernel) (*devKernel, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.modules[lk.hash]
	if !ok {
		img, err := d.image(lk)
		if err != nil {
			return nil, err
		}
		if err := d.withContext(func() error {
			var err error
			m, err = cu.ModuleLoadData(img)
			return err
		}); err != nil {
			return nil, err
		}
		d.modules[lk.hash] = m
	}
	var fn cu.Function
	if err := d.withContext(func() error {
		var err error
		fn, err = m.Function(lk.name)
		return err
	}); err != nil {
		return nil, fmt.Errorf("%w (CUDA C kernels must be extern \"C\" __global__)", err)
	}
	return &devKernel{name: lk.name, fn: fn}, nil
}

// publish makes kernel index idx run k.
func (d *device) publish(idx int, k *devKernel) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := *d.kernels.Load()
	ks := make([]*devKernel, max(len(old), idx+1))
	copy(ks, old)
	ks[idx] = k
	d.kernels.Store(&ks)
}

// close unloads the modules and releases the primary context; the
// device's worker has stopped.
func (d *device) close() error {
	var errs []error
	d.mu.Lock()
	if len(d.modules) > 0 {
		errs = append(errs, d.withContext(func() error {
			var errs []error
			for _, m := range d.modules {
				errs = append(errs, m.Unload())
			}
			return errors.Join(errs...)
		}))
	}
	d.modules = map[[32]byte]cu.Module{}
	d.mu.Unlock()
	if !d.ctx.IsNil() {
		errs = append(errs, d.ctx.Release())
		d.ctx = cu.Context{}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: close: %w", d.name, err)
	}
	return nil
}
