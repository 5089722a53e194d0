package core

// Task insert; documented in docs/user-guide.md.

import (
	"errors"
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Insert builds a task of codelet cl from args and submits it: the Go
// form of starpu_task_insert, the short way to write most tasks. A nil cl
// makes a task that runs nowhere (a synchronisation point for
// TaskDeps, Tag, Callback). Options that set one field (Priority, Name,
// ...) take the last value given; Data, DataArray, DataModeArray and
// Value add to what came before, in order.
//
//	t, err := rt.Insert(scal, core.Data(core.RW, h), core.Value(alpha), core.Priority(5))
//
// A wrong option is an error wrapping ErrInvalidTask that names the
// option by its position, and nothing is submitted. Once built, the task
// is returned with Submit's error, if any (for a Synchronous task, the
// error of its run). Unlike StarPU's, the task is not detached: it can be
// waited for.
//
// The StarPU 1.3 tokens and their options:
//
//	STARPU_R, _W, _RW, _SCRATCH, _REDUX   Data(mode, h), mode or'ed with
//	  (with STARPU_COMMUTE, _LOCALITY)      Commute and Locality as core allows
//	STARPU_DATA_ARRAY                     DataArray(hs...): modes from the codelet
//	STARPU_DATA_MODE_ARRAY                DataModeArray(ds...)
//	STARPU_VALUE                          Value(vals...), packed by kernel.Pack
//	STARPU_CL_ARGS, _CL_ARGS_NFREE        ClArgs(b)
//	STARPU_CALLBACK                       Callback(f)
//	STARPU_CALLBACK_WITH_ARG(_NFREE)      CallbackWithArg(f, arg)
//	STARPU_PROLOGUE_CALLBACK(_ARG(_NFREE)) Prologue(f), PrologueWithArg(f, arg)
//	STARPU_PRIORITY                       Priority(p)
//	STARPU_EXECUTE_ON_WORKER              ExecuteOnWorker(id); -1 leaves the choice to the policy
//	STARPU_WORKER_ORDER                   WorkerOrder(n)
//	STARPU_EXECUTE_WHERE                  ExecuteWhere(mask)
//	STARPU_TAG                            Tag(id)
//	STARPU_TAG_ONLY                       TagOnly(id)
//	STARPU_NAME                           Name(s)
//	STARPU_FLOPS                          Flops(f)
//	STARPU_SCHED_CTX                      SchedCtx(c)
//	STARPU_TASK_DEPS_ARRAY                TaskDeps(preds...)
//	STARPU_TASK_END_DEPS_ARRAY            TaskEndDeps(preds...)
//	STARPU_TASK_END_DEP                   TaskEndDep(n)
//	STARPU_SEQUENTIAL_CONSISTENCY         SequentialConsistency(on)
//	STARPU_HANDLES_SEQUENTIAL_CONSISTENCY HandlesSequentialConsistency(flags...)
//	STARPU_TASK_SYNCHRONOUS               Synchronous(on)
//
// Refused with an error wrapping errors.ErrUnsupported, since core has
// no equivalent yet: STARPU_EXECUTE_ON_NODE (ExecuteOnNode),
// STARPU_PROLOGUE_CALLBACK_POP and its _ARG (ProloguePop),
// STARPU_POSSIBLY_PARALLEL with a true value (PossiblyParallel).
//
// Not applicable, so left out: STARPU_CALLBACK_ARG and
// STARPU_PROLOGUE_CALLBACK_ARG alone (a Go callback is a closure: its
// argument comes with it, see CallbackWithArg); the _NFREE variants as
// such (the garbage collector frees); STARPU_EXECUTE_ON_DATA and
// STARPU_NODE_SELECTION_POLICY (StarPU-MPI's, about MPI ranks);
// STARPU_SSEND (an MPI mode bit: Data refuses modes core does not know);
// STARPU_HYPERVISOR_TAG (there is no scheduling-context hypervisor);
// STARPU_TASK_COLOR (the trace names tasks, its viewer colours them);
// STARPU_TASK_WORKERIDS (core has no per-task worker set: use
// ExecuteOnWorker, or a SchedCtx made of those workers);
// STARPU_TASK_PROFILING_INFO (Runtime.Profiling returns it after the
// run); STARPU_TASK_NO_SUBMITORDER (core keeps no submission order to
// replay); STARPU_TASK_SCHED_DATA (the policy is a plugin in another
// process: a Go pointer cannot reach it); the terminating 0 (Go's
// variadic arguments end by themselves).
func (rt *Runtime) Insert(cl *Codelet, args ...InsertArg) (*Task, error) {
	t, err := rt.build("Insert", cl, args)
	if err != nil {
		return nil, err
	}
	if err := rt.Submit(t); err != nil {
		return t, err
	}
	return t, nil
}

// BuildTask builds the task Insert would submit, without submitting it
// (StarPU's starpu_task_build): Submit it when ready. TaskDeps,
// TaskEndDeps and TaskEndDep are declared on it now, as StarPU does.
func (rt *Runtime) BuildTask(cl *Codelet, args ...InsertArg) (*Task, error) {
	return rt.build("BuildTask", cl, args)
}

// InsertArg is an option of Insert and BuildTask; the functions of this
// file make them.
type InsertArg interface {
	insert(b *taskBuilder) error
}

// insertOpt is an InsertArg: what the option does, and its name for
// messages.
type insertOpt struct {
	name  string
	apply func(b *taskBuilder) error
}

func (o insertOpt) insert(b *taskBuilder) error { return o.apply(b) }

// taskBuilder is the task being built and what the options said that
// the task cannot hold until all are read.
type taskBuilder struct {
	rt *Runtime
	t  *Task
	// modes has one mode per handle; 0 where the codelet gives it.
	modes []Mode
	// values and clArgs tell how Task.Arg was set.
	values, clArgs bool
	// seq is HandlesSequentialConsistency's flags; seqOff is
	// SequentialConsistency(false).
	seq    []bool
	seqOff bool
	// The dependencies to declare once the task is built.
	deps, endDeps []*Task
	endDep        int
}

// errUnsupported is the error of a StarPU token core cannot honour.
func errUnsupported(why string) error {
	return fmt.Errorf("%w: %s", errors.ErrUnsupported, why)
}

func (rt *Runtime) build(fn string, cl *Codelet, args []InsertArg) (*Task, error) {
	b := &taskBuilder{rt: rt, t: &Task{Codelet: cl}}
	what := "task"
	if cl != nil {
		what = fmt.Sprintf("codelet %q", cl.Name)
	}
	for i, a := range args {
		if a == nil {
			return nil, fmt.Errorf("%w: %s: %s argument %d is nil", ErrInvalidTask, what, fn, i)
		}
		if err := a.insert(b); err != nil {
			name := "?"
			if o, ok := a.(insertOpt); ok {
				name = o.name
			}
			return nil, fmt.Errorf("%w: %s: %s argument %d (%s): %w", ErrInvalidTask, what, fn, i, name, err)
		}
	}
	if err := b.finish(); err != nil {
		return nil, fmt.Errorf("%w: %s: %s: %w", ErrInvalidTask, what, fn, err)
	}
	t := b.t
	if len(b.deps) > 0 {
		if err := rt.DeclareDeps(t, b.deps...); err != nil {
			return nil, fmt.Errorf("%s: TaskDeps: %w", fn, err)
		}
	}
	if len(b.endDeps) > 0 {
		if err := rt.DeclareEndDeps(t, b.endDeps...); err != nil {
			return nil, fmt.Errorf("%s: TaskEndDeps: %w", fn, err)
		}
	}
	if b.endDep > 0 {
		if err := rt.EndDepAdd(t, b.endDep); err != nil {
			return nil, fmt.Errorf("%s: TaskEndDep: %w", fn, err)
		}
	}
	return t, nil
}

// finish checks the handles' modes against the codelet's, filling
// Task.Modes for a codelet with VariableBuffers, and sets the per-handle
// sequential consistency.
func (b *taskBuilder) finish() error {
	t, cl := b.t, b.t.Codelet
	n := len(t.Handles)
	switch {
	case cl == nil:
		if n > 0 {
			return fmt.Errorf("a task without a codelet takes no handles, %d given", n)
		}
	case cl.NBuffers == VariableBuffers:
		for i, m := range b.modes {
			if m == 0 {
				return fmt.Errorf("handle %d comes from DataArray, which gives no mode, and the codelet has VariableBuffers: give its mode with Data or DataModeArray", i)
			}
		}
		t.Modes = b.modes
	default:
		nb := cl.nbuffers()
		if n != nb {
			return fmt.Errorf("the codelet takes %d buffers, %d handles given", nb, n)
		}
		if len(cl.Modes) != nb {
			return fmt.Errorf("the codelet has %d modes for %d buffers", len(cl.Modes), nb)
		}
		for i, m := range b.modes {
			if m != 0 && m != cl.Modes[i] {
				return fmt.Errorf("handle %d (%s) is given mode %v, the codelet's buffer %d has mode %v", i, t.Handles[i], m, i, cl.Modes[i])
			}
		}
	}
	if b.seq != nil {
		if len(b.seq) != n {
			return fmt.Errorf("HandlesSequentialConsistency gives %d flags for %d handles", len(b.seq), n)
		}
		off := make([]bool, n)
		for i, on := range b.seq {
			switch {
			case !on:
				off[i] = true
			case b.seqOff:
				return fmt.Errorf("HandlesSequentialConsistency orders handle %d, but SequentialConsistency(false) drops the task's implicit dependencies", i)
			case !t.Handles[i].SequentialConsistency():
				// StarPU's flag would order this one access to a handle
				// whose accesses are not ordered; core cannot.
				return fmt.Errorf("HandlesSequentialConsistency orders handle %d (%s), whose own sequential consistency is off", i, t.Handles[i])
			}
		}
		t.HandlesNoSequentialConsistency = off
	}
	return nil
}

// add appends a handle; mode 0 takes the codelet's.
func (b *taskBuilder) add(h *Handle, mode Mode) error {
	i := len(b.t.Handles)
	if h == nil {
		return fmt.Errorf("handle %d is nil", i)
	}
	if mode != 0 && !validMode(mode) {
		return fmt.Errorf("handle %d (%s): mode %v is not one core has (R, W, RW, W or RW with Commute, Scratch, Redux; each may carry Locality)", i, h, mode)
	}
	b.t.Handles = append(b.t.Handles, h)
	b.modes = append(b.modes, mode)
	return nil
}

// Data gives the task handle h in mode (StarPU's STARPU_R, STARPU_W,
// STARPU_RW, STARPU_SCRATCH, STARPU_REDUX followed by a handle; Commute
// and Locality may be or'ed in as core allows). For a codelet with fixed
// modes, mode must be the codelet's for that buffer.
func Data(mode Mode, h *Handle) InsertArg {
	return insertOpt{"Data", func(b *taskBuilder) error {
		if mode == 0 {
			return fmt.Errorf("handle %d: mode 0 is no access mode", len(b.t.Handles))
		}
		return b.add(h, mode)
	}}
}

// DataArray gives the task handles whose modes are the codelet's
// (StarPU's STARPU_DATA_ARRAY): for codelets with fixed modes only.
func DataArray(hs ...*Handle) InsertArg {
	return insertOpt{"DataArray", func(b *taskBuilder) error {
		for _, h := range hs {
			if err := b.add(h, 0); err != nil {
				return err
			}
		}
		return nil
	}}
}

// DataDescr is a handle with its access mode (StarPU's struct
// starpu_data_descr), for DataModeArray.
type DataDescr struct {
	Handle *Handle
	Mode   Mode
}

// DataModeArray gives the task handles with their modes (StarPU's
// STARPU_DATA_MODE_ARRAY).
func DataModeArray(ds ...DataDescr) InsertArg {
	return insertOpt{"DataModeArray", func(b *taskBuilder) error {
		for _, d := range ds {
			if d.Mode == 0 {
				return fmt.Errorf("handle %d: mode 0 is no access mode", len(b.t.Handles))
			}
			if err := b.add(d.Handle, d.Mode); err != nil {
				return err
			}
		}
		return nil
	}}
}

// Value packs vals into the task's argument with kernel.Pack, after the
// values of the Value options before it (StarPU's STARPU_VALUE); the
// kernel gets them with kernel.Unpack, in the same order and types. It
// cannot be combined with ClArgs.
func Value(vals ...any) InsertArg {
	return insertOpt{"Value", func(b *taskBuilder) error {
		if b.clArgs {
			return errors.New("Value after ClArgs: the argument is either packed values or raw bytes")
		}
		arg, err := kernel.AppendPack(b.t.Arg, vals...)
		if err != nil {
			return err
		}
		b.t.Arg, b.values = arg, true
		return nil
	}}
}

// ClArgs sets the task's argument to arg as it is (StarPU's
// STARPU_CL_ARGS and STARPU_CL_ARGS_NFREE): bytes the kernel decodes
// itself, or kernel.Pack's. The task keeps arg: do not change it before
// the task completes.
func ClArgs(arg []byte) InsertArg {
	return insertOpt{"ClArgs", func(b *taskBuilder) error {
		if b.values {
			return errors.New("ClArgs after Value: the argument is either packed values or raw bytes")
		}
		b.t.Arg, b.clArgs = arg, true
		return nil
	}}
}

// Callback sets Task.Callback (StarPU's STARPU_CALLBACK): it runs after
// the task completes.
func Callback(f func(*Task)) InsertArg {
	return insertOpt{"Callback", func(b *taskBuilder) error {
		b.t.Callback = f
		return nil
	}}
}

// CallbackWithArg makes f(arg) the task's callback (StarPU's
// STARPU_CALLBACK_WITH_ARG).
func CallbackWithArg[A any](f func(A), arg A) InsertArg {
	return insertOpt{"CallbackWithArg", func(b *taskBuilder) error {
		b.t.Callback = nil
		if f != nil {
			b.t.Callback = func(*Task) { f(arg) }
		}
		return nil
	}}
}

// Prologue sets Task.PrologueCallback (StarPU's
// STARPU_PROLOGUE_CALLBACK): it runs when the task becomes ready.
func Prologue(f func(*Task)) InsertArg {
	return insertOpt{"Prologue", func(b *taskBuilder) error {
		b.t.PrologueCallback = f
		return nil
	}}
}

// PrologueWithArg makes f(arg) the task's prologue callback (StarPU's
// STARPU_PROLOGUE_CALLBACK with STARPU_PROLOGUE_CALLBACK_ARG).
func PrologueWithArg[A any](f func(A), arg A) InsertArg {
	return insertOpt{"PrologueWithArg", func(b *taskBuilder) error {
		b.t.PrologueCallback = nil
		if f != nil {
			b.t.PrologueCallback = func(*Task) { f(arg) }
		}
		return nil
	}}
}

// ProloguePop stands for StarPU's STARPU_PROLOGUE_CALLBACK_POP, a
// callback run when a worker pops the task. Insert refuses it: core has
// no such hook (tasks reach workers in driver processes); Prologue runs
// when the task becomes ready, before the policy sees it.
func ProloguePop(func(*Task)) InsertArg {
	return insertOpt{"ProloguePop", func(*taskBuilder) error {
		return errUnsupported("STARPU_PROLOGUE_CALLBACK_POP: core runs no callback when a worker takes a task; Prologue runs when it becomes ready")
	}}
}

// Priority sets Task.Priority (StarPU's STARPU_PRIORITY).
func Priority(p int) InsertArg {
	return insertOpt{"Priority", func(b *taskBuilder) error {
		b.t.Priority = p
		return nil
	}}
}

// ExecuteOnWorker makes the task run on worker id, an ID from
// Runtime.Workers (StarPU's STARPU_EXECUTE_ON_WORKER); -1, as in StarPU,
// leaves the choice to the policy.
func ExecuteOnWorker(id int) InsertArg {
	return insertOpt{"ExecuteOnWorker", func(b *taskBuilder) error {
		b.t.ExecuteOnWorker, b.t.Worker = id != -1, id
		if id == -1 {
			b.t.Worker = 0
		}
		return nil
	}}
}

// WorkerOrder sets Task.WorkerOrder (StarPU's STARPU_WORKER_ORDER), with
// ExecuteOnWorker.
func WorkerOrder(n uint) InsertArg {
	return insertOpt{"WorkerOrder", func(b *taskBuilder) error {
		b.t.WorkerOrder = n
		return nil
	}}
}

// ExecuteWhere sets Task.Where (StarPU's STARPU_EXECUTE_WHERE): an OR of
// WhereCPU, WhereCUDA, WhereOpenCL, or Nowhere.
func ExecuteWhere(mask uint32) InsertArg {
	return insertOpt{"ExecuteWhere", func(b *taskBuilder) error {
		b.t.Where = mask
		return nil
	}}
}

// ExecuteOnNode stands for StarPU's STARPU_EXECUTE_ON_NODE, which names
// the MPI rank that runs the task. Insert refuses it: a Runtime is one
// process, with no ranks; ExecuteWhere and ExecuteOnWorker choose where
// the task runs in it.
func ExecuteOnNode(rank int) InsertArg {
	return insertOpt{"ExecuteOnNode", func(*taskBuilder) error {
		return errUnsupported(fmt.Sprintf("STARPU_EXECUTE_ON_NODE (rank %d) is for StarPU-MPI's insert; this runtime has no MPI ranks: use ExecuteWhere or ExecuteOnWorker", rank))
	}}
}

// PossiblyParallel stands for StarPU's STARPU_POSSIBLY_PARALLEL, a hint
// for its scheduling-context hypervisor that StarPU itself leaves
// undocumented. False is what every task is here; true is refused: a
// parallel task is one whose codelet's Type is SPMD or ForkJoin.
func PossiblyParallel(on bool) InsertArg {
	return insertOpt{"PossiblyParallel", func(*taskBuilder) error {
		if on {
			return errUnsupported("STARPU_POSSIBLY_PARALLEL: the hypervisor's hint has no equivalent here; a codelet of Type SPMD or ForkJoin makes a parallel task")
		}
		return nil
	}}
}

// Tag makes the task notify tag id when it terminates (StarPU's
// STARPU_TAG: Task.Tag with UseTag).
func Tag(id TagID) InsertArg {
	return insertOpt{"Tag", func(b *taskBuilder) error {
		b.t.Tag, b.t.UseTag = id, true
		return nil
	}}
}

// TagOnly sets Task.Tag without UseTag (StarPU's STARPU_TAG_ONLY): the
// task carries the tag for the application and notifies nothing.
func TagOnly(id TagID) InsertArg {
	return insertOpt{"TagOnly", func(b *taskBuilder) error {
		b.t.Tag, b.t.UseTag = id, false
		return nil
	}}
}

// Name sets Task.Name (StarPU's STARPU_NAME).
func Name(s string) InsertArg {
	return insertOpt{"Name", func(b *taskBuilder) error {
		b.t.Name = s
		return nil
	}}
}

// Flops sets Task.Flops (StarPU's STARPU_FLOPS).
func Flops(f float64) InsertArg {
	return insertOpt{"Flops", func(b *taskBuilder) error {
		b.t.Flops = f
		return nil
	}}
}

// SchedCtx submits the task to scheduling context c (StarPU's
// STARPU_SCHED_CTX); nil is the global context.
func SchedCtx(c *SchedContext) InsertArg {
	return insertOpt{"SchedCtx", func(b *taskBuilder) error {
		b.t.SchedContext = c
		return nil
	}}
}

// TaskDeps makes the task wait for preds (StarPU's
// STARPU_TASK_DEPS_ARRAY; Runtime.DeclareDeps).
func TaskDeps(preds ...*Task) InsertArg {
	return insertOpt{"TaskDeps", func(b *taskBuilder) error {
		b.deps = append(b.deps, preds...)
		return nil
	}}
}

// TaskEndDeps makes the task's termination wait for preds' (StarPU's
// STARPU_TASK_END_DEPS_ARRAY; Runtime.DeclareEndDeps).
func TaskEndDeps(preds ...*Task) InsertArg {
	return insertOpt{"TaskEndDeps", func(b *taskBuilder) error {
		b.endDeps = append(b.endDeps, preds...)
		return nil
	}}
}

// TaskEndDep adds n end dependencies to the task, each released by
// Runtime.EndDepRelease (StarPU's STARPU_TASK_END_DEP;
// Runtime.EndDepAdd).
func TaskEndDep(n int) InsertArg {
	return insertOpt{"TaskEndDep", func(b *taskBuilder) error {
		if n <= 0 {
			return fmt.Errorf("%d end dependencies", n)
		}
		b.endDep += n
		return nil
	}}
}

// SequentialConsistency sets whether the task has implicit data
// dependencies; off drops them (StarPU's STARPU_SEQUENTIAL_CONSISTENCY;
// Task.NoSequentialConsistency).
func SequentialConsistency(on bool) InsertArg {
	return insertOpt{"SequentialConsistency", func(b *taskBuilder) error {
		b.t.NoSequentialConsistency, b.seqOff = !on, !on
		return nil
	}}
}

// HandlesSequentialConsistency gives one flag per handle of the task, in
// order (StarPU's STARPU_HANDLES_SEQUENTIAL_CONSISTENCY): false drops the
// task's implicit dependencies through that handle
// (Task.HandlesNoSequentialConsistency). True keeps them, and is refused
// for a handle whose own sequential consistency is off, which StarPU's
// flag would override and core cannot.
func HandlesSequentialConsistency(flags ...bool) InsertArg {
	return insertOpt{"HandlesSequentialConsistency", func(b *taskBuilder) error {
		b.seq = append([]bool{}, flags...)
		return nil
	}}
}

// Synchronous sets Task.Synchronous (StarPU's STARPU_TASK_SYNCHRONOUS):
// Insert returns once the task completed, with its error.
func Synchronous(on bool) InsertArg {
	return insertOpt{"Synchronous", func(b *taskBuilder) error {
		b.t.Synchronous = on
		return nil
	}}
}
