package core

import (
	"io"
	"testing"

	"github.com/starpu-go/starpu/core/internal/trace"
	"github.com/starpu-go/starpu/core/internal/tsc"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

type discardFile struct{ io.Writer }

func (discardFile) Close() error { return nil }

// BenchmarkTraceHooks is what tracing adds to one task of a chain on the
// runtime's side: the submit, ready, run and edge hooks, with a native
// stream to nowhere.
func BenchmarkTraceHooks(b *testing.B) {
	rt, s, j := benchTracer(b)
	prev := &job{id: 1, worker: 0, task: j.task, modes: j.modes}
	j.worker = 1
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j.id = uint64(i + 2)
		rt.trace.submit(rt, j)
		rt.trace.edge(prev, j, true)
		rt.trace.ready(j, 1)
		rt.traceTask(1, j, int64(i), int64(i)+10, 0, 0, false)
		rt.trace.flushRound()
	}
	b.StopTimer()
	if err := s.Close(nil, nil); err != nil {
		b.Fatal(err)
	}
}

// benchTracer is a runtime tracing to a native stream to nowhere, and a
// job of a chain's codelet on one handle in RW.
func benchTracer(b *testing.B) (*Runtime, *trace.Stream, *job) {
	s, err := trace.NewStream(discardFile{io.Discard}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	rt := &Runtime{}
	rt.trace = &tracer{stream: s, clock: tsc.New(wire.Now)}
	h := &Handle{id: 7, size: 4}
	cl := &Codelet{Name: "empty", Modes: []Mode{RW}}
	return rt, s, &job{task: &Task{Codelet: cl, Handles: []*Handle{h}}, modes: cl.Modes}
}

// With nothing observed the runtime keeps no tracer: every hook is one nil
// check.
func TestNoTracerByDefault(t *testing.T) {
	rt := &Runtime{getenv: func(string) string { return "" }}
	if err := rt.initTrace(Options{}); err != nil {
		t.Fatal(err)
	}
	if rt.trace != nil {
		t.Fatal("a tracer with nothing to observe")
	}
}

// BenchmarkTraceSubmit is the submit hook alone, on the application's
// goroutine: for a chain of one codelet on one handle, the record a
// task's submission writes.
func BenchmarkTraceSubmit(b *testing.B) {
	rt, s, j := benchTracer(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j.id = uint64(i + 1)
		rt.trace.submit(rt, j)
	}
	b.StopTimer()
	if err := s.Close(nil, nil); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTraceEngineChain is what tracing costs the engine goroutine per
// task of a chain, as it runs there: a task's run record, the edge to
// its successor and the successor's ready time at its end (a chained
// task's), written in rounds of 64 tasks.
func BenchmarkTraceEngineChain(b *testing.B) {
	rt, s, j := benchTracer(b)
	j.traced, j.worker = true, 1
	succ := &job{task: j.task, modes: j.modes, traced: true}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j.id, succ.id = uint64(i+1), uint64(i+2)
		j.start, j.end = int64(i)*1000, int64(i)*1000+300
		rt.traceTask(1, j, j.start, j.end, 0, 0, false)
		rt.trace.edge(j, succ, true)
		rt.trace.readyAt(succ, j.end, true)
		if i%64 == 63 {
			rt.trace.flushRound()
		}
	}
	rt.trace.flushRound()
	b.StopTimer()
	if err := s.Close(nil, nil); err != nil {
		b.Fatal(err)
	}
}
