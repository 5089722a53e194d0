package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/core/perfmodel"
)

// modelDir writes models through the package API into a fresh directory:
// gemm (history, two archs, one entry short of calibration), scal
// (regression), axpy (non-linear regression) and sizeless (only size-0
// entries).
func modelDir(t *testing.T) string {
	t.Helper()
	t.Setenv("STARPU_HOSTNAME", "clihost")
	dir := t.TempDir()
	db, err := perfmodel.Open(dir, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	record := func(m *perfmodel.Model, arch string, sizes []uint64, n int, f func(float64) float64) {
		for _, s := range sizes {
			if m.Kind() == perfmodel.History {
				m.Record(arch, uint32(s)^0x5a5a0000, s, f(float64(s))) // a history model drops an entry's first sample
			}
			for i := range n {
				// ±2% around f, so that deviations are not 0.
				m.Record(arch, uint32(s)^0x5a5a0000, s, f(float64(s))*(1+0.02*float64(i%3-1)))
			}
		}
	}
	sizes := []uint64{1 << 10, 1 << 14, 1 << 18, 1 << 22}
	gemm := db.Model("gemm", perfmodel.History)
	record(gemm, "cpu", sizes, 12, func(x float64) float64 { return 1e-2 * math.Pow(x, 1.5) })
	record(gemm, "opencl_0", sizes[:3], 12, func(x float64) float64 { return 2e4 + 1e-3*math.Pow(x, 1.5) })
	record(gemm, "opencl_0", sizes[3:], 9, func(x float64) float64 { return 2e4 + 1e-3*math.Pow(x, 1.5) })
	record(db.Model("scal", perfmodel.Regression), "cpu", sizes, 10, func(x float64) float64 { return 0.5 * x })
	axpy := db.Model("axpy", perfmodel.NonLinearRegression)
	record(axpy, "cpu", sizes, 10, func(x float64) float64 { return 3000 + 0.25*x })
	record(axpy, "cuda_0", sizes[:2], 3, func(x float64) float64 { return 9000 + 0.01*x })
	sizeless := db.Model("sizeless", perfmodel.History)
	sizeless.Record("cpu", 7, 0, 100) // dropped: the first
	sizeless.Record("cpu", 7, 0, 100)
	if err := db.Save(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runPM runs "starpu perfmodel ..." and returns the output and the closing
// key=value pairs.
func runPM(t *testing.T, args ...string) (string, map[string]string) {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"perfmodel"}, args...), &out); err != nil {
		t.Fatalf("starpu perfmodel %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := strings.Fields(lines[len(lines)-1])
	if len(last) < 2 || last[0] != "starpu" || last[1] != "perfmodel" {
		t.Fatalf("last line %q is not a key=value line", lines[len(lines)-1])
	}
	kv := map[string]string{}
	for _, f := range last[2:] {
		k, v, _ := strings.Cut(f, "=")
		kv[k] = v
	}
	return out.String(), kv
}

func TestPerfmodelList(t *testing.T) {
	dir := modelDir(t)
	out, kv := runPM(t, "list", "--dir", dir)
	if kv["models"] != "4" || kv["unreadable"] != "0" || kv["host"] != "clihost" {
		t.Errorf("key=values %v, want models=4 unreadable=0 host=clihost", kv)
	}
	for _, want := range []string{"axpy", "nl-regression", "cpu,cuda_0", "gemm", "history", "cpu,opencl_0", "scal", "regression", "sizeless"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	// A corrupt model is listed as such, with the error naming its file.
	bad := filepath.Join(dir, "codelets", "broken.clihost")
	if err := os.WriteFile(bad, []byte("{\n  \"format\": \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, kv = runPM(t, "list", "--dir", dir)
	if kv["models"] != "5" || kv["unreadable"] != "1" || !strings.Contains(out, bad+": line 3") {
		t.Errorf("with a corrupt file: %v\n%s", kv, out)
	}
	// An empty directory has no models.
	if _, kv := runPM(t, "list", "--dir", t.TempDir()); kv["models"] != "0" {
		t.Errorf("empty dir: %v", kv)
	}
}

func TestPerfmodelShow(t *testing.T) {
	dir := modelDir(t)
	out, kv := runPM(t, "show", "gemm", "--dir", dir)
	want := map[string]string{"symbol": "gemm", "kind": "history", "archs": "2", "entries": "8", "calibrated": "7"}
	for k, v := range want {
		if kv[k] != v {
			t.Errorf("%s=%s, want %s (%v)", k, kv[k], v, kv)
		}
	}
	m, err := perfmodel.Load(dir, "gemm")
	if err != nil {
		t.Fatal(err)
	}
	// Every entry appears in its arch's table with its footprint, size, mean
	// and deviation in us.
	sections := strings.Split(out, "\narch ")
	for i, a := range m.Archs() {
		sec := sections[i+1]
		if !strings.HasPrefix(sec, fmt.Sprintf("%s, implementation %d: ", a.Arch, a.Impl)) {
			t.Fatalf("section %d is %q, want arch %s", i, strings.SplitN(sec, "\n", 2)[0], a.Arch)
		}
		for _, e := range a.Entries {
			line := ""
			for _, l := range strings.Split(sec, "\n") {
				if strings.Contains(l, fmt.Sprintf("%08x", e.Footprint)) {
					line = l
				}
			}
			f := strings.Fields(line)
			if len(f) != 6 || f[1] != strconv.FormatUint(e.Size, 10) || f[2] != fmt.Sprintf("%.3f", e.Mean/1e3) || f[3] != fmt.Sprintf("%.3f", e.Dev/1e3) ||
				f[4] != strconv.FormatUint(e.Samples, 10) || f[5] != yesNo(e.Calibrated()) {
				t.Errorf("row for %s %08x = %q, want size %d mean %.3f dev %.3f samples %d", a.Arch, e.Footprint, line, e.Size, e.Mean/1e3, e.Dev/1e3, e.Samples)
			}
		}
	}
	if strings.Contains(out, "regression:") {
		t.Errorf("history model shows a regression:\n%s", out)
	}

	// The regressions show parameters close to the ones the data follow.
	fits := []struct {
		symbol, kind, tail string
		a, b, c            float64
	}{
		{"scal", "regression", "40 samples, sizes 1024..4194304, calibrated yes", 0.5, 1, 0},
		{"axpy", "nl-regression", "40 samples, sizes 1024..4194304, calibrated yes", 0.25, 1, 3000},
		{"axpy", "nl-regression", "6 samples, sizes 1024..16384, calibrated no", -1, -1, -1},
	}
	for _, f := range fits {
		out, kv := runPM(t, "show", "--dir", dir, f.symbol)
		if kv["kind"] != f.kind {
			t.Errorf("%s: kind=%s, want %s", f.symbol, kv["kind"], f.kind)
		}
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, f.kind+": duration (ns) = ") && strings.HasSuffix(l, f.tail) {
				line = l
			}
		}
		if line == "" {
			t.Errorf("%s: no %q line ending %q:\n%s", f.symbol, f.kind+": duration (ns) = ", f.tail, out)
			continue
		}
		if f.a < 0 {
			continue
		}
		var a, b, c float64
		formula := strings.TrimPrefix(line, f.kind+": duration (ns) = ")
		if f.kind == "regression" {
			_, err = fmt.Sscanf(formula, "%g*n^%g,", &a, &b)
		} else {
			_, err = fmt.Sscanf(formula, "%g*n^%g + %g,", &a, &b, &c)
		}
		if err != nil || math.Abs(a-f.a) > 0.01*f.a || math.Abs(b-f.b) > 0.01 || math.Abs(c-f.c) > 0.01*f.c {
			t.Errorf("%s: %q gives a=%v b=%v c=%v (%v), want about %v %v %v", f.symbol, line, a, b, c, err, f.a, f.b, f.c)
		}
	}
}

// svgDoc is what the plot test reads back from the SVG.
type svgElem struct {
	name  string
	attrs map[string]string
	text  string
}

func parseSVG(t *testing.T, path string) []svgElem {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := xml.NewDecoder(f)
	var elems []svgElem
	var stack []int
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := svgElem{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			elems = append(elems, e)
			stack = append(stack, len(elems)-1)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				elems[stack[len(stack)-1]].text += string(tok)
			}
		}
	}
	return elems
}

func TestPerfmodelPlot(t *testing.T) {
	dir := modelDir(t)
	cases := []struct {
		symbol         string
		points, curves int
		hollow, dashed int
		ticksX, ticksY []string
		archs          int
	}{
		{"gemm", 8, 0, 1, 0, []string{"1 kB", "10 MB"}, []string{"1", "100000"}, 2},
		{"scal", 4, 1, 0, 0, []string{"1 kB", "10 MB"}, []string{"1", "10000"}, 1},
		{"axpy", 6, 2, 2, 1, []string{"1 kB"}, []string{"1", "1000"}, 2},
	}
	for _, c := range cases {
		t.Run(c.symbol, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), c.symbol+"-plot.svg")
			_, kv := runPM(t, "plot", c.symbol, "--dir", dir, "-o", file)
			if kv["file"] != file || kv["points"] != strconv.Itoa(c.points) || kv["curves"] != strconv.Itoa(c.curves) || kv["archs"] != strconv.Itoa(c.archs) {
				t.Errorf("key=values %v, want points=%d curves=%d archs=%d", kv, c.points, c.curves, c.archs)
			}
			var points, curves, hollow, dashed int
			ticks := map[string]bool{}
			texts := ""
			for _, e := range parseSVG(t, file) {
				switch {
				case e.name == "circle" && e.attrs["class"] == "point":
					points++
					if e.attrs["fill"] == "white" {
						hollow++
					}
					x, _ := strconv.ParseFloat(e.attrs["cx"], 64)
					y, _ := strconv.ParseFloat(e.attrs["cy"], 64)
					if x < plotLeft || x > plotRight || y < plotTop || y > plotBottom {
						t.Errorf("point at (%v, %v) outside the plot area", x, y)
					}
				case e.name == "polyline" && e.attrs["class"] == "fit":
					curves++
					if e.attrs["stroke-dasharray"] != "" {
						dashed++
					}
					if n := len(strings.Fields(e.attrs["points"])); n < curveSteps/2 {
						t.Errorf("curve has %d vertices", n)
					}
				case e.name == "text":
					texts += e.text + "\n"
					if e.attrs["class"] == "tick" {
						ticks[e.text] = true
					}
				}
			}
			if points != c.points || curves != c.curves || hollow != c.hollow || dashed != c.dashed {
				t.Errorf("svg has %d points (%d hollow), %d curves (%d dashed); want %d (%d), %d (%d)",
					points, hollow, curves, dashed, c.points, c.hollow, c.curves, c.dashed)
			}
			for _, tk := range append(c.ticksX, c.ticksY...) {
				if !ticks[tk] {
					t.Errorf("no tick labelled %q (ticks: %v)", tk, ticks)
				}
			}
			for _, w := range []string{"data size (bytes)", "duration (µs)", "perfmodel " + c.symbol, "points)"} {
				if !strings.Contains(texts, w) {
					t.Errorf("svg text lacks %q", w)
				}
			}
		})
	}
	// Without -o the plot goes to NAME.svg in the current directory.
	wd := t.TempDir()
	t.Chdir(wd)
	if _, kv := runPM(t, "plot", "--dir", dir, "scal"); kv["file"] != "scal.svg" {
		t.Errorf("default file = %q", kv["file"])
	}
	if _, err := os.Stat(filepath.Join(wd, "scal.svg")); err != nil {
		t.Error(err)
	}
}

func TestPerfmodelErrors(t *testing.T) {
	dir := modelDir(t)
	cases := []struct {
		args []string
		msg  []string
	}{
		{[]string{"perfmodel"}, []string{"which subcommand"}},
		{[]string{"perfmodel", "draw"}, []string{`unknown subcommand "draw"`}},
		{[]string{"perfmodel", "show", "--dir", dir}, []string{"want one model name"}},
		{[]string{"perfmodel", "list", "--dir", dir, "extra"}, []string{"takes no argument"}},
		{[]string{"perfmodel", "show", "nope", "--dir", dir}, []string{`no model "nope"`, "clihost", "models there: axpy, gemm, scal, sizeless"}},
		{[]string{"perfmodel", "plot", "nope", "--dir", dir}, []string{`no model "nope"`, "models there: axpy, gemm, scal, sizeless"}},
		{[]string{"perfmodel", "show", "nope", "--dir", t.TempDir()}, []string{`no model "nope"`, "models there: none"}},
		{[]string{"perfmodel", "plot", "sizeless", "--dir", dir, "-o", filepath.Join(t.TempDir(), "x.svg")}, []string{"no sample with a size"}},
		{[]string{"perfmodel", "show", "../etc", "--dir", dir}, []string{"path separator"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			err := run(context.Background(), c.args, io.Discard)
			if err == nil {
				t.Fatal("no error")
			}
			for _, m := range c.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q lacks %q", err, m)
				}
			}
		})
	}
}
