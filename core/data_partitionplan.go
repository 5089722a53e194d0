package core

// Partitioning, plans; design note: docs/design/memory.md.

import (
	"errors"
	"fmt"
	"sync"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// Asynchronous partitioning, as StarPU's starpu_data_partition_plan and
// the *_submit calls: a Plan creates children handles without touching the
// data; submitting it switches between the parent and the children as a job
// in the task graph, ordered with the tasks on both by sequential
// consistency, so the application never waits. The switch job runs when the
// tasks before it are done: it brings the data it gathers or scatters to RAM
// (writing device copies back) and updates the replicates; tasks submitted
// after it wait for it.
//
// Which handles tasks may use follows the submission order and is checked at
// Submit: while a plan is active read-write, its parent is unusable and its
// children are read-write; while plans are active read-only, the parent and
// their children can only be read; children of an inactive plan are
// unusable. A task breaking these rules is refused with ErrInvalidData
// (StarPU would instead insert the switch for it).

// PlanState is what a plan's submissions made of it, in submission order.
type PlanState uint8

// The states of a Plan.
const (
	// PlanInactive: the parent is the valid view; the children are
	// unusable.
	PlanInactive PlanState = iota
	// PlanReadonly: the parent and the children can be read, not written.
	PlanReadonly
	// PlanReadWrite: the children are the valid view; the parent is
	// unusable.
	PlanReadWrite
	// PlanCleaned: the children are unregistered.
	PlanCleaned
)

func (s PlanState) String() string {
	switch s {
	case PlanInactive:
		return "inactive"
	case PlanReadonly:
		return "read-only"
	case PlanReadWrite:
		return "read-write"
	case PlanCleaned:
		return "cleaned"
	}
	return fmt.Sprintf("PlanState(%d)", uint8(s))
}

// Plan is one partitioning of a handle planned by Handle.Plan. Several
// plans may exist on one handle; at most one is active read-write, or any
// number read-only.
type Plan struct {
	parent   *Handle
	filter   Filter
	id       int
	children []*Handle
	state    PlanState // under planMu
}

// planMu guards every plan's state and every handle's plans: they change
// only on the application's partitioning calls, never on the task path,
// which reads the summary in Handle.restrict.
var planMu sync.Mutex

// What a handle's plans leave tasks allowed to do with it (Handle.restrict).
const (
	restrictNone  uint32 = iota
	restrictWrite        // reads only
	restrictAll          // no access
)

func (p *Plan) String() string {
	return fmt.Sprintf("plan %d (%s) of %s", p.id, p.filter, p.parent)
}

// Children returns the plan's children, in the filter's order.
func (p *Plan) Children() []*Handle { return append([]*Handle(nil), p.children...) }

// Parent returns the handle the plan partitions.
func (p *Plan) Parent() *Handle { return p.parent }

// State returns the plan's state after the submissions made so far.
func (p *Plan) State() PlanState {
	planMu.Lock()
	defer planMu.Unlock()
	return p.state
}

// Plan creates the children of h for filter f without moving data or
// waiting for tasks (StarPU's starpu_data_partition_plan). The children are
// usable once the plan is submitted (Submit or ReadonlySubmit). They are
// views of h's RAM replicate, as Partition's are. Plugin filters are not
// supported: their children's shapes depend on the data, which planning
// does not wait for; use Partition.
func (h *Handle) Plan(f Filter) (*Plan, error) {
	if err := h.rt.usable(); err != nil {
		return nil, err
	}
	if f.plugin {
		return nil, fmt.Errorf("%w: plan %s: filter %s is a data interface plugin's; plugin filters need Partition", ErrInvalidData, h, f.name)
	}
	if f.cut == nil {
		return nil, fmt.Errorf("%w: plan %s: no filter", ErrInvalidData, h)
	}
	if h.unregistered.Load() {
		return nil, fmt.Errorf("plan %s: %w", h, ErrUnregistered)
	}
	if h.partitioned.Load() {
		return nil, fmt.Errorf("%w: plan %s: it is partitioned by Partition", ErrInvalidData, h)
	}
	if h.iface != nil {
		return nil, fmt.Errorf("%w: plan %s: filter %s is for built-in interfaces", ErrInvalidData, h, f.name)
	}
	if err := h.noFilter("plan"); err != nil {
		return nil, err
	}
	views, err := f.split(h.layout)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", h, err)
	}
	if h.span.Size == 0 && h.layout.Len() > 0 {
		return nil, fmt.Errorf("%w: plan %s: no data registered", ErrInvalidData, h)
	}
	p := &Plan{parent: h, filter: f}
	p.children = make([]*Handle, len(views))
	for i, v := range views {
		c := h.rt.newHandle(v.Layout, v.Layout.Len())
		c.span = base.Span{Offset: h.span.Offset + v.Offset, Size: v.Layout.Len()}
		c.parent, c.home, c.ofPlan = h, nil, p
		c.restrict.Store(restrictAll)
		p.children[i] = c
	}
	planMu.Lock()
	h.nplans++
	p.id = h.nplans
	h.plans = append(h.plans, p)
	planMu.Unlock()
	for _, c := range p.children {
		h.rt.track(c)
	}
	return p, nil
}

// Submit makes the children the valid view of the parent (StarPU's
// starpu_data_partition_submit): tasks submitted after it may use the
// children, and may not use the parent until UnpartitionSubmit. No other
// plan of the parent may be active.
func (p *Plan) Submit() error {
	return p.change("submit", func(h *Handle) error {
		if err := p.only(PlanInactive); err != nil {
			return err
		}
		if err := h.positionAllows(W); err != nil {
			return err
		}
		p.set(PlanReadWrite)
		p.submitSwitch(RW, W, p.scatter(true), h.homeStale)
		return nil
	})
}

// ReadonlySubmit makes the children readable while the parent stays
// readable (StarPU's starpu_data_partition_readonly_submit): neither may be
// written until UnpartitionSubmit or ReadwriteUpgradeSubmit. Several plans
// of one parent may be active read-only together.
func (p *Plan) ReadonlySubmit() error {
	return p.change("read-only submit", func(h *Handle) error {
		if p.state != PlanInactive {
			return fmt.Errorf("%w: it is already %s", ErrInvalidData, p.state)
		}
		if q := h.activePlan(PlanReadWrite); q != nil {
			return fmt.Errorf("%w: %s is active read-write; unpartition it first", ErrInvalidData, q)
		}
		if err := h.positionAllows(R); err != nil {
			return err
		}
		p.set(PlanReadonly)
		p.submitSwitch(R, W, p.scatter(false))
		return nil
	})
}

// ReadwriteUpgradeSubmit turns the plan, active read-only, into read-write
// (StarPU's starpu_data_partition_readwrite_upgrade_submit): the children
// may be written by tasks submitted after it, once the tasks reading the
// parent are done; the parent becomes unusable. It must be the parent's
// only active plan.
func (p *Plan) ReadwriteUpgradeSubmit() error {
	return p.change("read-write upgrade", func(h *Handle) error {
		if err := p.only(PlanReadonly); err != nil {
			return err
		}
		if err := h.positionAllows(W); err != nil {
			return err
		}
		p.set(PlanReadWrite)
		p.submitSwitch(RW, R, func(e *engine) {
			h.releaseDevices(e)
			h.reps[0].state = owner
			h.publishValid()
		}, h.homeStale)
		return nil
	})
}

// UnpartitionSubmit makes the parent the valid view again (StarPU's
// starpu_data_unpartition_submit): after the tasks on the children, the
// children's data is gathered into the parent's RAM replicate (device
// copies written back) and the children become unusable. StarPU's gathering
// node is always RAM here: the children are views of the parent's RAM.
func (p *Plan) UnpartitionSubmit() error {
	return p.change("unpartition", func(h *Handle) error {
		was := p.state
		if was != PlanReadonly && was != PlanReadWrite {
			return fmt.Errorf("%w: it is %s", ErrInvalidData, was)
		}
		if err := p.childrenIdle(); err != nil {
			return err
		}
		p.set(PlanInactive)
		p.submitUnpartition(was)
		return nil
	})
}

// UnpartitionReadonlySubmit gathers the children of a read-write plan into
// the parent and leaves the plan active read-only (StarPU's
// starpu_data_unpartition_readonly_submit): the parent and the children can
// be read by the tasks submitted after it.
func (p *Plan) UnpartitionReadonlySubmit() error {
	return p.change("read-only unpartition", func(h *Handle) error {
		if p.state != PlanReadWrite {
			return fmt.Errorf("%w: it is %s, not read-write", ErrInvalidData, p.state)
		}
		if err := p.childrenIdle(); err != nil {
			return err
		}
		p.set(PlanReadonly)
		p.submitSwitch(W, R, p.gather(false), h.homeStale)
		return nil
	})
}

// Clean unregisters the plan's children, after UnpartitionSubmit if the
// plan is active (StarPU's starpu_data_partition_clean). Like the rest it
// does not wait: the children are forgotten once the tasks on them are
// done. The plan cannot be used afterwards.
func (p *Plan) Clean() error {
	return p.change("clean", func(h *Handle) error {
		if p.state == PlanCleaned {
			return fmt.Errorf("%w: already cleaned", ErrInvalidData)
		}
		if err := p.childrenIdle(); err != nil {
			return err
		}
		for _, c := range p.children {
			if len(c.plans) > 0 {
				return fmt.Errorf("%w: child %s has plans of its own; clean them first", ErrInvalidData, c)
			}
		}
		if was := p.state; was != PlanInactive {
			p.set(PlanInactive)
			p.submitUnpartition(was)
		}
		p.set(PlanCleaned)
		for i, q := range h.plans {
			if q == p {
				h.plans = append(h.plans[:i], h.plans[i+1:]...)
				break
			}
		}
		for _, c := range p.children {
			c.unregistered.Store(true)
		}
		rt := h.rt
		ms := make([]Mode, len(p.children))
		for i := range ms {
			ms[i] = RW
		}
		// The children are closed: the switch is their unregistration,
		// after the tasks on them and the gathering above.
		rt.submitSwitch(p.children, ms, true, func() error {
			rt.onEngine(func(e *engine) {
				for _, c := range p.children {
					c.releaseDevices(e)
				}
			})
			var errs []error
			for _, c := range p.children {
				errs = append(errs, rt.forget(c))
			}
			return errors.Join(errs...)
		})
		return nil
	})
}

// change runs one state change of p under planMu, after the checks every
// change shares, and names p in its error.
func (p *Plan) change(what string, f func(h *Handle) error) error {
	h := p.parent
	if err := h.rt.usable(); err != nil {
		return fmt.Errorf("%s %s: %w", what, p, err)
	}
	planMu.Lock()
	defer planMu.Unlock()
	if p.state == PlanCleaned && what != "clean" {
		return fmt.Errorf("%w: %s %s: the plan was cleaned", ErrInvalidData, what, p)
	}
	if h.unregistered.Load() {
		return fmt.Errorf("%s %s: %w", what, p, ErrUnregistered)
	}
	if h.partitioned.Load() {
		return fmt.Errorf("%w: %s %s: %s is partitioned by Partition", ErrInvalidData, what, p, h)
	}
	if err := f(h); err != nil {
		return fmt.Errorf("%s %s: %w", what, p, err)
	}
	return nil
}

// only checks that p is in state s and no other plan of its parent is
// active; planMu held.
func (p *Plan) only(s PlanState) error {
	if p.state != s {
		return fmt.Errorf("%w: it is %s, not %s", ErrInvalidData, p.state, s)
	}
	for _, q := range p.parent.plans {
		if q != p && q.state != PlanInactive {
			return fmt.Errorf("%w: %s is active (%s); unpartition it first", ErrInvalidData, q, q.state)
		}
	}
	return nil
}

// childrenIdle checks that no child of p is partitioned, by Partition or
// by an active plan of its own; planMu held.
func (p *Plan) childrenIdle() error {
	for _, c := range p.children {
		if c.partitioned.Load() {
			return fmt.Errorf("%w: child %s is partitioned by Partition; Unpartition it first", ErrInvalidData, c)
		}
		for _, q := range c.plans {
			if q.state != PlanInactive {
				return fmt.Errorf("%w: child %s is partitioned by %s; unpartition it first", ErrInvalidData, c, q)
			}
		}
	}
	return nil
}

// activePlan returns h's plan in state s, if any; planMu held.
func (h *Handle) activePlan(s PlanState) *Plan {
	for _, q := range h.plans {
		if q.state == s {
			return q
		}
	}
	return nil
}

// positionAllows checks that h, as a child of a plan, may be accessed in
// mode m; planMu held.
func (h *Handle) positionAllows(m Mode) error {
	if h.ofPlan == nil {
		return nil
	}
	switch s := h.ofPlan.state; {
	case s == PlanInactive || s == PlanCleaned:
		return fmt.Errorf("%w: %s is a child of %s, which is %s", ErrInvalidData, h, h.ofPlan, s)
	case s == PlanReadonly && m&W != 0:
		return fmt.Errorf("%w: %s is a child of %s, which is read-only; upgrade it first", ErrInvalidData, h, h.ofPlan)
	}
	return nil
}

// set moves p to state s and updates what tasks may do with its parent and
// children; planMu held.
func (p *Plan) set(s PlanState) {
	p.state = s
	p.parent.updateRestrict()
	for _, c := range p.children {
		c.updateRestrict()
	}
}

// updateRestrict recomputes h.restrict from h's place in its plan and from
// its own active plans; planMu held.
func (h *Handle) updateRestrict() {
	r := restrictNone
	if h.ofPlan != nil {
		switch h.ofPlan.state {
		case PlanInactive, PlanCleaned:
			r = restrictAll
		case PlanReadonly:
			r = restrictWrite
		}
	}
	for _, q := range h.plans {
		switch q.state {
		case PlanReadWrite:
			r = restrictAll
		case PlanReadonly:
			r = max(r, restrictWrite)
		}
	}
	h.restrict.Store(r)
}

// partitionChildren returns the children holding h's value while h is
// partitioned read-write (by Partition or an active plan), or nil.
func (h *Handle) partitionChildren() []*Handle {
	if h.partitioned.Load() {
		return h.Children()
	}
	if h.restrict.Load() == restrictNone {
		return nil
	}
	planMu.Lock()
	defer planMu.Unlock()
	if q := h.activePlan(PlanReadWrite); q != nil {
		return append([]*Handle(nil), q.children...)
	}
	return nil
}

// restrictErr explains why h cannot be accessed in mode m.
func (h *Handle) restrictErr(m Mode) error {
	planMu.Lock()
	defer planMu.Unlock()
	if err := h.positionAllows(m); err != nil {
		return err
	}
	if q := h.activePlan(PlanReadWrite); q != nil {
		return fmt.Errorf("%w: %s is partitioned by %s: use its children until UnpartitionSubmit", ErrInvalidData, h, q)
	}
	if q := h.activePlan(PlanReadonly); q != nil {
		return fmt.Errorf("%w: %s is partitioned read-only by %s: it can only be read until UnpartitionSubmit", ErrInvalidData, h, q)
	}
	return fmt.Errorf("%w: %s cannot be accessed in mode %v", ErrInvalidData, h, m)
}

// checkPlans says why h cannot be unregistered because of plans: a plan's
// child goes with Plan.Clean, and a parent must clean its plans first.
func (h *Handle) checkPlans() error {
	planMu.Lock()
	defer planMu.Unlock()
	if h.ofPlan != nil {
		return fmt.Errorf("%w: %s is a child of %s: Clean the plan instead", ErrInvalidData, h, h.ofPlan)
	}
	if len(h.plans) > 0 {
		return fmt.Errorf("%w: %s has %d partition plans: Clean them first", ErrInvalidData, h, len(h.plans))
	}
	return nil
}

// submitSwitch submits the job that switches p: the parent accessed in
// mode pm, every child in mode cm; once the tasks before it are done, the
// data is moved by data (on the engine goroutine), then then runs.
func (p *Plan) submitSwitch(pm, cm Mode, data func(e *engine), then ...func()) {
	hs := append([]*Handle{p.parent}, p.children...)
	ms := make([]Mode, len(hs))
	ms[0] = pm
	for i := 1; i < len(ms); i++ {
		ms[i] = cm
	}
	rt := p.parent.rt
	var fetch []*Handle
	switch {
	case pm == W: // gathering: the children's data comes to RAM
		fetch = p.children
	case cm == W: // scattering: the parent's data comes to RAM
		fetch = hs[:1]
	}
	rt.submitSwitch(hs, ms, false, func() error {
		if err := rt.fetchAll(fetch); err != nil {
			return fmt.Errorf("switch %s: %w", p, err)
		}
		rt.onEngine(data)
		for _, f := range then {
			f()
		}
		return nil
	})
}

// submitUnpartition submits the switch from state was back to inactive.
func (p *Plan) submitUnpartition(was PlanState) {
	h := p.parent
	if was == PlanReadWrite {
		p.submitSwitch(W, RW, p.gather(true), h.homeStale)
		return
	}
	// Read-only: nothing was written; the children's copies go once the
	// tasks reading them are done, which RW on them waits for.
	p.submitSwitch(R, RW, func(e *engine) {
		for _, c := range p.children {
			c.releaseDevices(e)
		}
	})
}

// scatter is the data side of a switch to the children: the parent's value
// is in RAM, which is the children's RAM replicate, so they start there.
// For a read-write switch the parent's device copies go: the parent is not
// accessed until gathered.
func (p *Plan) scatter(rw bool) func(e *engine) {
	return func(e *engine) {
		h := p.parent
		if rw {
			h.releaseDevices(e)
			h.reps[0].state = owner
			h.publishValid()
		}
		for _, c := range p.children {
			c.releaseDevices(e)
			c.reps[0].state = owner
			c.publishValid()
		}
	}
}

// gather is the data side of a switch back to the parent, once the
// children's data is in RAM (in the parent's replicate): the parent's RAM
// copy is the value. With drop the children become unusable and their
// device copies go; otherwise they stay readable with them.
func (p *Plan) gather(drop bool) func(e *engine) {
	return func(e *engine) {
		h := p.parent
		h.written(0)
		if drop {
			for _, c := range p.children {
				c.releaseDevices(e)
			}
		}
	}
}

// homeStale marks the application's copy of h stale: the children wrote,
// or will write, its RAM replicate.
func (h *Handle) homeStale() {
	if h.home == nil {
		return
	}
	h.mu.Lock()
	h.homeValid = false
	h.mu.Unlock()
}

// releaseDevices drops h's device replicates into the nodes' caches and
// leaves RAM's as the valid copy; engine goroutine, with no task holding
// them.
func (h *Handle) releaseDevices(e *engine) {
	for i := 1; i < len(h.reps); i++ {
		e.release(&h.reps[i])
	}
	if len(h.reps) > 0 && h.reps[0].state == invalid {
		h.reps[0].state = owner
	}
	h.publishValid()
}

// submitSwitch submits a job that accesses hs in modes ms, ordered with the
// tasks by sequential consistency, and runs run once it is ready, on a
// goroutine of its own (it waits for transfers); the tasks submitted after
// it wait for run to end. WaitForAll waits for it like for a task, and
// reports its error. closing marks Clean's switch, the unregistration of
// hs: they are closed already, and a closed handle orders only its
// unregistration's access after the earlier ones (admits). A switch doomed
// by a closed handle does not run: it would act on data out of order.
func (rt *Runtime) submitSwitch(hs []*Handle, ms []Mode, closing bool, run func() error) {
	j := rt.newJob()
	j.acquire = &acquisition{job: j, closing: closing, onGrant: func() {
		go func() {
			var err error
			if doom := j.doomErr(); doom != nil {
				err = fmt.Errorf("partition switch not run: %w", doom)
			} else {
				err = run()
			}
			if err != nil {
				rt.recordFailure(err)
			}
			rt.complete(j, -1, err)
			if rt.waits.pending.Add(-1) == 0 || rt.waits.idleWaiters.Load() > 0 {
				rt.wakeIdle()
			}
		}()
	}}
	rt.waits.pending.Add(1)
	for i, h := range hs {
		h.depend(j, ms[i])
	}
	if j.ndeps.Add(-1) == 0 {
		rt.ready(j, -1)
	}
}

// fetchAll brings the current value of every handle of hs to RAM, writing
// device copies back, and waits for it.
func (rt *Runtime) fetchAll(hs []*Handle) error {
	if !rt.multiNode || len(hs) == 0 {
		return nil
	}
	fs := make([]*fetchWaiter, len(hs))
	for i, h := range hs {
		fs[i] = &fetchWaiter{h: h, mode: R, done: make(chan error, 1)}
	}
	rt.engine.call(func() {
		for _, f := range fs {
			f.step(rt.engine)
		}
	})
	var errs []error
	for _, f := range fs {
		if err := <-f.done; err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.h, err))
		}
	}
	return errors.Join(errs...)
}

// onEngine runs f on the engine goroutine, which owns replicate state, and
// waits for it; with RAM only there is no replicate state to change.
func (rt *Runtime) onEngine(f func(e *engine)) {
	if !rt.multiNode {
		return
	}
	rt.engine.wait(func() { f(rt.engine) })
}
