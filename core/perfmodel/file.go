package perfmodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The model file format: JSON, one file per codelet symbol and host.
//
//	{
//	  "format": "starpu-go perfmodel",
//	  "version": 1 | 2,
//	  "symbol": "gemm_f32",
//	  "kind": "history" | "regression" | "nl-regression",
//	  "hostname": "node1",
//	  "archs": [{
//	    "arch": "cpu",
//	    "impl": 1,
//	    "entries": [{"footprint": "0x1a2b3c4d", "size": 262144,
//	                 "mean_ns": 512000, "dev_ns": 3100, "samples": 12}],
//	    "regression": {"samples": 40, "sum_ln_x": ..., "sum_ln_x2": ...,
//	                   "sum_ln_y": ..., "sum_ln_x_ln_y": ...,
//	                   "min_size": 4096, "max_size": 1048576,
//	                   "a": ..., "b": ..., "c": ..., "calibrated": true}
//	  }]
//	}
//
// The sums are the state; a, b, c and calibrated are written for readers and
// recomputed on load. An element of archs is one implementation on one
// architecture key, as StarPU keys its models per architecture and
// implementation; "impl" is left out for implementation 0, so a model of a
// codelet with one implementation is written as before implementations
// were recorded, as version 1, which older builds read. A file with other
// implementations is version 2: an older build refuses it by its version
// rather than by a key that appears twice.
const (
	modelFormat = "starpu-go perfmodel"
	// modelVersion is the newest version written and read;
	// implVersion the first with implementations other than 0.
	modelVersion = 2
	implVersion  = 2
)

type fileModel struct {
	Format   string     `json:"format"`
	Version  int        `json:"version"`
	Symbol   string     `json:"symbol"`
	Kind     string     `json:"kind"`
	Hostname string     `json:"hostname"`
	Archs    []fileArch `json:"archs"`
}

type fileArch struct {
	Arch       string      `json:"arch"`
	Impl       int         `json:"impl,omitempty"`
	Entries    []fileEntry `json:"entries"`
	Regression fileReg     `json:"regression"`
}

type fileEntry struct {
	Footprint string  `json:"footprint"`
	Size      uint64  `json:"size"`
	MeanNs    float64 `json:"mean_ns"`
	DevNs     float64 `json:"dev_ns"`
	Samples   uint64  `json:"samples"`
}

type fileReg struct {
	Samples    uint64  `json:"samples"`
	SumLnX     float64 `json:"sum_ln_x"`
	SumLnX2    float64 `json:"sum_ln_x2"`
	SumLnY     float64 `json:"sum_ln_y"`
	SumLnXLnY  float64 `json:"sum_ln_x_ln_y"`
	MinSize    uint64  `json:"min_size"`
	MaxSize    uint64  `json:"max_size"`
	A          float64 `json:"a"`
	B          float64 `json:"b"`
	C          float64 `json:"c"`
	Calibrated bool    `json:"calibrated"`
}

func modelPath(dir, host, symbol string) string {
	return filepath.Join(dir, "codelets", symbol+"."+host)
}

// List returns the symbols of the models stored in dir for this host
// (Hostname(os.Getenv)), sorted. A directory without models gives none.
func List(dir string) ([]string, error) {
	return list(dir, Hostname(os.Getenv))
}

func list(dir, host string) ([]string, error) {
	cdir := filepath.Join(dir, "codelets")
	des, err := os.ReadDir(cdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("perfmodel: list %s: %w", cdir, err)
	}
	var out []string
	suffix := "." + host
	for _, de := range des {
		name := de.Name()
		// Directories (StarPU's own codelets/45/) and temporaries are not ours.
		if !de.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, suffix) || len(name) == len(suffix) {
			continue
		}
		out = append(out, strings.TrimSuffix(name, suffix))
	}
	sort.Strings(out)
	return out, nil
}

// Load reads the model of symbol stored in dir for this host. A missing
// model is an error wrapping fs.ErrNotExist that lists the models there.
func Load(dir, symbol string) (*Model, error) {
	if err := validSymbol(symbol); err != nil {
		return nil, err
	}
	return load(dir, Hostname(os.Getenv), symbol)
}

func load(dir, host, symbol string) (*Model, error) {
	path := modelPath(dir, host, symbol)
	if st, err := os.Stat(path); err == nil && st.Size() > MaxModelFile {
		return nil, fmt.Errorf("perfmodel: %s: %d bytes, more than a model may hold (%d)", path, st.Size(), MaxModelFile)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		have, lerr := list(dir, host)
		if lerr != nil {
			return nil, fmt.Errorf("perfmodel: no model %q for host %s (%s): %w", symbol, host, path, err)
		}
		what := "none"
		if len(have) > 0 {
			what = strings.Join(have, ", ")
		}
		return nil, fmt.Errorf("perfmodel: no model %q for host %s in %s (models there: %s): %w",
			symbol, host, filepath.Join(dir, "codelets"), what, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("perfmodel: %w", err)
	}
	m, err := decodeModel(b, symbol)
	if err != nil {
		return nil, fmt.Errorf("perfmodel: %s: %w", path, err)
	}
	m.host = host
	return m, nil
}

// MaxEntries bounds the footprints of one architecture in a model file, and
// MaxModelFile a model file's size: a model holds one entry per data size
// its codelet ran on, a few hundred at most in practice, and a file of
// 300,000 entries made a small Cholesky take 28 s.
const (
	MaxEntries   = 10000
	MaxModelFile = 16 << 20
)

// decodeModel parses a model file; errors name the line or the field.
func decodeModel(b []byte, symbol string) (*Model, error) {
	var f fileModel
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, jsonError(b, err)
	}
	if f.Format != modelFormat {
		return nil, fmt.Errorf("field format: %q, want %q", f.Format, modelFormat)
	}
	if f.Version < 1 || f.Version > modelVersion {
		return nil, fmt.Errorf("field version: %d not supported (this build reads versions 1 to %d)", f.Version, modelVersion)
	}
	if f.Symbol != symbol {
		return nil, fmt.Errorf("field symbol: %q, but the file name says %q", f.Symbol, symbol)
	}
	kind, err := ParseKind(f.Kind)
	if err != nil {
		return nil, fmt.Errorf("field kind: %w", err)
	}
	m := newModel(symbol, kind)
	archs := archTable{}
	for i, fa := range f.Archs {
		at := fmt.Sprintf("archs[%d]", i)
		if fa.Arch == "" {
			return nil, fmt.Errorf("field %s.arch: empty", at)
		}
		if fa.Impl < 0 || fa.Impl > MaxImpl || fa.Impl > 0 && f.Version < implVersion {
			return nil, fmt.Errorf("field %s.impl: %d in a version %d file (implementations 1 to %d need version %d)", at, fa.Impl, f.Version, MaxImpl, implVersion)
		}
		key := modelKey{fa.Arch, fa.Impl}
		if archs.get(key.arch, key.impl) != nil {
			return nil, fmt.Errorf("field %s: architecture %q implementation %d appears twice", at, fa.Arch, fa.Impl)
		}
		if len(fa.Entries) > MaxEntries {
			return nil, fmt.Errorf("field %s.entries: %d entries, more than a model keeps (%d)", at, len(fa.Entries), MaxEntries)
		}
		a := &archModel{}
		fps := map[uint32]*entry{}
		for j, fe := range fa.Entries {
			et := fmt.Sprintf("%s.entries[%d]", at, j)
			fp, err := strconv.ParseUint(strings.TrimPrefix(fe.Footprint, "0x"), 16, 32)
			if err != nil || !strings.HasPrefix(fe.Footprint, "0x") {
				return nil, fmt.Errorf("field %s.footprint: %q is not a 32-bit hexadecimal 0x... value", et, fe.Footprint)
			}
			if fps[uint32(fp)] != nil {
				return nil, fmt.Errorf("field %s.footprint: %s appears twice", et, fe.Footprint)
			}
			if fe.Samples == 0 {
				return nil, fmt.Errorf("field %s.samples: 0 (an entry has at least one sample)", et)
			}
			if !finite(fe.MeanNs) || fe.MeanNs < 0 {
				return nil, fmt.Errorf("field %s.mean_ns: %v is not a duration", et, fe.MeanNs)
			}
			if !finite(fe.DevNs) || fe.DevNs < 0 {
				return nil, fmt.Errorf("field %s.dev_ns: %v is not a deviation", et, fe.DevNs)
			}
			e := &entry{footprint: uint32(fp), size: fe.Size, n: fe.Samples, mean: fe.MeanNs,
				m2: fe.DevNs * fe.DevNs * float64(fe.Samples)}
			e.pred.Store(nanBits)
			if e.n >= MinSamples {
				e.pred.Store(math.Float64bits(e.mean))
			}
			fps[e.footprint] = e
		}
		a.fps.Store(&fps)
		r := fa.Regression
		rt := at + ".regression"
		for _, v := range []struct {
			name string
			x    float64
		}{{"sum_ln_x", r.SumLnX}, {"sum_ln_x2", r.SumLnX2}, {"sum_ln_y", r.SumLnY}, {"sum_ln_x_ln_y", r.SumLnXLnY}} {
			if !finite(v.x) {
				return nil, fmt.Errorf("field %s.%s: %v is not a finite number", rt, v.name, v.x)
			}
		}
		if r.Samples > 0 && r.MinSize > r.MaxSize {
			return nil, fmt.Errorf("field %s.min_size: %d above max_size %d", rt, r.MinSize, r.MaxSize)
		}
		a.reg = regSums{n: r.Samples, sx: r.SumLnX, sxx: r.SumLnX2, sy: r.SumLnY, sxy: r.SumLnXLnY, minSize: r.MinSize, maxSize: r.MaxSize}
		if kind == NonLinearRegression {
			a.refitNL()
		}
		a.publish(kind)
		archs = archs.with(key, a)
	}
	m.archs.Store(&archs)
	return m, nil
}

// jsonError turns a decoding error into one that names the line and column,
// and the field when the type was wrong.
func jsonError(b []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(b, se.Offset)
		return fmt.Errorf("line %d column %d: %w", line, col, err)
	case errors.As(err, &te):
		line, col := position(b, te.Offset)
		return fmt.Errorf("line %d column %d: field %s: %s is not a %s", line, col, te.Field, te.Value, te.Type)
	}
	return err
}

// position converts a byte offset into a 1-based line and column.
func position(b []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(b)))
	before := b[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// save writes the model if it changed since it was last written.
func (m *Model) save(dir, host string) error {
	if err := validSymbol(m.symbol); err != nil {
		return err
	}
	m.mu.Lock()
	if m.gen == m.saved {
		m.mu.Unlock()
		return nil
	}
	gen := m.gen
	f := m.encodeLocked(host)
	m.mu.Unlock()
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("perfmodel: encode %s: %w", m.symbol, err)
	}
	if err := writeAtomic(modelPath(dir, host, m.symbol), append(b, '\n')); err != nil {
		return err
	}
	m.mu.Lock()
	m.saved = max(m.saved, gen)
	m.mu.Unlock()
	return nil
}

func (m *Model) encodeLocked(host string) fileModel {
	kind := m.Kind()
	f := fileModel{Format: modelFormat, Version: 1, Symbol: m.symbol, Kind: kind.String(), Hostname: host, Archs: []fileArch{}}
	archs := *m.archs.Load()
	for _, k := range archs.keys() {
		a := archs.get(k.arch, k.impl)
		if k.impl != 0 {
			f.Version = implVersion
		}
		if kind == NonLinearRegression {
			a.refitNL() // the parameters on disk reflect every sample
			a.publish(kind)
		}
		fa := fileArch{Arch: k.arch, Impl: k.impl, Entries: []fileEntry{}}
		for _, e := range *a.fps.Load() {
			if e.n == 0 {
				continue // no sample kept yet (RecordImpl)
			}
			fa.Entries = append(fa.Entries, fileEntry{Footprint: fmt.Sprintf("0x%08x", e.footprint), Size: e.size,
				MeanNs: e.mean, DevNs: e.dev(), Samples: e.n})
		}
		sort.Slice(fa.Entries, func(i, j int) bool { return fa.Entries[i].Footprint < fa.Entries[j].Footprint })
		fit := a.reg.fit()
		if kind == NonLinearRegression {
			fit = a.nl
		}
		fa.Regression = fileReg{Samples: a.reg.n, SumLnX: a.reg.sx, SumLnX2: a.reg.sxx, SumLnY: a.reg.sy, SumLnXLnY: a.reg.sxy,
			MinSize: a.reg.minSize, MaxSize: a.reg.maxSize, A: fit.A, B: fit.B, C: fit.C, Calibrated: fit.Calibrated}
		f.Archs = append(f.Archs, fa)
	}
	return f
}

// writeAtomic writes b to path through a temporary file in the same
// directory, renamed over path, so that a reader or a crash never sees half
// a file.
func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("perfmodel: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("perfmodel: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("perfmodel: write %s: %w", path, err)
	}
	return nil
}
