package dmda

import (
	"fmt"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
)

// teams are the combined workers of four CPUs: pairs, then all four.
var teams = []sched.Worker{
	{ID: 4, Arch: cpu, Members: []int{0, 1}},
	{ID: 5, Arch: cpu, Members: []int{2, 3}},
	{ID: 6, Arch: cpu, Members: []int{0, 1, 2, 3}},
}

// par is a parallel CPU task: alone it takes one ns, on a team of 2 and 4
// size2 and size4 (-1: uncalibrated).
func par(id uint64, prio int32, one, size2, size4 int64) *sched.Task {
	return &sched.Task{ID: id, Priority: prio, ArchMask: driver.ArchBit(cpu), Worker: -1, ReleasedBy: -1,
		Length:   [3]int64{one, -1, -1},
		Parallel: &sched.Parallel{Sizes: []sched.SizeLength{{Size: 2, Length: size2}, {Size: 4, Length: size4}}}}
}

// pops pops every worker in turn until none gives anything, and lists
// what each got: a task on a combined worker as "id@team".
func pops(p *Policy) map[int][]string {
	out := map[int][]string{}
	for progress := true; progress; {
		progress = false
		for _, s := range p.workers.Slots() {
			if t := p.Pop(s.ID); t != nil {
				v := fmt.Sprint(t.ID)
				if c := t.Combined(); c >= 0 {
					v += fmt.Sprint("@", c)
				}
				out[s.ID] = append(out[s.ID], v)
				progress = true
			}
		}
	}
	return out
}

func TestParallelDecisions(t *testing.T) {
	tests := []struct {
		name  string
		tasks []*sched.Task
		want  string // fmt of pops(p)
	}{
		{"the team of four ends first", []*sched.Task{par(1, 0, 1000, 600, 300)}, "map[3:[1@6]]"},
		{"alone ends first", []*sched.Task{par(1, 0, 100, 600, 300)}, "map[0:[1]]"},
		{"pairs side by side", []*sched.Task{par(1, 0, 1000, 300, 390), par(2, 0, 1000, 300, 390)},
			// The second would end at 600 behind the first pair, 690 on
			// the four: 300 on the other pair.
			"map[1:[1@4] 3:[2@5]]"},
		{"a team after what its members had", []*sched.Task{par(1, 0, 50, 600, 600), par(2, 0, 1000, 400, 200)},
			// Task 1 alone on worker 0; task 2's team of four ends at
			// 250: worker 0 reaches it last, after task 1.
			"map[0:[1 2@6]]"},
		{"calibrating each size in turn", []*sched.Task{par(1, 0, -1, -1, -1), par(2, 0, -1, -1, -1), par(3, 0, -1, -1, -1)},
			// Alone, then the least loaded pair, then the four; worker 2
			// joins the four, which worker 1 reached first, before its
			// pair's task.
			"map[0:[1 3@6] 3:[2@5]]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var clock int64
			p := newPolicy(t, &clock, false, cpu, cpu, cpu, cpu)
			p.SetCombinedWorkers(teams)
			for _, task := range tt.tasks {
				p.Push(task)
			}
			if got := fmt.Sprint(pops(p)); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// A member that reached its team's copy gets nothing else until the team
// forms; the team then leaves every member's load with one PostExec under
// the combined worker's ID.
func TestParallelMembersWait(t *testing.T) {
	var clock int64
	p := newPolicy(t, &clock, false, cpu, cpu, cpu, cpu)
	p.SetCombinedWorkers(teams)
	p.Push(mkCPU(1, 100, 0)) // worker 0
	p.Push(par(2, 0, 10_000, 5000, 400))
	p.Push(mkCPU(3, 100, 1)) // bound to worker 1, after the team
	if got := p.Pop(1); got != nil {
		t.Fatalf("worker 1 popped task %d; its queue starts with the team's copy", got.ID)
	}
	if got := p.Pop(1); got != nil {
		t.Fatalf("worker 1, waiting for its team, popped task %d", got.ID)
	}
	if got := p.Pop(2); got != nil {
		t.Fatalf("worker 2 popped task %d before the team formed", got.ID)
	}
	if got := p.Pop(0); got == nil || got.ID != 1 {
		t.Fatalf("worker 0 popped %v, want task 1, decided before the team", got)
	}
	if got := p.Pop(0); got != nil {
		t.Fatalf("worker 0 popped task %d, want its team's copy to wait", got.ID)
	}
	got := p.Pop(3)
	if got == nil || got.ID != 2 || got.Combined() != 6 {
		t.Fatalf("the last member popped %v, want task 2 on combined worker 6", got)
	}
	if got := p.Pop(1); got == nil || got.ID != 3 {
		t.Fatalf("worker 1 after its team: %v, want task 3", got)
	}
	clock = 1000
	p.PostExec(6, 2, 400)
	p.PostExec(1, 3, 100)
	p.PostExec(0, 1, 100)
	for _, s := range p.workers.Slots() {
		if n := len(s.State.running); n != 0 || s.State.runNs != 0 {
			t.Errorf("worker %d still has %d tasks, %d ns running", s.ID, n, s.State.runNs)
		}
	}
}

// With priorities (dmdas), a team pushed later with a higher priority
// must not overtake, on a member, a team another member has reached: the
// two would wait for each other.
func TestParallelNoCrossedTeams(t *testing.T) {
	var clock int64
	p := newPolicy(t, &clock, true, cpu, cpu, cpu, cpu)
	p.SetCombinedWorkers(teams)
	p.Push(par(1, 0, 10_000, 5000, 100)) // the team of four
	if got := p.Pop(0); got != nil {
		t.Fatalf("worker 0 popped %d", got.ID)
	}
	p.Push(par(2, 9, 10_000, 5000, 100)) // urgent, the same team
	got := pops(p)
	if fmt.Sprint(got) != "map[3:[1@6 2@6]]" {
		t.Fatalf("got %v, want task 1 then 2 on combined worker 6", got)
	}
}

// Workers leaving take their teams with them: the tasks queued for those
// teams are decided again, nothing waits for a gone member.
func TestParallelMemberLeaves(t *testing.T) {
	var clock int64
	p := newPolicy(t, &clock, false, cpu, cpu, cpu, cpu)
	p.SetCombinedWorkers(teams)
	p.Push(par(1, 0, 10_000, 5000, 100))
	if got := p.Pop(0); got != nil {
		t.Fatalf("worker 0 popped %d", got.ID)
	}
	p.RemoveWorkers([]int{3})
	p.SetCombinedWorkers(teams[:1]) // what the host says next
	got := pops(p)
	if fmt.Sprint(got) != "map[1:[1@4]]" {
		t.Fatalf("got %v, want task 1 on the pair left, combined worker 4", got)
	}
	for _, s := range p.workers.Slots() {
		if s.State.blocked != nil || len(s.State.next) > 0 {
			t.Errorf("worker %d still waits for a team", s.ID)
		}
	}
}

// mkCPU is a sequential CPU task of ns, bound to worker (-1: none).
func mkCPU(id uint64, ns int64, worker int32) *sched.Task {
	return &sched.Task{ID: id, ArchMask: driver.ArchBit(cpu), Worker: worker, ReleasedBy: -1, Length: [3]int64{ns, -1, -1}}
}
