package driver

import "github.com/starpu-go/starpu/pluginapi/wire"

// chainMemory is how many failed or skipped tasks a Chain remembers: more
// than a worker's queue holds (the core's queue depth is at most 64), so
// that a chained task's predecessor, which the worker ran at most a queue
// before it, is always remembered if it failed.
const chainMemory = 128

// Chain is what a worker keeps to honour wire.ExecAfter: a task queued
// behind its predecessor runs only if the worker ran that predecessor
// successfully (docs/design/hot-path.md, "Chains"). A driver whose workers
// read a scheduler ring keeps one per worker: call Skip before running an
// Exec and Failed after a task fails or is skipped.
type Chain struct {
	bad [chainMemory]uint64
	n   int
}

// Skip reports whether e must not run: it is flagged ExecAfter and its
// predecessor failed or was skipped on this worker. The driver then posts
// a completion flagged Skipped instead of running it.
func (c *Chain) Skip(e *wire.Exec) bool {
	if e.Flags&wire.ExecAfter == 0 || c.n == 0 {
		return false
	}
	p := wire.AfterOf(e.ID, e.After)
	for _, id := range c.bad[:min(c.n, chainMemory)] {
		if id == p {
			return true
		}
	}
	return false
}

// Failed records that task id failed or was skipped.
func (c *Chain) Failed(id uint64) {
	c.bad[c.n%chainMemory] = id
	c.n++
}
