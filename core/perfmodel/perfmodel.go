// Package perfmodel keeps the runtime's performance models, as StarPU's
// perfmodel layer does: per codelet symbol, per architecture and per
// implementation of the codelet there, the measured durations of tasks keyed by their data footprint (history-based
// models), power-law fits of duration against data size (regression-based
// models), and the bus model (latency and bandwidth between memory nodes).
//
// The core owns one DB per runtime. It calls Model.Predict for every task it
// hands to a scheduler and Model.Record for every task that completes, and
// DB.Save at shutdown. Predict never blocks and never allocates: readers see
// immutable maps and atomically published values, writers (Record, one
// goroutine per model at a time) update them behind a per-model mutex.
//
// Files live under a directory (DefaultDir) as dir/codelets/<symbol>.<host>
// and dir/bus/<host>.json: measurements are only valid on the machine that
// took them, so every host keeps its own files, as StarPU does.
package perfmodel

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// Kind is the kind of a performance model, StarPU's starpu_perfmodel_type.
type Kind int32

const (
	// History predicts the mean duration measured for the same codelet,
	// architecture and data footprint (STARPU_HISTORY_BASED).
	History Kind = iota + 1
	// Regression predicts a*size^b, fitted by least squares on
	// (ln size, ln duration) over every sample (STARPU_REGRESSION_BASED).
	Regression
	// NonLinearRegression predicts a*size^b + c, fitted over the per-footprint
	// means (STARPU_NL_REGRESSION_BASED).
	NonLinearRegression
)

// MinSamples is the number of samples after which a history entry counts as
// calibrated, and the number a regression needs (over at least two distinct
// sizes): StarPU's default STARPU_CALIBRATE_MINIMUM.
const MinSamples = 10

// DefaultMaxError is StarPU's STARPU_HISTORY_MAX_ERROR default: a sample
// more than 50% above an entry's mean, or below the mean divided by 1.5,
// is an outlier (SetMaxError).
const DefaultMaxError = 50

// outlierFloorNs is how far from an entry's mean a sample must be, whatever
// the ratio, to count as an outlier: a task of a few microseconds varies
// by more than half from run to run, and without a floor its entry would
// be started anew again and again instead of calibrating.
const outlierFloorNs = 10_000

var kindNames = map[Kind]string{History: "history", Regression: "regression", NonLinearRegression: "nl-regression"}

// String returns the kind's name as files and the command line spell it.
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int32(k))
}

// ParseKind returns the kind named s ("history", "regression",
// "nl-regression").
func ParseKind(s string) (Kind, error) {
	for k, n := range kindNames {
		if n == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown performance model kind %q (want history, regression or nl-regression)", s)
}

func (k Kind) valid() bool { _, ok := kindNames[k]; return ok }

// DefaultDir returns the directory that holds the performance models:
// $STARPU_PERF_MODEL_DIR if set, else $STARPU_HOME/.starpu/sampling, else
// $HOME/.starpu/sampling, else .starpu/sampling under the system's temporary
// directory (StarPU falls back to /tmp the same way).
func DefaultDir(getenv func(string) string) string {
	if d := getenv("STARPU_PERF_MODEL_DIR"); d != "" {
		return d
	}
	for _, v := range []string{"STARPU_HOME", "HOME"} {
		if d := getenv(v); d != "" {
			return filepath.Join(d, ".starpu", "sampling")
		}
	}
	return filepath.Join(os.TempDir(), ".starpu", "sampling")
}

// Hostname returns the name that keys this machine's files:
// $STARPU_HOSTNAME if set (as in StarPU, to share models between identical
// machines), else the system's host name, else "localhost".
func Hostname(getenv func(string) string) string {
	if h := getenv("STARPU_HOSTNAME"); h != "" {
		return h
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
}

// ArchKey returns the architecture key of a device: "cpu" for every CPU
// core (they share one model, as StarPU's CPU workers do), and
// "<arch>_<devid>" for anything else ("opencl_0", "cuda_1"), because two
// accelerators of one kind may differ.
func ArchKey(arch string, devid int) string {
	if arch == "cpu" {
		return "cpu"
	}
	return fmt.Sprintf("%s_%d", arch, devid)
}

// CombinedArchKey returns the architecture key of a combined worker of
// size workers whose master's key is key ("cpu:4"): a parallel task's
// duration depends on the team's size, so StarPU keys its models per
// combined worker size too.
func CombinedArchKey(key string, size int) string { return fmt.Sprintf("%s:%d", key, size) }

// DB is the set of performance models of one runtime, bound to a directory
// and to this host.
type DB struct {
	dir       string
	host      string
	calibrate int
	maxError  int // SetMaxError
	log       hclog.Logger

	mu     sync.RWMutex
	models map[string]*Model
}

// Open loads the models stored in dir for this host and returns the
// database. calibrate is STARPU_CALIBRATE: 0 uses the models and adds samples
// only where an entry is not calibrated yet; 1 adds every sample, even to
// calibrated entries; 2 ignores the stored models and calibrates from
// scratch (Save replaces the files of the models that got samples). A stored
// model that cannot be read (corrupt, or beyond MaxEntries or MaxModelFile)
// is renamed with ".bad" added, with a warning naming it, and its model
// starts empty. log may be nil.
func Open(dir string, calibrate int, log hclog.Logger) (*DB, error) {
	if dir == "" {
		return nil, errors.New("perfmodel: empty model directory")
	}
	if calibrate < 0 || calibrate > 2 {
		return nil, fmt.Errorf("perfmodel: STARPU_CALIBRATE=%d: want 0, 1 or 2", calibrate)
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	db := &DB{dir: dir, host: Hostname(os.Getenv), calibrate: calibrate, maxError: DefaultMaxError, log: log, models: map[string]*Model{}}
	if calibrate == 2 {
		log.Info("STARPU_CALIBRATE=2: ignoring stored performance models", "dir", dir)
		return db, nil
	}
	symbols, err := list(dir, db.host)
	if err != nil {
		return nil, err
	}
	for _, s := range symbols {
		m, err := load(dir, db.host, s)
		if err != nil {
			// One unreadable file (corrupt, truncated, too large) costs
			// its model's history, not every run of its codelet: it is
			// kept aside for a look, and the model calibrates anew.
			path := modelPath(dir, db.host, s)
			aside := path + ".bad"
			if rerr := os.Rename(path, aside); rerr != nil {
				aside = "(could not be moved: " + rerr.Error() + ")"
			}
			log.Warn("performance model file cannot be read: set aside, the model calibrates anew", "file", path, "kept_as", aside, "error", err)
			continue
		}
		m.calibrate, m.maxError, m.log = calibrate, db.maxError, log
		db.models[s] = m
	}
	log.Debug("performance models loaded", "dir", dir, "host", db.host, "models", len(symbols))
	return db, nil
}

// Dir returns the directory the database reads and writes.
func (db *DB) Dir() string { return db.dir }

// Host returns the host name that keys the database's files.
func (db *DB) Host() string { return db.host }

// Calibrate returns the STARPU_CALIBRATE level the database was opened with.
func (db *DB) Calibrate() int { return db.calibrate }

// SetMaxError sets StarPU's STARPU_HISTORY_MAX_ERROR for every model of
// the database, loaded or to come: how far, in percent, a sample may lie
// from its history entry's mean before it counts as an outlier (above
// mean*(1+pct/100) or below mean/(1+pct/100), and more than 10 µs away).
// The default is DefaultMaxError. RecordImpl has the whole rule.
func (db *DB) SetMaxError(pct int) error {
	if pct < 1 {
		return fmt.Errorf("perfmodel: STARPU_HISTORY_MAX_ERROR=%d: want a percentage of at least 1", pct)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	db.maxError = pct
	for _, m := range db.models {
		m.mu.Lock()
		m.maxError = pct
		m.mu.Unlock()
	}
	return nil
}

// Model returns the model of the codelet symbol, loaded or new. If a stored
// model has another kind, it takes the kind asked for and keeps its samples
// (every kind keeps both the history and the regression sums). It is meant to
// be called once per codelet, not per task.
func (db *DB) Model(symbol string, kind Kind) *Model {
	if !kind.valid() {
		db.log.Warn("unknown performance model kind, using history", "symbol", symbol, "kind", kind)
		kind = History
	}
	db.mu.RLock()
	m := db.models[symbol]
	db.mu.RUnlock()
	if m == nil {
		db.mu.Lock()
		if m = db.models[symbol]; m == nil {
			m = newModel(symbol, kind)
			m.calibrate, m.maxError, m.log = db.calibrate, db.maxError, db.log
			m.host = db.host
			db.models[symbol] = m
		}
		db.mu.Unlock()
	}
	if m.Kind() != kind {
		db.log.Warn("stored performance model has another kind; converting", "symbol", symbol, "stored", m.Kind(), "kind", kind)
		m.setKind(kind)
	}
	return m
}

// Save writes every model with samples not yet saved to
// dir/codelets/<symbol>.<host>, each atomically (a temporary file renamed
// over the old one). It returns the errors of the models it could not write.
// The core calls it at shutdown; it is safe at any time.
func (db *DB) Save() error {
	db.mu.RLock()
	models := make([]*Model, 0, len(db.models))
	for _, m := range db.models {
		models = append(models, m)
	}
	db.mu.RUnlock()
	var errs []error
	for _, m := range models {
		if err := m.save(db.dir, db.host); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Model is the performance model of one codelet symbol: per architecture
// key and implementation, the history entries and the regression state.
type Model struct {
	symbol    string
	host      string
	calibrate int
	kind      atomic.Int32
	archs     atomic.Pointer[archTable] // copy-on-write, under mu

	mu    sync.Mutex // serialises writers
	gen   uint64     // bumped by every change; saved is the gen on disk
	saved uint64
	// maxError is STARPU_HISTORY_MAX_ERROR (DB.SetMaxError); log hears of
	// entries started anew. Under mu.
	maxError int
	log      hclog.Logger
}

// modelKey names what one archModel measures: an implementation of the
// codelet (its index among the codelet's implementations for the
// architecture) on an architecture key. Implementation 0 is what a codelet
// with one implementation runs.
type modelKey struct {
	arch string
	impl int
}

// MaxImpl is the largest implementation number a model keeps: StarPU's
// codelets have at most STARPU_MAXIMPLEMENTATIONS (8) per architecture,
// the runtime's as many; the bound only keeps a corrupt file or a wrong
// caller from growing a table without end.
const MaxImpl = 255

// archTable is a model's state by architecture key, then by implementation
// (nil where an implementation has no state). Published tables are never
// changed: writers copy them. A map by string, then a slice, rather than
// a map by modelKey: Go's maps look strings up on a fast path that a
// struct key does not take (Predict took 41 ns instead of 17).
type archTable map[string][]*archModel

// get is the state of implementation impl on arch, or nil.
func (t archTable) get(arch string, impl int) *archModel {
	ms := t[arch]
	if uint(impl) >= uint(len(ms)) {
		return nil
	}
	return ms[impl]
}

// keys lists the (arch, impl) pairs that have state, by arch then impl.
func (t archTable) keys() []modelKey {
	var out []modelKey
	for arch, ms := range t {
		for impl, a := range ms {
			if a != nil {
				out = append(out, modelKey{arch, impl})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return keyLess(out[i], out[j]) })
	return out
}

// with returns a copy of t with a as the state of key.
func (t archTable) with(key modelKey, a *archModel) archTable {
	next := make(archTable, len(t)+1)
	for k, v := range t {
		next[k] = v
	}
	ms := make([]*archModel, max(len(t[key.arch]), key.impl+1))
	copy(ms, t[key.arch])
	ms[key.impl] = a
	next[key.arch] = ms
	return next
}

// archModel is a model's state for one architecture key and implementation.
type archModel struct {
	fps atomic.Pointer[map[uint32]*entry] // copy-on-write, under Model.mu
	fit publishedFit                      // what regression kinds predict with

	// Under Model.mu.
	reg       regSums
	nl        Fit    // a*n^b+c from the entries
	nlNext    uint64 // refit once reg.n reaches it
	nlNextPts int    // or once there are that many entries
}

// entry is the history of one data footprint on one architecture.
type entry struct {
	pred atomic.Uint64 // math.Float64bits(mean) once calibrated, else nanBits

	// Under Model.mu.
	footprint uint32
	size      uint64
	n         uint64
	mean, m2  float64 // Welford
	// outliers counts the samples refused since the entry last started
	// (RecordImpl); restarts counts how often it started anew.
	outliers, restarts uint64
}

var nanBits = math.Float64bits(math.NaN())

func newModel(symbol string, kind Kind) *Model {
	m := &Model{symbol: symbol}
	m.kind.Store(int32(kind))
	empty := archTable{}
	m.archs.Store(&empty)
	return m
}

// Symbol returns the codelet symbol the model belongs to.
func (m *Model) Symbol() string { return m.symbol }

// Host returns the host whose measurements the model holds.
func (m *Model) Host() string { return m.host }

// Kind returns the kind of the model.
func (m *Model) Kind() Kind { return Kind(m.kind.Load()) }

func (m *Model) setKind(k Kind) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kind.Store(int32(k))
	archs := *m.archs.Load()
	for _, key := range archs.keys() {
		a := archs.get(key.arch, key.impl)
		if k == NonLinearRegression {
			a.refitNL()
		}
		a.publish(k)
	}
	m.gen++
}

// Predict is PredictImpl for implementation 0, the one a codelet with a
// single implementation has.
func (m *Model) Predict(arch string, footprint uint32, size uint64) (ns float64, ok bool) {
	return m.PredictImpl(arch, 0, footprint, size)
}

// PredictImpl returns the predicted duration in ns of a task of the
// model's codelet run with implementation impl on architecture arch, whose
// data have the given footprint and total size in bytes. ok is false when
// the model is not calibrated there: for History, the (arch, impl,
// footprint) entry has fewer than MinSamples samples; for the regressions,
// the architecture and implementation have fewer than MinSamples samples
// or a single size, or size is 0. A nil model predicts nothing. PredictImpl
// is safe from any number of goroutines, takes no lock and does not
// allocate.
func (m *Model) PredictImpl(arch string, impl int, footprint uint32, size uint64) (ns float64, ok bool) {
	if m == nil {
		return 0, false
	}
	a := (*m.archs.Load()).get(arch, impl)
	if a == nil {
		return 0, false
	}
	if Kind(m.kind.Load()) == History {
		e := (*a.fps.Load())[footprint]
		if e == nil {
			return 0, false
		}
		v := math.Float64frombits(e.pred.Load())
		if math.IsNaN(v) {
			return 0, false
		}
		return v, true
	}
	if size == 0 {
		return 0, false
	}
	lnA, b, c, valid := a.fit.load()
	if !valid {
		return 0, false
	}
	return math.Exp(lnA+b*math.Log(float64(size))) + c, true
}

// Record is RecordImpl for implementation 0.
func (m *Model) Record(arch string, footprint uint32, size uint64, ns float64) {
	m.RecordImpl(arch, 0, footprint, size, ns)
}

// RecordImpl adds the measured duration ns of a task run with
// implementation impl (>= 0) on architecture arch, with the data footprint
// and size PredictImpl takes. With STARPU_CALIBRATE=0 a sample is only
// kept while its (arch, impl, footprint) entry has fewer than MinSamples
// samples.
//
// A history entry keeps StarPU's rule against outliers: for a History
// model, the first sample of a new entry is dropped (a first run pays for
// first touches and lazy initialisation); after that, a sample above mean*(1+e) or below
// mean/(1+e), e being STARPU_HISTORY_MAX_ERROR (DB.SetMaxError), and more
// than 10 µs from the mean, is refused and counted; once the refused
// samples are as many as the kept ones, the entry is wrong rather than the
// samples, and it starts anew from the next sample (a warning says so,
// once per entry). The regression sums take every sample, as StarPU's.
//
// Durations that are negative, NaN or infinite are not measurements and
// are dropped; a zero duration or size enters the history but not the
// regressions (whose logarithm it has none of). A nil model, or an impl
// outside [0, MaxImpl], records nothing.
func (m *Model) RecordImpl(arch string, impl int, footprint uint32, size uint64, ns float64) {
	if m == nil || impl < 0 || impl > MaxImpl || math.IsNaN(ns) || math.IsInf(ns, 0) || ns < 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.archLocked(modelKey{arch, impl})
	e, fresh := a.entryLocked(footprint, size)
	if m.calibrate == 0 && e.n >= MinSamples {
		return
	}
	kind := Kind(m.kind.Load())
	switch {
	case fresh && kind == History:
		// The first sample: dropped (StarPU drops it for history models
		// only; the regressions need every size's samples).
	case e.n > 0 && m.outlier(e, ns):
		e.outliers++
		if e.outliers >= e.n {
			m.restart(arch, impl, e, ns)
		}
	default:
		e.add(ns)
	}
	if size > 0 && ns > 0 {
		a.reg.add(float64(size), ns, size)
	}
	switch {
	case kind == Regression:
		a.publish(kind)
	case kind == NonLinearRegression && (a.reg.n >= a.nlNext || fresh && len(*a.fps.Load()) >= a.nlNextPts):
		a.refitNL()
		a.publish(kind)
	}
	m.gen++
}

func (m *Model) archLocked(key modelKey) *archModel {
	archs := *m.archs.Load()
	if a := archs.get(key.arch, key.impl); a != nil {
		return a
	}
	a := &archModel{}
	fps := map[uint32]*entry{}
	a.fps.Store(&fps)
	next := archs.with(key, a)
	m.archs.Store(&next)
	return a
}

// entryLocked returns the entry of footprint, creating it with size if it is
// new (fresh). A footprint keeps the size it was first seen with.
func (a *archModel) entryLocked(footprint uint32, size uint64) (e *entry, fresh bool) {
	fps := *a.fps.Load()
	if e := fps[footprint]; e != nil {
		return e, false
	}
	e = &entry{footprint: footprint, size: size}
	e.pred.Store(nanBits)
	next := make(map[uint32]*entry, len(fps)+1)
	for k, v := range fps {
		next[k] = v
	}
	next[footprint] = e
	a.fps.Store(&next)
	return e, true
}

// outlier tells whether ns is too far from e's mean to be folded in
// (RecordImpl). Under m.mu.
func (m *Model) outlier(e *entry, ns float64) bool {
	if math.Abs(ns-e.mean) <= outlierFloorNs {
		return false
	}
	r := 1 + float64(m.maxError)/100
	return ns > e.mean*r || ns*r < e.mean
}

// restart empties entry e, which refused as many samples as it kept,
// ns being the last refused. Under m.mu.
func (m *Model) restart(arch string, impl int, e *entry, ns float64) {
	if e.restarts == 0 && m.log != nil {
		m.log.Warn("performance model entry started anew: as many samples lay beyond STARPU_HISTORY_MAX_ERROR of its mean as within it",
			"model", m.symbol, "arch", arch, "impl", impl, "footprint", fmt.Sprintf("%08x", e.footprint),
			"mean_us", e.mean/1e3, "sample_us", ns/1e3, "samples", e.n, "history_max_error_pct", m.maxError)
	}
	e.restarts++
	e.n, e.mean, e.m2, e.outliers = 0, 0, 0, 0
	e.pred.Store(nanBits)
}

// add folds a sample into the entry (Welford's update) and publishes the mean
// once the entry is calibrated.
func (e *entry) add(ns float64) {
	e.n++
	d := ns - e.mean
	e.mean += d / float64(e.n)
	e.m2 += d * (ns - e.mean)
	if e.n >= MinSamples {
		e.pred.Store(math.Float64bits(e.mean))
	}
}

// dev is the population standard deviation, as StarPU computes it.
func (e *entry) dev() float64 {
	if e.n == 0 || e.m2 <= 0 {
		return 0
	}
	return math.Sqrt(e.m2 / float64(e.n))
}

// refitNL fits a*n^b+c over the entries' means, and schedules the next refit
// after an eighth more samples or an eighth more entries, so that its cost
// (linear in the number of entries: a few dozen evaluations of the error) is
// paid O(log n) times over a model's life, not per sample.
func (a *archModel) refitNL() {
	pts := make([]point, 0, len(*a.fps.Load()))
	for _, e := range *a.fps.Load() {
		if e.n > 0 && e.size > 0 && e.mean > 0 {
			pts = append(pts, newPoint(float64(e.size), e.mean))
		}
	}
	ca, cb, cc, ok := fitNonLinear(pts)
	a.nl = Fit{A: ca, B: cb, C: cc, Samples: a.reg.n, MinSize: a.reg.minSize, MaxSize: a.reg.maxSize,
		Calibrated: ok && a.reg.n >= MinSamples && a.reg.minSize < a.reg.maxSize}
	a.nlNext = a.reg.n + max(1, a.reg.n/8)
	a.nlNextPts = len(pts) + max(1, len(pts)/8)
}

// publish makes the fit of kind visible to Predict.
func (a *archModel) publish(kind Kind) {
	switch kind {
	case Regression:
		lnA, b, ok := a.reg.solve()
		a.fit.store(lnA, b, 0, ok)
	case NonLinearRegression:
		a.fit.store(math.Log(a.nl.A), a.nl.B, a.nl.C, a.nl.Calibrated)
	default:
		a.fit.store(0, 0, 0, false)
	}
}

// publishedFit is a seqlock over the parameters Predict reads (ln a, b,
// c: exp(ln a + b ln n) costs less than a*math.Pow(n, b)), so that a
// reader never mixes the a of one fit with the b of another and nothing is
// allocated per update. All fields are atomics, so the race detector agrees.
type publishedFit struct {
	seq       atomic.Uint64
	lnA, b, c atomic.Uint64
	valid     atomic.Bool
}

func (p *publishedFit) store(lnA, b, c float64, valid bool) {
	p.seq.Add(1) // odd: update in progress
	p.lnA.Store(math.Float64bits(lnA))
	p.b.Store(math.Float64bits(b))
	p.c.Store(math.Float64bits(c))
	p.valid.Store(valid)
	p.seq.Add(1)
}

func (p *publishedFit) load() (lnA, b, c float64, valid bool) {
	for {
		s := p.seq.Load()
		if s&1 == 0 {
			lnA = math.Float64frombits(p.lnA.Load())
			b = math.Float64frombits(p.b.Load())
			c = math.Float64frombits(p.c.Load())
			valid = p.valid.Load()
			if p.seq.Load() == s {
				return lnA, b, c, valid
			}
		}
		runtime.Gosched() // the writer was preempted mid-update
	}
}

// Entry is one history entry of a model, for display.
type Entry struct {
	Footprint uint32
	Size      uint64  // bytes
	Mean, Dev float64 // ns; Dev is the population standard deviation
	Samples   uint64
}

// Calibrated reports whether the entry has enough samples to predict.
func (e Entry) Calibrated() bool { return e.Samples >= MinSamples }

// Fit is a regression of duration (ns) against size (bytes): A*size^B + C,
// with C = 0 for Regression.
type Fit struct {
	A, B, C          float64
	Samples          uint64 // samples with a size and a duration above 0
	MinSize, MaxSize uint64
	Calibrated       bool
}

// Eval returns the fit's duration in ns at size bytes.
func (f Fit) Eval(size float64) float64 { return f.A*math.Pow(size, f.B) + f.C }

// ArchInfo is what a model holds for one architecture key and
// implementation, for display.
type ArchInfo struct {
	Arch string
	// Impl is the implementation's index among the codelet's
	// implementations for the architecture (0 for a codelet with one).
	Impl    int
	Entries []Entry // by size, then footprint
	// Fit is the regression the model predicts with: nil for History.
	Fit *Fit
}

// Archs returns a copy of the model's state per architecture and
// implementation, by key then implementation.
func (m *Model) Archs() []ArchInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	kind := m.Kind()
	archs := *m.archs.Load()
	keys := archs.keys()
	out := make([]ArchInfo, 0, len(keys))
	for _, key := range keys {
		a := archs.get(key.arch, key.impl)
		ai := ArchInfo{Arch: key.arch, Impl: key.impl}
		for _, e := range *a.fps.Load() {
			if e.n == 0 {
				continue // its first sample was dropped, or it started anew
			}
			ai.Entries = append(ai.Entries, Entry{Footprint: e.footprint, Size: e.size, Mean: e.mean, Dev: e.dev(), Samples: e.n})
		}
		sort.Slice(ai.Entries, func(i, j int) bool {
			x, y := ai.Entries[i], ai.Entries[j]
			if x.Size != y.Size {
				return x.Size < y.Size
			}
			return x.Footprint < y.Footprint
		})
		switch kind {
		case Regression:
			f := a.reg.fit()
			ai.Fit = &f
		case NonLinearRegression:
			f := a.nl
			ai.Fit = &f
		}
		out = append(out, ai)
	}
	return out
}

// keyLess orders keys by architecture, then implementation: the order of
// Archs and of the files.
func keyLess(x, y modelKey) bool {
	if x.arch != y.arch {
		return x.arch < y.arch
	}
	return x.impl < y.impl
}

// validSymbol checks that a symbol can name a file.
func validSymbol(s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00") {
		return fmt.Errorf("perfmodel: symbol %q cannot name a model file (empty, dot, or contains a path separator)", s)
	}
	return nil
}
