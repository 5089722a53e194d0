package driver

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/wire"
)

// result is what Run returned to one member.
type result struct {
	master bool
	err    error
}

// runTeam runs e on each worker of e.Members on its own goroutine, each
// after start(worker) returns, with kernel, and returns what Run returned
// to each, by rank. It fails the test if a member does not return in
// time: a team must never hang.
func runTeam(t *testing.T, ts *Teams, e *wire.Exec, start func(w int), kernel func(w, rank int) error) []result {
	t.Helper()
	out := make([]result, len(e.Members))
	var wg sync.WaitGroup
	for r, m := range e.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := int(m)
			if start != nil {
				start(w)
			}
			master, err := ts.Run(w, e, func(rank int) error { return kernel(w, rank) })
			out[r] = result{master, err}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("task %d: a member never returned from Run", e.ID)
	}
	return out
}

func TestTeamsRun(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name  string
		flags uint32
		size  int
		fail  map[int]bool // ranks whose kernel fails
		// ran: the ranks that must run the kernel.
		ran     func(rank int) bool
		wantErr []string
	}{
		{"spmd of 4", wire.ExecSPMD, 4, nil, func(int) bool { return true }, nil},
		{"spmd of 1", wire.ExecSPMD, 1, nil, func(int) bool { return true }, nil},
		{"forkjoin of 3", wire.ExecForkJoin, 3, nil, func(r int) bool { return r == 0 }, nil},
		{"spmd, two ranks fail", wire.ExecSPMD, 4, map[int]bool{1: true, 3: true}, func(int) bool { return true },
			[]string{"rank 1 (worker 11): boom", "rank 3 (worker 13): boom"}},
		{"forkjoin, the master fails", wire.ExecForkJoin, 2, map[int]bool{0: true}, func(r int) bool { return r == 0 },
			[]string{"rank 0 (worker 10): boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := NewTeams()
			e := &wire.Exec{ID: 42, Flags: tt.flags, Combined: 7}
			for r := range tt.size {
				e.Members = append(e.Members, int32(10+r))
				ts.Join(10 + r)
			}
			var arrived, ran atomic.Int32
			seen := make([]atomic.Int32, tt.size)
			// Members arrive one by one, some late: none may start before
			// the last has arrived.
			start := func(w int) {
				time.Sleep(time.Duration(w-10) * 5 * time.Millisecond)
				arrived.Add(1)
			}
			res := runTeam(t, ts, e, start, func(w, rank int) error {
				if n := arrived.Load(); int(n) != tt.size {
					t.Errorf("rank %d started with %d of %d members arrived", rank, n, tt.size)
				}
				if rank != e.Rank(w) {
					t.Errorf("worker %d ran as rank %d, want %d", w, rank, e.Rank(w))
				}
				seen[rank].Add(1)
				ran.Add(1)
				if tt.fail[rank] {
					return boom
				}
				return nil
			})
			for r := range tt.size {
				want := int32(0)
				if tt.ran(r) {
					want = 1
				}
				if got := seen[r].Load(); got != want {
					t.Errorf("rank %d ran the kernel %d times, want %d", r, got, want)
				}
				if res[r].master != (r == 0) {
					t.Errorf("rank %d: master = %v", r, res[r].master)
				}
				if r > 0 && res[r].err != nil {
					t.Errorf("rank %d, not the master, got an error to post: %v", r, res[r].err)
				}
			}
			err := res[0].err
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatalf("the master reports %v", err)
			}
			for _, w := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("the master reports %v, want it to say %q", err, w)
				}
			}
			if len(ts.teams) != 0 {
				t.Errorf("%d teams left behind", len(ts.teams))
			}
		})
	}
}

// A team whose member left (Deinit with the team half formed) gives up,
// and a member refusing the task fails it: the others return at once,
// the master with the reason, and a member arriving late too.
func TestTeamsGiveUp(t *testing.T) {
	tests := []struct {
		name string
		// act is what the worker of rank 2 does instead of running.
		act  func(ts *Teams, e *wire.Exec) result
		want string
	}{
		{"member left", func(ts *Teams, _ *wire.Exec) result { ts.Leave(12); return result{} },
			"worker 12, a member of its combined worker 3, stopped before joining it"},
		{"member refused", func(ts *Teams, e *wire.Exec) result {
			m, err := ts.Fail(12, e, errors.New("the application runs no task there"))
			return result{m, err}
		}, "worker 12 (rank 2 of 4) did not run it: the application runs no task there"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := NewTeams()
			e := &wire.Exec{ID: 5, Flags: wire.ExecSPMD, Combined: 3, Members: []int32{10, 11, 12, 13}}
			for _, m := range e.Members {
				ts.Join(int(m))
			}
			out := make([]result, 4)
			var wg sync.WaitGroup
			run := func(r int) {
				defer wg.Done()
				m, err := ts.Run(int(e.Members[r]), e, func(int) error {
					t.Errorf("rank %d ran the kernel of a team that gave up", r)
					return nil
				})
				out[r] = result{m, err}
			}
			wg.Add(2)
			go run(0)
			go run(1)
			time.Sleep(10 * time.Millisecond) // they wait
			out[2] = tt.act(ts, e)
			wg.Wait()
			wg.Add(1)
			run(3) // late: the team failed already
			if !out[0].master || out[0].err == nil || !strings.Contains(out[0].err.Error(), tt.want) {
				t.Fatalf("the master got (%v, %v), want to post an error saying %q", out[0].master, out[0].err, tt.want)
			}
			for r := 1; r < 4; r++ {
				if out[r].master {
					t.Errorf("rank %d thinks it is the master", r)
				}
			}
		})
	}
}

func TestTeamsRefuseMismatch(t *testing.T) {
	ts := NewTeams()
	tests := []struct {
		name   string
		worker int
		e      *wire.Exec
		want   string
	}{
		{"not parallel", 1, &wire.Exec{ID: 1, Members: []int32{1}}, "not a parallel task"},
		{"not a member", 9, &wire.Exec{ID: 2, Flags: wire.ExecSPMD, Members: []int32{1, 2}}, "not a parallel task of a team it belongs to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			master, err := ts.Run(tt.worker, tt.e, func(int) error { t.Fatal("ran"); return nil })
			if !master || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = (%v, %v), want (true, an error saying %q)", master, err, tt.want)
			}
		})
	}
	// Two members disagreeing on the team: the second is told, and the
	// first stops waiting.
	a := &wire.Exec{ID: 3, Flags: wire.ExecSPMD, Members: []int32{1, 2}}
	b := &wire.Exec{ID: 3, Flags: wire.ExecSPMD, Members: []int32{1, 2, 3}}
	done := make(chan result)
	go func() {
		m, err := ts.Run(1, a, func(int) error { return nil })
		done <- result{m, err}
	}()
	time.Sleep(10 * time.Millisecond)
	if _, err := ts.Run(2, b, func(int) error { return nil }); err == nil || !strings.Contains(err.Error(), "got the team [1 2 3], another member [1 2]") {
		t.Fatalf("a member with another team: %v", err)
	}
	select {
	case r := <-done:
		if !r.master || r.err == nil {
			t.Fatalf("the waiting master got (%v, %v), want an error to post", r.master, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting master never gave up")
	}
}
