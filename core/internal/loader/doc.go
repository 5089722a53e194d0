// Package loader finds plugin binaries in the plugin directory and starts
// them as go-plugin processes: the core's side of the plugin boundary.
//
// A plugin binary is named "<kind>-<name>" ("driver-cpu", "sched-ws",
// "iface-csr"). Launch starts it with the shared-memory arena on file
// descriptor base.ArenaFD, checks the go-plugin handshake and the plugin's
// identity, and returns a Plugin whose Driver, Scheduler or Interface method
// gives the kind's Go interface, implemented by the kind's gRPC client
// adapter: the core cannot tell it from an in-process implementation.
//
// A plugin process dies with the core: the kernel sends it SIGKILL when the
// core dies (Pdeathsig, which is why plugins are forked from one OS thread
// that never exits), and base.ServeKind's watchdog exits it when its parent
// changes.
//
// The loader runs only trusted files (Discover and Launch refuse a plugin
// directory or binary that others than the current user or root could
// change: ErrUnsafePath) and contains what it runs: each plugin is the
// leader of a process group of its own, killed whole when the plugin exits
// or fails to start, so that nothing it started outlives it; Plugin.Kill
// is bounded (KillGrace, then SIGKILL, a stopped process included); the
// gRPC connection is mutually authenticated (go-plugin's AutoMTLS) over a
// unix socket in a directory private to the launch and removed with it;
// and the plugin gets an allow-listed part of the core's environment.
package loader
