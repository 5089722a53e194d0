package main

import (
	"flag"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/starpu-go/starpu/core/perfmodel"
)

// perfmodelCmd is StarPU's starpu_perfmodel_display and
// starpu_perfmodel_plot: list, show and plot the models stored for this host.
func perfmodelCmd(args []string, out io.Writer) error {
	if len(args) == 0 {
		return usagef("perfmodel: which subcommand? (list, show NAME, plot NAME)")
	}
	var c *cmdFlags
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(out, usage)
		return nil
	case "list":
		c = newCmd("perfmodel list", "[flags]", "List the performance models stored for this host.")
	case "show":
		c = newCmd("perfmodel show", "[flags] NAME", "Show a model's history per architecture (footprint, size, mean, deviation,\nsamples) and its regression.")
	case "plot":
		c = newCmd("perfmodel plot", "[flags] NAME", "Write an SVG of a model's duration against size, per architecture.")
	default:
		return usagef("perfmodel: unknown subcommand %q (list, show, plot)", args[0])
	}
	c.refuse("it reads the stored models, without starting the runtime", "config", "plugin-dir", "sched", "ncpu", "trace")
	dir := c.String("dir", perfmodel.DefaultDir(os.Getenv), "read the models from `DIR`: by default $STARPU_PERF_MODEL_DIR, else $STARPU_HOME/.starpu/sampling, else $HOME/.starpu/sampling")
	switch args[0] {
	case "list":
		c.refuse("only perfmodel plot writes a file", "o")
		pos, err := c.parseInterspersed(args[1:], out)
		if err != nil {
			return err
		}
		if len(pos) != 0 {
			return usagef("perfmodel list: takes no argument, got %q", pos)
		}
		return perfmodelList(*dir, out)
	case "show":
		c.refuse("only perfmodel plot writes a file", "o")
		pos, err := c.parseInterspersed(args[1:], out)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("perfmodel show: want one model name (see starpu perfmodel list)")
		}
		return perfmodelShow(*dir, pos[0], out)
	default: // plot
		file := c.String("o", "", "SVG `FILE` to write (default NAME.svg in the current directory)")
		pos, err := c.parseInterspersed(args[1:], out)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("perfmodel plot: want one model name (see starpu perfmodel list)")
		}
		if *file == "" {
			*file = pos[0] + ".svg"
		}
		return perfmodelPlot(*dir, pos[0], *file, out)
	}
}

// parseInterspersed parses flags placed before or after the positional
// arguments ("plot NAME -o f.svg" as well as "plot -o f.svg NAME").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func perfmodelList(dir string, out io.Writer) error {
	syms, err := perfmodel.List(dir)
	if err != nil {
		return err
	}
	host := perfmodel.Hostname(os.Getenv)
	fmt.Fprintf(out, "models in %s for host %s: %d\n", filepath.Join(dir, "codelets"), host, len(syms))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SYMBOL\tKIND\tARCHS\tENTRIES\tSAMPLES")
	var bad []error
	for _, s := range syms {
		m, err := perfmodel.Load(dir, s)
		if err != nil {
			fmt.Fprintf(tw, "%s\tunreadable\t\t\t\n", s)
			bad = append(bad, err)
			continue
		}
		var archs []string
		var entries int
		var samples uint64
		for _, a := range m.Archs() {
			archs = append(archs, a.Arch)
			entries += len(a.Entries)
			for _, e := range a.Entries {
				samples += e.Samples
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", s, m.Kind(), strings.Join(archs, ","), entries, samples)
	}
	tw.Flush()
	for _, err := range bad {
		fmt.Fprintln(out, err)
	}
	kv(out, "perfmodel", map[string]any{"dir": dir, "host": host, "models": len(syms), "unreadable": len(bad)})
	return nil
}

func perfmodelShow(dir, symbol string, out io.Writer) error {
	m, err := perfmodel.Load(dir, symbol)
	if err != nil {
		return fmt.Errorf("perfmodel show: %w", err)
	}
	archs := m.Archs()
	fmt.Fprintf(out, "model %s (%s), host %s, %d architectures\n", m.Symbol(), m.Kind(), m.Host(), len(archs))
	var entries, calibrated int
	for _, a := range archs {
		var samples uint64
		for _, e := range a.Entries {
			samples += e.Samples
		}
		fmt.Fprintf(out, "\narch %s, implementation %d: %d entries, %d samples\n", a.Arch, a.Impl, len(a.Entries), samples)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "FOOTPRINT\tSIZE\tMEAN (us)\tDEV (us)\tSAMPLES\tCALIBRATED\t")
		for _, e := range a.Entries {
			fmt.Fprintf(tw, "%08x\t%d\t%.3f\t%.3f\t%d\t%s\t\n", e.Footprint, e.Size, e.Mean/1e3, e.Dev/1e3, e.Samples, yesNo(e.Calibrated()))
			entries++
			if e.Calibrated() {
				calibrated++
			}
		}
		tw.Flush()
		if f := a.Fit; f != nil {
			fmt.Fprintf(out, "%s: duration (ns) = %s, %d samples, sizes %d..%d, calibrated %s\n",
				m.Kind(), formula(m.Kind(), *f), f.Samples, f.MinSize, f.MaxSize, yesNo(f.Calibrated))
		}
	}
	kv(out, "perfmodel", map[string]any{"symbol": m.Symbol(), "kind": m.Kind().String(), "archs": len(archs),
		"entries": entries, "calibrated": calibrated})
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// formula prints a fit the way its kind models duration.
func formula(k perfmodel.Kind, f perfmodel.Fit) string {
	if f.A == 0 && f.B == 0 {
		return "(not fitted)"
	}
	s := fmt.Sprintf("%.4g*n^%.4g", f.A, f.B)
	if k == perfmodel.NonLinearRegression {
		s += fmt.Sprintf(" + %.4g", f.C)
	}
	return s
}

// Plot geometry, in SVG user units.
const (
	plotW, plotH           = 860.0, 560.0
	plotLeft, plotRight    = 90.0, 640.0
	plotTop, plotBottom    = 50.0, 490.0
	legendX                = 660.0
	curveSteps             = 120
	maxLabelledDecades     = 10
	minorTicksUpToDecades  = 6
	deviationCapHalfWidth  = 3.0
	pointRadius            = 3.5
	uncalibratedStrokeSize = 1.5
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// logAxis maps log10 of a value in [lo, hi] decades onto [p0, p1].
type logAxis struct {
	lo, hi int
	p0, p1 float64
}

func (a logAxis) at(v float64) float64 {
	return a.p0 + (math.Log10(v)-float64(a.lo))/float64(a.hi-a.lo)*(a.p1-a.p0)
}

// decades returns the whole decades that enclose [min, max].
func decades(minV, maxV float64) (lo, hi int) {
	lo, hi = int(math.Floor(math.Log10(minV))), int(math.Ceil(math.Log10(maxV)))
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}

// pow10Label writes 10^k with a unit: SI prefixes for bytes, plain numbers
// for microseconds.
func pow10Label(k int, bytes bool) string {
	if bytes {
		prefixes := []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"}
		if k >= 0 && k/3 < len(prefixes) {
			return fmt.Sprintf("%d %s", int(math.Pow10(k%3)), prefixes[k/3])
		}
		return fmt.Sprintf("1e%d B", k)
	}
	if k >= -3 && k <= 6 {
		return fmt.Sprintf("%g", math.Pow10(k))
	}
	return fmt.Sprintf("1e%d", k)
}

func perfmodelPlot(dir, symbol, file string, out io.Writer) error {
	m, err := perfmodel.Load(dir, symbol)
	if err != nil {
		return fmt.Errorf("perfmodel plot: %w", err)
	}
	archs := m.Archs()
	// Bounds over what can sit on log axes: sizes and durations above 0.
	minX, maxX, minY, maxY := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	npoints, skipped := 0, 0
	for _, a := range archs {
		for _, e := range a.Entries {
			if e.Size == 0 || e.Mean <= 0 {
				skipped++
				continue
			}
			npoints++
			x, y := float64(e.Size), e.Mean/1e3
			minX, maxX = min(minX, x), max(maxX, x)
			minY, maxY = min(minY, y), max(maxY, y+e.Dev/1e3)
			if lo := y - e.Dev/1e3; lo > 0 {
				minY = min(minY, lo)
			}
		}
	}
	if npoints == 0 {
		return fmt.Errorf("perfmodel plot: model %s has no sample with a size and a duration above 0 to plot", symbol)
	}
	xlo, xhi := decades(minX, maxX)
	ylo, yhi := decades(minY, maxY)
	xa := logAxis{xlo, xhi, plotLeft, plotRight}
	ya := logAxis{ylo, yhi, plotBottom, plotTop}

	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
<clipPath id="area"><rect x="%g" y="%g" width="%g" height="%g"/></clipPath>
<text x="%g" y="28" text-anchor="middle" font-size="15">%s</text>
`, plotW, plotH, plotW, plotH, plotLeft, plotTop, plotRight-plotLeft, plotBottom-plotTop,
		(plotLeft+plotRight)/2, html.EscapeString(fmt.Sprintf("perfmodel %s (%s, host %s)", m.Symbol(), m.Kind(), m.Host())))
	writeAxis(&b, xa, true)
	writeAxis(&b, ya, false)
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="black"/>
<text x="%g" y="%g" text-anchor="middle">data size (bytes)</text>
<text transform="translate(24 %g) rotate(-90)" text-anchor="middle">duration (µs)</text>
`, plotLeft, plotTop, plotRight-plotLeft, plotBottom-plotTop, (plotLeft+plotRight)/2, plotBottom+45, (plotTop+plotBottom)/2)

	curves := 0
	ly := plotTop + 10
	for i, a := range archs {
		color := palette[i%len(palette)]
		n := 0
		fmt.Fprintf(&b, "<g class=\"arch\" id=%q>\n", "arch-"+html.EscapeString(a.Arch))
		for _, e := range a.Entries {
			if e.Size == 0 || e.Mean <= 0 {
				continue
			}
			n++
			x, y, dev := xa.at(float64(e.Size)), e.Mean/1e3, e.Dev/1e3
			if dev > 0 {
				top := ya.at(y + dev)
				bot := plotBottom
				if y-dev > 0 {
					bot = ya.at(y - dev)
				}
				fmt.Fprintf(&b, `<path class="dev" d="M%.2f %.2fV%.2fM%.2f %.2fh%gM%.2f %.2fh%g" stroke="%s"/>`+"\n",
					x, top, bot, x-deviationCapHalfWidth, top, 2*deviationCapHalfWidth, x-deviationCapHalfWidth, bot, 2*deviationCapHalfWidth, color)
			}
			fill := color
			if !e.Calibrated() {
				fill = "white"
			}
			fmt.Fprintf(&b, `<circle class="point" cx="%.2f" cy="%.2f" r="%g" fill="%s" stroke="%s" stroke-width="%g"><title>%s</title></circle>`+"\n",
				x, ya.at(y), pointRadius, fill, color, uncalibratedStrokeSize,
				html.EscapeString(fmt.Sprintf("%s footprint %08x: size %d B, mean %.3f us, dev %.3f us, %d samples", a.Arch, e.Footprint, e.Size, y, dev, e.Samples)))
		}
		label := fmt.Sprintf("%s (%d points)", a.Arch, n)
		if f := a.Fit; f != nil && f.A > 0 {
			curves++
			var pts []string
			for s := 0; s <= curveSteps; s++ {
				lx := float64(xlo) + float64(xhi-xlo)*float64(s)/curveSteps
				v := f.Eval(math.Pow(10, lx)) / 1e3
				if v > 0 && !math.IsInf(v, 0) {
					pts = append(pts, fmt.Sprintf("%.2f,%.2f", xa.at(math.Pow(10, lx)), ya.at(v)))
				}
			}
			dash := ""
			if !f.Calibrated {
				dash = ` stroke-dasharray="6 4"`
			}
			fmt.Fprintf(&b, `<polyline class="fit" points="%s" fill="none" stroke="%s" stroke-width="1.5" clip-path="url(#area)"%s/>`+"\n",
				strings.Join(pts, " "), color, dash)
			fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="1.5"%s/>`+"\n", legendX, ly+22, legendX+20, ly+22, color, dash)
			fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10">%s</text>`+"\n", legendX+26, ly+26, html.EscapeString(formula(m.Kind(), *f)+" ns"))
		}
		fmt.Fprintf(&b, `<circle cx="%g" cy="%g" r="%g" fill="%s"/><text class="legend" x="%g" y="%g">%s</text>`+"\n",
			legendX+10, ly, pointRadius, color, legendX+26, ly+4, html.EscapeString(label))
		b.WriteString("</g>\n")
		ly += 44
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10">hollow: fewer than %d samples</text>
<text x="%g" y="%g" font-size="10">bars: ±1 standard deviation</text>
<text x="%g" y="%g" font-size="10">dashed: fit not calibrated</text>
</svg>
`, legendX, ly, perfmodel.MinSamples, legendX, ly+14, legendX, ly+28)

	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("perfmodel plot: %w", err)
	}
	fmt.Fprintf(out, "wrote %s: %d architectures, %d points, %d fitted curves", file, len(archs), npoints, curves)
	if skipped > 0 {
		fmt.Fprintf(out, " (%d entries of size or duration 0 left out of the log axes)", skipped)
	}
	fmt.Fprintln(out)
	kv(out, "perfmodel", map[string]any{"file": file, "archs": len(archs), "points": npoints, "curves": curves, "skipped": skipped})
	return nil
}

// writeAxis draws the grid, ticks and labels of one log axis: a labelled
// tick per decade (every few decades when there are many), unlabelled ticks
// at 2..9 times each decade when there are few.
func writeAxis(b *strings.Builder, a logAxis, horizontal bool) {
	step := 1 + (a.hi-a.lo)/maxLabelledDecades
	for k := a.lo; k <= a.hi; k++ {
		p := a.at(math.Pow10(k))
		major := (k-a.lo)%step == 0
		if major {
			if horizontal {
				fmt.Fprintf(b, `<line x1="%.2f" y1="%g" x2="%.2f" y2="%g" stroke="#ddd"/><line x1="%.2f" y1="%g" x2="%.2f" y2="%g" stroke="black"/><text class="tick" x="%.2f" y="%g" text-anchor="middle">%s</text>`+"\n",
					p, plotTop, p, plotBottom, p, plotBottom, p, plotBottom+6, p, plotBottom+20, pow10Label(k, true))
			} else {
				fmt.Fprintf(b, `<line x1="%g" y1="%.2f" x2="%g" y2="%.2f" stroke="#ddd"/><line x1="%g" y1="%.2f" x2="%g" y2="%.2f" stroke="black"/><text class="tick" x="%g" y="%.2f" text-anchor="end">%s</text>`+"\n",
					plotLeft, p, plotRight, p, plotLeft-6, p, plotLeft, p, plotLeft-9, p+4, pow10Label(k, false))
			}
		}
		if k == a.hi || a.hi-a.lo > minorTicksUpToDecades {
			continue
		}
		for m := 2; m <= 9; m++ {
			q := a.at(float64(m) * math.Pow10(k))
			if horizontal {
				fmt.Fprintf(b, `<line x1="%.2f" y1="%g" x2="%.2f" y2="%g" stroke="black"/>`+"\n", q, plotBottom, q, plotBottom+3)
			} else {
				fmt.Fprintf(b, `<line x1="%g" y1="%.2f" x2="%g" y2="%.2f" stroke="black"/>`+"\n", plotLeft-3, q, plotLeft, q)
			}
		}
	}
}
