package core

// Lost data; design note: docs/design/plugins.md.

import (
	"errors"
	"fmt"
)

// Lost data: a handle whose value no one can vouch for.
//
// A device driver that dies takes its memory with it: a handle whose only
// valid copy was there is lost the same way, naming the node (wipeNodes,
// plugin_restart.go).
//
// A task that fails on a worker may have written part of its output (a
// driver killed mid-kernel, a kernel that returned an error half way): the
// runtime cannot tell, so the handles it writes (W, RW, REDUX) are marked
// lost with the task's name and its error. A task that failed before it
// reached a worker (no live worker, a transfer or allocation that failed,
// its handle unregistered under it) wrote nothing: its data stays as it
// was, as the tasks after it expect. So does a task that did not run
// because its input was lost, except that its outputs, which the program
// meant to be computed from that input, are lost in turn. From then on
// every access that reads the value fails with an error that names the
// handle and the task that broke it: a task reading it fails instead of
// running (and loses its own outputs in turn, naming the first task), an
// Acquire for reading returns the error, and Unregister returns it without
// writing the value back to the application's memory. An access that
// writes without reading (a task or an Acquire in mode W, CopyFrom into
// the handle) writes the value anew and ends the loss.
//
// The check runs where an access gets its turn (push for tasks, the grant
// for acquisitions), not at Submit: a task submitted after the failure may
// come after a write that makes the value good again.
//
// Rejected: failing only the failed task (the state before): later
// Acquire and Unregister returned nil on half-written data. Failing the
// successors through their dependencies: successors over other handles,
// and acquisitions, are not the ones at risk; what is at risk is the
// value, so the mark sits on the handle.

// ErrDataLost is wrapped by the errors of accesses to data that a failed
// task was writing (see Handle.Lost).
var ErrDataLost = errors.New("data lost")

// lostData says how a handle's value was lost.
type lostData struct {
	h *Handle
	// by is the task that failed while writing it; cause its error.
	by    string
	cause error
	// via, when set, is the task that failed because its input viaInput
	// was lost by task by: the loss spread to this handle through it.
	via      string
	viaInput string
	// on, when set, is the device node that held the only valid copy
	// when its driver died (by is then empty).
	on string
}

func (l *lostData) Error() string {
	if l.on != "" {
		return fmt.Sprintf("%s: %s: its only valid copy was on %s: %v", ErrDataLost, l.h, l.on, l.cause)
	}
	if l.via != "" {
		return fmt.Sprintf("%s: %s: task %q did not run because its input %s was lost by task %q: %v",
			ErrDataLost, l.h, l.via, l.viaInput, l.by, l.cause)
	}
	return fmt.Sprintf("%s: %s: task %q failed while writing it: %v", ErrDataLost, l.h, l.by, l.cause)
}

// Unwrap lets errors.Is find ErrDataLost and what made the task fail
// (ErrPluginCrashed, ErrTaskFailed, ...).
func (l *lostData) Unwrap() []error { return []error{ErrDataLost, l.cause} }

// Lost returns the error that says how h's value was lost, or nil when it
// is not: a task that writes h failed, and nothing wrote h anew since.
func (h *Handle) Lost() error {
	if l := h.lost.Load(); l != nil {
		return l
	}
	return nil
}

// markLost records that l lost h's value.
func (h *Handle) markLost(l *lostData) {
	if h.lost.Swap(l) == nil {
		h.rt.nlost.Add(1)
		if e := h.rt.engine; e != nil {
			e.checks.Add(1)
		}
	}
}

// clearLost ends the loss: h was written anew.
func (h *Handle) clearLost() {
	if h.lost.Load() != nil && h.lost.Swap(nil) != nil {
		h.rt.nlost.Add(-1)
		if e := h.rt.engine; e != nil {
			e.checks.Add(-1)
		}
	}
}

// lostFor returns h's loss when an access in mode m would read the lost
// value, or nil; an access that only writes ends the loss.
func (h *Handle) lostFor(m Mode) error {
	l := h.lost.Load()
	if l == nil {
		return nil
	}
	if m&(R|Redux) != 0 {
		return l
	}
	if m&W != 0 {
		h.clearLost()
	}
	return nil
}

// lostInput says why j must not run because a value it reads is lost.
func (j *job) lostInput() error {
	if j.task == nil {
		return nil
	}
	for i, h := range j.task.Handles {
		if l := h.lost.Load(); l != nil && j.modes[i]&(R|Redux) != 0 {
			return fmt.Errorf("task %q did not run: %w", j.name(), l)
		}
	}
	return nil
}

// lostBy is the failed task whose lost data err says kept a task from
// running, or "".
func lostBy(err error) string {
	var l *lostData
	if errors.As(err, &l) {
		return l.by
	}
	return ""
}

// foldLost adds to errs, after the first error of the tasks that did not
// run because task T lost their inputs, one line counting the others
// (more[T], which recordFailure counted instead of keeping them): T's own
// error, in errs too, says why, and one bad argument used to read as a
// paragraph per dependent task.
func foldLost(errs []error, more map[string]int) []error {
	if len(more) == 0 {
		return errs
	}
	out := make([]error, 0, len(errs)+len(more))
	for _, err := range errs {
		out = append(out, err)
		if by := lostBy(err); more[by] > 0 {
			out = append(out, fmt.Errorf("and %d more tasks did not run because data task %q was writing was lost", more[by], by))
			delete(more, by)
		}
	}
	return out
}

// isLost tells whether err is a task's failure to run because its input
// was lost.
func isLost(err error) bool {
	var l *lostData
	return errors.As(err, &l)
}

// noteLost marks lost the handles that failed task j writes: it failed on
// a worker, or did not run because an input was lost.
func (rt *Runtime) noteLost(j *job) {
	var in *lostData
	errors.As(j.err, &in)
	for i, h := range j.task.Handles {
		if j.modes[i]&(W|Redux) == 0 {
			continue
		}
		l := &lostData{h: h, by: j.name(), cause: j.err}
		if in != nil {
			// j did not run because in was lost: name the task that
			// broke it, not a chain of every task since.
			l.by, l.cause, l.via, l.viaInput = in.by, in.cause, j.name(), in.h.String()
		}
		h.markLost(l)
	}
}

// noteRewrites ends the loss of the handles j wrote without reading.
func (rt *Runtime) noteRewrites(j *job) {
	for i, h := range j.task.Handles {
		if j.modes[i]&(R|W|Redux) == W {
			h.clearLost()
		}
	}
}
