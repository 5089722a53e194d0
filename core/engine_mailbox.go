package core

// The engine's mailboxes; design note: docs/design/hot-path.md.

// The engine's mailboxes: work other goroutines hand the engine goroutine
// (call), and device-memory messages (allocations, frees, copies) waiting
// for room in a worker's dispatch ring (postCtl). The engine.go header
// says what the engine goroutine owns and why the others go through here.

import "syscall"

// call runs f on the engine goroutine, which owns replicate state.
func (e *engine) call(f func()) {
	e.callMu.Lock()
	e.calls = append(e.calls, f)
	e.callMu.Unlock()
	e.ncalls.Add(1)
	e.coreBell.Ring()
}

// sync runs f on the engine goroutine and waits, or runs it at once when
// called there (from a callback): for what only reads replicate state or
// pins it.
func (e *engine) sync(f func()) {
	if e.onGoroutine() {
		f()
		return
	}
	e.wait(f)
}

// callWait runs f on the engine goroutine and waits for it. Called there
// (from a callback the engine runs), it only queues f: running it at once
// would change replicate state in the middle of the engine's operation.
func (e *engine) callWait(f func()) {
	if e.onGoroutine() {
		e.call(f)
		return
	}
	e.wait(f)
}

// onGoroutine reports whether the caller runs on the engine goroutine.
func (e *engine) onGoroutine() bool { return int32(syscall.Gettid()) == e.tid.Load() }

// wait runs f on the engine goroutine, from another, and waits for it.
func (e *engine) wait(f func()) {
	done := make(chan struct{})
	e.call(func() {
		f()
		close(done)
	})
	<-done
}

func (e *engine) runCalls() {
	if e.ncalls.Load() == 0 {
		return
	}
	e.callMu.Lock()
	fs := e.calls
	e.calls = nil
	e.ncalls.Store(0)
	e.callMu.Unlock()
	for _, f := range fs {
		f()
	}
}

// ctlMsg is an allocation, free or copy waiting for room in a ring.
type ctlMsg struct {
	size   int
	encode func([]byte)
}

// postCtl writes a device-memory message to w's dispatch ring, or queues it
// when the ring is full.
func (e *engine) postCtl(w *workerState, size int, encode func([]byte)) {
	if len(w.ctlOverflow) == 0 {
		if b := w.dispatch.Reserve(size); b != nil {
			encode(b)
			w.dispatch.Commit()
			w.mustRing = true
			return
		}
	}
	w.ctlOverflow = append(w.ctlOverflow, ctlMsg{size, encode})
}

func (e *engine) flushCtl(w *workerState) {
	n := 0
	for ; n < len(w.ctlOverflow); n++ {
		m := w.ctlOverflow[n]
		b := w.dispatch.Reserve(m.size)
		if b == nil {
			break
		}
		m.encode(b)
		w.dispatch.Commit()
		w.mustRing = true
	}
	if n > 0 {
		clear(w.ctlOverflow[:n])
		w.ctlOverflow = w.ctlOverflow[n:]
	}
}
