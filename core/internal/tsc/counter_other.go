//go:build !amd64

package tsc

// counter is never called where there is no counter to read (hasCounter).
func counter() uint64 { return 0 }

// hasCounter says the architecture has a counter this package reads.
const hasCounter = false
