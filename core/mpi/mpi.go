// Package mpi is StarPU-MPI's programming model over MPI: the runtime
// across the ranks of an MPI job (design note: docs/design/mpi.md).
//
// Every rank runs the same program: it starts a core.Runtime, then Init
// on it, registers every datum of the problem on every rank with a tag
// and an owner rank (Register), and submits the same task graph through
// Insert. The rank that owns the data a task writes runs it; the owners
// of the data it reads send them there first, and the data it writes on
// behalf of other owners goes back to them. A datum sent to a rank is not
// sent again until it is modified (the cache; Flush). Transfers move a
// handle's RAM replicate, in the shared-memory arena, straight to and
// from MPI: no copy, and no Go memory, in between.
//
//	rt, _ := core.Init(ctx, core.Options{})
//	c, _ := mpi.Init(ctx, rt, mpi.Options{})
//	h, _ := core.RegisterVector(rt, x)
//	_ = c.Register(h, 10, 0) // tag 10, owned by rank 0
//	_, _ = c.Insert(scal, core.Data(core.RW, h), core.Value(2.0))
//	_ = c.WaitForAll()
//	_ = c.Shutdown()
//	_ = rt.Shutdown()
//
// The Go names of StarPU-MPI's calls:
//
//	starpu_mpi_init_conf, _shutdown          Init, Comm.Shutdown
//	starpu_mpi_comm_rank, _size              Comm.Rank, Comm.Size
//	starpu_mpi_data_register                 Comm.Register
//	starpu_mpi_data_get_rank, _get_tag       Comm.Owner, Comm.Tag
//	starpu_data_unregister of such data      Comm.Unregister
//	starpu_mpi_task_insert                   Comm.Insert
//	  with STARPU_EXECUTE_ON_NODE            Comm.InsertOn
//	  with STARPU_EXECUTE_ON_DATA            Comm.InsertOnData
//	starpu_mpi_isend, _irecv                 Comm.Isend, Comm.Irecv
//	starpu_mpi_isend_detached, _irecv_...    Comm.IsendDetached, Comm.IrecvDetached
//	starpu_mpi_send, _recv                   Comm.Send, Comm.Recv
//	starpu_mpi_wait, _test                   Request.Wait, Request.Test
//	starpu_mpi_barrier                       Comm.Barrier
//	starpu_mpi_wait_for_all                  Comm.WaitForAll
//	starpu_mpi_redux_data                    Comm.Redux
//	starpu_mpi_cache_flush, _flush_all_data  Comm.Flush, Comm.FlushAll
//	starpu_mpi_cache_set (STARPU_MPI_CACHE)  Options.NoCache
//	starpu_mpi_get_data_on_node              Comm.GetDataOnNode
//	starpu_mpi_comm_amounts_retrieve         Comm.Stats
//	STARPU_MPI_STATS=1 (1.3: STARPU_COMM_STATS) Options.Stats: printed by Shutdown
//
// Failures never hang a run: a rank that dies (on this host, seen through
// its process; elsewhere, through mpirun ending the job), or that shuts
// down while others still wait for it, makes the transfers that involve
// it fail with an error naming it, and every rank is told (ErrRankFailed).
package mpi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/core/mpi/internal/mpib"
)

// Errors a caller can test for with errors.Is; each is wrapped with the
// details.
var (
	// ErrNotRegistered: a handle used by Insert or a transfer has no MPI
	// registration (no owner rank, no tag).
	ErrNotRegistered = errors.New("handle is not registered with MPI")
	// ErrTagInUse: a tag was registered twice.
	ErrTagInUse = errors.New("MPI tag already registered")
	// ErrRankGone: a peer rank died, or shut down while this rank still
	// needed it.
	ErrRankGone = errors.New("peer rank gone")
	// ErrRankFailed: another rank hit a failure that stops the run and
	// told every rank.
	ErrRankFailed = errors.New("the run failed on another rank")
	// ErrAborted: mpirun is ending the job (it sent SIGTERM).
	ErrAborted = errors.New("mpirun is ending the job")
	// ErrGraphMismatch: the ranks did not submit the same graph (detected
	// where it can be: message counts, sizes).
	ErrGraphMismatch = errors.New("the ranks submitted different task graphs")
	// ErrShutdown: the Comm is shut down.
	ErrShutdown = errors.New("MPI layer is shut down")
)

// Options configures Init.
type Options struct {
	// Getenv reads STARPU_MPI_STATS (or StarPU 1.3's STARPU_COMM_STATS)
	// and STARPU_MPI_CACHE (os.Getenv when nil).
	Getenv func(string) string
	// Stats makes Shutdown print the communication statistics per peer
	// (StarPU's STARPU_MPI_STATS=1, or 1.3's STARPU_COMM_STATS=1, which
	// set it too).
	Stats bool
	// NoCache turns the communication cache off: Insert sends a datum
	// each time a task needs it (STARPU_MPI_CACHE=0 sets it too).
	NoCache bool
	// Output receives the statistics (os.Stderr when nil).
	Output io.Writer
	// Logger receives the MPI layer's log lines (none when nil).
	Logger hclog.Logger
	// SpinPolls is how many times in a row the progression goroutine
	// polls MPI before it sleeps (0: 100): more lowers latency where cores
	// are idle and raises it where they are busy. MaxSleep caps its sleep
	// between polls while transfers are in flight (0: 100 us).
	SpinPolls int
	MaxSleep  time.Duration
	// ShutdownTimeout bounds how long Shutdown waits for the other ranks;
	// 0 means a minute.
	ShutdownTimeout time.Duration
	// NoSignalHandler leaves SIGTERM alone. By default, when mpirun ends
	// the job (it sends SIGTERM after a rank died), the error, naming the
	// dead ranks seen on this host, is printed; the calls in progress fail
	// with it (ErrAborted), and the process exits half a second later
	// unless it did already.
	NoSignalHandler bool
}

// Comm is the MPI layer of one rank over its runtime: the world
// communicator, the data registered with it, and the transfers in
// flight. Its methods may be called from any goroutine.
type Comm struct {
	rt    *core.Runtime
	mc    *mpib.Comm
	rank  int
	size  int
	opt   Options
	log   hclog.Logger
	cache bool
	start time.Time
	// ctrlTag is the MPI tag of control messages; data tags lie below.
	ctrlTag int

	// mu guards everything below it; it is never held while waiting for
	// the progression goroutine.
	mu    sync.Mutex
	byH   map[*core.Handle]*datum
	byTag map[int64]*datum
	peers []peer
	xfers map[*xfer]struct{}
	// hooked are the handles whose Unregister waits for their transfers
	// (track, waitTransfers); c.mu.
	hooked  map[*core.Handle]bool
	idle    chan struct{}           // closed while xfers is empty
	errs    []error                 // transfer failures not yet reported
	failErr error                   // the failure that stops the run, once set
	failed  chan struct{}           // closed when failErr is set
	coll    context.CancelCauseFunc // cancels the collective in progress
	ncoll   int64                   // collectives started
	closed  bool

	ctl   *control
	watch *watcher
	sigs  chan os.Signal
}

// Init starts the MPI layer of this rank over rt: it initialises MPI (on
// its own progression goroutine; thread level SERIALIZED or better),
// learns the other ranks, and starts listening to them. Every rank of the
// job calls it. ctx bounds the start-up exchange.
func Init(ctx context.Context, rt *core.Runtime, opt Options) (*Comm, error) {
	if rt == nil {
		return nil, errors.New("mpi: Init: nil runtime")
	}
	getenv := opt.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	// StarPU 1.3 calls it STARPU_COMM_STATS; later versions
	// STARPU_MPI_STATS.
	if getenv("STARPU_MPI_STATS") == "1" || getenv("STARPU_COMM_STATS") == "1" {
		opt.Stats = true
	}
	if getenv("STARPU_MPI_CACHE") == "0" {
		opt.NoCache = true
	}
	if opt.Output == nil {
		opt.Output = os.Stderr
	}
	if opt.ShutdownTimeout <= 0 {
		opt.ShutdownTimeout = time.Minute
	}
	log := opt.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	mc, err := mpib.Init(mpib.Options{SpinPolls: opt.SpinPolls, MaxSleep: opt.MaxSleep})
	if err != nil {
		return nil, fmt.Errorf("mpi: Init: %w", err)
	}
	// The progression goroutine sleeps in ppoll and calls MPI on its
	// locked thread: it needs a P of its own beside the engine's (under
	// mpirun's default binding a rank starts with one).
	rt.ReserveThreads(1)
	c := &Comm{
		rt: rt, mc: mc, rank: mc.Rank(), size: mc.Size(), opt: opt, log: log.Named("mpi"),
		cache: !opt.NoCache, start: time.Now(), ctrlTag: mc.TagUB(),
		byH: map[*core.Handle]*datum{}, byTag: map[int64]*datum{}, xfers: map[*xfer]struct{}{},
		idle: make(chan struct{}), failed: make(chan struct{}),
	}
	close(c.idle)
	c.peers = make([]peer, c.size)
	for i := range c.peers {
		c.peers[i].rank = i
	}
	c.log = c.log.With("rank", c.rank)
	if err := c.startControl(); err != nil {
		_ = mc.Finalize(context.Background())
		return nil, fmt.Errorf("mpi: Init: %w", err)
	}
	if err := c.startWatch(ctx); err != nil {
		c.stopControl()
		_ = mc.Finalize(context.Background())
		return nil, fmt.Errorf("mpi: Init: %w", err)
	}
	if !opt.NoSignalHandler {
		c.sigs = make(chan os.Signal, 1)
		signal.Notify(c.sigs, syscall.SIGTERM)
		go c.onSignal()
	}
	// A task stuck on data from another rank: the watchdog names the
	// transfers it may wait for.
	rt.AddWatchdogReport(c.watchdogReport)
	return c, nil
}

// Built says whether this program was built with MPI: with cgo and
// OpenMPI's headers (libopenmpi-dev), without the nompi build tag, which
// leaves MPI out on machines that lack them (Init then fails).
func Built() bool { return mpib.Built }

// Runtime is the runtime the Comm was started over.
func (c *Comm) Runtime() *core.Runtime { return c.rt }

// Rank is this process's rank (starpu_mpi_world_rank).
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks (starpu_mpi_world_size).
func (c *Comm) Size() int { return c.size }

// TagMax is the largest data tag Register and the transfers accept: MPI's
// MPI_TAG_UB less the one tag the layer keeps for its control messages.
func (c *Comm) TagMax() int64 { return int64(c.ctrlTag - 1) }

// usable says why the Comm cannot start new work.
func (c *Comm) usable() error {
	if c.closed {
		return ErrShutdown
	}
	return nil
}

// fail records err as the failure that stops the run, unless one is
// recorded already: every transfer in flight and every later one fails
// with it, and with tell set every other rank is told. It returns the
// failure recorded.
func (c *Comm) fail(err error, tell bool) error {
	c.mu.Lock()
	if c.failErr != nil {
		first := c.failErr
		c.mu.Unlock()
		return first
	}
	c.failErr = err
	close(c.failed)
	xs := make([]*xfer, 0, len(c.xfers))
	for x := range c.xfers {
		xs = append(xs, x)
	}
	if c.coll != nil {
		c.coll(err)
	}
	c.mu.Unlock()
	c.log.Error("run failed", "error", err)
	if tell {
		c.tellFailure(err)
	}
	c.abandon(xs, err)
	return err
}

// failure is the failure that stops the run, or nil.
func (c *Comm) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failErr
}

// onSignal waits for mpirun's SIGTERM: the job is being ended, most
// likely because a rank died, and mpirun kills what is left soon after.
// The error, naming the dead ranks this host can see, is printed at once;
// the calls in progress fail with it; half a second later, if the program
// has not exited, the process exits.
func (c *Comm) onSignal() {
	if _, ok := <-c.sigs; !ok {
		return
	}
	err := fmt.Errorf("%w: rank %d got SIGTERM", ErrAborted, c.rank)
	switch dead := c.watch.deadNow(); {
	case len(dead) > 0:
		err = fmt.Errorf("%w: %w", err, errors.Join(dead...))
	case c.watch.watchesAll(c.size):
		// Nothing died that could have made mpirun end the job.
		err = fmt.Errorf("%w (no rank died: every rank runs on this host and is alive; mpirun ended the job, interrupted or out of time)", err)
	default:
		err = fmt.Errorf("%w (no rank on this host died: one on another host may have died or failed, or mpirun was interrupted; see mpirun's message)", err)
	}
	err = c.fail(err, false)
	fmt.Fprintf(os.Stderr, "starpu mpi: rank %d: %v\n", c.rank, err)
	time.AfterFunc(500*time.Millisecond, func() {
		loader.RemoveOwnSockDirs() // no Shutdown will
		os.Exit(143)
	})
}
