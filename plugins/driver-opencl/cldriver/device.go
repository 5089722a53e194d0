package cldriver

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/starpu-go/starpu/plugins/driver-opencl/cl"
)

// Queue indices: transfers and kernels run on two in-order queues of the
// device, so that a copy can overlap a kernel.
const (
	xferQ   = 0
	kernelQ = 1
	nqueues = 2
)

// device is an opened OpenCL device: its context, queues, programs and
// kernels. Its buffers belong to its worker.
type device struct {
	index int
	name  string
	unit  unit
	ctx   cl.Context
	q     [nqueues]cl.Queue

	// mu guards programs; LoadKernel builds while the worker runs.
	mu       sync.Mutex
	programs map[[32]byte]cl.Program
	// lib holds the built-in library's programs, one per precision.
	lib []cl.Program
	// kernels is indexed by kernel index; replaced whole (copy on write)
	// so that the worker reads it without a lock.
	kernels atomic.Pointer[[]*devKernel]
}

// devKernel is a kernel ready to run on a device. Only the device's worker
// sets its arguments and enqueues it.
type devKernel struct {
	name  string
	k     cl.Kernel
	nargs int
	// lib is the library entry of a built-in kernel, nil for a loaded one.
	lib *builtin
}

func openDevice(index int, u unit, builtins []*builtin, loaded []loadedKernel) (dev *device, err error) {
	d := &device{index: index, name: fmt.Sprintf("OpenCL %d (%s)", index, u.info.Name), unit: u, programs: map[[32]byte]cl.Program{}}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.ctx, err = cl.CreateContext(u.dev); err != nil {
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	for i := range d.q {
		// Profiling gives kernels' durations on the device.
		if d.q[i], err = d.ctx.CreateQueue(u.dev, true); err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
	}
	ks := make([]*devKernel, 0, len(builtins)+len(loaded))
	d.kernels.Store(&ks)
	progs := map[precision]cl.Program{}
	for _, b := range builtins {
		p, ok := progs[b.prec]
		if !ok {
			if p, err = d.ctx.BuildProgram(librarySource, []cl.Device{u.dev}, b.prec.options); err != nil {
				return nil, fmt.Errorf("%s: built-in library (%s): %w", d.name, b.prec.suffix, err)
			}
			progs[b.prec] = p
			d.lib = append(d.lib, p)
		}
		dk, err := newDevKernel(p, b.fullName())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		dk.lib = b
		ks = append(ks, dk)
		d.kernels.Store(&ks)
	}
	for _, lk := range loaded {
		dk, err := d.build(lk)
		if err != nil {
			return nil, fmt.Errorf("%s: kernel %q: %w", d.name, lk.name, err)
		}
		ks = append(ks, dk)
		d.kernels.Store(&ks)
	}
	return d, nil
}

func newDevKernel(p cl.Program, name string) (*devKernel, error) {
	k, err := p.CreateKernel(name)
	if err != nil {
		return nil, err
	}
	n, err := k.NumArgs()
	if err != nil {
		k.Release()
		return nil, fmt.Errorf("kernel %q: %w", name, err)
	}
	return &devKernel{name: name, k: k, nargs: n}, nil
}

// build compiles a loaded kernel's source, or reuses the program built from
// the same source, and creates the kernel.
func (d *device) build(lk loadedKernel) (*devKernel, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.programs[lk.hash]
	if !ok {
		var err error
		if p, err = d.ctx.BuildProgram(lk.source, []cl.Device{d.unit.dev}, ""); err != nil {
			return nil, err
		}
		d.programs[lk.hash] = p
	}
	return newDevKernel(p, lk.name)
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

// close releases everything the device holds; its worker has stopped.
func (d *device) close() error {
	var errs []error
	if p := d.kernels.Load(); p != nil {
		for _, k := range *p {
			if k != nil {
				errs = append(errs, k.k.Release())
			}
		}
	}
	for _, p := range d.programs {
		errs = append(errs, p.Release())
	}
	for _, p := range d.lib {
		errs = append(errs, p.Release())
	}
	for _, q := range d.q {
		if q != (cl.Queue{}) {
			errs = append(errs, q.Release())
		}
	}
	if d.ctx != (cl.Context{}) {
		errs = append(errs, d.ctx.Release())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: close: %w", d.name, err)
	}
	return nil
}
