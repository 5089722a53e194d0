package core

// The summaries STARPU_WORKER_STATS and STARPU_BUS_STATS print at
// Shutdown, in the spirit of StarPU's (starpu_profiling_worker_helper_
// display_summary, starpu_profiling_bus_helper_display_summary); design
// note: docs/design/tracing.md.

import (
	"fmt"
	"io"
	"math"
	"sort"
	"time"
)

// workerTotals is one worker's executions over every codelet.
type workerTotals struct {
	tasks int64
	exec  time.Duration
	flops float64
}

// workerTotals sums the codelets' per-worker statistics (always kept, see
// codeletInfo.note).
func (rt *Runtime) workerTotals() []workerTotals {
	out := make([]workerTotals, len(rt.workers))
	rt.codelets.mu.Lock()
	cls := append([]*Codelet(nil), rt.codelets.order...)
	rt.codelets.mu.Unlock()
	for _, cl := range cls {
		v, ok := rt.codelets.byPtr.Load(cl)
		if !ok {
			continue
		}
		ci := v.(*codeletInfo)
		for w := range ci.stats {
			if w >= len(out) {
				break
			}
			st := &ci.stats[w]
			out[w].tasks += st.n.Load()
			out[w].exec += time.Duration(st.ns.Load())
			out[w].flops += math.Float64frombits(st.flops.Load())
		}
	}
	return out
}

func msOf(d time.Duration) float64 { return float64(d) / 1e6 }

// writeWorkerStats prints per worker the tasks it ran and how the time
// since Init returned (total) split between executing them and the rest
// (idle, waiting for data, the runtime's overhead).
func (rt *Runtime) writeWorkerStats(w io.Writer, total time.Duration) {
	fmt.Fprintf(w, "\n#---------------------\nWorker stats:\n")
	var exec, all time.Duration
	for i, t := range rt.workerTotals() {
		wk := rt.workers[i]
		other := max(0, total-t.exec)
		fmt.Fprintf(w, "%-32s\n", rt.workerName(wk))
		fmt.Fprintf(w, "\t%d task(s)\n", t.tasks)
		fmt.Fprintf(w, "\ttime split: total %.2f ms = executing: %.2f ms + idle and overhead: %.2f ms\n", msOf(total), msOf(t.exec), msOf(other))
		if t.flops > 0 && total > 0 {
			fmt.Fprintf(w, "\t%f GFlop/s\n", t.flops/total.Seconds()/1e9)
		}
		exec += t.exec
		all += total
	}
	if all > 0 {
		other := max(0, all-exec)
		fmt.Fprintf(w, "\nGlobal time split: total %.2f ms = executing: %.2f ms (%.2f%%) + idle and overhead: %.2f ms (%.2f%%)\n",
			msOf(all), msOf(exec), 100*float64(exec)/float64(all), msOf(other), 100*float64(other)/float64(all))
	}
	fmt.Fprintf(w, "#---------------------\n")
}

// writeBusStats prints per bus link the bytes copied, the bandwidth over
// the time the copies took, and the number of copies.
func (rt *Runtime) writeBusStats(w io.Writer) {
	const gib = 1 << 30
	fmt.Fprintf(w, "\n#---------------------\nData transfer stats:\n")
	links := make([][2]int, 0, len(rt.trace.links))
	for l := range rt.trace.links {
		links = append(links, l)
	}
	sort.Slice(links, func(i, j int) bool {
		if links[i][0] != links[j][0] {
			return links[i][0] < links[j][0]
		}
		return links[i][1] < links[j][1]
	})
	var sum uint64
	for _, l := range links {
		st := rt.trace.links[l]
		gb := float64(st.bytes) / gib
		rate := 0.0
		if st.busy > 0 {
			rate = gb * 1024 / (float64(st.busy) / 1e9)
		}
		fmt.Fprintf(w, "\t%s -> %s\t%.4f GB\t%.4f MB/s\t(transfers : %d - avg %.4f MB)\n",
			rt.nodes[l[0]].name, rt.nodes[l[1]].name, gb, rate, st.n, gb*1024/float64(st.n))
		sum += st.bytes
	}
	fmt.Fprintf(w, "Total transfers: %.4f GB\n#---------------------\n", float64(sum)/gib)
}
