package mpib_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/core/mpi/internal/mpib"
	"github.com/starpu-go/starpu/internal/mpirun"
)

func TestMain(m *testing.M) {
	// Started by mpirun as a rank: run the body and exit.
	mpirun.Main(map[string]func() error{
		"p2p":         rankP2P,
		"collectives": rankCollectives,
		"dies":        rankDies,
		"bench":       rankBench,
		"hang":        rankHang,
		"abort":       rankAbort,
	})
	os.Exit(m.Run())
}

// TestRanks starts this test binary on real ranks under mpirun and checks
// how every rank ended.
func TestRanks(t *testing.T) {
	if !mpib.Built {
		t.Skip("built without MPI (nompi tag)")
	}
	if err := mpirun.Available(); err != nil {
		t.Skip(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		np   int
		body string
		// check inspects a run that is expected to fail; nil expects
		// every rank to succeed.
		check func(t *testing.T, res *mpirun.Result)
	}{
		{name: "p2p 2 ranks", np: 2, body: "p2p"},
		{name: "collectives 2 ranks", np: 2, body: "collectives"},
		{name: "collectives 4 ranks", np: 4, body: "collectives"},
		{name: "abort", np: 2, body: "abort", check: func(t *testing.T, res *mpirun.Result) {
			if res.TimedOut {
				t.Fatalf("the run hung: %s", res.Output)
			}
			if res.Ranks[0].Reported || res.Ranks[1].Reported {
				t.Errorf("a rank reported after MPI_Abort: %+v", res.Ranks)
			}
			// mpirun exits with the abort's code. (Its message, "MPI_ABORT
			// was invoked on rank 0 ... errorcode 7", sometimes comes out
			// garbled by an ORTE show_help error.)
			var ee *exec.ExitError
			if !errors.As(res.ExitErr, &ee) || ee.ExitCode() != 7 {
				t.Errorf("mpirun exited with %v, want status 7 from rank 0's MPI_Abort:\n%s", res.ExitErr, res.Output)
			}
		}},
		{name: "rank dies", np: 2, body: "dies", check: func(t *testing.T, res *mpirun.Result) {
			if res.TimedOut {
				t.Fatalf("the run hung: %s", res.Output)
			}
			err := res.Err()
			if err == nil {
				t.Fatalf("a run where rank 1 dies succeeded: %s", res.Output)
			}
			if res.Ranks[1].Reported {
				t.Errorf("rank 1 reported %q, it died before", res.Ranks[1].Err)
			}
			// mpirun's own word on it is added when its message is
			// legible (ORTE sometimes garbles it).
			if !strings.Contains(err.Error(), "rank 1 died without reporting") {
				t.Errorf("the error does not name rank 1: %v", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res, err := mpirun.Run(context.Background(), mpirun.Job{NP: tc.np, Prog: exe, Args: []string{"-test.run=^$"}, Body: tc.body, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d ranks, %v", tc.np, time.Since(start).Round(time.Millisecond))
			if tc.check != nil {
				tc.check(t, res)
				return
			}
			if err := res.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTimeout: a run that hangs is stopped at its timeout, and none of
// its processes is left behind.
func TestTimeout(t *testing.T) {
	if !mpib.Built {
		t.Skip("built without MPI (nompi tag)")
	}
	if err := mpirun.Available(); err != nil {
		t.Skip(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	token := fmt.Sprintf("STARPU_MPIB_TEST_TOKEN=%d-%d", os.Getpid(), time.Now().UnixNano())
	start := time.Now()
	res, err := mpirun.Run(context.Background(), mpirun.Job{NP: 2, Prog: exe, Args: []string{"-test.run=^$"}, Body: "hang", Env: []string{token}, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("a run with a 3 s timeout took %v", took)
	}
	if !res.TimedOut || res.Err() == nil {
		t.Errorf("timed out %v, error %v: want a timeout", res.TimedOut, res.Err())
	}
	// Every process that carried the token is gone.
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		env, err := os.ReadFile("/proc/" + p.Name() + "/environ")
		if err == nil && bytes.Contains(env, []byte(token)) {
			cmd, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
			t.Errorf("process %s (%s) outlived the run", p.Name(), bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
		}
	}
}

// rankAbort: rank 0 aborts the job with code 7 while rank 1 waits for a
// message from it.
func rankAbort() error {
	c, err := mpib.Init(mpib.Options{})
	if err != nil {
		return err
	}
	if c.Rank() == 0 {
		time.Sleep(100 * time.Millisecond)
		c.Abort(7)
		return errors.New("Abort returned")
	}
	buf, free := mmap(8)
	defer free()
	return recv(context.Background(), c, buf, 0, 1, 8)
}

// rankHang: every rank waits for a message nobody sends.
func rankHang() error {
	c, err := mpib.Init(mpib.Options{})
	if err != nil {
		return err
	}
	buf, free := mmap(8)
	defer free()
	return recv(context.Background(), c, buf, 1-c.Rank(), 1, 8)
}

// mmap returns n bytes outside the Go heap, as the arena's are.
func mmap(n int) ([]byte, func()) {
	b, err := unix.Mmap(-1, 0, max(n, 1), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		panic(err)
	}
	return b[:n], func() { _ = unix.Munmap(b[:cap(b)]) }
}

func ptr(b []byte) unsafe.Pointer {
	if cap(b) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

func timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// rankP2P: ping-pong of several sizes, probe, Testsome, cancel, argument
// errors and calls after Finalize, between ranks 0 and 1.
func rankP2P() error {
	c, err := mpib.Init(mpib.Options{})
	if err != nil {
		return err
	}
	if c.Size() != 2 {
		return fmt.Errorf("size %d, want 2", c.Size())
	}
	if c.ThreadLevel() < mpib.ThreadSerialized {
		return fmt.Errorf("thread level %v", c.ThreadLevel())
	}
	me, peer := c.Rank(), 1-c.Rank()
	ctx, cancel := timeout()
	defer cancel()

	for _, n := range []int{0, 8, 1000, 4 << 20} {
		buf, free := mmap(n)
		if me == 0 {
			for i := range buf {
				buf[i] = byte(i)
			}
			if err := send(ctx, c, buf, peer, 1); err != nil {
				return err
			}
			if err := recv(ctx, c, buf, peer, 2, n); err != nil {
				return err
			}
			for i := range buf {
				if buf[i] != byte(i)+1 {
					return fmt.Errorf("%d bytes: byte %d came back %d, want %d", n, i, buf[i], byte(i)+1)
				}
			}
		} else {
			if err := recv(ctx, c, buf, peer, 1, n); err != nil {
				return err
			}
			for i := range buf {
				buf[i]++
			}
			if err := send(ctx, c, buf, peer, 2); err != nil {
				return err
			}
		}
		free()
	}

	// Runs: rank 0 sends three strided runs, rank 1 gets them packed,
	// and sends them back into runs at other offsets.
	sbuf, free0 := mmap(64)
	defer free0()
	for i := range sbuf {
		sbuf[i] = byte(i)
	}
	out := []mpib.Run{{Off: 0, Len: 4}, {Off: 10, Len: 4}, {Off: 20, Len: 4}}
	back := []mpib.Run{{Off: 32, Len: 6}, {Off: 50, Len: 6}}
	if me == 0 {
		s, err := c.Isendv(ptr(sbuf), out, peer, 3, nil)
		if err != nil {
			return err
		}
		if _, err := s.Wait(ctx); err != nil {
			return err
		}
		r, err := c.Irecvv(ptr(sbuf), back, peer, 4, nil)
		if err != nil {
			return err
		}
		if st, err := r.Wait(ctx); err != nil || st.Count != 12 {
			return fmt.Errorf("irecvv: %+v, %v", st, err)
		}
		want := []byte{0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23}
		if got := append(append([]byte{}, sbuf[32:38]...), sbuf[50:56]...); !bytes.Equal(got, want) {
			return fmt.Errorf("runs came back as %v, want %v", got, want)
		}
	} else {
		if err := recv(ctx, c, sbuf[:12], peer, 3, 12); err != nil {
			return err
		}
		if err := send(ctx, c, sbuf[:12], peer, 4); err != nil {
			return err
		}
	}

	// Probe: rank 1 sends 24 bytes with tag 9; rank 0 probes any source
	// and tag until it sees the message, then receives it with a callback.
	buf, free := mmap(64)
	defer free()
	if me == 1 {
		if err := send(ctx, c, buf[:24], 0, 9); err != nil {
			return err
		}
	} else {
		var st mpib.Status
		for {
			ok, s, err := c.Iprobe(mpib.AnySource, mpib.AnyTag)
			if err != nil {
				return err
			}
			if ok {
				st = s
				break
			}
			if ctx.Err() != nil {
				return errors.New("probe: no message")
			}
			time.Sleep(time.Millisecond)
		}
		if st != (mpib.Status{Source: 1, Tag: 9, Count: 24}) {
			return fmt.Errorf("probe: %+v, want source 1, tag 9, 24 bytes", st)
		}
		called := make(chan mpib.Status, 1)
		r, err := c.Irecv(ptr(buf), len(buf), mpib.AnySource, mpib.AnyTag, func(st mpib.Status, _ error) { called <- st })
		if err != nil {
			return err
		}
		if _, err := r.Wait(ctx); err != nil {
			return err
		}
		if st := <-called; st.Count != 24 || st.Source != 1 {
			return fmt.Errorf("callback saw %+v", st)
		}
	}

	// Testsome over several receives, the sends in reverse order.
	const k = 4
	if me == 0 {
		reqs := make([]*mpib.Request, k)
		for i := range reqs {
			if reqs[i], err = c.Irecv(ptr(buf[8*i:]), 8, 1, 20+i, nil); err != nil {
				return err
			}
		}
		seen := map[int]bool{}
		for len(seen) < k && ctx.Err() == nil {
			for _, i := range mpib.Testsome(reqs) {
				seen[i] = true
				if _, _, err := reqs[i].Test(); err != nil {
					return err
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
		if len(seen) < k {
			return fmt.Errorf("testsome saw %d of %d receives", len(seen), k)
		}
	} else {
		for i := k - 1; i >= 0; i-- {
			if err := send(ctx, c, buf[8*i:8*i+8], 0, 20+i); err != nil {
				return err
			}
		}
	}

	// Many requests in flight at once: the request table grows under
	// them.
	const many = 150
	mbuf, free1 := mmap(many)
	defer free1()
	if me == 0 {
		reqs := make([]*mpib.Request, many)
		for i := range reqs {
			if reqs[i], err = c.Irecv(ptr(mbuf[i:]), 1, 1, 1000+i, nil); err != nil {
				return err
			}
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		for i, r := range reqs {
			if _, err := r.Wait(ctx); err != nil {
				return err
			}
			if mbuf[i] != byte(i) {
				return fmt.Errorf("message %d of %d: %d", i, many, mbuf[i])
			}
		}
	} else {
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		for i := range mbuf {
			mbuf[i] = byte(i)
		}
		for i := many - 1; i >= 0; i-- {
			if err := send(ctx, c, mbuf[i:i+1], 0, 1000+i); err != nil {
				return err
			}
		}
	}

	// Cancel a receive nobody sends to, twice (OpenMPI crashes on a
	// second MPI_Cancel: the binding makes one).
	r, err := c.Irecv(ptr(buf), 8, peer, 99, nil)
	if err != nil {
		return err
	}
	for range 2 {
		if err := c.Cancel(r); err != nil {
			return err
		}
	}
	if st, err := r.Wait(ctx); !errors.Is(err, mpib.ErrCancelled) || !st.Cancelled {
		return fmt.Errorf("cancelled receive: %+v, %v", st, err)
	}

	// Bad arguments are errors, not MPI aborts.
	bad := []struct {
		what string
		err  error
	}{
		{"isend to rank 2", second(c.Isend(ptr(buf), 8, 2, 1, nil))},
		{"isend with tag -3", second(c.Isend(ptr(buf), 8, peer, -3, nil))},
		{"isend from AnySource", second(c.Isend(ptr(buf), 8, mpib.AnySource, 1, nil))},
		{"irecv with a tag above MPI_TAG_UB", second(c.Irecv(ptr(buf), 8, peer, c.TagUB()+1, nil))},
		{"isend of 8 bytes from nil", second(c.Isend(nil, 8, peer, 1, nil))},
	}
	for _, b := range bad {
		if !errors.Is(b.err, mpib.ErrMPI) {
			return fmt.Errorf("%s: %v, want an ErrMPI error", b.what, b.err)
		}
	}
	if _, err := mpib.Init(mpib.Options{}); err == nil || !strings.Contains(err.Error(), "already initialised") {
		return fmt.Errorf("second Init: %v", err)
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	if err := c.Finalize(ctx); err != nil {
		return err
	}
	if err := second(c.Isend(ptr(buf), 8, peer, 1, nil)); !errors.Is(err, mpib.ErrFinalized) {
		return fmt.Errorf("isend after Finalize: %v", err)
	}
	if err := c.Barrier(ctx); !errors.Is(err, mpib.ErrFinalized) {
		return fmt.Errorf("barrier after Finalize: %v", err)
	}
	return nil
}

func second[T any](_ T, err error) error { return err }

func send(ctx context.Context, c *mpib.Comm, b []byte, to, tag int) error {
	r, err := c.Isend(ptr(b), len(b), to, tag, nil)
	if err != nil {
		return err
	}
	_, err = r.Wait(ctx)
	return err
}

func recv(ctx context.Context, c *mpib.Comm, b []byte, from, tag, want int) error {
	r, err := c.Irecv(ptr(b), len(b), from, tag, nil)
	if err != nil {
		return err
	}
	st, err := r.Wait(ctx)
	if err != nil {
		return err
	}
	if st.Count != want || st.Source != from || st.Tag != tag {
		return fmt.Errorf("received %+v, want %d bytes from rank %d with tag %d", st, want, from, tag)
	}
	return nil
}

// rankCollectives: barrier, the three reductions, allgather, and a ring
// of sends around every rank.
func rankCollectives() error {
	c, err := mpib.Init(mpib.Options{})
	if err != nil {
		return err
	}
	ctx, cancel := timeout()
	defer cancel()
	n, me := c.Size(), c.Rank()
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	for _, tc := range []struct {
		op   mpib.Op
		want []int64
	}{
		{mpib.Sum, []int64{int64(n * (n - 1) / 2), int64(n)}},
		{mpib.Max, []int64{int64(n - 1), 1}},
		{mpib.Min, []int64{0, 1}},
	} {
		got, err := c.Allreduce(ctx, []int64{int64(me), 1}, tc.op)
		if err != nil {
			return err
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			return fmt.Errorf("allreduce op %d: %v, want %v", tc.op, got, tc.want)
		}
	}
	all, err := c.Allgather(ctx, []byte{byte(me), byte(2 * me)})
	if err != nil {
		return err
	}
	for r, b := range all {
		if !bytes.Equal(b, []byte{byte(r), byte(2 * r)}) {
			return fmt.Errorf("allgather: rank %d gave %v", r, b)
		}
	}
	// Ring: each rank sends its number to the next, receives the
	// previous one's.
	buf, free := mmap(16)
	defer free()
	buf[0] = byte(me)
	rr, err := c.Irecv(ptr(buf[8:]), 8, (me+n-1)%n, 5, nil)
	if err != nil {
		return err
	}
	if err := send(ctx, c, buf[:8], (me+1)%n, 5); err != nil {
		return err
	}
	if _, err := rr.Wait(ctx); err != nil {
		return err
	}
	if buf[8] != byte((me+n-1)%n) {
		return fmt.Errorf("ring: got %d from rank %d", buf[8], (me+n-1)%n)
	}
	return c.Finalize(ctx)
}

// rankDies: rank 1 exits at once without finalizing; rank 0 waits for a
// message it will never get. mpirun must end the job.
func rankDies() error {
	c, err := mpib.Init(mpib.Options{})
	if err != nil {
		return err
	}
	if c.Rank() == 1 {
		os.Exit(3)
	}
	buf, free := mmap(8)
	defer free()
	ctx, cancel := timeout()
	defer cancel()
	if err := recv(ctx, c, buf, 1, 1, 8); err != nil {
		return err
	}
	return errors.New("received a message from a dead rank")
}

// TestBenchPingPong measures raw MPI ping-pong between two ranks through
// the binding, the reference for core/mpi's handle ping-pong; it runs with
// STARPU_MPI_BENCH=1 only.
func TestBenchPingPong(t *testing.T) {
	if os.Getenv("STARPU_MPI_BENCH") != "1" {
		t.Skip("set STARPU_MPI_BENCH=1 to measure")
	}
	if !mpib.Built {
		t.Skip("built without MPI (nompi tag)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res, err := mpirun.Run(context.Background(), mpirun.Job{NP: 2, Prog: exe, Args: []string{"-test.run=^$"}, Body: "bench", Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Ranks[0].Output)
}

// rankBench: ping-pong of 8 bytes and 4 MiB between ranks 0 and 1; rank 0
// prints the one-way time and bandwidth (median of 5 runs).
func rankBench() error {
	c, err := mpib.Init(mpib.Options{SpinPolls: benchSpin()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	me, peer := c.Rank(), 1-c.Rank()
	for _, tc := range []struct{ size, iters int }{{8, 2000}, {4 << 20, 40}} {
		buf, free := mmap(tc.size)
		var runs []time.Duration
		for range 5 {
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			start := time.Now()
			for range tc.iters {
				if me == 0 {
					if err := send(ctx, c, buf, peer, 1); err != nil {
						return err
					}
					if err := recv(ctx, c, buf, peer, 1, tc.size); err != nil {
						return err
					}
				} else {
					if err := recv(ctx, c, buf, peer, 1, tc.size); err != nil {
						return err
					}
					if err := send(ctx, c, buf, peer, 1); err != nil {
						return err
					}
				}
			}
			runs = append(runs, time.Since(start)/time.Duration(2*tc.iters))
		}
		free()
		slices.Sort(runs)
		oneWay := runs[len(runs)/2]
		if me == 0 {
			fmt.Printf("raw MPI ping-pong %d B: one-way %.2f us, %.1f MB/s\n", tc.size, float64(oneWay.Nanoseconds())/1e3, float64(tc.size)/oneWay.Seconds()/1e6)
		}
	}
	return c.Finalize(ctx)
}

// benchSpin is STARPU_MPI_BENCH_SPIN, the progression's spin polls for
// the benchmark (0: the default).
func benchSpin() int {
	n, _ := strconv.Atoi(os.Getenv("STARPU_MPI_BENCH_SPIN"))
	return n
}
