// Package core is the runtime applications import: codelets, tasks, data
// handles, implicit and explicit dependencies, and the machinery that hands
// ready tasks to a scheduler plugin and runs them on driver plugins.
//
// A minimal program:
//
//	rt, err := core.Init(ctx, core.Options{})
//	x := []float32{1, 2, 3}
//	h, err := core.RegisterVector(rt, x)
//	scal := &core.Codelet{Name: "scal", Kernels: map[core.Arch]string{core.CPU: "scal_f32"},
//		Modes: []core.Mode{core.RW}}
//	err = rt.Submit(&core.Task{Codelet: scal, Handles: []*core.Handle{h},
//		Arg: blasarg.ScalArg{Alpha: 2}.Encode(), Synchronous: true})
//	err = h.Unregister() // x is now {2, 4, 6}
//	err = rt.Shutdown()
//
// # A tour by task
//
// Start and stop: [Init] with [Options] (a config file, STARPU_*
// variables, or a config.Config) starts the plugins; [Runtime.Shutdown]
// waits for the tasks, writes the data back and stops them. Keep CPU
// workers to run on the application's own threads with
// [Options].NotLaunchedDrivers and [Runtime.RunDriver] or
// [Runtime.DriverRunOnce].
//
// Describe work: a [Codelet] names a kernel per architecture ([CPU],
// [CUDA], [OpenCL]) and the [Mode] of each buffer; a [Task] gives it
// handles, an argument, a priority, tags and callbacks.
// [Runtime.Submit] queues it; [Runtime.Wait], [Runtime.WaitForAll] and
// [Task.Err] report how it ended. [Runtime.Insert] builds and submits a
// task from options ([Data], [Value], [Priority], ...), as
// starpu_task_insert does; kernels read what [Value] packs with
// kernel.Unpack.
//
// Order work: data accesses order tasks implicitly (sequential
// consistency, per handle: [Handle.SetSequentialConsistency]); add
// [Runtime.DeclareDeps], end dependencies ([Runtime.DeclareEndDeps]), tags
// ([Runtime.DeclareTagDeps], [Runtime.TagWait]) and arbiters
// ([Runtime.NewArbiter]) for the rest.
//
// Register data: [RegisterVector], [RegisterMatrix], [RegisterBlock],
// [RegisterVariable], [RegisterMultiformat] (a layout per architecture),
// [Runtime.RegisterInterface] (a data interface plugin) and [Malloc] for
// arena memory ([PtrRegister] gives it to data registered without home);
// [Handle.Acquire] and [Handle.Release] to read it from Go between tasks;
// [Handle.Unregister] to get it back. Split it with [Handle.Partition]
// or, asynchronously, [Handle.Plan]; reduce into it with
// [Handle.SetReductionMethods].
//
// Move data ahead of time: [Handle.PrefetchOnNode],
// [Handle.FetchOnNodeAsync], [Handle.WontUse]; see where it is with
// [Handle.QueryStatus], [Handle.InterfaceOn] and [Runtime.MemoryNodes];
// give cached device memory back with [Runtime.TidyMemory]; measure the
// links between nodes again, for transfer predictions, with
// [Runtime.CalibrateBus].
//
// Divide the machine: [Runtime.CreateSchedContext] gives a set of workers
// its own policy; [Runtime.Workers] lists them, [Runtime.CombinedWorkers]
// the teams of them that parallel tasks (Codelet.Type [SPMD] or
// [ForkJoin]) may run on.
//
// Observe: $STARPU_TRACE or [Options].TraceFile (a trace file, read back
// with [ReadTraceFile]), [Runtime.WriteTrace] (Chrome trace),
// [Runtime.Profiling], [Runtime.CodeletStats], [Runtime.DriverNotes],
// [Runtime.ProbePlugins]; a live dashboard in a browser while it runs
// ([Options].Dashboard or $STARPU_DASHBOARD, [Runtime.DashboardAddr]).
//
// Survive faults: [ErrPluginCrashed], [ErrDataLost] and [Handle.Lost];
// plugins that die are restarted (config.Config.PluginRestarts) and tasks
// retried when that cannot give a wrong result ([Codelet.Retryable]).
//
// # Where things live
//
// The package is one package (its subsystems share the task and handle
// state too closely for a split to be more than the same package with
// capital letters); its files are grouped by prefix, as the Go runtime's
// are:
//
//	concept                        files                         design note
//	-----------------------------  ----------------------------  ----------------------------
//	Init, Options, Shutdown        runtime.go                    docs/design/plugins.md
//	introspection                  runtime_introspect.go         docs/user-guide.md
//	tasks: submit, wait, complete  task.go                       docs/design/tasks.md
//	codelets, implementations      task_codelet.go               docs/design/tasks.md
//	task insert, its options       task_insert.go                docs/user-guide.md
//	explicit and end dependencies  task_deps.go (header)         docs/design/tasks.md
//	tags                           task_tags.go                  docs/design/tasks.md
//	tasks queued behind their pred task_chain.go (header)        docs/design/hot-path.md
//	parallel tasks on teams       task_parallel.go (header)     docs/design/scheduling.md
//	status, profiling, iterations  task_status.go                docs/design/tasks.md
//	performance models             task_models.go, perfmodel/    docs/design/perfmodel.md
//	tracing, STARPU_*_STATS hooks  task_trace.go                 docs/design/tracing.md
//	statistics printed at Shutdown stats_shutdown.go             docs/design/tracing.md
//	live dashboard: snapshots      stats_dashboard.go            docs/design/tracing.md
//	live dashboard: server, page   internal/dashboard/           docs/design/tracing.md
//	trace files read back          trace_file.go                 docs/design/tracing.md
//	trace formats, analysis, views internal/trace/               docs/design/tracing.md
//	the submit records' clock      internal/tsc/                 docs/design/tracing.md
//	handles, register, unregister  data.go                       docs/design/access.md
//	access order, locks, arbiters  data_access.go                docs/design/access.md
//	acquire, callbacks             data_acquire.go               docs/design/access.md
//	handle metadata, pack          data_info.go                  docs/design/interfaces.md
//	lost data                      data_lost.go                  docs/design/plugins.md
//	reductions, scratch            data_redux.go                 docs/design/access.md
//	partitioning, plans            data_partition*.go            docs/design/memory.md
//	built-in filters' arithmetic   internal/filter/              docs/design/memory.md
//	interface plugins              data_iface*.go                docs/design/interfaces.md
//	multiformat data, conversions  data_multiformat.go           docs/design/memory.md
//	memory nodes                   mem_nodes.go                  docs/design/memory.md
//	coherency, transfers, eviction mem_coherency.go              docs/design/memory.md
//	prefetch and data requests     mem_requests.go               docs/design/memory.md
//	bus measurements               mem_bus.go                    docs/design/perfmodel.md
//	the engine's round             engine.go (header)            docs/design/hot-path.md
//	the engine's mailboxes         engine_mailbox.go             docs/design/hot-path.md
//	scheduling contexts            sched_context.go              docs/design/scheduling.md
//	scheduler restart              sched_restart.go (header)     docs/design/plugins.md
//	heartbeats, watchdog           plugin_health.go (header)     docs/design/plugins.md
//	driver restart, task retry,    plugin_restart.go (header)    docs/design/plugins.md
//	completion fence, Faults
//	errors                         errors.go                     docs/user-guide.md
//	configuration                  config/                       docs/user-guide.md
//	plugin processes               internal/loader/              docs/design/plugins.md
//	plugin search path             plugin_search.go              docs/design/plugins.md
//	application as its CPU driver  plugin_kernelhost.go (header) docs/design/plugins.md
//	application-driven workers     plugin_appdriven.go (header)  docs/design/plugins.md
//	accessors for core/mpi         mpi_access.go                 docs/design/mpi.md
//	StarPU-MPI over OpenMPI        mpi/ (its own package)        docs/design/mpi.md
//
// Tests are named for what they test (data_access_test.go tests
// data_access.go); the in-package ones end in _internal_test.go.
//
// # Ownership
//
// engine.go's header is the reference; in short: the engine goroutine
// owns replicate state, transfers and device memory, and other goroutines
// hand it work through engine_mailbox.go; a scheduling context's mu
// serialises the producers of its events ring; job.mu guards a task's
// dependencies, Handle.mu a handle's access order, taken handle first.
// Plugins own what lies on their side of a ring; the core never trusts a
// value they write without checking it.
//
// The Runtime's own state is grouped by subsystem: what is set at Init and
// read-only after sits at the top of the struct; each subsystem's mutable
// state is one field of its own type (ctxTable, codeletTable, modelTable,
// waitState, tagTable, iterTable, orderTable, handleSet, ifaceTable,
// restartState, ...), declared in that subsystem's file, whose doc comment
// names the lock that guards what. Lock order: ctxs.mu and ifaces.mu come
// first (they are held while a plugin starts); the other subsystem locks
// are held briefly, and only per-object locks (tagState.mu, job.mu,
// Handle.mu) are taken under them.
package core
