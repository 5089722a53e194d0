package cudadriver

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"
	"github.com/starpu-go/starpu/plugins/driver-cuda/cu"
)

// Version is the driver's plugin version.
const Version = "0.1.0"

// Environment variables, with StarPU's names and meanings where StarPU has
// them. They override the plugin's config block.
const (
	// EnvNDevices caps the number of GPUs used (0: none, -1: all).
	EnvNDevices = "STARPU_NCUDA"
	// EnvLimitMem caps each GPU's memory node, in MiB.
	EnvLimitMem = "STARPU_LIMIT_CUDA_MEM"
	// EnvPipeline is how many kernels of implementations flagged
	// asynchronous a worker keeps in flight (default 2; 0 runs every
	// kernel synchronously).
	EnvPipeline = "STARPU_CUDA_PIPELINE"
	// EnvPin = 1 registers the arena's heap with the driver (page-locked,
	// so copies are DMA); 0 leaves it pageable. Not a StarPU variable:
	// StarPU pins its own buffers one by one.
	EnvPin = "STARPU_CUDA_PIN"
	// EnvGPUDirect = 0 sends every copy between two GPUs through RAM; 1
	// (the default) copies straight between GPUs that have peer access.
	EnvGPUDirect = "STARPU_ENABLE_CUDA_GPU_GPU_DIRECT"
)

// defaultPipeline is StarPU's default for EnvPipeline.
const defaultPipeline = 2

// maxPipeline bounds EnvPipeline: beyond a few kernels in flight a worker
// only holds back tasks other workers could run.
const maxPipeline = 64

// Driver is the CUDA driver: one unit and one memory node per GPU, one
// worker per unit the core asks for.
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
	// builtins are the library kernels the loaded libraries provide;
	// loaded the kernels given by LoadKernel, indexed from len(builtins);
	// loadedIdx finds one by name and source hash.
	builtins  []*builtin
	loaded    []loadedKernel
	loadedIdx map[loadedKey]int

	workers []*worker
	wg      sync.WaitGroup
	// drained counts the started workers that may still queue commands: a
	// worker frees its buffers only once every worker has drained, since a
	// peer's copy may still be writing them.
	drained sync.WaitGroup
	stop    atomic.Bool
	// pinned is the arena heap registered with the driver at Init, nil
	// when it is not.
	pinned []byte
}

// loadedKernel is a kernel given as source (CUDA C or PTX) to LoadKernel.
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
	limitMiB int64 // < 0: no limit
	// limitErr is a malformed EnvLimitMem: an error once a device would be
	// capped by it, a remark in the Note while no device is used.
	limitErr error
	ndevices int64 // < 0: all
	// ndevFrom says where ndevices came from, for the Note.
	ndevFrom string
	pipeline int64
	pin      bool
	// noDirect turns peer copies off (EnvGPUDirect=0).
	noDirect bool
}

// defaultSettings are the driver's defaults. Pinning is off by default: it
// commits the whole heap (see docs/design/cuda.md, "Pinned host memory").
func defaultSettings() settings {
	return settings{limitMiB: -1, ndevices: -1, pipeline: defaultPipeline}
}

// New returns a CUDA driver over the arena.
func New(a *shm.Arena, log hclog.Logger) *Driver {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Driver{arena: a, log: log, cfg: defaultSettings(), loadedIdx: map[loadedKey]int{}}
}

// Serve is the whole main() of the CUDA driver plugin.
func Serve() {
	driver.Serve(func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
		return New(a, log), nil
	})
}

// PluginInfo implements base.Plugin.
func (d *Driver) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: base.KindDriver, Name: "cuda", Version: Version, APIVersions: []int{base.APIVersion}}, nil
}

// ConfigSchema implements base.Plugin.
func (d *Driver) ConfigSchema(context.Context) (*base.Schema, error) {
	return &base.Schema{Attrs: []base.Attr{
		{Name: "limit_mem_mib", Type: base.AttrInt, Doc: "memory the runtime may use on each GPU, in MiB (default: all of it); env " + EnvLimitMem},
		{Name: "ndevices", Type: base.AttrInt, Doc: "how many GPUs to use, 0 for none (default: all); env " + EnvNDevices},
		{Name: "pipeline", Type: base.AttrInt, Default: strconv.Itoa(defaultPipeline), Doc: "kernels of implementations flagged asynchronous (ImplAsync) each worker keeps in flight, 0 to run every kernel synchronously; env " + EnvPipeline},
		{Name: "pin", Type: base.AttrBool, Default: "false", Doc: "page-lock the shared arena's heap so that copies are DMA (see docs/design/cuda.md before turning it on); env " + EnvPin},
		{Name: "gpu_direct", Type: base.AttrBool, Default: "true", Doc: "copy data straight between GPUs that have peer access, false to go through RAM; env " + EnvGPUDirect},
	}}, nil
}

// SetConfig implements base.Plugin.
func (d *Driver) SetConfig(ctx context.Context, cfg base.Config) error {
	s, _ := d.ConfigSchema(ctx)
	if err := s.Validate(cfg); err != nil {
		return fmt.Errorf("driver-cuda config: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	next, err := applyConfig(d.cfg, cfg)
	if err != nil {
		return err
	}
	d.cfg = next
	return nil
}

// applyConfig returns s with the config block's values.
func applyConfig(s settings, cfg base.Config) (settings, error) {
	if v, ok := cfg["limit_mem_mib"].(int64); ok {
		if v < 0 {
			return s, fmt.Errorf("driver-cuda config: limit_mem_mib = %d: must be at least 0", v)
		}
		s.limitMiB = v
	}
	if v, ok := cfg["ndevices"].(int64); ok {
		if v < -1 {
			return s, fmt.Errorf("driver-cuda config: ndevices = %d: must be -1 (all) or more", v)
		}
		s.ndevices, s.ndevFrom = v, "the config's ndevices = "+strconv.FormatInt(v, 10)
	}
	if v, ok := cfg["pipeline"].(int64); ok {
		if v < 0 || v > maxPipeline {
			return s, fmt.Errorf("driver-cuda config: pipeline = %d: want 0 to %d", v, maxPipeline)
		}
		s.pipeline = v
	}
	if v, ok := cfg["pin"].(bool); ok {
		s.pin = v
	}
	if v, ok := cfg["gpu_direct"].(bool); ok {
		s.noDirect = !v
	}
	return s, nil
}

// effective is the config overridden by the environment.
func (d *Driver) effective() (settings, error) {
	return withEnv(d.cfg, os.LookupEnv)
}

// withEnv overrides s with the environment variables lookup finds.
func withEnv(s settings, lookup func(string) (string, bool)) (settings, error) {
	if s.ndevFrom == "" {
		s.ndevFrom = "ndevices"
	}
	if v, ok := lookup(EnvLimitMem); ok && v != "" {
		n, err := parseLimitMiB(v)
		if err != nil {
			s.limitErr = fmt.Errorf("environment variable %s=%q: %w", EnvLimitMem, v, err)
		} else {
			s.limitMiB = n
		}
	}
	if v, ok := lookup(EnvNDevices); ok && v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < -1 {
			return s, fmt.Errorf("driver-cuda: %s=%q: want a number of GPUs (-1 for all)", EnvNDevices, v)
		}
		s.ndevices, s.ndevFrom = n, EnvNDevices+"="+v
	}
	if v, ok := lookup(EnvPipeline); ok && v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 || n > maxPipeline {
			return s, fmt.Errorf("driver-cuda: %s=%q: want a number of kernels from 0 to %d", EnvPipeline, v, maxPipeline)
		}
		s.pipeline = n
	}
	if v, ok := lookup(EnvPin); ok && v != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return s, fmt.Errorf("driver-cuda: %s=%q: want 0 or 1", EnvPin, v)
		}
		s.pin = b
	}
	if v, ok := lookup(EnvGPUDirect); ok && v != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return s, fmt.Errorf("driver-cuda: %s=%q: want 0 or 1", EnvGPUDirect, v)
		}
		s.noDirect = !b
	}
	return s, nil
}

// parseLimitMiB parses a value of EnvLimitMem: a whole number of MiB, 0 or
// more (surrounding spaces allowed). A value beyond any device's memory
// leaves the devices uncapped.
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

// unit is one GPU the driver uses.
type unit struct {
	info cu.DeviceInfo
	// limit is the memory node's size: the device's memory or the user's
	// limit when smaller.
	limit uint64
	// peers are the units whose memory this one's context can access
	// (cuDeviceCanAccessPeer), unless EnvGPUDirect turned that off: a
	// copy goes from this unit's memory to theirs in one command.
	peers []int
}

// discovery is what the driver found, under its settings.
type discovery struct {
	units         []unit
	driverVersion string
	// blas and solver say cuBLAS and cuSOLVER loaded: the library kernels
	// exist only then. nvrtc says CUDA C can be compiled.
	blas, solver, nvrtc bool
	nvrtcErr            error
	note                string
}

func (d *Driver) discover() (*discovery, error) {
	s, err := d.effective()
	if err != nil {
		return nil, err
	}
	// A malformed limit matters only once a device would be capped by it.
	ignored := func(d *discovery) *discovery {
		if s.limitErr != nil {
			d.note += fmt.Sprintf("; ignored, as no GPU uses it: %v", s.limitErr)
		}
		return d
	}
	if s.ndevices == 0 {
		return ignored(&discovery{note: "CUDA disabled by " + s.ndevFrom}), nil
	}
	m, err := cu.Probe(cu.Config{})
	if err != nil {
		// Probe's reason is exactly what `starpu machine` should say.
		return ignored(&discovery{note: err.Error()}), nil
	}
	disc := &discovery{driverVersion: m.DriverVersionString(), blas: m.Libraries.BLAS.Loaded(),
		solver: m.Libraries.Solver.Loaded(), nvrtc: m.Libraries.NVRTC.Loaded(), nvrtcErr: m.Libraries.NVRTC.Err}
	for _, info := range m.Devices {
		if s.ndevices >= 0 && int64(len(disc.units)) >= s.ndevices {
			break
		}
		disc.units = append(disc.units, unit{info: info, limit: capBytes(info.TotalMem, s.limitMiB)})
	}
	for i := range disc.units {
		for _, j := range m.Peers[i] {
			if j < len(disc.units) && !s.noDirect {
				disc.units[i].peers = append(disc.units[i].peers, j)
			}
		}
	}
	if s.limitErr != nil {
		return nil, fmt.Errorf("driver-cuda: %w", s.limitErr)
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
	d.builtins = library(disc.blas, disc.solver)
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

// unitName is how `starpu machine` lists a GPU.
func unitName(i int, u unit, driverVersion string) string {
	return fmt.Sprintf("CUDA %d: %s (%.1f GiB, compute capability %d.%d, driver %s)",
		i, u.info.Name, float64(u.info.TotalMem)/(1<<30), u.info.Major, u.info.Minor, driverVersion)
}

// Fingerprint implements driver.Driver: one unit per GPU, on its own
// memory node (unit i on node i+1), with the nodes of the GPUs it can
// copy to directly as its peers; the library kernels cuBLAS and cuSOLVER
// provide; or no unit and the reason.
func (d *Driver) Fingerprint(context.Context) (*driver.Fingerprint, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	disc, err := d.current()
	if err != nil {
		return nil, err
	}
	fp := &driver.Fingerprint{Arch: driver.CUDA, Note: disc.note}
	for i, u := range disc.units {
		fp.Units = append(fp.Units, driver.Unit{Name: unitName(i, u, disc.driverVersion), Node: i + 1})
		n := driver.MemoryNode{Name: fmt.Sprintf("CUDA %d memory (%s)", i, u.info.Name), Bytes: u.limit}
		for _, p := range u.peers {
			n.Peers = append(n.Peers, p+1)
		}
		fp.Nodes = append(fp.Nodes, n)
	}
	for _, b := range d.builtins {
		fp.Kernels = append(fp.Kernels, b.fullName())
	}
	for _, k := range d.loaded {
		fp.Kernels = append(fp.Kernels, k.name)
	}
	return fp, nil
}

// openDevice opens unit i (primary context, kernels) if it is not yet.
// Call with d.mu held, after freeze.
func (d *Driver) openDevice(i int) (*device, error) {
	if d.devs[i] != nil {
		return d.devs[i], nil
	}
	if err := cu.Init(); err != nil {
		return nil, fmt.Errorf("driver-cuda: %w", err)
	}
	dev, err := openDevice(i, d.found.units[i], d.builtins)
	if err != nil {
		return nil, err
	}
	for idx, lk := range d.loaded {
		k, err := dev.build(lk)
		if err != nil {
			dev.close()
			return nil, fmt.Errorf("%s: kernel %q: %w", dev.name, lk.name, err)
		}
		dev.publish(len(d.builtins)+idx, k)
	}
	d.devs[i] = dev
	return dev, nil
}

// Init implements driver.Driver: it opens the workers' devices and starts
// one worker per WorkerSpec, each on its own locked OS thread with its
// device's primary context current. It returns once every worker has run
// StarPU's init (streams, events, library handles) or one has failed.
func (d *Driver) Init(_ context.Context, req *driver.InitRequest) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.workers) > 0 {
		return errors.New("driver-cuda: already initialised")
	}
	if d.arena == nil {
		return errors.New("driver-cuda: no shared-memory arena")
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
		d.stop.Store(true)
		for _, w := range ws {
			w.rings.Bell.Ring()
		}
		d.wg.Wait()
		return err
	}
	used := map[int]int{}
	d.stop.Store(false)
	var all []*worker
	for _, spec := range req.Workers {
		if spec.Unit < 0 || spec.Unit >= len(disc.units) {
			return fail(fmt.Errorf("driver-cuda: worker %d: unit %d out of range (%d units)", spec.ID, spec.Unit, len(disc.units)))
		}
		if other, dup := used[spec.Unit]; dup {
			return fail(fmt.Errorf("driver-cuda: workers %d and %d on unit %d: one worker per GPU", other, spec.ID, spec.Unit))
		}
		used[spec.Unit] = spec.ID
		dev, err := d.openDevice(spec.Unit)
		if err != nil {
			return fail(fmt.Errorf("driver-cuda: worker %d: %w", spec.ID, err))
		}
		rings, err := driver.OpenRings(d.arena, spec, req.SpinIters)
		if err != nil {
			return fail(fmt.Errorf("driver-cuda: worker %d: %w", spec.ID, err))
		}
		all = append(all, newWorker(d, dev, rings, int(cfg.pipeline), req.SpinIters))
	}
	linkPeers(all)
	for _, w := range all {
		started := make(chan error, 1)
		d.wg.Add(1)
		d.drained.Add(1)
		go d.run(w, started)
		if err := <-started; err != nil {
			return fail(fmt.Errorf("driver-cuda: worker %d: %w", w.rings.Spec.ID, err))
		}
		ws = append(ws, w)
	}
	if cfg.pin && len(ws) > 0 {
		d.pin(ws[0].dev)
	}
	d.workers = ws
	return nil
}

// linkPeers gives each worker the workers of the GPUs its own can copy
// to directly, and those a table of their buffers that the others read.
// Before the workers start: they read it without a lock.
func linkPeers(ws []*worker) {
	for _, w := range ws {
		for _, p := range w.dev.unit.peers {
			for _, q := range ws {
				if q.dev.index != p {
					continue
				}
				if q.exported == nil {
					q.exported = &bufTable{m: map[uint64]devBuf{}}
				}
				if w.peers == nil {
					w.peers = map[uint32]*worker{}
				}
				w.peers[q.node] = q
			}
		}
	}
}

// pin registers the arena's heap with the driver (page-locked, portable
// to every context) so that copies from and to it are DMA. A failure is
// a warning: copies work from pageable memory too, staged by the driver.
func (d *Driver) pin(dev *device) {
	heap := d.arena.Size() - d.arena.ControlSize()
	if heap == 0 {
		return
	}
	b := d.arena.Bytes(base.Span{Offset: d.arena.ControlSize(), Size: heap})
	// Registering page-locks, and so commits, every page of the heap.
	if ram := physicalRAM(); ram > 0 && heap > ram/2 {
		d.log.Warn("arena heap not pinned: larger than half the machine's memory; set a smaller STARPU_ARENA_SIZE", "heap", heap, "ram", ram)
		return
	}
	// From now on the core's Free must not punch holes: a punched page
	// would be remapped while the GPU kept using the pinned one.
	d.arena.KeepPages()
	err := dev.withContext(func() error { return cu.MemHostRegisterBytes(b, cu.HostRegisterPortable) })
	if err != nil {
		d.log.Warn("arena heap not pinned; copies go through pageable memory", "bytes", heap, "error", err)
		return
	}
	d.pinned = b
}

// physicalRAM is the machine's memory in bytes, 0 if unknown.
func physicalRAM() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}

// Deinit implements driver.Driver: the workers finish the tasks sent
// before it, free their buffers and stop; then the arena is unpinned and
// the devices close.
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
	if d.pinned != nil {
		for _, dev := range d.devs {
			if dev != nil {
				errs = append(errs, dev.withContext(func() error { return cu.MemHostUnregister(unsafe.Pointer(&d.pinned[0])) }))
				break
			}
		}
		d.pinned = nil
	}
	for i, dev := range d.devs {
		if dev != nil {
			errs = append(errs, dev.close())
			d.devs[i] = nil
		}
	}
	// The discovery stays fixed: kernel indices must not move.
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("driver-cuda: deinit: %w", err)
	}
	return nil
}

// LoadKernel implements driver.Driver: it builds CUDA C source with NVRTC
// (or loads PTX) for every unit, once per source and compute capability,
// and returns the kernel's index, after the library kernels. A build
// failure is an error carrying the compiler's or the JIT's log.
func (d *Driver) LoadKernel(_ context.Context, k driver.KernelSource) (int, error) {
	if k.Name == "" || strings.TrimSpace(k.Source) == "" {
		return 0, fmt.Errorf("driver-cuda: load kernel %q: empty name or source", k.Name)
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
		return 0, fmt.Errorf("driver-cuda: no GPU to build kernel %q for: %s", k.Name, disc.note)
	}
	if !isPTX(k.Source) && !disc.nvrtc {
		return 0, fmt.Errorf("driver-cuda: kernel %q is CUDA C, and NVRTC did not load: %w", k.Name, disc.nvrtcErr)
	}
	idx := len(d.builtins) + len(d.loaded)
	built := make([]*devKernel, len(disc.units))
	for i := range disc.units {
		dev, err := d.openDevice(i)
		if err == nil {
			built[i], err = dev.build(lk)
		}
		if err != nil {
			return 0, fmt.Errorf("driver-cuda: kernel %q on unit %d: %w", k.Name, i, err)
		}
	}
	for i, b := range built {
		d.devs[i].publish(idx, b)
	}
	d.loaded = append(d.loaded, lk)
	d.loadedIdx[key] = idx
	return idx, nil
}

// lockedContext runs f on a locked OS thread with ctx current, and leaves
// the thread as it found it: control-plane calls (LoadKernel, Init's
// pinning) come on gRPC goroutines, which must not carry a context away.
func lockedContext(ctx cu.Context, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := ctx.PushCurrent(); err != nil {
		return err
	}
	ferr := f()
	if err := cu.PopCurrent(); err != nil && ferr == nil {
		return err
	}
	return ferr
}
