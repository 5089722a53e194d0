package schedkit

import "github.com/starpu-go/starpu/pluginapi/sched"

// Impls is the implementations of t on the worker's architecture
// (t.ImplsOn): nil when the core chooses there.
func (s *Slot[S]) Impls(t *sched.Task) []sched.Impl {
	if s.ArchIndex < 0 || t.Impls == nil {
		return nil
	}
	return t.Impls[s.ArchIndex]
}

// ChooseImpl picks among impls, a task's implementations on one
// architecture (Slot.Impls), the one a policy driven by performance
// models runs, as StarPU's dmda does: while some usable implementation has
// no calibrated prediction, one of those, so that it gets measured
// (calibrated is then false; the k-th of them, modulo their number: a
// policy passes a counter it advances at each such choice, so that tasks
// pushed together measure every implementation, not the first one only);
// else the usable implementation of least predicted length, ns. It
// returns impl -1 when none is usable.
func ChooseImpl(impls []sched.Impl, k uint) (impl int, ns int64, calibrated bool) {
	impl, ns = -1, -1
	unknown := uint(0)
	for i, im := range impls {
		if !im.Usable() {
			continue
		}
		if im.Length < 0 {
			unknown++
			continue
		}
		if impl < 0 || im.Length < ns {
			impl, ns = i, im.Length
		}
	}
	if unknown == 0 {
		return impl, ns, true
	}
	k %= unknown
	for i, im := range impls {
		if im.Usable() && im.Length < 0 {
			if k == 0 {
				return i, -1, false
			}
			k--
		}
	}
	return -1, -1, false // not reached: unknown counts these
}
