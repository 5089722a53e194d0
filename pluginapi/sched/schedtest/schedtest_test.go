package schedtest

import (
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/sched"
)

// flaw is a way for a policy to break the contract.
type flaw int

const (
	none flaw = iota
	duplicates
	anyArch
	dropOnRemove
	popAfterDeinit
	ignorePriorities
	hoard
	badImpl
	badTeam
)

// prio is a correct policy (one queue, by priority then age; the last
// usable implementation when the core lists them; every other parallel
// task on the first combined worker of the popping worker it may run on)
// unless given a flaw.
type prio struct {
	flaw     flaw
	workers  map[int]sched.Worker
	combined []sched.Worker
	q        []*sched.Task
	closed   bool
	last     *sched.Task
}

func (p *prio) SetCombinedWorkers(cs []sched.Worker) { p.combined = cs }

func (p *prio) Init(ws []sched.Worker) error {
	p.workers = map[int]sched.Worker{}
	p.AddWorkers(ws)
	return nil
}

func (p *prio) AddWorkers(ws []sched.Worker) {
	for _, w := range ws {
		p.workers[w.ID] = w
	}
}

func (p *prio) RemoveWorkers(ids []int) {
	for _, id := range ids {
		delete(p.workers, id)
	}
	if p.flaw == dropOnRemove && len(p.q) > 0 {
		p.q = p.q[1:]
	}
}

func (p *prio) Push(t *sched.Task) {
	p.q = append(p.q, t)
	if p.flaw != ignorePriorities {
		sort.SliceStable(p.q, func(i, j int) bool { return p.q[i].Priority > p.q[j].Priority })
	}
}

func (p *prio) Pop(id int) *sched.Task {
	w, ok := p.workers[id]
	if !ok || p.closed && p.flaw != popAfterDeinit {
		return nil
	}
	if p.flaw == duplicates && p.last != nil && len(p.q) == 0 {
		t := p.last
		p.last = nil
		return t
	}
	for i, t := range p.q {
		if p.flaw == hoard && t.ID == 7 {
			continue
		}
		if t.CanRun(&w) || p.flaw == anyArch {
			p.q = append(p.q[:i], p.q[i+1:]...)
			p.last = t
			impls := t.ImplsOn(&w)
			for k := len(impls) - 1; k >= 0; k-- {
				if impls[k].Usable() {
					t.SetImpl(k)
					break
				}
			}
			if p.flaw == badImpl && len(impls) > 0 {
				t.SetImpl(len(impls))
			}
			if t.Parallel != nil && t.ID%2 == 0 || p.flaw == badTeam {
				for _, c := range p.combined {
					if slices.Contains(c.Members, id) && (t.CanRunCombined(&c) || p.flaw == badTeam) {
						t.SetCombined(c.ID)
						break
					}
				}
			}
			return t
		}
	}
	return nil
}

func (p *prio) PostExec(int, uint64, int64) {}

func (p *prio) Deinit() {
	p.closed = true
	if p.flaw != popAfterDeinit {
		p.q = nil
	}
}

func TestCorrectPolicyPasses(t *testing.T) {
	Run(t, func() sched.Policy { return &prio{} }, HonoursPriorities())
}

// TestFlawsCaught runs the kit on each broken policy in a child process
// (the kit fails the test it is given) and checks it failed for the right
// reason.
func TestFlawsCaught(t *testing.T) {
	if f := os.Getenv("SCHEDTEST_FLAW"); f != "" {
		var fl flaw
		for k, v := range flawNames {
			if v.name == f {
				fl = k
			}
		}
		Run(t, func() sched.Policy { return &prio{flaw: fl} }, HonoursPriorities(), Timeout(3*time.Second), Tasks(500), Seed(1))
		return
	}
	for _, f := range []flaw{duplicates, anyArch, dropOnRemove, popAfterDeinit, ignorePriorities, hoard, badImpl, badTeam} {
		f := flawNames[f]
		t.Run(f.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestFlawsCaught$", "-test.count=1")
			cmd.Env = append(os.Environ(), "SCHEDTEST_FLAW="+f.name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the kit passed a policy that %s:\n%s", f.name, out)
			}
			if !strings.Contains(string(out), f.want) {
				t.Fatalf("the kit failed a policy that %s, but not with %q:\n%s", f.name, f.want, out)
			}
		})
	}
}

var flawNames = map[flaw]struct{ name, want string }{
	duplicates:       {"hands-out-twice", "assigned twice"},
	anyArch:          {"ignores-architectures", "cannot run it"},
	dropOnRemove:     {"drops-tasks-on-remove", "lost when worker 1 left"},
	popAfterDeinit:   {"pops-after-deinit", "after Deinit returned task"},
	ignorePriorities: {"ignores-priorities", "while task"},
	hoard:            {"keeps-a-task", "timed out"},
	badImpl:          {"chooses-a-missing-implementation", "which it may not run there"},
	badTeam:          {"hands-any-task-to-a-combined-worker", "where it may not run"},
}
