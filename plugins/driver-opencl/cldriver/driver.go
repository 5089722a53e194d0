package cldriver

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/driver-opencl/cl"
)

// Version is the driver's plugin version.
const Version = "0.1.0"

// Environment variables, with StarPU's names and meanings. They override
// the plugin's config block.
const (
	// EnvOnCPUs = 1 lets CPU-type OpenCL devices (pocl) be units.
	EnvOnCPUs = "STARPU_OPENCL_ON_CPUS"
	// EnvLimitMem caps each device's memory node, in MiB.
	EnvLimitMem = "STARPU_LIMIT_OPENCL_MEM"
	// EnvNDevices caps the number of devices used (0: none, -1: all).
	EnvNDevices = "STARPU_NOPENCL"
	// EnvPipeline is how many kernels of implementations flagged
	// asynchronous a worker keeps in flight (default 2; 0 runs every
	// kernel synchronously).
	EnvPipeline = "STARPU_OPENCL_PIPELINE"
)

// defaultPipeline is StarPU's default for EnvPipeline.
const defaultPipeline = 2

// Driver is the OpenCL driver: one unit and one memory node per OpenCL
// device, one worker per unit the core asks for.
type Driver struct {
	arena *shm.Arena
	log   hclog.Logger

	mu  sync.Mutex
	cfg settings
	// found is the discovery the driver runs on: refreshed by each
	// Fingerprint until a device is opened (Init, LoadKernel), then fixed
	// so that units and kernel indices stay what the core was told.
	found  *discovery
	frozen bool
	devs   []*device // per unit, nil until opened
	// loaded are the kernels given by LoadKernel, indexed from
	// len(builtins); loadedIdx finds one by name and source hash.
	builtins  []*builtin
	loaded    []loadedKernel
	loadedIdx map[loadedKey]int

	workers []*worker
	wg      sync.WaitGroup
	stop    atomic.Bool
}

// loadedKernel is a kernel compiled from source by LoadKernel.
type loadedKernel struct {
	name, source string
	hash         [32]byte
}

type loadedKey struct {
	name string
	hash [32]byte
}

// settings are the driver's knobs, from the config block and then the
// environment.
type settings struct {
	onCPUs   bool
	limitMiB int64 // < 0: no limit
	// limitErr is a malformed EnvLimitMem: an error once a device would be
	// capped by it, a remark in the Note while no device is used.
	limitErr error
	ndevices int64 // < 0: all
	// from says where ndevices came from, for the Note.
	ndevFrom string
	// pipeline is how many asynchronous kernels a worker keeps in flight.
	pipeline int64
}

// New returns an OpenCL driver over the arena.
func New(a *shm.Arena, log hclog.Logger) *Driver {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Driver{arena: a, log: log, cfg: settings{limitMiB: -1, ndevices: -1, pipeline: defaultPipeline}, loadedIdx: map[loadedKey]int{}}
}

// Serve is the whole main() of the OpenCL driver plugin.
func Serve() {
	driver.Serve(func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
		return New(a, log), nil
	})
}

// PluginInfo implements base.Plugin.
func (d *Driver) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindDriver, Name: "opencl", Version: Version, APIVersions: []int{base.APIVersion}}, nil
}

// ConfigSchema implements base.Plugin.
func (d *Driver) ConfigSchema(context.Context) (*base.Schema, error) {
	return &base.Schema{Attrs: []base.Attr{
		{Name: "on_cpus", Type: base.AttrBool, Default: "false", Doc: "use CPU-type OpenCL devices (pocl) too; env " + EnvOnCPUs},
		{Name: "limit_mem_mib", Type: base.AttrInt, Doc: "memory the runtime may use on each device, in MiB (default: all of it); env " + EnvLimitMem},
		{Name: "ndevices", Type: base.AttrInt, Doc: "how many OpenCL devices to use, 0 for none (default: all); env " + EnvNDevices},
		{Name: "pipeline", Type: base.AttrInt, Default: strconv.Itoa(defaultPipeline), Doc: "kernels of implementations flagged asynchronous (ImplAsync) each worker keeps in flight, 0 to run every kernel synchronously; env " + EnvPipeline},
	}}, nil
}

// SetConfig implements base.Plugin.
func (d *Driver) SetConfig(ctx context.Context, cfg base.Config) error {
	s, _ := d.ConfigSchema(ctx)
	if err := s.Validate(cfg); err != nil {
		return fmt.Errorf("driver-opencl config: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	next := d.cfg
	if v, ok := cfg["on_cpus"].(bool); ok {
		next.onCPUs = v
	}
	if v, ok := cfg["limit_mem_mib"].(int64); ok {
		if v < 0 {
			return fmt.Errorf("driver-opencl config: limit_mem_mib = %d: must be at least 0", v)
		}
		next.limitMiB = v
	}
	if v, ok := cfg["ndevices"].(int64); ok {
		if v < -1 {
			return fmt.Errorf("driver-opencl config: ndevices = %d: must be -1 (all) or more", v)
		}
		next.ndevices, next.ndevFrom = v, "the config's ndevices = "+strconv.FormatInt(v, 10)
	}
	if v, ok := cfg["pipeline"].(int64); ok {
		if v < 0 || v > maxPipeline {
			return fmt.Errorf("driver-opencl config: pipeline = %d: want 0 to %d", v, maxPipeline)
		}
		next.pipeline = v
	}
	d.cfg = next
	return nil
}

// effective is the config overridden by the environment.
func (d *Driver) effective() (settings, error) {
	s := d.cfg
	if s.ndevFrom == "" {
		s.ndevFrom = "ndevices"
	}
	if v, ok := os.LookupEnv(EnvOnCPUs); ok && v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("driver-opencl: %s=%q: want 0 or 1", EnvOnCPUs, v)
		}
		s.onCPUs = b
	}
	if v, ok := os.LookupEnv(EnvLimitMem); ok && v != "" {
		n, err := parseLimitMiB(v)
		if err != nil {
			s.limitErr = fmt.Errorf("environment variable %s=%q: %w", EnvLimitMem, v, err)
		} else {
			s.limitMiB = n
		}
	}
	if v, ok := os.LookupEnv(EnvNDevices); ok && v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			return s, fmt.Errorf("driver-opencl: %s=%q: want a number of devices (-1 for all)", EnvNDevices, v)
		}
		s.ndevices, s.ndevFrom = n, EnvNDevices+"="+v
	}
	if v, ok := os.LookupEnv(EnvPipeline); ok && v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 || n > maxPipeline {
			return s, fmt.Errorf("driver-opencl: %s=%q: want a number of kernels from 0 to %d", EnvPipeline, v, maxPipeline)
		}
		s.pipeline = n
	}
	return s, nil
}

// maxPipeline bounds EnvPipeline: beyond a few kernels in flight a worker
// only holds back tasks other workers could run.
const maxPipeline = 64

// parseLimitMiB parses a value of EnvLimitMem: a whole number of MiB, 0 or
// more (surrounding spaces allowed, as core/config allows them). A value
// beyond any device's memory leaves the devices uncapped.
func parseLimitMiB(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(strings.TrimSpace(v), "-"):
		return math.MaxInt64, nil
	case err != nil:
		return 0, errors.New("want a whole number of MiB, 0 or more")
	case n < 0:
		return 0, errors.New("must not be negative (unset it for no limit)")
	}
	return n, nil
}

// capBytes is a device's memory of mem bytes capped at limitMiB MiB (no cap
// when limitMiB < 0), without overflowing for large limits.
func capBytes(mem uint64, limitMiB int64) uint64 {
	if limitMiB < 0 || uint64(limitMiB) > mem>>20 {
		return mem
	}
	return uint64(limitMiB) << 20
}

// unit is one OpenCL device the driver uses.
type unit struct {
	platform string
	dev      cl.Device
	info     cl.DeviceInfo
	// limit is the memory node's size: the device's memory or the user's
	// limit when smaller.
	limit uint64
}

// discovery is what the driver found, under its settings.
type discovery struct {
	units []unit
	fp64  bool // every unit has cl_khr_fp64
	note  string
}

func (d *Driver) discover() (*discovery, error) {
	s, err := d.effective()
	if err != nil {
		return nil, err
	}
	// A malformed limit matters only once a device would be capped by it.
	ignored := func(d *discovery) *discovery {
		if s.limitErr != nil {
			d.note += fmt.Sprintf("; ignored, as no device uses it: %v", s.limitErr)
		}
		return d
	}
	if s.ndevices == 0 {
		return ignored(&discovery{note: "OpenCL disabled by " + s.ndevFrom}), nil
	}
	ps, err := cl.Platforms()
	if err != nil {
		var ce *cl.Error
		if errors.As(err, &ce) && ce.Code == cl.PlatformNotFoundKHR {
			return ignored(&discovery{note: "no OpenCL platform (" + err.Error() + "): is an OpenCL ICD such as pocl-opencl-icd installed?"}), nil
		}
		return nil, fmt.Errorf("driver-opencl: %w", err)
	}
	if len(ps) == 0 {
		return ignored(&discovery{note: "no OpenCL platform: is an OpenCL ICD such as pocl-opencl-icd installed?"}), nil
	}
	disc := &discovery{fp64: true}
	var skipped, platforms []string
	for _, p := range ps {
		pname, err := p.Name()
		if err != nil {
			return nil, fmt.Errorf("driver-opencl: %w", err)
		}
		platforms = append(platforms, pname)
		devs, err := p.Devices(cl.DeviceAll)
		if err != nil {
			return nil, fmt.Errorf("driver-opencl: platform %s: %w", pname, err)
		}
		for _, dev := range devs {
			info, err := dev.Info()
			if err != nil {
				return nil, fmt.Errorf("driver-opencl: platform %s: %w", pname, err)
			}
			if info.Type&(cl.DeviceGPU|cl.DeviceAccelerator) == 0 && !s.onCPUs {
				skipped = append(skipped, pname+": "+info.Name)
				continue
			}
			if s.ndevices >= 0 && int64(len(disc.units)) >= s.ndevices {
				continue
			}
			u := unit{platform: pname, dev: dev, info: info, limit: capBytes(info.GlobalMemSize, s.limitMiB)}
			disc.fp64 = disc.fp64 && info.HasExtension("cl_khr_fp64")
			disc.units = append(disc.units, u)
		}
	}
	switch {
	case len(disc.units) > 0:
	case len(skipped) == 1:
		disc.note = fmt.Sprintf("found 1 CPU-type OpenCL device (%s); set %s=1 to use it", skipped[0], EnvOnCPUs)
	case len(skipped) > 1:
		disc.note = fmt.Sprintf("found %d CPU-type OpenCL devices (%s); set %s=1 to use them", len(skipped), strings.Join(skipped, "; "), EnvOnCPUs)
	default:
		disc.note = fmt.Sprintf("no OpenCL device on platform(s) %s", strings.Join(platforms, ", "))
	}
	if len(disc.units) == 0 {
		disc.fp64 = false
		return ignored(disc), nil
	}
	if s.limitErr != nil {
		return nil, fmt.Errorf("driver-opencl: %w", s.limitErr)
	}
	return disc, nil
}

// current is the discovery to use: the fixed one once a device is open,
// else a fresh one. Call with d.mu held.
func (d *Driver) current() (*discovery, error) {
	if d.frozen {
		return d.found, nil
	}
	disc, err := d.discover()
	if err != nil {
		return nil, err
	}
	d.found = disc
	d.builtins = library(disc.fp64)
	return disc, nil
}

// freeze fixes the discovery, before a device is opened. Call with d.mu
// held.
func (d *Driver) freeze() (*discovery, error) {
	disc, err := d.current()
	if err != nil {
		return nil, err
	}
	if !d.frozen {
		d.frozen = true
		d.devs = make([]*device, len(disc.units))
	}
	return disc, nil
}

// Fingerprint implements driver.Driver: one unit per device, on its own
// memory node (unit i on node i+1).
func (d *Driver) Fingerprint(context.Context) (*driver.Fingerprint, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	disc, err := d.current()
	if err != nil {
		return nil, err
	}
	fp := &driver.Fingerprint{Arch: driver.OpenCL, Note: disc.note}
	for i, u := range disc.units {
		fp.Units = append(fp.Units, driver.Unit{Name: fmt.Sprintf("OpenCL %d: %s (%s, %s)", i, u.info.Name, u.platform, u.info.Type), Node: i + 1})
		fp.Nodes = append(fp.Nodes, driver.MemoryNode{Name: fmt.Sprintf("OpenCL %d memory (%s)", i, u.info.Name), Bytes: u.limit})
	}
	for _, b := range d.builtins {
		fp.Kernels = append(fp.Kernels, b.fullName())
	}
	for _, k := range d.loaded {
		fp.Kernels = append(fp.Kernels, k.name)
	}
	return fp, nil
}

// openDevice opens unit i (context, queues, kernels) if it is not yet.
// Call with d.mu held, after freeze.
func (d *Driver) openDevice(i int) (*device, error) {
	if d.devs[i] != nil {
		return d.devs[i], nil
	}
	dev, err := openDevice(i, d.found.units[i], d.builtins, d.loaded)
	if err != nil {
		return nil, err
	}
	d.devs[i] = dev
	return dev, nil
}

// Init implements driver.Driver: it opens the workers' devices and starts
// one worker per WorkerSpec, each on its own locked OS thread.
func (d *Driver) Init(_ context.Context, req *driver.InitRequest) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.workers) > 0 {
		return errors.New("driver-opencl: already initialised")
	}
	if d.arena == nil {
		return errors.New("driver-opencl: no shared-memory arena")
	}
	disc, err := d.freeze()
	if err != nil {
		return err
	}
	cfg, err := d.effective()
	if err != nil {
		return err
	}
	var ws []*worker
	fail := func(err error) error {
		for _, w := range ws {
			w.close()
		}
		return err
	}
	used := map[int]int{}
	for _, spec := range req.Workers {
		if spec.Unit < 0 || spec.Unit >= len(disc.units) {
			return fail(fmt.Errorf("driver-opencl: worker %d: unit %d out of range (%d units)", spec.ID, spec.Unit, len(disc.units)))
		}
		if other, dup := used[spec.Unit]; dup {
			return fail(fmt.Errorf("driver-opencl: workers %d and %d on unit %d: one worker per OpenCL device", other, spec.ID, spec.Unit))
		}
		used[spec.Unit] = spec.ID
		dev, err := d.openDevice(spec.Unit)
		if err != nil {
			return fail(fmt.Errorf("driver-opencl: worker %d: %w", spec.ID, err))
		}
		w, err := d.newWorker(spec, dev, req.SpinIters)
		if err != nil {
			return fail(fmt.Errorf("driver-opencl: worker %d: %w", spec.ID, err))
		}
		w.pipe = driver.NewPipeline(int(cfg.pipeline))
		ws = append(ws, w)
	}
	d.stop.Store(false)
	d.workers = ws
	for _, w := range ws {
		d.wg.Add(1)
		go d.run(w)
	}
	return nil
}

// Deinit implements driver.Driver: the workers finish the commands they
// have in flight, free their buffers and stop; then the devices close.
func (d *Driver) Deinit(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stop.Store(true)
	for _, w := range d.workers {
		w.rings.Bell.Ring()
	}
	d.wg.Wait()
	d.workers = nil
	var errs []error
	for i, dev := range d.devs {
		if dev != nil {
			errs = append(errs, dev.close())
			d.devs[i] = nil
		}
	}
	// The discovery stays fixed: kernel indices must not move.
	return errors.Join(errs...)
}

// LoadKernel implements driver.Driver: it builds the source for every unit
// (once per source: programs are cached by source hash) and returns the
// kernel's index, after the built-in kernels. A build failure is an error
// carrying the build log.
func (d *Driver) LoadKernel(_ context.Context, k driver.KernelSource) (int, error) {
	if k.Name == "" || strings.TrimSpace(k.Source) == "" {
		return 0, fmt.Errorf("driver-opencl: load kernel %q: empty name or source", k.Name)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	lk := loadedKernel{name: k.Name, source: k.Source, hash: sha256.Sum256([]byte(k.Source))}
	key := loadedKey{lk.name, lk.hash}
	if idx, ok := d.loadedIdx[key]; ok {
		return idx, nil
	}
	disc, err := d.freeze()
	if err != nil {
		return 0, err
	}
	if len(disc.units) == 0 {
		return 0, fmt.Errorf("driver-opencl: no OpenCL device to build kernel %q for: %s", k.Name, disc.note)
	}
	idx := len(d.builtins) + len(d.loaded)
	built := make([]*devKernel, len(disc.units))
	for i := range disc.units {
		dev, err := d.openDevice(i)
		if err != nil {
			return 0, fmt.Errorf("driver-opencl: kernel %q: %w", k.Name, err)
		}
		if built[i], err = dev.build(lk); err != nil {
			for _, b := range built[:i] {
				b.k.Release()
			}
			return 0, fmt.Errorf("driver-opencl: kernel %q on %s: %w", k.Name, dev.name, err)
		}
	}
	for i, b := range built {
		d.devs[i].publish(idx, b)
	}
	d.loaded = append(d.loaded, lk)
	d.loadedIdx[key] = idx
	return idx, nil
}
