package core

// Codelets, implementations; design note: docs/design/tasks.md.

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starpu-go/starpu/core/perfmodel"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// Mode is a buffer's access mode.
type Mode = kernel.Mode

// Access modes.
const (
	R  = kernel.R
	W  = kernel.W
	RW = kernel.RW
	// Locality is or'ed into a mode as a hint: keep the task where the
	// data is (StarPU's STARPU_LOCALITY).
	Locality = kernel.Locality
)

// Arch is a worker architecture, the key of Codelet.Kernels: an alias of
// driver.Arch, so that an application names architectures from core alone.
type Arch = driver.Arch

// The architectures the runtime knows.
const (
	CPU    = driver.CPU
	CUDA   = driver.CUDA
	OpenCL = driver.OpenCL
)

// Bits of Codelet.Where and Task.Where, one per architecture
// (driver.ArchBit).
const (
	WhereCPU    uint32 = 1 << 0
	WhereCUDA   uint32 = 1 << 1
	WhereOpenCL uint32 = 1 << 2
)

// VariableBuffers as Codelet.NBuffers means each task gives its own modes
// (Task.Modes), one per handle.
const VariableBuffers = -1

// Nowhere as Codelet.Where (or Task.Where) makes a codelet with no
// computation part (StarPU's STARPU_NOWHERE): its tasks wait for their
// dependencies, data ones included, and complete without running anywhere
// and without moving data. It serves synchronisation tasks. The other
// Where bits are WhereCPU, WhereCUDA and WhereOpenCL.
const Nowhere uint32 = 1 << 31

// MaxImplementations is the most implementations a codelet may have for
// one architecture (StarPU's STARPU_MAXIMPLEMENTATIONS): as many as a
// scheduler may be told of per architecture.
const MaxImplementations = wire.MaxImpls

// CodeletType says how a codelet's implementations run: sequentially on
// one worker, or in parallel on a combined worker.
type CodeletType int

// Codelet types, as StarPU's starpu_codelet_type.
const (
	// Seq is the default: a sequential implementation.
	Seq CodeletType = iota
	// SPMD is a parallel task whose threads the runtime starts.
	SPMD
	// ForkJoin is a parallel task that starts its own threads.
	ForkJoin
)

func (t CodeletType) String() string {
	switch t {
	case Seq:
		return "SEQ"
	case SPMD:
		return "SPMD"
	case ForkJoin:
		return "FORKJOIN"
	}
	return fmt.Sprintf("CodeletType(%d)", int(t))
}

// ImplFlag qualifies one implementation of a codelet (StarPU's cuda_flags
// and opencl_flags).
type ImplFlag uint8

// Implementation flags.
const (
	// ImplAsync marks a CUDA or OpenCL implementation whose kernel may
	// overlap the worker's next tasks (STARPU_CUDA_ASYNC,
	// STARPU_OPENCL_ASYNC): the driver keeps up to its pipeline depth of
	// them in flight (STARPU_OPENCL_PIPELINE, STARPU_CUDA_PIPELINE, 2 by
	// default). Without it a device worker starts no other task until the
	// kernel ends, as StarPU does for synchronous implementations.
	ImplAsync ImplFlag = 1 << 0
)

// Specific memory nodes for Codelet.Nodes and Task.Nodes, besides a memory
// node's number (see Runtime.MemoryNodes), as StarPU's
// STARPU_SPECIFIC_NODE_*.
const (
	// NodeLocal is the memory node of the worker that runs the task, as
	// when no node is given.
	NodeLocal = -1
	// NodeCPU is the RAM memory node.
	NodeCPU = -2
	// NodeSlow is a slow node the worker can reach: its local node, the
	// only one a worker's kernels reach here.
	NodeSlow = -3
	// NodeFast is a fast node the worker can reach (its local node).
	NodeFast = -4
)

// Codelet describes a computation: its kernels, named per architecture, and
// how it accesses its buffers. A codelet must not change once a task using it
// has been submitted.
type Codelet struct {
	Name string
	// Where restricts the architectures the codelet may run on: an OR of
	// WhereCPU, WhereCUDA, WhereOpenCL, or Nowhere. Zero means every architecture for
	// which it names a kernel.
	Where uint32
	// Kernels names the implementation for each architecture; a driver of
	// that architecture must host a kernel of that name.
	Kernels map[driver.Arch]string
	// Impls names several implementations per architecture (StarPU's
	// cpu_funcs_name[] and friends); implementation i of an architecture is
	// Impls[arch][i]. An architecture is named in Kernels or Impls, not both.
	// When the codelet has a performance model, the scheduling policy is
	// told each implementation's predicted length and may choose one
	// (dmda takes the one expected to finish first, after measuring each);
	// otherwise, or when the policy leaves the choice to the runtime, a
	// worker runs the first implementation its driver hosts that
	// CanExecute accepts, or with calibration on (Options.Calibrate) each
	// in turn, so that each gets measured. Each implementation has its own
	// entries in the performance model.
	Impls map[driver.Arch][]string
	// ImplFlags gives flags per implementation, indexed like Impls (or
	// index 0 for a Kernels entry).
	ImplFlags map[driver.Arch][]ImplFlag
	// CanExecute, when set, tells whether implementation impl of the codelet
	// may run task t on architecture arch. The runtime asks it at submit for
	// every architecture and implementation its drivers host; a task for
	// which it accepts none fails with ErrNoWorker. It must not block.
	CanExecute func(arch driver.Arch, t *Task, impl int) bool
	// Type is Seq (the default), or SPMD or ForkJoin for a parallel task:
	// besides running on one worker, as any task, it may then run on a
	// combined worker (Runtime.CombinedWorkers), when the scheduling
	// policy places it there (dmda does). An SPMD kernel then runs on
	// every member of the team at once, each with its rank
	// (kernel.Context.CombinedRank) among CombinedSize; a ForkJoin kernel
	// runs once, on the team's master, and may keep CombinedSize
	// goroutines busy.
	Type CodeletType
	// MaxParallelism bounds the size of the combined workers a parallel
	// task may run on: 1 keeps it on one worker; 0 sets no bound (StarPU
	// reads 0 as "none but a worker", which is why its examples set
	// INT_MAX). It means nothing for Seq, as in StarPU.
	MaxParallelism int
	// NBuffers is the number of buffers, or VariableBuffers. Zero means
	// len(Modes).
	NBuffers int
	// Modes gives each buffer's access mode (fixed-buffer codelets).
	Modes []Mode
	// Nodes, when set, gives for each buffer the memory node where a task
	// accesses it (a node number or NodeLocal, NodeCPU, NodeSlow, NodeFast)
	// instead of the node of the worker that runs it: StarPU's
	// specific_nodes. A worker's kernels reach only its own node, so the
	// task runs on a worker of the node named; buffers naming different
	// nodes, or a node where no worker able to run the codelet computes,
	// are ErrNoWorker at Submit. Codelets with VariableBuffers set
	// Task.Nodes instead.
	Nodes []int
	// ModelName names the codelet's performance model (StarPU's
	// perfmodel symbol); Task.TaskName falls back to it.
	ModelName string
	// Sources gives, per architecture whose drivers compile kernels at run
	// time (OpenCL C for driver-opencl), the source of the kernels named
	// in Kernels and Impls for it. The drivers compile it at the codelet's
	// first submit, once per device; a build failure is Submit's error,
	// with the build log.
	Sources map[driver.Arch]string
	// Model is the kind of performance model the runtime keeps for the
	// codelet (by ModelName, else Name), to predict its tasks' durations
	// for the schedulers; zero means none.
	Model ModelKind
	// Retryable asks the runtime to keep a copy of the task's read-write
	// buffers from the moment it is pushed until it completes, so that a
	// task whose driver plugin dies under it can be run again on the
	// restarted driver instead of failing and losing its data. It costs a
	// copy of those buffers per task. Tasks without read-write buffers
	// are retried without it.
	Retryable bool
}

// codeletTable is what the runtime knows of the codelets submitted so far.
// byPtr (*Codelet -> *codeletInfo) is read lock-free on every Submit; mu
// guards adding to it, next (the next codelet number) and order (codelets
// in order of first submission).
type codeletTable struct {
	byPtr sync.Map
	mu    sync.Mutex
	next  uint32
	order []*Codelet
}

// codeletInfo is what the runtime resolved about a codelet at its first
// submit: which architectures can run it and the kernel index per driver.
type codeletInfo struct {
	id       uint32
	archMask uint32
	nowhere  bool
	// modelName is what the policy's messages call the codelet: its
	// performance model's name (ModelName, else Name), cut to
	// wire.MaxName.
	modelName []byte
	// impls[d][i] is implementation i's kernel index in driver d's list,
	// or -1; implMask[d] has bit i set where it is not -1.
	impls    [][]int32
	implMask []uint8
	// asyncMask[d] has bit i set where implementation i is flagged
	// ImplAsync.
	asyncMask []uint8
	// rr[d] is the round-robin cursor among implementations when
	// calibrating (engine goroutine only).
	rr []uint8
	// stats[w] accumulates the executions on worker w.
	stats []workerStat
	// model is the codelet's performance model, or nil.
	model *perfmodel.Model
	// modes is its buffers' modes or'ed together (fixed-buffer codelets).
	modes Mode
	// retryable is Codelet.Retryable.
	retryable bool
	// par: the codelet's tasks may run on combined workers (SPMD or
	// ForkJoin), of at most maxPar workers (0: no bound).
	par    bool
	maxPar int
	// warnedAlone: the warning that its tasks with SCRATCH or REDUX
	// buffers run on one worker was logged (parallelSizes).
	warnedAlone atomic.Bool
}

// workerStat counts a codelet's executions on one worker.
type workerStat struct {
	n, ns           atomic.Int64
	posted, chained atomic.Int64
	flops           atomic.Uint64 // float64 bits
}

func (cl *Codelet) nbuffers() int {
	if cl.NBuffers == 0 {
		return len(cl.Modes)
	}
	return cl.NBuffers
}

// implNames returns the implementations the codelet names for arch.
func (cl *Codelet) implNames(a driver.Arch) []string {
	if names, ok := cl.Impls[a]; ok {
		return names
	}
	if name, ok := cl.Kernels[a]; ok {
		return []string{name}
	}
	return nil
}

func (cl *Codelet) validate(nnodes int) error {
	if cl.Type != Seq && cl.Type != SPMD && cl.Type != ForkJoin {
		return fmt.Errorf("%w: codelet %q has type %s: want Seq, SPMD or ForkJoin", ErrInvalidTask, cl.Name, cl.Type)
	}
	if cl.MaxParallelism < 0 {
		return fmt.Errorf("%w: codelet %q: MaxParallelism = %d", ErrInvalidTask, cl.Name, cl.MaxParallelism)
	}
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
	if cl.Nodes != nil {
		if cl.NBuffers == VariableBuffers {
			return fmt.Errorf("%w: codelet %q has VariableBuffers: give nodes in Task.Nodes", ErrInvalidTask, cl.Name)
		}
		if len(cl.Nodes) != cl.nbuffers() {
			return fmt.Errorf("%w: codelet %q: %d nodes for %d buffers", ErrInvalidTask, cl.Name, len(cl.Nodes), cl.nbuffers())
		}
		if err := validNodes(cl.Nodes, nnodes); err != nil {
			return fmt.Errorf("%w: codelet %q: %w", ErrInvalidTask, cl.Name, err)
		}
	}
	if cl.Where&Nowhere != 0 && cl.Where != Nowhere {
		return fmt.Errorf("%w: codelet %q: Where combines Nowhere with architectures (%#x)", ErrInvalidTask, cl.Name, cl.Where)
	}
	for a, names := range cl.Impls {
		if _, ok := cl.Kernels[a]; ok {
			return fmt.Errorf("%w: codelet %q names %s kernels in both Kernels and Impls", ErrInvalidTask, cl.Name, a)
		}
		if len(names) > MaxImplementations {
			return fmt.Errorf("%w: codelet %q has %d %s implementations, at most %d", ErrInvalidTask, cl.Name, len(names), a, MaxImplementations)
		}
		for i, n := range names {
			if n == "" {
				return fmt.Errorf("%w: codelet %q: %s implementation %d has no kernel name", ErrInvalidTask, cl.Name, a, i)
			}
		}
	}
	for a, flags := range cl.ImplFlags {
		n := len(cl.implNames(a))
		if len(flags) > n {
			return fmt.Errorf("%w: codelet %q: %d %s implementation flags for %d implementations", ErrInvalidTask, cl.Name, len(flags), a, n)
		}
		for i, f := range flags {
			if f&^ImplAsync != 0 {
				return fmt.Errorf("%w: codelet %q: %s implementation %d has unknown flags %#x", ErrInvalidTask, cl.Name, a, i, uint8(f))
			}
			if f&ImplAsync != 0 && a == driver.CPU {
				return fmt.Errorf("%w: codelet %q: ImplAsync is for device implementations, not %s implementation %d", ErrInvalidTask, cl.Name, a, i)
			}
		}
	}
	if cl.Where != Nowhere && len(cl.Kernels) == 0 && len(cl.Impls) == 0 {
		return fmt.Errorf("%w: codelet %q names no kernel for any architecture", ErrNoWorker, cl.Name)
	}
	return nil
}

func validNodes(nodes []int, nnodes int) error {
	for i, n := range nodes {
		if n < NodeFast || n >= nnodes {
			return fmt.Errorf("buffer %d: memory node %d does not exist (nodes 0 to %d, or NodeLocal, NodeCPU, NodeSlow, NodeFast)", i, n, nnodes-1)
		}
	}
	return nil
}

func validMode(m Mode) bool {
	switch m &^ Locality {
	case R, W, RW, W | Commute, RW | Commute, Scratch, Redux:
		return true
	}
	return false
}

// resolve finds, once per codelet, the drivers that host its kernels.
func (rt *Runtime) resolve(cl *Codelet) (*codeletInfo, error) {
	if v, ok := rt.codelets.byPtr.Load(cl); ok {
		return v.(*codeletInfo), nil
	}
	if err := cl.validate(rt.nnodes()); err != nil {
		return nil, err
	}
	model, err := rt.modelFor(cl)
	if err != nil {
		return nil, err
	}
	info := &codeletInfo{model: model, nowhere: cl.Where == Nowhere, impls: make([][]int32, len(rt.drivers)),
		implMask: make([]uint8, len(rt.drivers)), asyncMask: make([]uint8, len(rt.drivers)), rr: make([]uint8, len(rt.drivers)), stats: make([]workerStat, len(rt.workers)),
		retryable: cl.Retryable, par: cl.Type != Seq, maxPar: cl.MaxParallelism}
	for _, m := range cl.Modes {
		info.modes |= m
	}
	for d, drv := range rt.drivers {
		if info.nowhere || len(drv.workers) == 0 {
			continue
		}
		bit := driver.ArchBit(drv.fp.Arch)
		if cl.Where != 0 && cl.Where&bit == 0 {
			continue
		}
		names := cl.implNames(drv.fp.Arch)
		info.impls[d] = make([]int32, len(names))
		flags := cl.ImplFlags[drv.fp.Arch]
		for i, name := range names {
			info.impls[d][i] = -1
			if i < len(flags) && flags[i]&ImplAsync != 0 {
				info.asyncMask[d] |= 1 << i
			}
			if src, ok := cl.Sources[drv.fp.Arch]; ok {
				k, err := drv.loadKernel(name, src)
				if err != nil {
					return nil, fmt.Errorf("%w: codelet %q: driver-%s: %w", ErrInvalidTask, cl.Name, drv.name, err)
				}
				info.impls[d][i] = int32(k)
				info.implMask[d] |= 1 << i
				info.archMask |= bit
				continue
			}
			if k, ok := drv.kernelIndex[name]; ok {
				info.impls[d][i] = int32(k)
				info.implMask[d] |= 1 << i
				info.archMask |= bit
			}
		}
	}
	if info.archMask == 0 && !info.nowhere {
		where := ""
		if cl.Where != 0 {
			where = fmt.Sprintf(" (Where %s)", describeWhere(cl.Where))
		}
		return nil, fmt.Errorf("%w: codelet %q wants %s%s; %s%s", ErrNoWorker, cl.Name, describeKernels(cl), where, rt.describeDrivers(), rt.suggestKernels(cl))
	}
	info.modelName = []byte(cmp.Or(cl.ModelName, cl.Name))
	info.modelName = info.modelName[:min(len(info.modelName), wire.MaxName)]
	rt.codelets.mu.Lock()
	info.id = rt.codelets.next
	rt.codelets.next++
	rt.codelets.mu.Unlock()
	v, loaded := rt.codelets.byPtr.LoadOrStore(cl, info)
	if !loaded {
		rt.codelets.mu.Lock()
		rt.codelets.order = append(rt.codelets.order, cl)
		rt.codelets.mu.Unlock()
	}
	return v.(*codeletInfo), nil
}

// implMaskOf is the implementations j may run on driver d.
func (j *job) implMaskOf(d int) uint8 {
	if x := j.ext.Load(); x != nil && x.implMask != nil {
		return x.implMask[d]
	}
	return j.cl.implMask[d]
}

// manyImpls reports whether j may run more than one implementation on
// driver d: whether a policy's choice of implementation can matter there.
func (j *job) manyImpls(d int) bool {
	m := j.implMaskOf(d)
	return m&(m-1) != 0
}

// chooseImpl picks the implementation job j runs on driver d when the
// policy did not: the next in turn when calibrating, else defaultImpl's.
// Engine goroutine only.
func (rt *Runtime) chooseImpl(j *job, d int) int {
	mask := j.implMaskOf(d)
	if mask == 0 {
		return -1
	}
	if !rt.calibrate || mask&(mask-1) == 0 {
		return rt.defaultImpl(j, d, mask)
	}
	n := bits.OnesCount8(mask)
	k := int(j.cl.rr[d]) % n
	j.cl.rr[d]++
	for i := 0; ; i++ {
		if mask&(1<<i) != 0 {
			if k == 0 {
				return i
			}
			k--
		}
	}
}

// defaultImpl is the implementation j runs on driver d, among those of
// mask (not empty), when neither its policy nor calibration chooses: the
// one its codelet's model predicts fastest on d's architecture for j's
// footprint, once the model predicts every one of them there, else the
// first. So a codelet may list variants of a kernel (a diagonal update by
// SYRK or by GEMM, say) and run the faster on each machine once calibrated
// (STARPU_CALIBRATE=1 runs each in turn). Reads only: push calls it from
// any goroutine, after predict has set j's footprint.
func (rt *Runtime) defaultImpl(j *job, d int, mask uint8) int {
	first := bits.TrailingZeros8(mask)
	m := j.cl.model
	if m == nil || mask&(mask-1) == 0 || j.dataSize == 0 || d < 0 || d >= len(rt.drivers) {
		return first
	}
	a := driver.ArchIndex(rt.drivers[d].fp.Arch)
	if a < 0 || rt.models.archKeys[a] == "" {
		return first
	}
	key := rt.models.archKeys[a]
	best, bestNs := first, math.Inf(1)
	for mm := mask; mm != 0; mm &= mm - 1 {
		i := bits.TrailingZeros8(mm)
		ns, ok := m.PredictImpl(key, i, j.footprint, j.dataSize)
		if !ok {
			return first
		}
		if ns < bestNs {
			best, bestNs = i, ns
		}
	}
	return best
}

// policyImpl takes the implementation a policy chose for job j on worker w
// (an Assign flagged wire.AssignImpl), after checking that w's driver hosts
// it and j may run it. Engine goroutine only.
func (rt *Runtime) policyImpl(j *job, w *workerState, impl uint32) error {
	mask := j.implMaskOf(w.driverIdx)
	if impl >= MaxImplementations || mask&(1<<impl) == 0 {
		var ok []int
		for m := mask; m != 0; m &= m - 1 {
			ok = append(ok, bits.TrailingZeros8(m))
		}
		return fmt.Errorf("scheduler chose implementation %d of codelet %q for task %q on worker %d (%s), where the task may run implementations %v only", int32(impl), j.task.Codelet.Name, j.name(), w.id, w.drv.fp.Arch, ok)
	}
	j.impl = int8(impl)
	return nil
}

// assign is called as job j is posted to worker w: it returns the kernel
// index j runs with there, choosing the implementation unless the policy
// did or it was chosen before; -1 when w's driver has none for it. The
// caller marks j running once its Exec is in a ring (job.queued). Engine
// goroutine only.
func (rt *Runtime) assign(j *job, w *workerState) int32 {
	if j.impl < 0 {
		i := rt.chooseImpl(j, w.driverIdx)
		if i < 0 {
			return -1
		}
		j.impl = int8(i)
	}
	return j.cl.impls[w.driverIdx][j.impl]
}

// execFlags is the wire flags of implementation impl on driver d's
// workers: wire.ExecAsync where it is flagged ImplAsync.
func (info *codeletInfo) execFlags(d int, impl int8) uint32 {
	if impl >= 0 && info.asyncMask[d]&(1<<impl) != 0 {
		return wire.ExecAsync
	}
	return 0
}

// nnodes is the number of memory nodes, as MemoryNodes lists them.
func (rt *Runtime) nnodes() int {
	n := 1
	for _, d := range rt.drivers {
		n += len(d.fp.Nodes)
	}
	return n
}

func describeKernels(cl *Codelet) string {
	var parts []string
	for a, n := range cl.Kernels {
		parts = append(parts, fmt.Sprintf("%s kernel %q", a, n))
	}
	for a, ns := range cl.Impls {
		parts = append(parts, fmt.Sprintf("%s kernels %q", a, ns))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func describeWhere(where uint32) string {
	if where == Nowhere {
		return "nowhere"
	}
	var parts []string
	for _, a := range []driver.Arch{driver.CPU, driver.CUDA, driver.OpenCL} {
		if where&driver.ArchBit(a) != 0 {
			parts = append(parts, string(a))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%#x", where)
	}
	return strings.Join(parts, "|")
}

func (rt *Runtime) describeDrivers() string {
	if len(rt.drivers) == 0 {
		return "no driver is loaded"
	}
	var parts []string
	for _, d := range rt.drivers {
		if d.fp.Arch == driver.CPU && rt.hostedKernels > 0 {
			// The stumble: a newcomer's own kernels in Options.Kernels
			// take the standard library's place.
			parts = append(parts, fmt.Sprintf("driver-cpu (%d workers) is this application, hosting the %d kernels of Options.Kernels in place of the standard library (add kernels.Library() of plugins/driver-cpu/kernels to Options.Kernels for the standard ones)", len(d.workers), len(d.fp.Kernels)))
			continue
		}
		parts = append(parts, fmt.Sprintf("driver-%s (%s, %d workers) hosts %d kernels", d.name, d.fp.Arch, len(d.workers), len(d.fp.Kernels)))
	}
	return strings.Join(parts, "; ")
}

// suggestKernels is "; did you mean ...?" for the kernels cl names that no
// driver of their architecture hosts but one hosts a name close to, or "".
func (rt *Runtime) suggestKernels(cl *Codelet) string {
	var hints []string
	for _, a := range []driver.Arch{driver.CPU, driver.CUDA, driver.OpenCL} {
		if _, ok := cl.Sources[a]; ok {
			continue // compiled from source: any name goes
		}
		for _, name := range cl.implNames(a) {
			best, bestD := "", 0
			for _, d := range rt.drivers {
				if d.fp.Arch != a {
					continue
				}
				if _, ok := d.kernelIndex[name]; ok {
					best = ""
					break
				}
				for _, k := range d.fp.Kernels {
					// Close: a few edits, fewer than a third of the name.
					if e := editDistance(name, k); e <= max(1, len(name)/3) && (best == "" || e < bestD) {
						best, bestD = k, e
					}
				}
			}
			if best != "" {
				hints = append(hints, fmt.Sprintf("%q for %s kernel %q", best, a, name))
			}
		}
	}
	if len(hints) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(hints, ", ") + "?"
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// loadKernel has the driver compile kernel name from source, once per
// distinct source.
func (d *driverInst) loadKernel(name, source string) (int, error) {
	d.loadMu.Lock()
	defer d.loadMu.Unlock()
	key := name + "\x00" + source
	if k, ok := d.loaded[key]; ok {
		return k, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, drv := d.current()
	k, err := drv.LoadKernel(ctx, driver.KernelSource{Name: name, Source: source})
	if err != nil {
		return 0, err
	}
	if d.loaded == nil {
		d.loaded = map[string]int{}
	}
	d.loaded[key] = k
	return k, nil
}
