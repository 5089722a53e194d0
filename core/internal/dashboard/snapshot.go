package dashboard

import "time"

// Snapshot is what the runtime looks like at one moment: what
// /api/snapshot answers, as JSON. The runtime fills it (core's
// stats_dashboard.go); the server adds the rates (Tasks.Throughput,
// Worker.Busy), which need the previous snapshot.
type Snapshot struct {
	// Time is when the snapshot was taken; UptimeS the seconds since
	// Init.
	Time    time.Time `json:"time"`
	UptimeS float64   `json:"uptime_s"`
	// Sched is the global scheduling policy.
	Sched string `json:"sched"`
	// Stopping: Shutdown has begun.
	Stopping bool `json:"stopping"`
	// Engine is "ok", or why the per-worker queues, the contexts' queues
	// and the device memory are missing from this snapshot (the engine
	// did not answer in time).
	Engine string `json:"engine"`
	// Walked of the Tracked tasks pushed to a scheduler and not completed
	// were counted in the queues (Worker.Queued, Context.Queued and
	// Assigned, Worker.Current): past a bound the walk stops, and those
	// counts are lower bounds.
	Walked   int       `json:"walked"`
	Tracked  int       `json:"tracked"`
	Tasks    Tasks     `json:"tasks"`
	Workers  []Worker  `json:"workers"`
	Contexts []Context `json:"contexts"`
	Nodes    []Node    `json:"nodes"`
	Plugins  []Plugin  `json:"plugins"`
}

// Tasks counts the runtime's tasks.
type Tasks struct {
	// Pending counts the tasks submitted and not completed; Ready those
	// pushed to a scheduler (their dependencies met) and not completed.
	Pending int64 `json:"pending"`
	Ready   int64 `json:"ready"`
	// Done counts the tasks executed on workers since Init.
	Done int64 `json:"done"`
	// Throughput is tasks done per second over the last IntervalS
	// seconds (since the previous snapshot); 0 in the first one.
	Throughput float64 `json:"throughput"`
	IntervalS  float64 `json:"interval_s"`
}

// Worker is one worker.
type Worker struct {
	ID     int    `json:"id"`
	Name   string `json:"name"`
	Arch   string `json:"arch"`
	Node   int    `json:"node"`
	Driver string `json:"driver"`
	// Pid is the driver plugin's process, 0 in process.
	Pid int `json:"pid"`
	// State is "busy" (it holds tasks), "idle", "restarting" (its driver
	// plugin died and is starting again) or "dead".
	State string `json:"state"`
	// Current is the codelet of the oldest task the worker holds: the
	// one running, or the next to run once its data is in place.
	Current string `json:"current"`
	// Queued counts the tasks assigned to the worker and not completed,
	// the running one included.
	Queued int `json:"queued"`
	// Done counts the tasks it executed; ExecNs their execution time.
	Done   int64 `json:"done"`
	ExecNs int64 `json:"exec_ns"`
	// Busy is the fraction of the last interval the worker spent
	// executing, counted when tasks complete (a task longer than the
	// interval shows in the one it completes in), 0 to 1.
	Busy float64 `json:"busy"`
}

// Context is one scheduling context.
type Context struct {
	ID      int    `json:"id"`
	Name    string `json:"name"`
	Policy  string `json:"policy"`
	Workers []int  `json:"workers"`
	// Pending counts the tasks submitted to the context and not
	// finished (to the global context: those submitted to no other);
	// Queued those its policy holds, not yet assigned to a worker;
	// Assigned those assigned and not completed.
	Pending  int64 `json:"pending"`
	Queued   int   `json:"queued"`
	Assigned int   `json:"assigned"`
	// State is "ok", "restarting" or "broken: why".
	State string `json:"state"`
}

// Node is one memory node.
type Node struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
	// Kind is "RAM" or the device's description.
	Kind string `json:"kind"`
	// Used and Capacity are bytes: on RAM the shared-memory arena's data
	// heap, on a device its memory as the driver reported it (Used
	// includes Cached, freed allocations kept for reuse).
	Used     uint64 `json:"used"`
	Capacity uint64 `json:"capacity"`
	Cached   uint64 `json:"cached"`
	// Replicates counts the data replicates allocated on a device node;
	// on RAM, the registered handles.
	Replicates int `json:"replicates"`
}

// Plugin is one plugin: a driver, a scheduling policy instance or a data
// interface.
type Plugin struct {
	// Name is the plugin's ("driver-cpu"); Kind "driver", "sched" or
	// "iface"; Context the scheduling context a policy serves.
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Context string `json:"context,omitempty"`
	// Pid is the process, 0 in process or when none runs.
	Pid int `json:"pid"`
	// State says what the plugin is doing: "running", "in process",
	// "restarting", "exited", "no device", "not started".
	State string `json:"state"`
	// Health is "ok" (running and beating), "off" (not running, and the
	// runtime runs without it: no device, or a device driver that could
	// not start) or "failed" (it died or stopped beating).
	Health string `json:"health"`
	// Restarts counts the times it was started again after dying.
	Restarts int `json:"restarts"`
	// HeartbeatAgeMs is how old its last heartbeat is, -1 when it has
	// none (in process, or no heartbeat slot).
	HeartbeatAgeMs float64 `json:"heartbeat_age_ms"`
	// Error says how it failed, if it did.
	Error string `json:"error,omitempty"`
}
