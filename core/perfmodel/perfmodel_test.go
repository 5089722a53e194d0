package perfmodel

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

const testHost = "testhost"

// open opens a database in a fresh directory keyed by testHost.
func open(t *testing.T, dir string, calibrate int) *DB {
	t.Helper()
	t.Setenv("STARPU_HOSTNAME", testHost)
	db, err := Open(dir, calibrate, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func near(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))
}

func TestHistoryMeanDeviationAndThreshold(t *testing.T) {
	cases := []struct {
		name    string
		samples []float64
		ok      bool
	}{
		{"one", []float64{100}, false},
		{"nine", []float64{10, 20, 30, 40, 50, 60, 70, 80, 90}, false},
		{"ten", []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, true},
		{"ten equal", []float64{7, 7, 7, 7, 7, 7, 7, 7, 7, 7}, true},
		{"eleven with zero", []float64{0, 1e3, 2e3, 3e3, 4e3, 5e3, 6e3, 7e3, 8e3, 9e3, 1e4}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := open(t, t.TempDir(), 1).Model("k", History)
			m.Record("cpu", 0xabc, 4096, 1e9) // a new entry's first sample is dropped
			for _, s := range c.samples {
				m.Record("cpu", 0xabc, 4096, s)
			}
			var sum, sum2 float64
			for _, s := range c.samples {
				sum += s
				sum2 += s * s
			}
			n := float64(len(c.samples))
			mean := sum / n
			dev := math.Sqrt(math.Max(0, sum2/n-mean*mean))

			got, ok := m.Predict("cpu", 0xabc, 4096)
			if ok != c.ok {
				t.Fatalf("Predict ok = %v after %d samples, want %v", ok, len(c.samples), c.ok)
			}
			if ok && !near(got, mean, 1e-12) {
				t.Errorf("Predict = %v, want mean %v", got, mean)
			}
			archs := m.Archs()
			if len(archs) != 1 || len(archs[0].Entries) != 1 {
				t.Fatalf("Archs = %+v, want one arch with one entry", archs)
			}
			e := archs[0].Entries[0]
			if e.Samples != uint64(len(c.samples)) || !near(e.Mean, mean, 1e-12) || math.Abs(e.Dev-dev) > 1e-9*(1+dev) {
				t.Errorf("entry = %+v, want samples %d mean %v dev %v", e, len(c.samples), mean, dev)
			}
			if e.Calibrated() != c.ok || archs[0].Fit != nil {
				t.Errorf("entry calibrated = %v, fit = %v; want %v and no fit for a history model", e.Calibrated(), archs[0].Fit, c.ok)
			}
			// Other keys stay unknown.
			if _, ok := m.Predict("cpu", 0xabd, 4096); ok {
				t.Error("another footprint predicted")
			}
			if _, ok := m.Predict("opencl_0", 0xabc, 4096); ok {
				t.Error("another arch predicted")
			}
		})
	}
}

func TestNilModelAndBadSamples(t *testing.T) {
	var m *Model
	m.Record("cpu", 1, 1, 5)
	if _, ok := m.Predict("cpu", 1, 1); ok {
		t.Error("nil model predicted")
	}
	mod := open(t, t.TempDir(), 1).Model("k", History)
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1} {
		for range MinSamples {
			mod.Record("cpu", 1, 8, bad)
		}
	}
	if a := mod.Archs(); len(a) != 0 {
		t.Errorf("invalid durations were recorded: %+v", a)
	}
}

// synth records n samples per size of a*size^b + c, with multiplicative
// noise of relative amplitude noise.
func synth(m *Model, arch string, sizes []uint64, n int, a, b, c, noise float64, rng *rand.Rand) {
	for _, s := range sizes {
		for range n {
			y := (a*math.Pow(float64(s), b) + c) * (1 + noise*(2*rng.Float64()-1))
			m.Record(arch, uint32(s), s, y)
		}
	}
}

func TestRegressionRecoversPowerLaw(t *testing.T) {
	sizes := []uint64{1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20}
	cases := []struct {
		a, b, noise float64
		tolA, tolB  float64
	}{
		{0.5, 1, 0, 1e-9, 1e-9},
		{3e-3, 1.5, 0, 1e-9, 1e-9},
		{20, 0.5, 0.05, 0.1, 0.01},
		{1e-4, 2, 0.1, 0.2, 0.02},
	}
	for _, c := range cases {
		t.Run("", func(t *testing.T) {
			m := open(t, t.TempDir(), 1).Model("reg", Regression)
			synth(m, "cpu", sizes, 20, c.a, c.b, 0, c.noise, rand.New(rand.NewPCG(1, 2)))
			f := m.Archs()[0].Fit
			if f == nil || !f.Calibrated {
				t.Fatalf("fit = %+v, want calibrated", f)
			}
			if !near(f.A, c.a, c.tolA) || math.Abs(f.B-c.b) > c.tolB || f.C != 0 {
				t.Errorf("fit a=%v b=%v c=%v, want a=%v b=%v c=0", f.A, f.B, f.C, c.a, c.b)
			}
			if f.Samples != uint64(20*len(sizes)) || f.MinSize != sizes[0] || f.MaxSize != sizes[len(sizes)-1] {
				t.Errorf("fit samples=%d sizes=[%d,%d]", f.Samples, f.MinSize, f.MaxSize)
			}
			// Predict interpolates and extrapolates with the fit.
			for _, s := range []uint64{3000, 1 << 22} {
				got, ok := m.Predict("cpu", 0, s)
				want := c.a * math.Pow(float64(s), c.b)
				if !ok || !near(got, want, 2*c.tolA+c.tolB*math.Log(float64(s))+1e-9) {
					t.Errorf("Predict(%d) = %v, %v; want about %v", s, got, ok, want)
				}
			}
		})
	}
}

func TestNonLinearRegressionRecovers(t *testing.T) {
	sizes := []uint64{64, 256, 1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20}
	cases := []struct {
		a, b, c, noise   float64
		tolA, tolB, tolC float64
	}{
		{2, 1.5, 5000, 0, 1e-3, 1e-3, 1e-3},
		{0.25, 1, 20000, 0, 1e-3, 1e-3, 1e-3},
		{0.01, 2, 1e5, 0.01, 0.1, 0.01, 0.05},
		{3, 1.2, 800, 0.02, 0.15, 0.02, 0.1},
		// The constant dominates all but the largest sizes, under 10% noise:
		// the log-log start alone is far off here, the descent is not.
		{0.05, 1, 30000, 0.1, 0.3, 0.03, 0.05},
	}
	for _, c := range cases {
		t.Run("", func(t *testing.T) {
			m := open(t, t.TempDir(), 1).Model("nl", NonLinearRegression)
			synth(m, "cuda_0", sizes, 12, c.a, c.b, c.c, c.noise, rand.New(rand.NewPCG(3, 4)))
			m.Archs() // the published fit is the one Archs shows
			f := m.Archs()[0].Fit
			if f == nil || !f.Calibrated {
				t.Fatalf("fit = %+v, want calibrated", f)
			}
			if !near(f.A, c.a, c.tolA) || math.Abs(f.B-c.b) > c.tolB || !near(f.C, c.c, c.tolC) {
				t.Errorf("fit a=%v b=%v c=%v, want a=%v b=%v c=%v", f.A, f.B, f.C, c.a, c.b, c.c)
			}
			for _, s := range sizes {
				got, ok := m.Predict("cuda_0", 0, s)
				want := c.a*math.Pow(float64(s), c.b) + c.c
				if !ok || !near(got, want, max(0.02, c.noise/2)) {
					t.Errorf("Predict(%d) = %v, %v; want about %v", s, got, ok, want)
				}
			}
		})
	}
}

func TestRegressionCalibration(t *testing.T) {
	cases := []struct {
		name  string
		sizes []uint64 // one sample each
		kind  Kind
		ok    bool
	}{
		{"ten samples one size", []uint64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100}, Regression, false},
		{"nine samples two sizes", []uint64{100, 200, 100, 200, 100, 200, 100, 200, 100}, Regression, false},
		{"ten samples two sizes", []uint64{100, 200, 100, 200, 100, 200, 100, 200, 100, 200}, Regression, true},
		{"nl ten samples one size", []uint64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100}, NonLinearRegression, false},
		{"nl nine samples two sizes", []uint64{100, 200, 100, 200, 100, 200, 100, 200, 100}, NonLinearRegression, false},
		{"nl ten samples two sizes", []uint64{100, 200, 100, 200, 100, 200, 100, 200, 100, 200}, NonLinearRegression, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := open(t, t.TempDir(), 1).Model("k", c.kind)
			for _, s := range c.sizes {
				m.Record("cpu", uint32(s), s, 3*float64(s))
			}
			got, ok := m.Predict("cpu", 0, 150)
			if ok != c.ok {
				t.Fatalf("Predict ok = %v, want %v", ok, c.ok)
			}
			if ok && !near(got, 450, 1e-6) {
				t.Errorf("Predict(150) = %v, want 450", got)
			}
			if _, ok := m.Predict("cpu", 0, 0); ok {
				t.Error("size 0 predicted")
			}
		})
	}
}

func TestCalibrateLevels(t *testing.T) {
	cases := []struct {
		calibrate int
		want      uint64 // samples after 15 records
	}{{0, MinSamples}, {1, 14}, {2, 14}} // the first is dropped
	for _, c := range cases {
		t.Run("", func(t *testing.T) {
			m := open(t, t.TempDir(), c.calibrate).Model("k", History)
			for i := range 15 {
				m.Record("cpu", 1, 8, float64(i))
			}
			if got := m.Archs()[0].Entries[0].Samples; got != c.want {
				t.Errorf("STARPU_CALIBRATE=%d: %d samples kept, want %d", c.calibrate, got, c.want)
			}
		})
	}
}

func TestCalibrate2DropsStoredModels(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, 1)
	m := db.Model("k", History)
	for range MinSamples + 1 { // the first is dropped
		m.Record("cpu", 1, 8, 100)
	}
	if err := db.Save(); err != nil {
		t.Fatal(err)
	}
	// Calibrate 0 and 1 use the stored model.
	for _, cal := range []int{0, 1} {
		if _, ok := open(t, dir, cal).Model("k", History).Predict("cpu", 1, 8); !ok {
			t.Errorf("STARPU_CALIBRATE=%d: stored model not used", cal)
		}
	}
	db2 := open(t, dir, 2)
	m2 := db2.Model("k", History)
	if _, ok := m2.Predict("cpu", 1, 8); ok {
		t.Fatal("STARPU_CALIBRATE=2 predicted from the stored model")
	}
	m2.Record("cpu", 1, 8, 1e6) // dropped: the first of a new entry
	m2.Record("cpu", 1, 8, 7)
	if err := db2.Save(); err != nil {
		t.Fatal(err)
	}
	l, err := Load(dir, "k")
	if err != nil {
		t.Fatal(err)
	}
	if e := l.Archs()[0].Entries[0]; e.Samples != 1 || e.Mean != 7 {
		t.Errorf("after recalibration the file holds %+v, want 1 sample of 7", e)
	}
}

func TestPersistenceRoundTrip(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, 1)
	rng := rand.New(rand.NewPCG(5, 6))
	sizes := []uint64{1 << 10, 1 << 14, 1 << 18}
	h := db.Model("gemm", History)
	synth(h, "cpu", sizes, 12, 1e-3, 1.5, 0, 0.1, rng)
	synth(h, "opencl_0", sizes[:2], 4, 1e-4, 1.5, 0, 0.1, rng)
	r := db.Model("scal", Regression)
	synth(r, "cpu", sizes, 5, 0.5, 1, 0, 0.05, rng)
	nl := db.Model("axpy", NonLinearRegression)
	synth(nl, "cpu", sizes, 5, 0.5, 1, 3000, 0.05, rng)
	db.Model("unused", History) // no samples: nothing to save
	if err := db.Save(); err != nil {
		t.Fatal(err)
	}
	// StarPU's own models (codelets/45/<symbol>.<host>) and temporaries are
	// not ours.
	if err := os.MkdirAll(filepath.Join(dir, "codelets", "45"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join("45", "starpu_sgemm."+testHost), ".gemm." + testHost + ".tmp123"} {
		if err := os.WriteFile(filepath.Join(dir, "codelets", f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	syms, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(syms, ",") != "axpy,gemm,scal" {
		t.Errorf("List = %v", syms)
	}
	if _, err := os.Stat(filepath.Join(dir, "codelets", "gemm."+testHost)); err != nil {
		t.Errorf("model file not named <symbol>.<host>: %v", err)
	}

	db2 := open(t, dir, 0)
	for _, m := range []*Model{h, r, nl} {
		m2 := db2.Model(m.Symbol(), m.Kind())
		l, err := Load(dir, m.Symbol())
		if err != nil {
			t.Fatal(err)
		}
		if l.Kind() != m.Kind() || l.Symbol() != m.Symbol() || l.Host() != testHost {
			t.Errorf("Load: %s %v %s, want %s %v %s", l.Symbol(), l.Kind(), l.Host(), m.Symbol(), m.Kind(), testHost)
		}
		want := m.Archs()
		for _, got := range [][]ArchInfo{m2.Archs(), l.Archs()} {
			if len(got) != len(want) {
				t.Fatalf("%s: %d archs after reload, want %d", m.Symbol(), len(got), len(want))
			}
			for i := range want {
				if got[i].Arch != want[i].Arch || len(got[i].Entries) != len(want[i].Entries) {
					t.Fatalf("%s: arch %+v, want %+v", m.Symbol(), got[i], want[i])
				}
				for j, e := range want[i].Entries {
					g := got[i].Entries[j]
					if g.Footprint != e.Footprint || g.Size != e.Size || g.Samples != e.Samples || g.Mean != e.Mean || !near(g.Dev, e.Dev, 1e-12) {
						t.Errorf("%s %s: entry %+v, want %+v", m.Symbol(), want[i].Arch, g, e)
					}
				}
				if (got[i].Fit == nil) != (want[i].Fit == nil) || (want[i].Fit != nil && !fitsClose(*got[i].Fit, *want[i].Fit)) {
					t.Errorf("%s %s: fit %+v, want %+v", m.Symbol(), want[i].Arch, got[i].Fit, want[i].Fit)
				}
			}
		}
		for _, arch := range []string{"cpu", "opencl_0"} {
			for _, s := range sizes {
				p1, ok1 := m.Predict(arch, uint32(s), s)
				p2, ok2 := m2.Predict(arch, uint32(s), s)
				if ok1 != ok2 || !near(p1, p2, 1e-9) {
					t.Errorf("%s %s %d: Predict %v,%v after reload, want %v,%v", m.Symbol(), arch, s, p2, ok2, p1, ok1)
				}
			}
		}
	}
	// Nothing changed: Save writes nothing (the file keeps its time).
	st, _ := os.Stat(filepath.Join(dir, "codelets", "gemm."+testHost))
	if err := os.Chtimes(filepath.Join(dir, "codelets", "gemm."+testHost), st.ModTime().Add(-1e9), st.ModTime().Add(-1e9)); err != nil {
		t.Fatal(err)
	}
	if err := db2.Save(); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(filepath.Join(dir, "codelets", "gemm."+testHost))
	if !st2.ModTime().Before(st.ModTime()) {
		t.Error("Save rewrote a model that did not change")
	}
	// Models of another host are not this host's.
	t.Setenv("STARPU_HOSTNAME", "otherhost")
	if syms, _ := List(dir); len(syms) != 0 {
		t.Errorf("List for another host = %v", syms)
	}
}

func fitsClose(a, b Fit) bool {
	return near(a.A, b.A, 1e-9) && near(a.B, b.B, 1e-9) && math.Abs(a.C-b.C) <= 1e-9*(1+math.Abs(b.C)) &&
		a.Samples == b.Samples && a.MinSize == b.MinSize && a.MaxSize == b.MaxSize && a.Calibrated == b.Calibrated
}

func TestKindConversionKeepsSamples(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, 1)
	m := db.Model("k", History)
	synth(m, "cpu", []uint64{100, 1000}, 10, 2, 1, 0, 0, rand.New(rand.NewPCG(1, 1)))
	if _, ok := m.Predict("cpu", 0, 500); ok {
		t.Fatal("history model predicted an unknown footprint")
	}
	if err := db.Save(); err != nil {
		t.Fatal(err)
	}
	m2 := open(t, dir, 1).Model("k", Regression)
	if m2.Kind() != Regression {
		t.Fatalf("kind = %v", m2.Kind())
	}
	if got, ok := m2.Predict("cpu", 0, 500); !ok || !near(got, 1000, 1e-9) {
		t.Errorf("converted model predicts %v, %v; want 1000", got, ok)
	}
}

func TestLoadMissingListsModels(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, 1)
	db.Model("alpha", History).Record("cpu", 1, 1, 1)
	db.Model("beta", History).Record("cpu", 1, 1, 1)
	if err := db.Save(); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir, "gamma")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), `"gamma"`) || !strings.Contains(err.Error(), "alpha, beta") {
		t.Errorf("Load of a missing model: %v", err)
	}
	if _, err := Load(dir, "../x"); err == nil || !strings.Contains(err.Error(), "path separator") {
		t.Errorf("Load of a bad symbol: %v", err)
	}
}

func TestCorruptFile(t *testing.T) {
	valid := `{
  "format": "starpu-go perfmodel",
  "version": 1,
  "symbol": "k",
  "kind": "history",
  "hostname": "testhost",
  "archs": [{"arch": "cpu", "entries": [ENTRY], "regression": {"samples": 0}}]
}`
	entry := `{"footprint": "0x0000abcd", "size": 8, "mean_ns": 10, "dev_ns": 1, "samples": 3}`
	many := make([]string, MaxEntries+1)
	for k := range many {
		many[k] = fmt.Sprintf(`{"footprint": "0x%08x", "size": %d, "mean_ns": 10, "dev_ns": 1, "samples": 3}`, k, k)
	}
	tooMany := strings.Replace(valid, "ENTRY", strings.Join(many, ", "), 1)
	valid = strings.Replace(valid, "ENTRY", entry, 1)
	cases := []struct {
		name, content string
		want          []string
	}{
		{"valid", valid, nil},
		// 300,000 of them made a small Cholesky take 28 s.
		{"too many entries", tooMany, []string{"field archs[0].entries", "more than a model keeps"}},
		{"syntax", strings.Replace(valid, entry, entry+",", 1), []string{"line 7 column"}},
		{"truncated", valid[:60], []string{"line 4", "unexpected end"}},
		{"type", strings.Replace(valid, entry, strings.Replace(entry, `"samples": 3`, `"samples": "many"`, 1), 1), []string{"line 7", "field archs.entries.samples"}},
		{"format", strings.Replace(valid, "starpu-go perfmodel", "other", 1), []string{"field format"}},
		{"version", strings.Replace(valid, `"version": 1`, `"version": 9`, 1), []string{"field version", "9 not supported"}},
		{"symbol", strings.Replace(valid, `"symbol": "k"`, `"symbol": "j"`, 1), []string{"field symbol"}},
		{"kind", strings.Replace(valid, `"history"`, `"guess"`, 1), []string{"field kind", "guess"}},
		{"footprint", strings.Replace(valid, entry, strings.Replace(entry, "0x0000abcd", "abcd", 1), 1), []string{"field archs[0].entries[0].footprint"}},
		{"samples", strings.Replace(valid, entry, strings.Replace(entry, `"samples": 3`, `"samples": 0`, 1), 1), []string{"field archs[0].entries[0].samples"}},
		{"mean", strings.Replace(valid, entry, strings.Replace(entry, `"mean_ns": 10`, `"mean_ns": -10`, 1), 1), []string{"field archs[0].entries[0].mean_ns"}},
		{"duplicate", strings.Replace(valid, entry, entry+","+entry, 1), []string{"field archs[0].entries[1].footprint", "twice"}},
		{"version 2", strings.Replace(strings.Replace(valid, `"version": 1`, `"version": 2`, 1), `"arch": "cpu",`, `"arch": "cpu", "impl": 3,`, 1), nil},
		{"impl in version 1", strings.Replace(valid, `"arch": "cpu",`, `"arch": "cpu", "impl": 1,`, 1), []string{"field archs[0].impl", "need version 2"}},
		{"negative impl", strings.Replace(strings.Replace(valid, `"version": 1`, `"version": 2`, 1), `"arch": "cpu",`, `"arch": "cpu", "impl": -1,`, 1), []string{"field archs[0].impl"}},
		{"duplicate impl", strings.Replace(strings.Replace(valid, `"version": 1`, `"version": 2`, 1), `"archs": [`,
			`"archs": [{"arch": "cpu", "impl": 0, "entries": [], "regression": {}}, `, 1), []string{"field archs[1]", `"cpu" implementation 0 appears twice`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "codelets", "k."+testHost)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv("STARPU_HOSTNAME", testHost)
			_, lerr := Load(dir, "k")
			if c.want == nil {
				if lerr != nil {
					t.Fatalf("valid file: %v", lerr)
				}
				if _, err := Open(dir, 0, nil); err != nil {
					t.Fatalf("valid file: %v", err)
				}
				return
			}
			if lerr == nil {
				t.Fatal("corrupt file accepted")
			}
			for _, w := range append(c.want, path) {
				if !strings.Contains(lerr.Error(), w) {
					t.Errorf("error %q does not mention %q", lerr, w)
				}
			}
			// Open sets it aside, says so, and the model starts anew:
			// the codelet's runs go on.
			var logged strings.Builder
			db, oerr := Open(dir, 0, hclog.New(&hclog.LoggerOptions{Output: &logged}))
			if oerr != nil {
				t.Fatalf("Open with a corrupt model: %v, want it set aside", oerr)
			}
			if _, err := os.Stat(path + ".bad"); err != nil {
				t.Errorf("the corrupt file was not kept aside: %v", err)
			}
			warning := strings.ReplaceAll(logged.String(), `\"`, `"`)
			for _, w := range append(c.want, path, "set aside") {
				if !strings.Contains(warning, w) {
					t.Errorf("warning %q does not mention %q", logged.String(), w)
				}
			}
			if _, ok := db.Model("k", History).Predict("cpu", 1, 1); ok {
				t.Error("the set-aside model predicts")
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open("", 0, nil); err == nil {
		t.Error("empty dir accepted")
	}
	if _, err := Open(t.TempDir(), 3, nil); err == nil || !strings.Contains(err.Error(), "STARPU_CALIBRATE=3") {
		t.Errorf("calibrate 3: %v", err)
	}
	// A model whose symbol cannot name a file fails at Save, naming it.
	db := open(t, t.TempDir(), 1)
	db.Model("a/b", History).Record("cpu", 1, 1, 1)
	if err := db.Save(); err == nil || !strings.Contains(err.Error(), `"a/b"`) {
		t.Errorf("Save of a bad symbol: %v", err)
	}
}

func TestConcurrentPredictRecord(t *testing.T) {
	db := open(t, t.TempDir(), 1)
	models := []*Model{db.Model("h", History), db.Model("r", Regression), db.Model("n", NonLinearRegression)}
	sizes := []uint64{1 << 8, 1 << 12, 1 << 16}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m := models[(i+g)%len(models)]
				s := sizes[i%len(sizes)]
				if ns, ok := m.Predict("cpu", uint32(s), s); ok {
					// Every sample is exactly 2*s: a torn read would show.
					if !near(ns, 2*float64(s), 1e-6) {
						t.Errorf("%s: Predict(%d) = %v, want %v", m.Symbol(), s, ns, 2*float64(s))
						return
					}
				}
				m.Archs()
			}
		}()
	}
	for i := range 3000 {
		m := models[i%len(models)]
		s := sizes[(i/len(models))%len(sizes)]
		arch := []string{"cpu", "opencl_0"}[(i/len(models)/len(sizes))%2]
		m.Record(arch, uint32(s), s, 2*float64(s))
		if i%500 == 0 {
			if err := db.Save(); err != nil {
				t.Error(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	for _, m := range models {
		if _, ok := m.Predict("cpu", 1<<12, 1<<12); !ok {
			t.Errorf("%s not calibrated after the run", m.Symbol())
		}
	}
}

func TestPredictDoesNotAllocate(t *testing.T) {
	db := open(t, t.TempDir(), 1)
	for _, k := range []Kind{History, Regression, NonLinearRegression} {
		m := db.Model(k.String(), k)
		synth(m, "opencl_0", []uint64{100, 1000}, 10, 1, 1, 0, 0, rand.New(rand.NewPCG(1, 1)))
		arch := "opencl_0"
		if n := testing.AllocsPerRun(100, func() { m.Predict(arch, 100, 100) }); n != 0 {
			t.Errorf("%v: Predict allocates %v times", k, n)
		}
		if n := testing.AllocsPerRun(100, func() { m.PredictImpl(arch, 1, 100, 100) }); n != 0 {
			t.Errorf("%v: PredictImpl allocates %v times", k, n)
		}
	}
}

// Each implementation of a codelet has its own entries: samples of one do
// not move another's prediction, and both survive a save and a load. A
// model with implementation 0 only is written as version 1, without the
// "impl" key, as before implementations were recorded; with others it is
// version 2.
func TestImplementationsKeptApart(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, 1)
	m := db.Model("two", History)
	for range MinSamples + 1 { // the first is dropped
		m.Record("cpu", 7, 64, 1000)
	}
	if err := db.Save(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "codelets", "two."+testHost))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"version": 1,`) || strings.Contains(string(raw), `"impl"`) {
		t.Fatalf("a model of implementation 0 only is not written as version 1 was:\n%s", raw)
	}
	for range MinSamples + 1 {
		m.RecordImpl("cpu", 2, 7, 64, 50)
	}
	for range MinSamples { // not implementations: dropped
		m.RecordImpl("cpu", -1, 7, 64, 1)
		m.RecordImpl("cpu", MaxImpl+1, 7, 64, 1)
	}
	for _, c := range []struct {
		impl int
		want float64
		ok   bool
	}{{0, 1000, true}, {1, 0, false}, {2, 50, true}, {-1, 0, false}, {MaxImpl + 1, 0, false}} {
		if ns, ok := m.PredictImpl("cpu", c.impl, 7, 64); ok != c.ok || ns != c.want {
			t.Errorf("implementation %d: predicted %v, %v; want %v, %v", c.impl, ns, ok, c.want, c.ok)
		}
	}
	if ns, _ := m.Predict("cpu", 7, 64); ns != 1000 {
		t.Errorf("Predict = %v, want implementation 0's 1000", ns)
	}
	if err := db.Save(); err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "codelets", "two."+testHost))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"version": 2,`) || !strings.Contains(string(raw), `"impl": 2,`) {
		t.Fatalf("a model with implementation 2 is not version 2 with its impl:\n%s", raw)
	}
	back, err := Load(dir, "two")
	if err != nil {
		t.Fatal(err)
	}
	if ns, ok := back.PredictImpl("cpu", 2, 7, 64); !ok || ns != 50 {
		t.Errorf("reloaded implementation 2: %v, %v", ns, ok)
	}
	if ns, ok := back.PredictImpl("cpu", 0, 7, 64); !ok || ns != 1000 {
		t.Errorf("reloaded implementation 0: %v, %v", ns, ok)
	}
	archs := back.Archs()
	if len(archs) != 2 || archs[0].Impl != 0 || archs[1].Impl != 2 || archs[1].Entries[0].Mean != 50 {
		t.Errorf("Archs = %+v, want cpu implementations 0 and 2 in order", archs)
	}
}

func TestDefaultDir(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"STARPU_PERF_MODEL_DIR": "/p", "STARPU_HOME": "/s", "HOME": "/h"}, "/p"},
		{map[string]string{"STARPU_HOME": "/s", "HOME": "/h"}, "/s/.starpu/sampling"},
		{map[string]string{"HOME": "/h"}, "/h/.starpu/sampling"},
		{map[string]string{}, filepath.Join(os.TempDir(), ".starpu", "sampling")},
	}
	for _, c := range cases {
		if got := DefaultDir(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("DefaultDir(%v) = %q, want %q", c.env, got, c.want)
		}
	}
}

func TestKindNamesAndArchKey(t *testing.T) {
	for _, k := range []Kind{History, Regression, NonLinearRegression} {
		if p, err := ParseKind(k.String()); err != nil || p != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), p, err)
		}
	}
	if _, err := ParseKind("nope"); err == nil {
		t.Error("ParseKind accepted nope")
	}
	for _, c := range []struct {
		arch  string
		devid int
		want  string
	}{{"cpu", 3, "cpu"}, {"opencl", 0, "opencl_0"}, {"cuda", 1, "cuda_1"}} {
		if got := ArchKey(c.arch, c.devid); got != c.want {
			t.Errorf("ArchKey(%s, %d) = %s, want %s", c.arch, c.devid, got, c.want)
		}
	}
}

// TestHistoryOutliers is StarPU's rule against outliers (RecordImpl), with
// durations in µs.
func TestHistoryOutliers(t *testing.T) {
	const us = 1e3
	type step struct {
		samples  []float64 // µs, recorded in order
		mean     float64   // µs the entry's mean is then (0: no sample kept)
		n        uint64    // samples kept
		restarts uint64
	}
	cases := []struct {
		name     string
		maxError int // 0: the default
		steps    []step
	}{
		// The model: tasks of 0.2-0.36 ms with a few descheduled
		// runs of 20 ms early on. Without the rule the mean froze at
		// 2.9 ms. With it, the first is dropped, and each of the next
		// two, refused against one sample, starts the entry anew.
		{"descheduled runs", 0, []step{
			{samples: []float64{20000, 250, 20000, 300, 21000}, n: 0, restarts: 2},
			{samples: []float64{280, 200, 360, 240, 310, 260, 22000, 330, 290, 270}, mean: 2540.0 / 9, n: 9, restarts: 2},
			{samples: []float64{250}, mean: 2790.0 / 10, n: 10, restarts: 2},
		}},
		{"bounds", 0, []step{
			{samples: []float64{0, 100, 149}, mean: 124.5, n: 2},
			{samples: []float64{190}, mean: 124.5, n: 2},    // above 124.5*1.5
			{samples: []float64{84}, mean: 333.0 / 3, n: 3}, // 84*1.5 >= 124.5
			{samples: []float64{73}, mean: 333.0 / 3, n: 3}, // 73*1.5 < 111
			{samples: []float64{167}, n: 0, restarts: 1},    // 167/1.5 > 111, and a third refused against 3 kept
		}},
		// Samples a few µs apart differ by more than half, but lie within
		// 10 µs of the mean: kept.
		{"tiny tasks", 0, []step{
			{samples: []float64{1, 2, 8, 3, 1}, mean: 14.0 / 4, n: 4},
		}},
		// As many refused as kept: the mean was wrong. It starts anew
		// from the next sample, which the check then compares with.
		{"wrong mean", 0, []step{
			{samples: []float64{0, 100, 100, 100}, mean: 100, n: 3},
			{samples: []float64{1000, 1000}, mean: 100, n: 3},
			{samples: []float64{1000}, n: 0, restarts: 1},
			{samples: []float64{1000, 1010, 990}, mean: 1000, n: 3, restarts: 1},
		}},
		{"max error 100%", 100, []step{
			{samples: []float64{0, 100, 199}, mean: 299.0 / 2, n: 2},
			{samples: []float64{300, 298}, mean: 597.0 / 3, n: 3},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logged strings.Builder
			t.Setenv("STARPU_HOSTNAME", testHost)
			db, err := Open(t.TempDir(), 1, hclog.New(&hclog.LoggerOptions{Output: &logged, Level: hclog.Warn}))
			if err != nil {
				t.Fatal(err)
			}
			if c.maxError != 0 {
				if err := db.SetMaxError(c.maxError); err != nil {
					t.Fatal(err)
				}
			}
			m := db.Model("kernel_model", History)
			for i, s := range c.steps {
				for _, x := range s.samples {
					m.Record("cpu", 1, 64, x*us)
				}
				e := &entry{}
				if a := (*m.archs.Load()).get("cpu", 0); a != nil && (*a.fps.Load())[1] != nil {
					e = (*a.fps.Load())[1]
				}
				if e.n != s.n || math.Abs(e.mean-s.mean*us) > 1e-6 || e.restarts != s.restarts {
					t.Fatalf("step %d: %d samples kept, mean %v µs, %d restarts; want %d, %v µs, %d", i, e.n, e.mean/us, e.restarts, s.n, s.mean, s.restarts)
				}
				_, ok := m.Predict("cpu", 1, 64)
				if ok != (s.n >= MinSamples) {
					t.Errorf("step %d: Predict ok %v with %d samples", i, ok, s.n)
				}
			}
			if last := c.steps[len(c.steps)-1]; (last.restarts > 0) != strings.Contains(logged.String(), "started anew") ||
				last.restarts > 0 && !strings.Contains(logged.String(), "model=kernel_model") {
				t.Errorf("warning %q after %d restarts: want one naming the model when the entry restarted", logged.String(), last.restarts)
			}
		})
	}
	db := open(t, t.TempDir(), 0)
	if err := db.SetMaxError(0); err == nil || !strings.Contains(err.Error(), "STARPU_HISTORY_MAX_ERROR=0") {
		t.Errorf("SetMaxError(0): %v", err)
	}
}
