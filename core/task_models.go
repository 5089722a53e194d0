package core

// Performance models; design note: docs/design/perfmodel.md.

import (
	"fmt"
	"math/bits"
	"sync"

	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/core/perfmodel"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// ModelKind chooses a codelet's performance model (Codelet.Model); the zero
// value means none.
type ModelKind = perfmodel.Kind

// Performance model kinds, as StarPU's.
const (
	// HistoryModel predicts the mean duration measured for the same data
	// shape (STARPU_HISTORY_BASED).
	HistoryModel = perfmodel.History
	// RegressionModel fits a*size^b (STARPU_REGRESSION_BASED).
	RegressionModel = perfmodel.Regression
	// NonLinearRegressionModel fits a*size^b+c (STARPU_NL_REGRESSION_BASED).
	NonLinearRegressionModel = perfmodel.NonLinearRegression
)

// modelTable holds the performance models: db, the model database, is
// opened when a codelet first needs a model and mu guards it; archKeys,
// the model key standing for each architecture (driver.ArchIndex), and
// archDrv, the driver whose implementations stand for it in pushes, are
// set at Init and read-only after.
type modelTable struct {
	mu       sync.Mutex
	db       *perfmodel.DB
	archKeys [wire.NumArch]string
	archDrv  [wire.NumArch]int
}

// modelFor returns the performance model of cl, opening the model database
// on first use; nil when cl has none.
func (rt *Runtime) modelFor(cl *Codelet) (*perfmodel.Model, error) {
	if cl.Model == 0 {
		return nil, nil
	}
	rt.models.mu.Lock()
	defer rt.models.mu.Unlock()
	if rt.models.db == nil {
		db, err := perfmodel.Open(rt.modelDir(), rt.cfg.Calibrate, rt.log.Named("perfmodel"))
		if err != nil {
			return nil, fmt.Errorf("performance models: %w", err)
		}
		pct := rt.cfg.HistoryMaxError
		if pct == 0 {
			pct = config.DefaultHistoryMaxError
		}
		if err := db.SetMaxError(pct); err != nil {
			return nil, fmt.Errorf("performance models: %w", err)
		}
		rt.models.db = db
	}
	symbol := cl.ModelName
	if symbol == "" {
		symbol = cl.Name
	}
	if symbol == "" {
		return nil, fmt.Errorf("%w: a codelet with a performance model needs a Name or ModelName", ErrInvalidTask)
	}
	return rt.models.db.Model(symbol, cl.Model), nil
}

// setupArchKeys names each worker's entry in the performance models: "cpu"
// for every CPU core, "<arch>_<device>" for the others; per architecture,
// the key of its first worker stands for the architecture in predictions,
// and its driver's implementations for the architecture's in pushes,
// unless the architecture's workers with scheduler rings have another
// driver: the kernels of a Push's implementations go into their Execs.
func (rt *Runtime) setupArchKeys() {
	for i := range rt.models.archKeys {
		rt.models.archKeys[i] = ""
	}
	for _, w := range rt.workers {
		dev := w.spec.Unit
		if w.drv.fp.Arch == driver.CPU {
			dev = 0
		}
		w.archKey = perfmodel.ArchKey(string(w.drv.fp.Arch), dev)
		if a := driver.ArchIndex(w.drv.fp.Arch); a >= 0 && rt.models.archKeys[a] == "" {
			rt.models.archKeys[a] = w.archKey
			rt.models.archDrv[a] = w.driverIdx
		}
	}
	if d := rt.engine.postDriver; d >= 0 {
		if a := driver.ArchIndex(rt.drivers[d].fp.Arch); a >= 0 {
			rt.models.archDrv[a] = d
		}
	}
}

// fnv32 is the FNV-1a hash of s.
func fnv32(s string) uint32 {
	h := uint32(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// footprint hashes the shapes of a task's data (not where it lies), and
// sums its size: the keys of its performance model entries. The hash runs
// over the handles in turn (shapeHash), so a task with one handle has
// that handle's own footprint (Handle.footprint).
func footprint(t *Task) (uint32, uint64) {
	h := uint32(fnvOffset)
	var size uint64
	for i, hd := range t.Handles {
		if i == 0 {
			h = hd.footprint() // cached: most tasks have one handle
		} else {
			h = hd.shapeHash(h)
		}
		if d := hd.iface; d != nil {
			size += d.desc.Size
		} else {
			size += hd.size
		}
	}
	return h, size
}

// fnvOffset is FNV-1a's initial value.
const fnvOffset = 2166136261

// fnvMix goes on with the FNV-1a hash h over v's 8 bytes, low first.
func fnvMix(h uint32, v uint64) uint32 {
	for i := 0; i < 8; i++ {
		h ^= uint32(v & 0xff)
		h *= 16777619
		v >>= 8
	}
	return h
}

// shapeHash goes on with the FNV-1a hash h over the handle's shape: for a
// built-in interface its interface, element size and dimensions, for a
// plugin interface the interface's name and its own footprint (CSR: its
// dimensions and non-zeros, not where its rows start), so that
// equal-shaped data share a model entry across runs.
func (hd *Handle) shapeHash(h uint32) uint32 {
	if d := hd.iface; d != nil {
		return fnvMix(h, uint64(d.inst.nameHash)<<32|uint64(d.desc.Footprint))
	}
	l := hd.layout
	h = fnvMix(h, uint64(l.Interface)<<32|uint64(l.ElemSize))
	h = fnvMix(h, l.NX)
	h = fnvMix(h, l.NY)
	return fnvMix(h, l.NZ)
}

// footprint is the handle's own footprint, as traces record it per
// handle (StarPU's starpu_data_get_footprint).
func (hd *Handle) footprint() uint32 {
	if v := hd.fp.Load(); v != 0 {
		return uint32(v)
	}
	fp := hd.shapeHash(fnvOffset)
	hd.fp.Store(uint64(fp) | 1<<32)
	return fp
}

// predict fills a push with the model's predicted lengths per architecture,
// of the implementation the core runs when the policy leaves the choice to
// it (defaultImpl's); with the length of each of them when
// j may run more than one on some architecture, so that the policy may
// choose (implsPredicted); and with the predicted time to bring the task's
// input data to each node.
func (e *engine) predict(j *job, p *wire.Push) {
	rt := e.rt
	if m := j.cl.model; m != nil {
		j.footprint, j.dataSize = footprint(j.task)
		multi := false
		for a, key := range rt.models.archKeys {
			if key == "" {
				continue
			}
			mask := j.implMaskOf(rt.models.archDrv[a])
			first := 0
			if mask != 0 {
				first = rt.defaultImpl(j, rt.models.archDrv[a], mask)
				multi = multi || mask&(mask-1) != 0
			}
			if ns, ok := m.PredictImpl(key, first, j.footprint, j.dataSize); ok {
				p.Length[a] = int64(ns)
			}
		}
		if multi {
			e.implsPredicted(j, p, m)
		}
	}
	if !rt.multiNode || rt.bus == nil {
		return
	}
	p.Transfer = j.transfer[:0]
	for n := range rt.nodes {
		var ns float64
		for i, h := range j.task.Handles {
			if valid := h.validMask.Load(); j.modes[i]&R != 0 && valid&(1<<n) == 0 {
				ns += rt.fetchTime(h, valid, n)
			}
		}
		p.Transfer = append(p.Transfer, int64(ns))
	}
	j.transfer = p.Transfer
}

// fetchTime is the bus model's time to bring h, valid on the nodes of
// mask, to node n, the way engine.fetch brings it: from RAM when valid,
// else in one copy from a device with a peer link to n, else through RAM,
// so that data valid only on another device pays its copy up to RAM as
// well (and so does a peer link the model has not measured).
func (rt *Runtime) fetchTime(h *Handle, mask uint64, n int) float64 {
	if mask&1 == 0 && n != 0 {
		for m := mask; m != 0; m &= m - 1 {
			if src := bits.TrailingZeros64(m); src < len(rt.nodes) && rt.direct(src, n) {
				if t, ok := rt.bus.Predict(rt.nodes[src].name, rt.nodes[n].name, h.transferBytes(n)); ok {
					return t
				}
				break
			}
		}
	}
	var ns float64
	if src := bits.TrailingZeros64(mask); mask&1 == 0 && src < len(rt.nodes) {
		t, _ := rt.bus.Predict(rt.nodes[src].name, "RAM", h.transferBytes(src))
		ns += t
	}
	if n != 0 {
		t, _ := rt.bus.Predict("RAM", rt.nodes[n].name, h.transferBytes(n))
		ns += t
	}
	return ns
}

// transferBytes is what a copy of h between RAM and device node dev moves:
// the data as the device stores it (matrices and blocks packed, without
// the gaps RAM may have), or a plugin interface's Size, the total of its
// copy plan.
func (h *Handle) transferBytes(dev int) uint64 {
	if h.iface != nil {
		return h.iface.desc.Size
	}
	return h.nodeLayout(dev).Len()
}

// implsPredicted lists in p, per architecture, the implementations of j's
// codelet with their predicted lengths and kernels (-1 where j may not run
// them), and flags p PushImpls.
func (e *engine) implsPredicted(j *job, p *wire.Push, m *perfmodel.Model) {
	rt := e.rt
	n := 0
	for a, key := range rt.models.archKeys {
		if key != "" {
			n += len(j.cl.impls[rt.models.archDrv[a]])
		}
	}
	buf := make([]wire.Impl, 0, n)
	for a, key := range rt.models.archKeys {
		if key == "" {
			continue
		}
		d := rt.models.archDrv[a]
		mask, start := j.implMaskOf(d), len(buf)
		for i, k := range j.cl.impls[d] {
			im := wire.Impl{Length: -1, Kernel: -1}
			if mask&(1<<i) != 0 {
				im.Kernel = k
				if ns, ok := m.PredictImpl(key, i, j.footprint, j.dataSize); ok {
					im.Length = int64(ns)
				}
			}
			buf = append(buf, im)
		}
		p.Impls[a] = buf[start:len(buf):len(buf)]
	}
	p.Flags |= wire.PushImpls
}

// notePrediction keeps, for Profiling, what the models predicted for j on
// the worker that runs it, before its own duration is recorded: its length
// on w's architecture (the worker's own model entry, for the implementation
// j runs), and the time to bring its input to w's node that predict gave
// the scheduler when j was pushed. The transfer is 0 on a machine with RAM
// only, where nothing ever moves, and unknown (-1) without a bus model.
func (e *engine) notePrediction(j *job, w *workerState) {
	j.predicted = -1
	if m := j.cl.model; m != nil {
		if ns, ok := m.PredictImpl(w.archKey, int(max(j.impl, 0)), j.footprint, j.dataSize); ok {
			j.predicted = int64(ns)
		}
	}
	switch {
	case !e.rt.multiNode:
		j.predictedTransfer = 0
	case w.node < len(j.transfer):
		j.predictedTransfer = j.transfer[w.node]
	default:
		j.predictedTransfer = -1
	}
}

// record adds a completed task's duration to its codelet's model, under
// the implementation it ran.
func (e *engine) record(j *job, w *workerState, ns int64) {
	if j.cl == nil || j.cl.model == nil {
		return
	}
	if j.dataSize == 0 && j.footprint == 0 {
		j.footprint, j.dataSize = footprint(j.task)
	}
	j.cl.model.RecordImpl(w.archKey, int(max(j.impl, 0)), j.footprint, j.dataSize, float64(ns))
}

// saveModels writes the calibrated models back to the model directory.
func (rt *Runtime) saveModels() {
	rt.models.mu.Lock()
	db := rt.models.db
	rt.models.mu.Unlock()
	if db == nil {
		return
	}
	if err := db.Save(); err != nil {
		rt.log.Warn("cannot save performance models", "dir", db.Dir(), "error", err)
	}
}
