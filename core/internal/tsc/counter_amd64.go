package tsc

// counter reads the time-stamp counter (RDTSC).
func counter() uint64

// hasCounter says the architecture has a counter this package reads.
const hasCounter = true
