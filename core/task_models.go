package core

// Performance models; design note: docs/design/perfmodel.md.

import (
	"fmt"
	"sync"

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
// the model key standing for each architecture (driver.ArchIndex), is set
// at Init and read-only after.
type modelTable struct {
	mu       sync.Mutex
	db       *perfmodel.DB
	archKeys [wire.NumArch]string
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
// the key of its first worker stands for the architecture in predictions.
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
		}
	}
}

// fnv32 is the FNV-1a hash of s.
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// footprint hashes the shapes of a task's data (not where it lies), and
// sums its size: the keys of its performance model entries.
func footprint(t *Task) (uint32, uint64) {
	h := uint32(2166136261)
	mix := func(v uint64) {
		for i := 0; i < 8; i++ {
			h ^= uint32(v & 0xff)
			h *= 16777619
			v >>= 8
		}
	}
	var size uint64
	for _, hd := range t.Handles {
		if d := hd.iface; d != nil {
			// A plugin interface's own footprint and data size (CSR: its
			// dimensions and non-zeros, not where its rows start), so that
			// equal-shaped data share a model entry across runs.
			mix(uint64(d.inst.nameHash)<<32 | uint64(d.desc.Footprint))
			size += d.desc.Size
			continue
		}
		l := hd.layout
		mix(uint64(l.Interface)<<32 | uint64(l.ElemSize))
		mix(l.NX)
		mix(l.NY)
		mix(l.NZ)
		size += hd.size
	}
	return h, size
}

// predict fills a push with the model's predicted lengths per architecture
// and the predicted time to bring the task's input data to each node.
func (e *engine) predict(j *job, p *wire.Push) {
	rt := e.rt
	if m := j.cl.model; m != nil {
		j.footprint, j.dataSize = footprint(j.task)
		for a, key := range rt.models.archKeys {
			if key == "" {
				continue
			}
			if ns, ok := m.Predict(key, j.footprint, j.dataSize); ok {
				p.Length[a] = int64(ns)
			}
		}
	}
	if !rt.multiNode || rt.bus == nil {
		return
	}
	p.Transfer = j.transfer[:0]
	for n := range rt.nodes {
		var ns float64
		for i, h := range j.task.Handles {
			if j.modes[i]&R == 0 || h.validMask.Load()&(1<<n) != 0 {
				continue
			}
			src := 0
			if n == 0 {
				for k := range rt.nodes {
					if h.validMask.Load()&(1<<k) != 0 {
						src = k
						break
					}
				}
			}
			t, _ := rt.bus.Predict(rt.nodes[src].name, rt.nodes[n].name, h.size)
			if src != 0 && n != 0 {
				t2, _ := rt.bus.Predict("RAM", rt.nodes[n].name, h.size)
				t += t2
			}
			ns += t
		}
		p.Transfer = append(p.Transfer, int64(ns))
	}
	j.transfer = p.Transfer
}

// notePrediction keeps, for Profiling, what the models predicted for j on
// the worker that runs it: its length on w's architecture (the worker's
// own model entry) and the transfer of its input to w's node, read when
// it is dispatched, before its own duration is recorded. The transfer is 0
// on a machine with RAM only, where nothing ever moves, and unknown (-1)
// without a bus model.
func (e *engine) notePrediction(j *job, w *workerState) {
	j.predicted = -1
	if m := j.cl.model; m != nil {
		if ns, ok := m.Predict(w.archKey, j.footprint, j.dataSize); ok {
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

// record adds a completed task's duration to its codelet's model.
func (e *engine) record(j *job, w *workerState, ns int64) {
	if j.cl == nil || j.cl.model == nil {
		return
	}
	if j.dataSize == 0 && j.footprint == 0 {
		j.footprint, j.dataSize = footprint(j.task)
	}
	j.cl.model.Record(w.archKey, j.footprint, j.dataSize, float64(ns))
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
