// Package wire defines the binary messages of the hot path: what travels on
// the shared-memory rings between the core, the scheduler and the drivers.
// They are fixed little-endian layouts, not protobuf, because one dependency
// hop crosses four rings and each message must cost nanoseconds to encode.
//
// Events ring (core to scheduler): Push and Done.
// Decisions ring (scheduler to core): Assign.
// Dispatch ring (core to worker): Exec.
// Completion ring (worker to core): Completion.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/kernel"
)

var le = binary.LittleEndian

// Message types, the first 4 bytes of every message.
const (
	TypePush uint32 = iota + 1
	TypeDone
	TypeAssign
	TypeExec
	TypeCompletion
)

// Sizes of the fixed-size messages and parts.
const (
	PushSize       = 32
	DoneSize       = 24
	AssignSize     = 16
	ExecHeaderSize = 24
	BufferDescSize = 56
	CompletionSize = 40
)

// ErrShort reports a message shorter than its type requires.
var ErrShort = errors.New("wire: short message")

// Type returns a message's type.
func Type(msg []byte) uint32 {
	if len(msg) < 4 {
		return 0
	}
	return le.Uint32(msg)
}

// Push tells the scheduler a task is ready.
type Push struct {
	ID         uint64
	Priority   int32
	ArchMask   uint32
	Worker     int32
	ReleasedBy int32
	Codelet    uint32
}

// Encode writes p into b (PushSize bytes).
func (p *Push) Encode(b []byte) {
	_ = b[PushSize-1]
	le.PutUint32(b[0:], TypePush)
	le.PutUint32(b[4:], uint32(p.Priority))
	le.PutUint64(b[8:], p.ID)
	le.PutUint32(b[16:], p.ArchMask)
	le.PutUint32(b[20:], uint32(p.Worker))
	le.PutUint32(b[24:], uint32(p.ReleasedBy))
	le.PutUint32(b[28:], p.Codelet)
}

// Decode reads p from b.
func (p *Push) Decode(b []byte) error {
	if len(b) < PushSize {
		return ErrShort
	}
	p.Priority = int32(le.Uint32(b[4:]))
	p.ID = le.Uint64(b[8:])
	p.ArchMask = le.Uint32(b[16:])
	p.Worker = int32(le.Uint32(b[20:]))
	p.ReleasedBy = int32(le.Uint32(b[24:]))
	p.Codelet = le.Uint32(b[28:])
	return nil
}

// Done tells the scheduler a task finished on a worker.
type Done struct {
	Worker     int32
	ID         uint64
	DurationNs int64
}

// Encode writes d into b (DoneSize bytes).
func (d *Done) Encode(b []byte) {
	_ = b[DoneSize-1]
	le.PutUint32(b[0:], TypeDone)
	le.PutUint32(b[4:], uint32(d.Worker))
	le.PutUint64(b[8:], d.ID)
	le.PutUint64(b[16:], uint64(d.DurationNs))
}

// Decode reads d from b.
func (d *Done) Decode(b []byte) error {
	if len(b) < DoneSize {
		return ErrShort
	}
	d.Worker = int32(le.Uint32(b[4:]))
	d.ID = le.Uint64(b[8:])
	d.DurationNs = int64(le.Uint64(b[16:]))
	return nil
}

// Assign is a scheduling decision: run task ID on Worker.
type Assign struct {
	Worker int32
	ID     uint64
}

// Encode writes a into b (AssignSize bytes).
func (a *Assign) Encode(b []byte) {
	_ = b[AssignSize-1]
	le.PutUint32(b[0:], TypeAssign)
	le.PutUint32(b[4:], uint32(a.Worker))
	le.PutUint64(b[8:], a.ID)
}

// Decode reads a from b.
func (a *Assign) Decode(b []byte) error {
	if len(b) < AssignSize {
		return ErrShort
	}
	a.Worker = int32(le.Uint32(b[4:]))
	a.ID = le.Uint64(b[8:])
	return nil
}

// BufferDesc locates one task buffer in the arena: where it starts and its
// shape. This is all a driver learns about the data.
type BufferDesc struct {
	Offset uint64
	Mode   kernel.Mode
	Layout kernel.Layout
}

// ExecSize is the size of an Exec message with n buffers and an argument of
// argLen bytes.
func ExecSize(n, argLen int) int { return ExecHeaderSize + n*BufferDescSize + argLen }

// Exec asks a worker to run a task. Buffers and Arg alias the message when
// decoded into a reused Exec.
type Exec struct {
	ID      uint64
	Kernel  uint32
	Buffers []BufferDesc
	Arg     []byte
}

// Encode writes e into b, which must be ExecSize(len(e.Buffers), len(e.Arg))
// bytes.
func (e *Exec) Encode(b []byte) {
	PutExecHeader(b, e.ID, e.Kernel, len(e.Buffers), len(e.Arg))
	p := b[ExecHeaderSize:]
	for i := range e.Buffers {
		EncodeBuffer(p, &e.Buffers[i])
		p = p[BufferDescSize:]
	}
	copy(p, e.Arg)
}

// EncodeBuffer writes one buffer descriptor (BufferDescSize bytes).
func EncodeBuffer(p []byte, d *BufferDesc) {
	_ = p[BufferDescSize-1]
	le.PutUint64(p[0:], d.Offset)
	p[8] = byte(d.Layout.Interface)
	p[9] = byte(d.Mode)
	p[10], p[11] = 0, 0
	le.PutUint32(p[12:], d.Layout.ElemSize)
	le.PutUint64(p[16:], d.Layout.NX)
	le.PutUint64(p[24:], d.Layout.NY)
	le.PutUint64(p[32:], d.Layout.NZ)
	le.PutUint64(p[40:], d.Layout.LD)
	le.PutUint64(p[48:], d.Layout.LDZ)
}

// Decode reads e from b, reusing e.Buffers' storage. e.Arg aliases b.
func (e *Exec) Decode(b []byte) error {
	if len(b) < ExecHeaderSize {
		return ErrShort
	}
	e.Kernel = le.Uint32(b[4:])
	e.ID = le.Uint64(b[8:])
	n := int(le.Uint32(b[16:]))
	argLen := int(le.Uint32(b[20:]))
	if len(b) < ExecSize(n, argLen) {
		return fmt.Errorf("wire: exec message of %d bytes for %d buffers and %d argument bytes: %w", len(b), n, argLen, ErrShort)
	}
	e.Buffers = e.Buffers[:0]
	p := b[ExecHeaderSize:]
	for i := 0; i < n; i++ {
		e.Buffers = append(e.Buffers, BufferDesc{
			Offset: le.Uint64(p[0:]),
			Mode:   kernel.Mode(p[9]),
			Layout: kernel.Layout{
				Interface: kernel.InterfaceID(p[8]),
				ElemSize:  le.Uint32(p[12:]),
				NX:        le.Uint64(p[16:]),
				NY:        le.Uint64(p[24:]),
				NZ:        le.Uint64(p[32:]),
				LD:        le.Uint64(p[40:]),
				LDZ:       le.Uint64(p[48:]),
			},
		})
		p = p[BufferDescSize:]
	}
	e.Arg = p[:argLen:argLen]
	return nil
}

// Completion reports a task's end on a worker.
type Completion struct {
	ID      uint64
	Failed  bool
	StartNs int64
	EndNs   int64
	// Err is the kernel's error message when Failed.
	Err []byte
}

// CompletionLen is the size of a Completion with an error of errLen bytes.
func CompletionLen(errLen int) int { return CompletionSize + errLen }

// Encode writes c into b (CompletionLen(len(c.Err)) bytes).
func (c *Completion) Encode(b []byte) {
	le.PutUint32(b[0:], TypeCompletion)
	var f uint32
	if c.Failed {
		f = 1
	}
	le.PutUint32(b[4:], f)
	le.PutUint64(b[8:], c.ID)
	le.PutUint64(b[16:], uint64(c.StartNs))
	le.PutUint64(b[24:], uint64(c.EndNs))
	le.PutUint32(b[32:], uint32(len(c.Err)))
	le.PutUint32(b[36:], 0)
	copy(b[CompletionSize:], c.Err)
}

// Decode reads c from b; c.Err aliases b.
func (c *Completion) Decode(b []byte) error {
	if len(b) < CompletionSize {
		return ErrShort
	}
	c.Failed = le.Uint32(b[4:]) != 0
	c.ID = le.Uint64(b[8:])
	c.StartNs = int64(le.Uint64(b[16:]))
	c.EndNs = int64(le.Uint64(b[24:]))
	n := int(le.Uint32(b[32:]))
	if len(b) < CompletionSize+n {
		return ErrShort
	}
	c.Err = b[CompletionSize : CompletionSize+n]
	return nil
}

// Now is CLOCK_MONOTONIC in nanoseconds: the same clock in every process of
// the machine, so workers' timestamps line up in one trace.
func Now() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// PutExecHeader writes an Exec message's header, for a producer that encodes
// the buffers and argument itself straight into the ring.
func PutExecHeader(b []byte, id uint64, kernel uint32, nbuffers, argLen int) {
	_ = b[ExecHeaderSize-1]
	le.PutUint32(b[0:], TypeExec)
	le.PutUint32(b[4:], kernel)
	le.PutUint64(b[8:], id)
	le.PutUint32(b[16:], uint32(nbuffers))
	le.PutUint32(b[20:], uint32(argLen))
}
