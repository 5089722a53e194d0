package schedtest

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/wire"
)

// The machine of the parallel scenario: four CPUs, combined as the core
// combines them (StarPU's tree: pairs, then all four), and a GPU.
var (
	parMachine = []sched.Worker{
		{ID: 0, Arch: driver.CPU}, {ID: 1, Arch: driver.CPU}, {ID: 2, Arch: driver.CPU}, {ID: 3, Arch: driver.CPU},
		{ID: 4, Arch: driver.CUDA, Node: 1},
	}
	parCombined = []sched.Worker{
		{ID: 5, Arch: driver.CPU, Members: []int{0, 1}},
		{ID: 6, Arch: driver.CPU, Members: []int{2, 3}},
		{ID: 7, Arch: driver.CPU, Members: []int{0, 1, 2, 3}},
	}
)

// parallelTasks pushes sequential and parallel tasks (sched.Task.Parallel:
// some sizes, calibrated or not) while the kit runs what is assigned as
// the core and the driver do: a task assigned to a combined worker joins
// every member's queue and completes once it heads all of them, its Done
// naming the combined worker. Every task must run exactly once; one given
// to a combined worker must be a parallel task bound to no worker, of a
// size it lists. A policy that is no sched.ParallelPolicy runs every task
// on one worker; one that is must not starve its teams either.
func parallelTasks(t *testing.T, sub subject, o options) {
	t.Logf("seed %d", o.seed)
	rng := rand.New(rand.NewSource(o.seed))
	c := startHost(t, sub, parMachine, 4, 16, o.timeout, parCombined...)
	n := max(o.tasks/3, 60)
	tasks := make([]*sched.Task, n)
	for i := range tasks {
		tk := randomTask(rng, uint64(i+1), parMachine)
		if rng.Intn(2) == 0 {
			tk.ArchMask |= driver.ArchBit(driver.CPU)
			tk.Parallel = &sched.Parallel{}
			for _, size := range []int32{2, 4} {
				if rng.Intn(4) != 0 {
					l := int64(-1)
					if rng.Intn(3) != 0 {
						l = rng.Int63n(60_000)
					}
					tk.Parallel.Sizes = append(tk.Parallel.Sizes, sched.SizeLength{Size: size, Length: l})
				}
			}
		}
		tasks[i] = tk
	}
	assigned := make([]int, n)        // worker+1 (combined or not), 0 while unassigned
	queues := map[int][]uint64{}      // per worker, assigned and not completed
	team := map[uint64]sched.Worker{} // the combined worker of a task on one
	pushed, completed, teamed := 0, 0, 0
	for completed < n {
		if !c.alive() {
			t.Fatalf("timed out: %d of %d tasks pushed, %d completed; %d never assigned (first: %v); queues %v",
				pushed, n, completed, countZero(assigned[:pushed]), firstUnassigned(tasks[:pushed], assigned), queues)
		}
		progress := c.pushBurst(rng, tasks, &pushed)
		wait := idleWait(progress)
		for {
			a, ok := c.decision(wait)
			if !ok {
				break
			}
			wait, progress = 0, true
			cw := workerByID(parCombined, int(a.Worker))
			if cw == nil {
				id, wid := checkAssignOn(t, parMachine, a, tasks, pushed, assigned)
				assigned[id-1] = wid + 1
				queues[wid] = append(queues[wid], id)
				continue
			}
			id := checkTeamAssign(t, a, *cw, tasks, pushed, assigned)
			assigned[id-1] = cw.ID + 1
			team[id] = *cw
			teamed++
			for _, m := range cw.Members {
				queues[m] = append(queues[m], id)
			}
		}
		if k := completeTeams(c, rng, tasks, queues, team); k > 0 {
			completed += k
			progress = true
		}
	}
	if _, ok := sub.policy.(sched.ParallelPolicy); ok {
		t.Logf("%d of %d tasks ran on combined workers", teamed, n)
	}
	if err := c.host.Deinit(t.Context()); err != nil {
		t.Fatalf("host deinit: %v", err)
	}
}

// checkTeamAssign checks an Assign naming combined worker cw and returns
// the task's ID.
func checkTeamAssign(t *testing.T, a wire.Assign, cw sched.Worker, tasks []*sched.Task, pushed int, assigned []int) uint64 {
	t.Helper()
	id := a.ID
	if id == 0 || id > uint64(pushed) {
		t.Fatalf("policy assigned task %d, which was never pushed, to combined worker %d", id, cw.ID)
	}
	if prev := assigned[id-1]; prev != 0 {
		t.Fatalf("task %d assigned twice: to worker %d, then to combined worker %d", id, prev-1, cw.ID)
	}
	tk := tasks[id-1]
	var sizes []int32
	if tk.Parallel != nil {
		for _, s := range tk.Parallel.Sizes {
			sizes = append(sizes, s.Size)
		}
	}
	if !tk.CanRunCombined(&cw) {
		t.Fatalf("task %d (parallel sizes %v, bound to %d) assigned to combined worker %d of %d workers, where it may not run: a policy hands combined workers parallel tasks of the sizes they list only",
			id, sizes, tk.Worker, cw.ID, len(cw.Members))
	}
	if a.Flags&wire.AssignPosted != 0 {
		t.Fatalf("task %d assigned to combined worker %d flagged posted: the core posts a team's task to every member", id, cw.ID)
	}
	return id
}

// completeTeams completes, on a random subset of the workers, the task at
// the head of their queue: a sequential one at once, a team's once it
// heads every member's queue. It rings the policy if it completed any and
// returns how many.
func completeTeams(c *core, rng *rand.Rand, tasks []*sched.Task, queues map[int][]uint64, team map[uint64]sched.Worker) int {
	n := 0
	for _, w := range parMachine {
		q := queues[w.ID]
		if len(q) == 0 || rng.Intn(3) == 0 {
			continue
		}
		id := q[0]
		cw, isTeam := team[id]
		if !isTeam {
			c.done(w.ID, id, max(tasks[id-1].LengthOn(&w), 1))
			queues[w.ID] = q[1:]
			n++
			continue
		}
		if !slices.ContainsFunc(cw.Members, func(m int) bool { return len(queues[m]) == 0 || queues[m][0] != id }) {
			for _, m := range cw.Members {
				queues[m] = queues[m][1:]
			}
			delete(team, id)
			c.done(cw.ID, id, 1000)
			n++
		}
	}
	if n > 0 {
		c.bell.Ring()
	}
	return n
}
