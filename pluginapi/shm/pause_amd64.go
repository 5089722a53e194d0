package shm

// cpuPause executes the PAUSE instruction: it tells the core this is a spin
// loop, which saves power and frees execution resources for a hyper-thread
// sibling, and avoids the memory-order mis-speculation penalty on loop exit.
func cpuPause()
