package driver

import "github.com/starpu-go/starpu/pluginapi/wire"

// Pipeline is StarPU's rule for how many tasks a device worker keeps in
// flight (STARPU_CUDA_PIPELINE, STARPU_OPENCL_PIPELINE): a task whose
// implementation is flagged asynchronous (wire.ExecAsync) lets the worker
// take its next tasks while it runs, up to the pipeline's depth; one that
// is not is the last the worker takes until it ends. A depth of 0 makes
// every task synchronous. It belongs to the worker's goroutine.
type Pipeline struct {
	depth   int  // at least 1
	allSync bool // depth 0 was asked for
	// tasks counts the tasks in flight; syncBusy says one of them is
	// synchronous.
	tasks    int
	syncBusy bool
}

// NewPipeline returns the rule for a pipeline of depth tasks (0: every task
// synchronous).
func NewPipeline(depth int) Pipeline {
	return Pipeline{depth: max(depth, 1), allSync: depth <= 0}
}

// MayTake reports whether the worker may take msg, its next dispatch
// message, off the ring now: anything but a task may go; a task waits
// while a synchronous one runs or the pipeline is full. nil (no message)
// may not. It reads only msg and the pipeline, so it may serve in a
// Bell.Wait condition.
func (p *Pipeline) MayTake(msg []byte) bool {
	if msg == nil {
		return false
	}
	if wire.Type(msg) != wire.TypeExec {
		return true
	}
	return !p.syncBusy && p.tasks < p.depth
}

// Sync reports whether a task with these wire flags runs synchronously.
func (p *Pipeline) Sync(flags uint32) bool { return p.allSync || flags&wire.ExecAsync == 0 }

// Started counts in a task the worker has queued; sync is Sync's answer
// for it.
func (p *Pipeline) Started(sync bool) {
	p.tasks++
	p.syncBusy = p.syncBusy || sync
}

// Ended counts out a task Started counted in.
func (p *Pipeline) Ended(sync bool) {
	p.tasks--
	if sync {
		p.syncBusy = false
	}
}
