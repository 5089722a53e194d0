package loader

import (
	"runtime"
	"sync"
)

// The kernel delivers a child's Pdeathsig when the *thread* that forked it
// exits, not the process (golang/go#27505), and the Go runtime ends a thread
// when a goroutine locked to it returns without unlocking. Plugin processes
// are therefore forked from one goroutine locked for good to its thread,
// which lives as long as the core. Forks are serialised by it (a fork takes
// a millisecond); the handshakes that follow run side by side.
var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

// onSpawnThread runs f on the spawn thread and waits for it.
func onSpawnThread(f func()) {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must not exit
			for f := range spawnCh {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawnCh <- func() {
		defer close(done)
		f()
	}
	<-done
}
