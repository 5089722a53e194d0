package core_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// The codelets and kernels of StarPU's tests/main/insert_task.c, in Go.
var (
	insertIFactor int32   = 12
	insertFFactor float32 = 10.0

	mycodeletArgs = &core.Codelet{Name: "mycodelet_args", Modes: []core.Mode{core.RW, core.RW},
		Kernels: map[core.Arch]string{core.CPU: "func_cpu_args"}}
	mycodeletNoargs = &core.Codelet{Name: "mycodelet_noargs", Modes: []core.Mode{core.RW, core.RW},
		Kernels: map[core.Arch]string{core.CPU: "func_cpu_noargs"}}
)

var insertKernels = []kernel.Kernel{
	{Name: "func_cpu_args", Func: func(ctx *kernel.Context) error {
		x0 := ctx.Buffers[0].Int32s()
		x1 := ctx.Buffers[1].Float32s()
		var (
			ifactor int32
			ffactor float32
		)
		if err := kernel.Unpack(ctx.Arg, &ifactor, &ffactor); err != nil {
			return err
		}
		x0[0] *= ifactor
		x1[0] *= ffactor
		return nil
	}},
	{Name: "func_cpu_noargs", Func: func(ctx *kernel.Context) error {
		ctx.Buffers[0].Int32s()[0] *= insertIFactor
		ctx.Buffers[1].Float32s()[0] *= insertFFactor
		return nil
	}},
	// insert_probe writes where it ran and what it unpacked: its worker,
	// the weights' sum times the scale, the name's length.
	{Name: "insert_probe", Func: func(ctx *kernel.Context) error {
		var (
			name    string
			weights []float64
			p       probeParams
		)
		if err := ctx.Unpack(&name, &weights, &p); err != nil {
			return err
		}
		sum := 0.0
		for _, w := range weights {
			sum += w
		}
		out := ctx.Buffers[0].Float64s()
		out[0], out[1], out[2] = float64(ctx.Worker), sum*p.Scale, float64(len(name))
		return nil
	}},
}

type probeParams struct {
	Scale float64
	steps [2]int16
}

var probeCl = &core.Codelet{Name: "probe", Modes: []core.Mode{core.W}, Kernels: map[core.Arch]string{core.CPU: "insert_probe"}}

// TestInsertStarPUExample ports StarPU's tests/main/insert_task.c line for
// line: the same codelet run through Insert and BuildTask, with its factors
// as two STARPU_VALUE arguments and without.
func TestInsertStarPUExample(t *testing.T) {
	rt := start(t, withKernels(insertKernels...))
	testCodelet := func(codelet *core.Codelet, taskInsert, args bool, x int32, f float32) bool {
		xx, ff := x, f
		var dataHandles [2]*core.Handle
		var err error
		if dataHandles[0], err = core.RegisterVariable(rt, &xx); err != nil {
			t.Fatal(err)
		}
		if dataHandles[1], err = core.RegisterVariable(rt, &ff); err != nil {
			t.Fatal(err)
		}
		t.Logf("values: %d (%d) %f (%f)", xx, insertIFactor, ff, insertFFactor)
		if taskInsert {
			if args {
				_, err = rt.Insert(codelet,
					core.Value(insertIFactor),
					core.Value(insertFFactor),
					core.Data(core.RW, dataHandles[0]), core.Data(core.RW, dataHandles[1]))
			} else {
				_, err = rt.Insert(codelet,
					core.Data(core.RW, dataHandles[0]), core.Data(core.RW, dataHandles[1]))
			}
			if err != nil {
				t.Fatalf("Insert: %v", err)
			}
		} else {
			var task *core.Task
			if args {
				task, err = rt.BuildTask(codelet,
					core.Value(insertIFactor),
					core.Value(insertFFactor),
					core.Data(core.RW, dataHandles[0]), core.Data(core.RW, dataHandles[1]))
			} else {
				task, err = rt.BuildTask(codelet,
					core.Data(core.RW, dataHandles[0]), core.Data(core.RW, dataHandles[1]))
			}
			if err != nil {
				t.Fatalf("BuildTask: %v", err)
			}
			if err := rt.Submit(task); err != nil {
				t.Fatalf("Submit: %v", err)
			}
		}
		for i := 0; i < 2; i++ {
			if err := dataHandles[i].Unregister(); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("values: %d (should be %d) %f (should be %f)", xx, x*insertIFactor, ff, f*insertFFactor)
		return xx == x*insertIFactor && ff == f*insertFFactor
	}

	ret := testCodelet(mycodeletArgs, true, true, 4, 2.0)
	if ret {
		ret = testCodelet(mycodeletNoargs, true, false, 9, 7.0)
	}
	if ret {
		ret = testCodelet(mycodeletArgs, false, true, 5, 3.0)
	}
	if ret {
		ret = testCodelet(mycodeletNoargs, false, false, 7, 5.0)
	}
	if !ret {
		t.Fatal("a task computed the wrong values")
	}
}

// TestInsertOptions: each option lands in its Task field, and the task runs
// with them: packed values reach the kernel, the worker is the one asked,
// the callbacks get their arguments, the tag is notified.
func TestInsertOptions(t *testing.T) {
	rt := start(t, withKernels(insertKernels...))
	out := make([]float64, 3)
	h, err := core.RegisterVector(rt, out)
	if err != nil {
		t.Fatal(err)
	}
	prologue := make(chan string, 1)
	callback := make(chan int, 1)
	task, err := rt.Insert(probeCl,
		core.Data(core.W, h),
		core.Value("probe", []float64{1, 2, 3}),
		core.Value(probeParams{Scale: 2, steps: [2]int16{1, 2}}),
		core.Priority(7), core.Name("probe-task"), core.Flops(1e6),
		core.Tag(42), core.ExecuteOnWorker(1), core.WorkerOrder(1),
		core.ExecuteWhere(core.WhereCPU), core.SchedCtx(rt.GlobalSchedContext()),
		core.PossiblyParallel(false),
		core.PrologueWithArg(func(s string) { prologue <- s }, "pro"),
		core.CallbackWithArg(func(n int) { callback <- n }, 5))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.TagWait(42); err != nil {
		t.Fatalf("TagWait: %v", err)
	}
	if err := rt.Wait(task); err != nil {
		t.Fatal(err)
	}
	if s, n := <-prologue, <-callback; s != "pro" || n != 5 {
		t.Errorf("prologue got %q, callback %d; want pro, 5", s, n)
	}
	if task.Priority != 7 || task.Name != "probe-task" || task.Flops != 1e6 || task.Tag != 42 || !task.UseTag ||
		!task.ExecuteOnWorker || task.Worker != 1 || task.WorkerOrder != 1 || task.Where != core.WhereCPU ||
		task.SchedContext != rt.GlobalSchedContext() || task.Synchronous || task.NoSequentialConsistency {
		t.Errorf("task fields: %+v", *task)
	}
	if err := h.Unregister(); err != nil {
		t.Fatal(err)
	}
	if out[0] != 1 || out[1] != 12 || out[2] != 5 {
		t.Errorf("kernel wrote %v, want [1 12 5] (worker 1, (1+2+3)*2, len(probe))", out)
	}

	// The last of two options that set one field wins, as in StarPU.
	b, err := rt.BuildTask(nil, core.Tag(1), core.TagOnly(9), core.ExecuteOnWorker(1), core.ExecuteOnWorker(-1),
		core.SequentialConsistency(false), core.Callback(func(*core.Task) {}), core.CallbackWithArg[int](nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	if b.Tag != 9 || b.UseTag || b.ExecuteOnWorker || b.Worker != 0 || !b.NoSequentialConsistency || b.Callback != nil {
		t.Errorf("built task: %+v", *b)
	}

	// Synchronous: Insert returns once the task has completed.
	var ran bool
	task, err = rt.Insert(nil, core.Synchronous(true), core.Callback(func(*core.Task) { ran = true }))
	if err != nil || !ran || task.Status() != core.StatusFinished {
		t.Errorf("synchronous Insert: %v, callback ran %v, status %v", err, ran, task.Status())
	}

	// A kernel that unpacks other types than were packed fails the task,
	// naming the argument.
	h, _ = core.RegisterVector(rt, out)
	_, err = rt.Insert(probeCl, core.Data(core.W, h), core.Value("probe", []float32{1}, probeParams{}), core.Synchronous(true))
	if !errors.Is(err, core.ErrTaskFailed) || !strings.Contains(err.Error(), "argument 1 was packed as []float32, Unpack asks for []float64") {
		t.Errorf("mismatched Value: %v", err)
	}
}

// TestInsertDataArrays: DataArray takes the codelet's modes, DataModeArray
// gives them to a codelet with VariableBuffers, and both mix with Data;
// ClArgs passes the CPU driver's own argument encoding.
func TestInsertDataArrays(t *testing.T) {
	rt := start(t, withKernels())
	x := []float64{1, 2, 3}
	y := []float64{10, 20, 30}
	hx, _ := core.RegisterVector(rt, x)
	hy, _ := core.RegisterVector(rt, y)
	axpyVar := &core.Codelet{Name: "axpy-var", Kernels: map[core.Arch]string{core.CPU: blasarg.AxpyF64}, NBuffers: core.VariableBuffers}

	if _, err := rt.Insert(axpyF64, core.DataArray(hx, hy), core.ClArgs(blasarg.AxpyArg{Alpha: 2}.Encode())); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Insert(axpyF64, core.Data(core.R, hx), core.DataArray(hy), core.ClArgs(blasarg.AxpyArg{Alpha: 1}.Encode())); err != nil {
		t.Fatal(err)
	}
	task, err := rt.Insert(axpyVar, core.DataModeArray(core.DataDescr{Handle: hx, Mode: core.R}, core.DataDescr{Handle: hy, Mode: core.RW}),
		core.ClArgs(blasarg.AxpyArg{Alpha: 4}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Modes) != 2 || task.Modes[0] != core.R || task.Modes[1] != core.RW {
		t.Errorf("variable-buffer task's modes: %v, want [R RW]", task.Modes)
	}
	if err := hy.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := hx.Unregister(); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		if want := float64(10*(i+1)) + 7*x[i]; y[i] != want {
			t.Errorf("y[%d] = %v, want %v", i, y[i], want)
		}
	}
}

// TestInsertHandlesSequentialConsistency: a false flag frees the task from
// the order of that handle only.
func TestInsertHandlesSequentialConsistency(t *testing.T) {
	gate, openGate := newGate()
	rt := start(t, withKernels(gateKernel("insert_gate", gate)))
	t.Cleanup(openGate)
	g, _ := core.RegisterVector(rt, []float64{0})
	h, _ := core.RegisterVector(rt, []float64{0})
	gateCl := &core.Codelet{Name: "gate", Modes: []core.Mode{core.W}, Kernels: map[core.Arch]string{core.CPU: "insert_gate"}}
	readWrite := &core.Codelet{Name: "read-g-write-h", Modes: []core.Mode{core.R, core.RW}, Kernels: map[core.Arch]string{core.CPU: blasarg.Empty}}
	read := &core.Codelet{Name: "read-h", Modes: []core.Mode{core.R}, Kernels: map[core.Arch]string{core.CPU: blasarg.Empty}}

	// The gate blocks worker 0; the readers run on worker 1, so that only
	// their dependencies, not a queue behind the gate, can hold them.
	if _, err := rt.Insert(gateCl, core.Data(core.W, g), core.ExecuteOnWorker(0)); err != nil {
		t.Fatal(err)
	}
	// a writes h once the gate task is done with g.
	if _, err := rt.Insert(readWrite, core.Data(core.R, g), core.Data(core.RW, h)); err != nil {
		t.Fatal(err)
	}
	free := make(chan struct{})
	ordered := make(chan struct{})
	if _, err := rt.Insert(read, core.Data(core.R, h), core.HandlesSequentialConsistency(false), core.ExecuteOnWorker(1),
		core.Callback(func(*core.Task) { close(free) })); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Insert(read, core.Data(core.R, h), core.HandlesSequentialConsistency(true), core.ExecuteOnWorker(1),
		core.Callback(func(*core.Task) { close(ordered) })); err != nil {
		t.Fatal(err)
	}
	select {
	case <-free:
	case <-time.After(5 * time.Second):
		t.Fatal("the reader without sequential consistency on h waited for the writer before it")
	}
	select {
	case <-ordered:
		t.Fatal("the ordered reader ran before the writer before it")
	case <-time.After(20 * time.Millisecond):
	}
	openGate()
	if err := rt.WaitForAll(); err != nil {
		t.Fatal(err)
	}
	<-ordered
}

// TestInsertDeps: TaskDeps, TaskEndDeps and TaskEndDep declare StarPU's
// task dependencies at build time.
func TestInsertDeps(t *testing.T) {
	rt := start(t, withKernels())
	var rec recorder
	a, err := rt.BuildTask(emptyCl, core.Name("a"), core.Callback(rec.cb("a")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := rt.Insert(emptyCl, core.Name("b"), core.TaskDeps(a), core.Callback(rec.cb("b")))
	if err != nil {
		t.Fatal(err)
	}
	c, err := rt.Insert(emptyCl, core.Name("c"), core.TaskEndDep(1), core.Callback(rec.cb("c")))
	if err != nil {
		t.Fatal(err)
	}
	d, err := rt.Insert(nil, core.Name("d"), core.TaskEndDeps(b), core.Callback(rec.cb("d")))
	if err != nil {
		t.Fatal(err)
	}
	waitB := notDone(t, "Wait(b) before a is submitted", func() error { return rt.Wait(b) })
	waitC := notDone(t, "Wait(c) before its end dependency is released", func() error { return rt.Wait(c) })
	waitD := notDone(t, "Wait(d) before b terminated", func() error { return rt.Wait(d) })
	submit(t, rt, a)
	done(t, "Wait(b)", waitB)
	done(t, "Wait(d)", waitD)
	if err := rt.EndDepRelease(c); err != nil {
		t.Fatal(err)
	}
	done(t, "Wait(c)", waitC)
	if got := strings.Join(rec.get(), " "); !strings.HasPrefix(got, "a b") {
		t.Errorf("callbacks ran in order %q: want b after a", got)
	}
}

// TestInsertRefused: an option core cannot honour, or that contradicts the
// codelet or another option, is an error naming it, and nothing is
// submitted.
func TestInsertRefused(t *testing.T) {
	rt := start(t, withKernels())
	x, _ := core.RegisterVector(rt, []float64{1, 2})
	y, _ := core.RegisterVector(rt, []float64{1, 2})
	unordered, _ := core.RegisterVector(rt, []float64{1, 2})
	unordered.SetSequentialConsistency(false)
	sum, _ := core.RegisterVector(rt, []float64{0, 0})
	if err := sum.SetReductionMethods(addF64Cl, zeroCl); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		cl          *core.Codelet
		args        []core.InsertArg
		unsupported bool     // wraps errors.ErrUnsupported too
		submitted   bool     // refused by Submit, after the build
		msg         []string // what the error says
	}{
		{"mode differs from the codelet's", axpyF64, []core.InsertArg{core.Data(core.R, x), core.Data(core.R, y)}, false, false,
			[]string{`codelet "axpy"`, "handle 1", "given mode R", "buffer 1 has mode RW"}},
		{"locality the codelet lacks", axpyF64, []core.InsertArg{core.Data(core.R|core.Locality, x), core.Data(core.RW, y)}, false, false,
			[]string{"handle 0", "buffer 0 has mode R"}},
		{"too many handles", axpyF64, []core.InsertArg{core.DataArray(x, y, x)}, false, false,
			[]string{"takes 2 buffers, 3 handles given"}},
		{"DataArray with variable buffers", emptyVar, []core.InsertArg{core.Data(core.R, x), core.DataArray(y)}, false, false,
			[]string{"handle 1 comes from DataArray", "VariableBuffers"}},
		{"invalid mode", emptyVar, []core.InsertArg{core.Data(core.Scratch|core.Commute, x)}, false, false,
			[]string{"argument 0 (Data)", "handle 0", "not one core has"}},
		{"mode 0", emptyVar, []core.InsertArg{core.DataModeArray(core.DataDescr{Handle: x})}, false, false,
			[]string{"argument 0 (DataModeArray)", "handle 0: mode 0"}},
		{"nil handle", axpyF64, []core.InsertArg{core.DataArray(x, nil)}, false, false,
			[]string{"argument 0 (DataArray)", "handle 1 is nil"}},
		{"nil option", emptyCl, []core.InsertArg{core.Name("n"), nil}, false, false,
			[]string{"Insert argument 1 is nil"}},
		{"Value after ClArgs", emptyCl, []core.InsertArg{core.ClArgs([]byte{1}), core.Value(1)}, false, false,
			[]string{"argument 1 (Value)", "Value after ClArgs"}},
		{"ClArgs after Value", emptyCl, []core.InsertArg{core.Value(1), core.ClArgs([]byte{1})}, false, false,
			[]string{"argument 1 (ClArgs)", "ClArgs after Value"}},
		{"unpackable Value", emptyCl, []core.InsertArg{core.Value(1, make(chan int))}, false, false,
			[]string{"argument 0 (Value)", "value 1", "chan int"}},
		{"prologue on pop", emptyCl, []core.InsertArg{core.ProloguePop(func(*core.Task) {})}, true, false,
			[]string{"argument 0 (ProloguePop)", "STARPU_PROLOGUE_CALLBACK_POP"}},
		{"execute on node", emptyCl, []core.InsertArg{core.Name("n"), core.ExecuteOnNode(1)}, true, false,
			[]string{"argument 1 (ExecuteOnNode)", "MPI"}},
		{"possibly parallel", emptyCl, []core.InsertArg{core.PossiblyParallel(true)}, true, false,
			[]string{"STARPU_POSSIBLY_PARALLEL"}},
		{"handles consistency count", axpyF64, []core.InsertArg{core.DataArray(x, y), core.HandlesSequentialConsistency(true)}, false, false,
			[]string{"1 flags for 2 handles"}},
		{"handles consistency on an unordered handle", emptyRW, []core.InsertArg{core.Data(core.RW, unordered), core.HandlesSequentialConsistency(true)}, false, false,
			[]string{"orders handle 0", "own sequential consistency is off"}},
		{"handles consistency against the task's", emptyRW, []core.InsertArg{core.Data(core.RW, x), core.SequentialConsistency(false), core.HandlesSequentialConsistency(true)}, false, false,
			[]string{"orders handle 0", "SequentialConsistency(false)"}},
		{"handles without codelet", nil, []core.InsertArg{core.Data(core.RW, x)}, false, false,
			[]string{"without a codelet takes no handles"}},
		{"no end dependency", emptyCl, []core.InsertArg{core.TaskEndDep(0)}, false, false,
			[]string{"argument 0 (TaskEndDep)", "0 end dependencies"}},
		{"nil predecessor", emptyCl, []core.InsertArg{core.TaskDeps(nil)}, false, false,
			[]string{"TaskDeps", "predecessor 0 is nil"}},
		{"REDUX unordered", contribute, []core.InsertArg{core.Data(core.Redux, sum), core.Data(core.R, x), core.HandlesSequentialConsistency(false, true)}, false, true,
			[]string{"buffer 0", "REDUX needs sequential consistency"}},
		{"priority out of range", emptyCl, []core.InsertArg{core.Priority(core.MaxPriority + 1)}, false, true,
			[]string{"priority"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			task, err := rt.Insert(c.cl, c.args...)
			if !errors.Is(err, core.ErrInvalidTask) {
				t.Fatalf("Insert = %v, want ErrInvalidTask", err)
			}
			if errors.Is(err, errors.ErrUnsupported) != c.unsupported {
				t.Errorf("errors.Is(%v, errors.ErrUnsupported) = %v", err, !c.unsupported)
			}
			if (task != nil) != c.submitted {
				t.Errorf("Insert returned task %v with %v", task, err)
			}
			for _, m := range c.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
			if _, berr := rt.BuildTask(c.cl, c.args...); (berr == nil) != c.submitted {
				t.Errorf("BuildTask = %v", berr)
			}
		})
	}
	if n := rt.NSubmitted(); n != 0 {
		t.Errorf("%d tasks submitted, want none", n)
	}
	if _, err := rt.Insert(emptyCl, core.Value(kernel.ErrArgType)); !errors.Is(err, kernel.ErrArgType) {
		t.Errorf("Insert of an interface value: %v, want kernel.ErrArgType", err)
	}
}
