package trace

// The Gantt chart: one row per worker, per bus link and per peer rank
// communicated with, tasks coloured by codelet (a task's tooltip lists
// its implementation, its team and its handles with their modes, sizes
// and footprints; a parallel task is drawn on every member), the workers'
// states between tasks (idle, sleeping, scheduling, fetching: states.go)
// shaded and labelled, the critical path outlined and joined. Tasks narrower than a pixel merge with their neighbours of the
// same codelet, so that a run of a million tasks draws as a few thousand
// rectangles.

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
)

// Chart layout, in SVG user units (pixels at 100%).
const (
	chartWidth  = 1400.0 // the time axis
	labelWidth  = 240.0
	rowHeight   = 22.0
	rowGap      = 6.0
	axisHeight  = 30.0
	legendRow   = 18.0
	idleColour  = "#e4e4e4"
	sleepColour = "#c8c8d8"
	schedColour = "#fff0a0"
	fetchColour = "#a8d8f0"
	xferColour  = "#7a7a7a"
	sendColour  = "#4a7a4a"
	recvColour  = "#7a4a7a"
	critColour  = "#d62728"
	mergeSlackX = 0.5 // pixels: closer boxes merge
)

// palette colours codelets in order of total time; more than it holds
// take hues around the circle.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5"}

func colour(i int) string {
	if i < len(palette) {
		return palette[i]
	}
	h := math.Mod(float64(i)*137.508, 360)
	return fmt.Sprintf("hsl(%.0f,55%%,55%%)", h)
}

// box is one rectangle to draw: a task or a transfer, several of them
// merged, or an idle gap.
type box struct {
	x0, x1 float64
	fill   string
	crit   bool
	n      int
	title  string
	// busy is the time the merged items cover, span the time from the
	// first's start to the last's end: the box is as opaque as it is
	// busy.
	busy, span int64
	x0Ns       int64
}

// item is a task or transfer to draw, before merging.
type item struct {
	start, end int64
	fill       string
	crit       bool
	kind       string
	title      string
}

// SVGOptions tunes WriteSVG.
type SVGOptions struct {
	// Title heads the chart.
	Title string
}

// WriteSVG draws t as a self-contained SVG Gantt chart, s being t's
// summary.
func (t *Trace) WriteSVG(w io.Writer, s Summary, opt SVGOptions) error {
	bw := bufio.NewWriter(w)
	t.svg(bw, s, opt, false)
	return bw.Flush()
}

// WriteHTML writes an HTML page that needs no network: the summary, the
// Gantt chart (wheel to zoom, drag to pan) and its legend.
func (t *Trace) WriteHTML(w io.Writer, s Summary, opt SVGOptions) error {
	bw := bufio.NewWriter(w)
	title := opt.Title
	if title == "" {
		title = "StarPU trace"
	}
	fmt.Fprintf(bw, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n", html.EscapeString(title))
	bw.WriteString(`<style>body{font-family:sans-serif;margin:16px}pre{background:#f6f6f6;padding:8px;overflow:auto}#chart{border:1px solid #ccc;overflow:hidden}svg{display:block;width:100%;cursor:grab}</style></head><body>` + "\n")
	fmt.Fprintf(bw, "<h1>%s</h1>\n<p>Wheel over the chart to zoom the time axis, drag to pan, double-click to reset. Hover a box for its task.</p>\n<div id=\"chart\">\n", html.EscapeString(title))
	t.svg(bw, s, opt, true)
	bw.WriteString("</div>\n<h2>Summary</h2>\n<pre>")
	var sum strings.Builder
	if err := t.WriteSummary(&sum, s); err != nil {
		return err
	}
	bw.WriteString(html.EscapeString(sum.String()))
	bw.WriteString("</pre>\n")
	bw.WriteString(zoomScript)
	bw.WriteString("</body></html>\n")
	return bw.Flush()
}

// zoomScript zooms and pans the plot's time axis by changing the SVG's
// viewBox; the worker labels stay, drawn in a group it moves back.
const zoomScript = `<script>
(function(){
var svg=document.querySelector('#chart svg');if(!svg)return;
var vb=svg.viewBox.baseVal,W=vb.width,X0=vb.x,lw=+svg.dataset.labels,labels=document.getElementById('labels');
function set(x,w){w=Math.min(Math.max(w,8),W);x=Math.min(Math.max(x,X0),X0+W-w);vb.x=x;vb.width=w;
labels.setAttribute('transform','translate('+(x-X0)+',0) scale('+(w/W)+',1)');}
svg.addEventListener('wheel',function(e){e.preventDefault();var r=svg.getBoundingClientRect();
var f=(e.clientX-r.left)/r.width,px=vb.x+f*vb.width,k=e.deltaY<0?0.8:1.25,w=vb.width*k;set(px-f*w,w);},{passive:false});
var drag=null;svg.addEventListener('mousedown',function(e){drag={x:e.clientX,vx:vb.x};});
window.addEventListener('mouseup',function(){drag=null;});
window.addEventListener('mousemove',function(e){if(!drag)return;var r=svg.getBoundingClientRect();
set(drag.vx-(e.clientX-drag.x)*vb.width/r.width,vb.width);});
svg.addEventListener('dblclick',function(){set(X0,W);});
})();
</script>
`

func (t *Trace) svg(w *bufio.Writer, s Summary, opt SVGOptions, inHTML bool) {
	start, end := s.Start, s.End
	for _, x := range t.Transfers {
		if s.Ran == 0 && start == 0 && end == 0 {
			start, end = x.Start, x.End
		}
		start, end = min(start, x.Start), max(end, x.End)
	}
	span := float64(end - start)
	if span <= 0 {
		span = 1
	}
	xOf := func(ns int64) float64 { return labelWidth + chartWidth*float64(ns-start)/span }

	// Colours by codelet, in the summary's order (most time first).
	fills := map[string]string{}
	for i, c := range s.Codelets {
		fills[c.Name] = colour(i)
	}
	crit := make(map[uint64]bool, len(s.CriticalTasks))
	for _, id := range s.CriticalTasks {
		crit[id] = true
	}

	type row struct {
		label string
		boxes []box
	}
	var rows []row
	rowOf := map[int]int{}
	for _, wk := range s.Workers {
		rowOf[wk.Worker.ID] = len(rows)
		rows = append(rows, row{label: wk.Worker.Name})
	}
	perRow := make([][]*Task, len(rows))
	var one [1]int
	for _, x := range t.Tasks {
		if !x.Ran {
			continue
		}
		// A team's task is drawn on every member's row.
		for _, w := range x.ranOn(&one) {
			if r, ok := rowOf[w]; ok {
				perRow[r] = append(perRow[r], x)
			}
		}
	}
	stateItems := make([][]item, len(rows))
	for _, st := range t.States {
		r, ok := rowOf[st.Worker]
		if !ok {
			continue
		}
		fill := idleColour
		switch st.Kind {
		case StateFetching:
			fill = fetchColour
		case StateScheduling:
			fill = schedColour
		case StateSleeping:
			fill = sleepColour
		}
		title := fmt.Sprintf("%s %s, from %s to %s", st.Kind, human(st.End-st.Start), human(st.Start), human(st.End))
		if st.Task != 0 {
			title += fmt.Sprintf(", before job %d", st.Task)
		}
		stateItems[r] = append(stateItems[r], item{start: st.Start, end: st.End, fill: fill, kind: st.Kind.String(), title: title})
	}
	for r, tasks := range perRow {
		sort.Slice(tasks, func(i, j int) bool { return tasks[i].Start < tasks[j].Start })
		items := make([]item, len(tasks))
		for i, x := range tasks {
			title := fmt.Sprintf("%s (job %d): %s, from %s to %s", x.Name, x.ID, human(x.Duration()), human(x.Start), human(x.End))
			if x.Failed {
				title += ", failed"
			}
			if x.Impl >= 0 {
				title += fmt.Sprintf(", implementation %d", x.Impl)
			}
			if len(x.Team) > 0 {
				title += fmt.Sprintf(", on a team of %d (workers %v, master %d)", len(x.Team), x.Team, x.Worker)
			}
			title += handlesNote(x.Handles)
			items[i] = item{start: x.Start, end: x.End, fill: fills[x.Kind()], crit: crit[x.ID], kind: x.Kind(), title: title}
		}
		// A trace with states draws them; one without, its gaps as idle.
		if sts := stateItems[r]; len(sts) > 0 {
			rows[r].boxes = append(merge(sts, start, end, xOf, false), merge(items, start, end, xOf, false)...)
		} else {
			rows[r].boxes = merge(items, start, end, xOf, true)
		}
	}
	links := map[[2]int]int{}
	var xitems [][]item
	for _, x := range t.Transfers {
		k := [2]int{x.Src, x.Dst}
		r, ok := links[k]
		if !ok {
			r = len(rows)
			links[k] = r
			rows = append(rows, row{label: t.NodeName(x.Src) + " -> " + t.NodeName(x.Dst)})
			xitems = append(xitems, nil)
		}
		title := fmt.Sprintf("transfer of handle %d, %d bytes: %s, from %s to %s", x.Handle, x.Bytes, human(x.End-x.Start), human(x.Start), human(x.End))
		xitems[r-len(s.Workers)] = append(xitems[r-len(s.Workers)], item{start: x.Start, end: x.End, fill: xferColour, kind: "transfer", title: title})
	}
	for i, its := range xitems {
		rows[len(s.Workers)+i].boxes = merge(its, start, end, xOf, false)
	}
	peers := map[[2]int]int{}
	var citems [][]item
	firstPeer := len(rows)
	merged := t.multiRank()
	for _, c := range t.Comms {
		r, ok := peers[[2]int{c.Rank, c.Peer}]
		if !ok {
			r = len(rows)
			peers[[2]int{c.Rank, c.Peer}] = r
			label := fmt.Sprintf("rank %d", c.Peer)
			if merged {
				label = fmt.Sprintf("rank %d with rank %d", c.Rank, c.Peer)
			}
			rows = append(rows, row{label: label})
			citems = append(citems, nil)
		}
		fill, what := recvColour, "receive from"
		if c.Send {
			fill, what = sendColour, "send to"
		}
		title := fmt.Sprintf("%s rank %d, tag %d, %d bytes: %s, from %s to %s", what, c.Peer, c.Tag, c.Bytes, human(c.End-c.Start), human(c.Start), human(c.End))
		citems[r-firstPeer] = append(citems[r-firstPeer], item{start: c.Start, end: c.End, fill: fill, kind: what, title: title})
	}
	for i, its := range citems {
		sort.Slice(its, func(a, b int) bool { return its[a].start < its[b].start })
		rows[firstPeer+i].boxes = merge(its, start, end, xOf, false)
	}

	top := axisHeight
	if opt.Title != "" && !inHTML {
		top += 20
	}
	height := top + float64(len(rows))*(rowHeight+rowGap) + 10 + legendRow*float64((legendItems(t, s)+3)/4)
	width := labelWidth + chartWidth + 20
	aspect := ""
	if inHTML {
		// The zoom stretches the time axis only.
		aspect = ` preserveAspectRatio="none"`
	}
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f"%s font-family="sans-serif" font-size="12" data-labels="%.0f">`+"\n", width, height, width, height, aspect, labelWidth)
	if opt.Title != "" && !inHTML {
		fmt.Fprintf(w, `<text x="4" y="16" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(opt.Title))
	}
	// The time axis.
	step := niceStep(span / 10)
	fmt.Fprintf(w, `<g stroke="#bbb" font-size="10">`+"\n")
	for v := 0.0; v <= span; v += step {
		x := labelWidth + chartWidth*v/span
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/><text x="%.1f" y="%.1f" stroke="none" fill="#333">%s</text>`+"\n",
			x, top-8, x, top+float64(len(rows))*(rowHeight+rowGap), x+2, top-12, human(int64(v)))
	}
	w.WriteString("</g>\n")
	// Rows.
	type point struct{ x, y float64 }
	var critPts []point
	critIdx := map[uint64]int{}
	for i, id := range s.CriticalTasks {
		critIdx[id] = i
	}
	critAt := make([]point, len(s.CriticalTasks))
	for r, rw := range rows {
		y := top + float64(r)*(rowHeight+rowGap)
		for _, b := range rw.boxes {
			wd := math.Max(b.x1-b.x0, 0.3)
			extra := ""
			if b.crit {
				extra = fmt.Sprintf(` stroke="%s" stroke-width="1.5"`, critColour)
			}
			title := b.title
			if b.n > 1 {
				extra += fmt.Sprintf(` fill-opacity="%.2f"`, math.Max(0.25, float64(b.busy)/math.Max(1, float64(b.span))))
				title = fmt.Sprintf("%d %s merged at this zoom: busy %s of %s, from %s", b.n, b.title, human(b.busy), human(b.span), human(b.x0Ns))
			}
			fmt.Fprintf(w, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"%s><title>%s</title></rect>`+"\n", b.x0, y, wd, rowHeight, b.fill, extra, html.EscapeString(title))
		}
	}
	for _, x := range t.Tasks {
		if i, ok := critIdx[x.ID]; ok && x.Ran {
			if r, ok := rowOf[x.Worker]; ok {
				y := top + float64(r)*(rowHeight+rowGap) + rowHeight/2
				critAt[i] = point{xOf(x.Start) + (xOf(x.End)-xOf(x.Start))/2, y}
				continue
			}
		}
		if i, ok := critIdx[x.ID]; ok {
			critAt[i] = point{-1, -1}
		}
	}
	for _, p := range critAt {
		if p.x < 0 {
			continue
		}
		if n := len(critPts); n > 0 && math.Abs(critPts[n-1].x-p.x) < 1 && critPts[n-1].y == p.y {
			continue
		}
		critPts = append(critPts, p)
	}
	if len(critPts) > 1 {
		var pts strings.Builder
		for _, p := range critPts {
			fmt.Fprintf(&pts, "%.1f,%.1f ", p.x, p.y)
		}
		fmt.Fprintf(w, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.2" stroke-dasharray="4 2"><title>critical path: %d tasks, %s</title></polyline>`+"\n",
			strings.TrimSpace(pts.String()), critColour, len(s.CriticalTasks), human(s.CriticalPath))
	}
	// Labels, over a white band so that a zoomed plot slides under them.
	fmt.Fprintf(w, `<g id="labels"><rect x="0" y="0" width="%.0f" height="%.0f" fill="white"/>`+"\n", labelWidth-4, height)
	for r, rw := range rows {
		y := top + float64(r)*(rowHeight+rowGap) + rowHeight/2 + 4
		fmt.Fprintf(w, `<text x="4" y="%.1f">%s</text>`+"\n", y, html.EscapeString(clip(rw.label, 36)))
	}
	// The legend.
	ly := top + float64(len(rows))*(rowHeight+rowGap) + 10
	items := []struct{ fill, stroke, label string }{{idleColour, "", "idle"}, {sleepColour, "", "sleeping"}, {schedColour, "", "scheduling"}, {fetchColour, "", "fetching"},
		{xferColour, "", "transfer"}, {"white", critColour, "critical path"}}
	if len(t.Comms) > 0 {
		items = append(items, struct{ fill, stroke, label string }{sendColour, "", "send"}, struct{ fill, stroke, label string }{recvColour, "", "receive"})
	}
	for _, c := range s.Codelets {
		items = append(items, struct{ fill, stroke, label string }{fills[c.Name], "", c.Name})
	}
	for i, it := range items {
		x := 4 + float64(i%4)*((labelWidth+chartWidth)/4)
		y := ly + float64(i/4)*legendRow
		stroke := ""
		if it.stroke != "" {
			stroke = fmt.Sprintf(` stroke="%s" stroke-width="1.5"`, it.stroke)
		}
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"%s/><text x="%.1f" y="%.1f">%s</text>`+"\n", x, y, it.fill, stroke, x+16, y+10, html.EscapeString(clip(it.label, 40)))
	}
	w.WriteString("</g>\n</svg>\n")
}

// legendItems is the number of entries in the legend.
func legendItems(t *Trace, s Summary) int {
	n := 6 + len(s.Codelets)
	if len(t.Comms) > 0 {
		n += 2
	}
	return n
}

// handlesNote lists a task's handles for its tooltip: number, mode, size,
// footprint (when the trace has it) and name, a line each.
func handlesNote(hs []Access) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "\nhandle %d %s, %d bytes", h.Handle, ModeString(h.Mode), h.Size)
		if h.Footprint != 0 {
			fmt.Fprintf(&b, ", footprint %08x", h.Footprint)
		}
		if h.Name != "" {
			fmt.Fprintf(&b, ", %s", h.Name)
		}
	}
	return b.String()
}

// merge turns a row's items, sorted by start, into boxes: items less than
// a pixel apart that look the same (colour, critical or not) merge into
// one box as opaque as they are busy, so that a million tiny tasks draw as
// what the eye can see of them. With idle, the gaps of a pixel or more
// between start and end become idle boxes.
func merge(items []item, start, end int64, xOf func(int64) float64, idle bool) []box {
	var bs, gaps []box
	cur := start
	for _, it := range items {
		if idle && it.start > cur && xOf(it.start)-xOf(cur) >= 1 {
			gaps = append(gaps, box{x0: xOf(cur), x1: xOf(it.start), fill: idleColour, n: 1, title: "idle " + human(it.start-cur)})
		}
		cur = max(cur, it.end)
		if n := len(bs); n > 0 {
			l := &bs[n-1]
			if l.fill == it.fill && l.crit == it.crit && xOf(it.start)-l.x1 < 1 && (l.x1-l.x0 < 2 || xOf(it.end)-xOf(it.start) < 1) {
				if l.n == 1 {
					l.title = it.kind + " boxes"
				}
				l.x1 = math.Max(l.x1, xOf(it.end))
				l.n++
				l.busy += it.end - it.start
				l.span = max(l.span, it.end-l.x0Ns)
				continue
			}
		}
		bs = append(bs, box{x0: xOf(it.start), x1: xOf(it.end), x0Ns: it.start, fill: it.fill, crit: it.crit, n: 1, title: it.title, busy: it.end - it.start, span: it.end - it.start})
	}
	if idle && end > cur && xOf(end)-xOf(cur) >= 1 {
		gaps = append(gaps, box{x0: xOf(cur), x1: xOf(end), fill: idleColour, n: 1, title: "idle " + human(end-cur)})
	}
	return append(gaps, bs...)
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// human writes ns with a unit that suits it.
func human(ns int64) string {
	d := float64(ns)
	switch a := math.Abs(d); {
	case a >= 1e9:
		return fmt.Sprintf("%.3g s", d/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.3g ms", d/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.3g us", d/1e3)
	}
	return fmt.Sprintf("%d ns", ns)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
