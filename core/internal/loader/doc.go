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
package loader
