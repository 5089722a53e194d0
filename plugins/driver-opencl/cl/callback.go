package cl

// #include <stdint.h>
// #include <CL/cl.h>
// cl_int starpuSetEventDone(cl_event e, uintptr_t tag);
import "C"

import (
	"errors"
	"sync"
)

// A Sink receives the completions of events: OnComplete registers an event
// with a tag, and when the command finishes OpenCL calls the sink's function
// with the tag and the command's final status (Complete, or its negative
// error), on a thread of its own. The function must be quick and must not
// call OpenCL's blocking functions: signal a waiting goroutine and return.
type Sink struct {
	id uint64
	fn func(tag uint64, status int32)
}

// sinkBits is how many high bits of the C callback's tag name the sink;
// the rest carry the caller's tag.
const (
	sinkBits = 16
	tagBits  = 64 - sinkBits
	// MaxTag is the largest tag OnComplete accepts.
	MaxTag = 1<<tagBits - 1
)

var (
	sinksMu sync.RWMutex
	sinks   = map[uint64]*Sink{}
	nextID  uint64
)

// NewSink registers fn to receive completions. Close it once no registered
// event is pending.
func NewSink(fn func(tag uint64, status int32)) (*Sink, error) {
	sinksMu.Lock()
	defer sinksMu.Unlock()
	if len(sinks) >= 1<<sinkBits-1 {
		return nil, errors.New("cl: too many event sinks open")
	}
	for {
		nextID = (nextID + 1) & (1<<sinkBits - 1)
		if _, used := sinks[nextID]; !used && nextID != 0 {
			break
		}
	}
	s := &Sink{id: nextID, fn: fn}
	sinks[s.id] = s
	return s, nil
}

// Close unregisters the sink; a completion still arriving for it is
// dropped.
func (s *Sink) Close() {
	sinksMu.Lock()
	delete(sinks, s.id)
	sinksMu.Unlock()
}

// OnComplete has s receive tag when the command of e finishes (tag <=
// MaxTag).
func (e Event) OnComplete(s *Sink, tag uint64) error {
	if tag > MaxTag {
		return &Error{Call: "clSetEventCallback", Code: int32(C.CL_INVALID_VALUE)}
	}
	return check("clSetEventCallback", C.starpuSetEventDone(e.e, C.uintptr_t(s.id<<tagBits|tag)))
}

//export goEventDone
func goEventDone(tag C.uintptr_t, status C.cl_int) {
	t := uint64(tag)
	sinksMu.RLock()
	s := sinks[t>>tagBits]
	sinksMu.RUnlock()
	if s != nil {
		s.fn(t&MaxTag, int32(status))
	}
}
