package core

// throttleSubmit holds a Submit while config.LimitMaxSubmitted tasks or
// more are submitted and not completed, until no more than the lower
// bound are left (StarPU's STARPU_LIMIT_MAX/MIN_SUBMITTED_TASKS). A submit
// from a callback, which the completion path runs, is never held: waiting
// there would stop the completions it waits for.
func (rt *Runtime) throttleSubmit() {
	max, min := rt.cfg.SubmitLimits()
	if max == 0 || rt.waits.pending.Load() < int64(max) {
		return
	}
	if rt.mayBlock("submit") != nil {
		return
	}
	_ = rt.WaitForNSubmitted(min) // cannot fail: min >= 0, not in a callback
}
