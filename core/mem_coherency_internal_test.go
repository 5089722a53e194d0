package core

// DeviceAllocations counts the allocations the runtime asked the device
// drivers for so far (those taken from a node's cache of freed ones not
// included), for the tests of the allocation cache.
func (rt *Runtime) DeviceAllocations() uint64 {
	var n uint64
	rt.engine.sync(func() { n = rt.engine.nextBuf })
	return n
}
