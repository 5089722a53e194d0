//go:build !amd64

package shm

// cpuPause is a no-op where no spin-hint instruction is wired up; the spin
// loops still yield to the scheduler periodically.
func cpuPause() {}
