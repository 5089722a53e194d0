// Package wire defines the binary messages of the hot path: what travels on
// the shared-memory rings between the core, the scheduler and the drivers.
// They are fixed little-endian layouts, not protobuf, because one dependency
// hop crosses four rings and each message must cost nanoseconds to encode.
//
// Events ring (core to scheduler): Push, Done and Workers.
// Decisions ring (scheduler to core): Assign, and Workers echoed back as the
// acknowledgement that the policy has applied a change of workers.
// Dispatch ring (core to worker): Exec, and for workers on a device memory
// node Alloc, Free, Copy and Parts.
// Scheduler ring (scheduler to worker, RAM workers whose driver reads it):
// Exec only. A Push flagged PushExec ends with the task's Exec, which the
// scheduler posts there itself instead of sending the core an Assign to
// dispatch: one ring crossing less per dependency hop.
// Completion ring (worker to core): Completion, for Exec, Alloc and Copy.
// A parallel task's Push and Exec carry a section more (parallel.go).
//
// A worker handles its dispatch ring in order as far as the data goes: an
// Exec or Copy that uses a buffer runs after the Alloc and the Copy posted
// before it on that buffer. It may overlap independent transfers and kernels.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
	_ "unsafe" // go:linkname

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
	TypeAlloc
	TypeFree
	TypeCopy
	TypeWorkers
	TypeParts
)

// Sizes of the fixed-size messages and parts.
const (
	PushHeaderSize = 64
	TransferSize   = 8
	DoneSize       = 24
	AssignSize     = 32
	ExecHeaderSize = 32
	BufferDescSize = 56
	CompletionSize = 56
	AllocSize      = 32
	FreeSize       = 16
	CopyHeaderSize = 40
	CopyRangeSize  = 24
	PartsHeader    = 24
	PartSize       = 16
	WorkersHeader  = 24
	WorkerSize     = 16
)

// Workers operations.
const (
	WorkersAdd    uint32 = 1
	WorkersRemove uint32 = 2
)

// NumArch is the number of architectures a Push carries predictions for,
// indexed as driver.ArchIndex numbers them: CPU, CUDA, OpenCL.
const NumArch = 3

// Push flags.
const (
	// PushLocality is StarPU's LOCALITY hint: the task prefers the worker
	// that holds its data.
	PushLocality uint32 = 1 << 0
	// PushExec: the message ends with the task's Exec message, the same for
	// every worker the task may run on that has a scheduler ring.
	PushExec uint32 = 1 << 1
	// PushAfter: the task's only unfinished predecessor is the task its
	// Exec names in After (ExecAfter): the scheduler may queue it behind
	// that task on the worker that holds it, before it is ready. Only with
	// PushExec.
	PushAfter uint32 = 1 << 2
	// PushImpls: after the transfers (and before the Exec) comes the
	// implementations section (Push.Impls): the codelet has a performance
	// model and the task may run more than one implementation on some
	// architecture, so the scheduler may choose one (AssignImpl).
	PushImpls uint32 = 1 << 3
	// PushParallel: after the implementations section comes the parallel
	// section (Push.Parallel, parallel.go): the task may run on combined
	// workers of the sizes it lists. Never with PushExec.
	PushParallel uint32 = 1 << 4
	// PushName: after the parallel section comes the name section
	// (Push.Name, name.go): the first Push of each codelet to a scheduler
	// names it.
	PushName uint32 = 1 << 5
)

// Assign flags.
const (
	// AssignPosted: the scheduler posted the task's Exec to the worker's
	// scheduler ring itself; the core only records where the task runs.
	AssignPosted uint32 = 1 << 0
	// AssignDeclined answers a Push flagged PushAfter that the scheduler
	// did not queue behind its predecessor: Worker is -1, and the core
	// pushes the task again, without PushAfter, once it is ready.
	AssignDeclined uint32 = 1 << 1
	// AssignImpl: the scheduler chose the implementation the task runs
	// with, Assign.Impl. Without it the core chooses.
	AssignImpl uint32 = 1 << 2
)

// ErrShort reports a message shorter than its type requires.
var ErrShort = errors.New("wire: short message")

// ErrType reports a message decoded as a type it is not.
var ErrType = errors.New("wire: wrong message type")

// header checks that b is at least size bytes of a message of type typ.
// It inlines into the decoders; the error's formatting does not.
func header(b []byte, size int, typ uint32) error {
	if len(b) < size {
		return ErrShort
	}
	if le.Uint32(b) != typ {
		return typeError(le.Uint32(b), typ)
	}
	return nil
}

func typeError(got, want uint32) error {
	return fmt.Errorf("%w %d, want %d", ErrType, got, want)
}

// fits reports whether b holds a header of hdr bytes, n items of size
// bytes and extra bytes more. n and extra come from the message: the sum
// is computed in 64 bits, where it cannot overflow, so that a lying count
// is short on every platform (on 32-bit ones, int(n)*size would wrap).
func fits(b []byte, hdr int, n uint32, size int, extra uint32) bool {
	return uint64(hdr)+uint64(n)*uint64(size)+uint64(extra) <= uint64(len(b))
}

// Type returns a message's type.
func Type(msg []byte) uint32 {
	if len(msg) < 4 {
		return 0
	}
	return le.Uint32(msg)
}

// Push tells the scheduler a task is ready, with what the core predicts
// about it.
type Push struct {
	ID         uint64
	Priority   int32
	ArchMask   uint32
	Worker     int32
	ReleasedBy int32
	Codelet    uint32
	Flags      uint32
	// Length is the predicted execution time in ns per architecture, or -1
	// where the codelet's performance model has no calibrated value.
	Length [NumArch]int64
	// Transfer[n] is the predicted time in ns to bring the task's input data
	// to memory node n; empty when the machine has a single node. It
	// aliases the message after Decode.
	Transfer []int64
	// Impls[a][i] is implementation i of the task's codelet on
	// architecture a, when Flags has PushImpls (at most MaxImpls per
	// architecture); Decode reuses its storage.
	Impls [NumArch][]Impl
	// Exec is the task's Exec message when Flags has PushExec; it aliases
	// the message after Decode, without the bytes that follow the Exec, if
	// any. (The core encodes it in place, at ExecOffset, instead.)
	Exec []byte
	// Parallel, when Flags has PushParallel, lists the combined worker
	// sizes the task may run on (parallel.go); Decode reuses its storage.
	Parallel []SizeLength
	// Name, when Flags has PushName, is the name of the task's codelet's
	// performance model (name.go); it aliases the message after Decode.
	Name []byte
}

// Impl is one implementation of a task's codelet on one architecture, as a
// Push flagged PushImpls lists it.
type Impl struct {
	// Length is its predicted execution time in ns, or -1 where the
	// codelet's performance model has no calibrated value for it.
	Length int64
	// Kernel is its kernel's number in the architecture's driver, which a
	// scheduler that posts the task's Exec writes into it (SetExecKernel);
	// -1 where the task may not run it (no driver of the architecture
	// hosts it, or the codelet's CanExecute refused it).
	Kernel int32
}

// Usable reports whether the task may run the implementation.
func (i Impl) Usable() bool { return i.Kernel >= 0 }

// The implementations section of a Push (PushImpls) is self-delimiting: a
// header of ImplsHeaderSize bytes (the section's own size in bytes, u32;
// the number of implementations of each architecture, one byte each; a
// zero byte), then ImplSize bytes per implementation, architecture by
// architecture: the length (i64), the kernel (i32), 4 zero bytes.
const (
	ImplsHeaderSize = 8
	ImplSize        = 16
	// MaxImpls is the most implementations a codelet has for one
	// architecture (StarPU's STARPU_MAXIMPLEMENTATIONS).
	MaxImpls = 8
)

// PushLen is the size of a Push with predictions for nnodes memory nodes,
// without the implementations section and the Exec (see Push.Len).
func PushLen(nnodes int) int { return PushHeaderSize + nnodes*TransferSize }

// implsLen is the size of p's implementations section: 0 without PushImpls.
func (p *Push) implsLen() int {
	if p.Flags&PushImpls == 0 {
		return 0
	}
	n := ImplsHeaderSize
	for _, is := range p.Impls {
		n += len(is) * ImplSize
	}
	return n
}

// ExecOffset is where p's Exec starts in the encoded message: after the
// header, the transfers and the implementations section.
func (p *Push) ExecOffset() int {
	return PushLen(len(p.Transfer)) + p.implsLen() + p.parallelLen() + p.nameLen()
}

// Len is the size of the encoded p, its Exec included.
func (p *Push) Len() int { return p.ExecOffset() + len(p.Exec) }

// Encode writes p into b (p.Len() bytes).
func (p *Push) Encode(b []byte) {
	_ = b[PushHeaderSize-1]
	le.PutUint32(b[0:], TypePush)
	le.PutUint32(b[4:], uint32(p.Priority))
	le.PutUint64(b[8:], p.ID)
	le.PutUint32(b[16:], p.ArchMask)
	le.PutUint32(b[20:], uint32(p.Worker))
	le.PutUint32(b[24:], uint32(p.ReleasedBy))
	le.PutUint32(b[28:], p.Codelet)
	le.PutUint32(b[32:], p.Flags)
	le.PutUint32(b[36:], uint32(len(p.Transfer)))
	for i, l := range p.Length {
		le.PutUint64(b[40+8*i:], uint64(l))
	}
	q := b[PushHeaderSize:]
	for i, t := range p.Transfer {
		le.PutUint64(q[8*i:], uint64(t))
	}
	if p.Flags&PushImpls != 0 {
		p.encodeImpls(b[PushLen(len(p.Transfer)):])
	}
	if p.Flags&PushParallel != 0 {
		p.encodeParallel(b[PushLen(len(p.Transfer))+p.implsLen():])
	}
	if p.Flags&PushName != 0 {
		p.encodeName(b[PushLen(len(p.Transfer))+p.implsLen()+p.parallelLen():])
	}
	copy(b[p.ExecOffset():], p.Exec)
}

// encodeImpls writes p's implementations section at the start of q.
func (p *Push) encodeImpls(q []byte) {
	n := p.implsLen()
	_ = q[n-1]
	le.PutUint32(q[0:], uint32(n))
	for a, is := range p.Impls {
		q[4+a] = byte(len(is))
	}
	q[4+NumArch] = 0
	e := q[ImplsHeaderSize:]
	for _, is := range p.Impls {
		for _, im := range is {
			le.PutUint64(e[0:], uint64(im.Length))
			le.PutUint32(e[8:], uint32(im.Kernel))
			le.PutUint32(e[12:], 0)
			e = e[ImplSize:]
		}
	}
}

// decodeImpls reads the implementations section at the start of q into
// p.Impls and returns its size.
func (p *Push) decodeImpls(q []byte) (int, error) {
	if len(q) < ImplsHeaderSize {
		return 0, fmt.Errorf("wire: push flagged PushImpls with %d bytes for its implementations: %w", len(q), ErrShort)
	}
	total := 0
	for a := range p.Impls {
		c := int(q[4+a])
		if c > MaxImpls {
			return 0, fmt.Errorf("wire: push lists %d implementations for architecture %d, at most %d", c, a, MaxImpls)
		}
		total += c
	}
	n := ImplsHeaderSize + total*ImplSize
	if len(q) < n {
		return 0, fmt.Errorf("wire: push of %d implementations with %d bytes for them: %w", total, len(q), ErrShort)
	}
	if size := le.Uint32(q); size != uint32(n) {
		return 0, fmt.Errorf("wire: push implementations section says %d bytes, but lists %d implementations (%d bytes)", size, total, n)
	}
	e := q[ImplsHeaderSize:]
	for a := range p.Impls {
		for k := 0; k < int(q[4+a]); k++ {
			p.Impls[a] = append(p.Impls[a], Impl{Length: int64(le.Uint64(e[0:])), Kernel: int32(le.Uint32(e[8:]))})
			e = e[ImplSize:]
		}
	}
	return n, nil
}

// Decode reads p from b, reusing p.Transfer's storage.
func (p *Push) Decode(b []byte) error {
	if err := header(b, PushHeaderSize, TypePush); err != nil {
		return err
	}
	p.Priority = int32(le.Uint32(b[4:]))
	p.ID = le.Uint64(b[8:])
	p.ArchMask = le.Uint32(b[16:])
	p.Worker = int32(le.Uint32(b[20:]))
	p.ReleasedBy = int32(le.Uint32(b[24:]))
	p.Codelet = le.Uint32(b[28:])
	p.Flags = le.Uint32(b[32:])
	n32 := le.Uint32(b[36:])
	for i := range p.Length {
		p.Length[i] = int64(le.Uint64(b[40+8*i:]))
	}
	if !fits(b, PushHeaderSize, n32, TransferSize, 0) {
		return fmt.Errorf("wire: push of %d bytes for %d nodes: %w", len(b), n32, ErrShort)
	}
	n := int(n32)
	p.Transfer = p.Transfer[:0]
	q := b[PushHeaderSize:]
	for i := 0; i < n; i++ {
		p.Transfer = append(p.Transfer, int64(le.Uint64(q[8*i:])))
	}
	for a := range p.Impls {
		p.Impls[a] = p.Impls[a][:0]
	}
	off := PushLen(n)
	if p.Flags&PushImpls != 0 {
		size, err := p.decodeImpls(b[off:])
		if err != nil {
			return err
		}
		off += size
	}
	p.Parallel = p.Parallel[:0]
	if p.Flags&PushParallel != 0 {
		size, err := p.decodeParallel(b[off:])
		if err != nil {
			return err
		}
		off += size
	}
	p.Name = nil
	if p.Flags&PushName != 0 {
		size, err := p.decodeName(b[off:])
		if err != nil {
			return err
		}
		off += size
	}
	p.Exec = nil
	if p.Flags&PushExec != 0 {
		p.Exec = b[off:]
		if len(p.Exec) < ExecHeaderSize {
			return fmt.Errorf("wire: push of %d bytes flagged PushExec: %w", len(b), ErrShort)
		}
		if t := Type(p.Exec); t != TypeExec {
			return fmt.Errorf("wire: push flagged PushExec ends with message type %d, not an Exec", t)
		}
		nb, argLen := le.Uint32(p.Exec[16:]), le.Uint32(p.Exec[20:])
		if !fits(p.Exec, ExecHeaderSize, nb, BufferDescSize, argLen) {
			return fmt.Errorf("wire: push ends with %d bytes of an Exec for %d buffers and %d argument bytes: %w", len(p.Exec), nb, argLen, ErrShort)
		}
		p.Exec = p.Exec[:ExecSize(int(nb), int(argLen))]
	}
	return nil
}

// SetExecKernel sets the kernel of an encoded Exec message: a scheduler
// that posts a task's Exec after choosing its implementation (AssignImpl)
// writes that implementation's Impl.Kernel there.
func SetExecKernel(b []byte, kernel uint32) { le.PutUint32(b[4:], kernel) }

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
	if err := header(b, DoneSize, TypeDone); err != nil {
		return err
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
	Flags  uint32
	// Impl, with AssignImpl, is the implementation the task runs with: its
	// index among the codelet's implementations for the worker's
	// architecture (Push.Impls).
	Impl uint32
	// At, with AssignPosted, is where the Exec lies in the worker's
	// scheduler ring: the ring's consumer position when it is the
	// consumer's next message (shm.Ring.ReservedAt). The core compares it
	// with the consumer's position to tell a task the worker is running
	// from one queued behind others.
	At uint64
}

// Encode writes a into b (AssignSize bytes).
func (a *Assign) Encode(b []byte) {
	_ = b[AssignSize-1]
	le.PutUint32(b[0:], TypeAssign)
	le.PutUint32(b[4:], uint32(a.Worker))
	le.PutUint64(b[8:], a.ID)
	le.PutUint32(b[16:], a.Flags)
	le.PutUint32(b[20:], a.Impl)
	le.PutUint64(b[24:], a.At)
}

// Decode reads a from b.
func (a *Assign) Decode(b []byte) error {
	if err := header(b, AssignSize, TypeAssign); err != nil {
		return err
	}
	a.Worker = int32(le.Uint32(b[4:]))
	a.ID = le.Uint64(b[8:])
	a.Flags = le.Uint32(b[16:])
	a.Impl = le.Uint32(b[20:])
	a.At = le.Uint64(b[24:])
	return nil
}

// WorkerRef is one worker of a Workers message: its ID, its architecture
// (driver.ArchBit) and its memory node.
type WorkerRef struct {
	ID   int32
	Arch uint32
	Node int32
}

// Workers changes the set of workers a policy schedules for (Op is
// WorkersAdd or WorkersRemove). It travels on the events ring, ordered with
// the pushes and completions; the policy's host echoes it, with no workers
// and the same Seq, on the decisions ring once applied: no Assign after the
// echo names a removed worker.
type Workers struct {
	Op      uint32
	Seq     uint64
	Workers []WorkerRef
}

// WorkersLen is the size of a Workers message for n workers.
func WorkersLen(n int) int { return WorkersHeader + n*WorkerSize }

// Encode writes w into b (WorkersLen(len(w.Workers)) bytes).
func (w *Workers) Encode(b []byte) {
	_ = b[WorkersLen(len(w.Workers))-1]
	le.PutUint32(b[0:], TypeWorkers)
	le.PutUint32(b[4:], w.Op)
	le.PutUint64(b[8:], w.Seq)
	le.PutUint32(b[16:], uint32(len(w.Workers)))
	le.PutUint32(b[20:], 0)
	q := b[WorkersHeader:]
	for i, r := range w.Workers {
		e := q[i*WorkerSize:]
		le.PutUint32(e[0:], uint32(r.ID))
		le.PutUint32(e[4:], r.Arch)
		le.PutUint32(e[8:], uint32(r.Node))
		le.PutUint32(e[12:], 0)
	}
}

// Decode reads w from b, reusing w.Workers' storage.
func (w *Workers) Decode(b []byte) error {
	if err := header(b, WorkersHeader, TypeWorkers); err != nil {
		return err
	}
	w.Op = le.Uint32(b[4:])
	w.Seq = le.Uint64(b[8:])
	n32 := le.Uint32(b[16:])
	if !fits(b, WorkersHeader, n32, WorkerSize, 0) {
		return fmt.Errorf("wire: workers message of %d bytes for %d workers: %w", len(b), n32, ErrShort)
	}
	n := int(n32)
	w.Workers = w.Workers[:0]
	q := b[WorkersHeader:]
	for i := 0; i < n; i++ {
		e := q[i*WorkerSize:]
		w.Workers = append(w.Workers, WorkerRef{ID: int32(le.Uint32(e[0:])), Arch: le.Uint32(e[4:]), Node: int32(le.Uint32(e[8:]))})
	}
	return nil
}

// BufferDesc locates one task buffer: its memory node, where it starts and
// its shape. This is all a driver learns about the data.
type BufferDesc struct {
	// Node is the driver's number for the memory node holding the buffer: 0
	// for the RAM node, where Offset is an arena offset; otherwise Offset is
	// the device buffer named by an earlier Alloc.
	Node   uint8
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
	ID     uint64
	Kernel uint32
	// Flags are ExecAsync and future per-task hints for the driver.
	Flags uint32
	// After, with ExecAfter, is ID minus the predecessor's ID, as a signed
	// 32-bit number (AfterOf).
	After   uint32
	Buffers []BufferDesc
	// Combined and Members, with ExecSPMD or ExecForkJoin, are the
	// combined worker that runs the task and its members' worker IDs,
	// the master first (parallel.go); Members is empty otherwise.
	Combined int32
	Members  []int32
	Arg      []byte
}

// Exec flags.
const (
	// ExecAsync says the task's implementation is flagged asynchronous
	// (core.ImplAsync, StarPU's STARPU_CUDA_ASYNC and STARPU_OPENCL_ASYNC):
	// a device driver may start the worker's next task before this one
	// ends, keeping a few in flight. Without it the worker waits for the
	// task to end before it starts another.
	ExecAsync uint32 = 1 << 0
	// ExecAfter says the task was queued behind its only unfinished
	// predecessor, task ID - After, before it was ready: the driver runs it
	// only if it ran that predecessor successfully, and otherwise answers
	// with a Completion flagged Skipped, without running it.
	ExecAfter uint32 = 1 << 1
	// ExecSPMD and ExecForkJoin say the task is a parallel task run by the
	// team of workers its Members list (parallel.go): every member runs
	// the kernel with its rank (SPMD), or the master runs it with the
	// others' cores to use while they wait (FORKJOIN).
	ExecSPMD     uint32 = 1 << 2
	ExecForkJoin uint32 = 1 << 3
)

// Encode writes e into b, which must be e.Len() bytes:
// ExecSize(len(e.Buffers), len(e.Arg)), plus the team of a parallel task.
func (e *Exec) Encode(b []byte) {
	PutExecHeader(b, e.ID, e.Kernel, e.Flags, len(e.Buffers), len(e.Arg))
	le.PutUint32(b[28:], e.After)
	p := b[ExecHeaderSize:]
	for i := range e.Buffers {
		EncodeBuffer(p, &e.Buffers[i])
		p = p[BufferDescSize:]
	}
	copy(p, e.Arg)
	if e.Flags&ExecParallel != 0 {
		e.encodeTeam(p[len(e.Arg):])
	}
}

// EncodeBuffer writes one buffer descriptor (BufferDescSize bytes).
func EncodeBuffer(p []byte, d *BufferDesc) {
	_ = p[BufferDescSize-1]
	le.PutUint64(p[0:], d.Offset)
	p[8] = byte(d.Layout.Interface)
	p[9] = byte(d.Mode)
	p[10], p[11] = d.Node, 0
	le.PutUint32(p[12:], d.Layout.ElemSize)
	le.PutUint64(p[16:], d.Layout.NX)
	le.PutUint64(p[24:], d.Layout.NY)
	le.PutUint64(p[32:], d.Layout.NZ)
	le.PutUint64(p[40:], d.Layout.LD)
	le.PutUint64(p[48:], d.Layout.LDZ)
}

// Decode reads e from b, reusing e.Buffers' storage. e.Arg aliases b.
func (e *Exec) Decode(b []byte) error {
	if err := header(b, ExecHeaderSize, TypeExec); err != nil {
		return err
	}
	e.Kernel = le.Uint32(b[4:])
	e.ID = le.Uint64(b[8:])
	e.Flags = le.Uint32(b[24:])
	e.After = le.Uint32(b[28:])
	n32, argLen32 := le.Uint32(b[16:]), le.Uint32(b[20:])
	if !fits(b, ExecHeaderSize, n32, BufferDescSize, argLen32) {
		return fmt.Errorf("wire: exec message of %d bytes for %d buffers and %d argument bytes: %w", len(b), n32, argLen32, ErrShort)
	}
	n, argLen := int(n32), int(argLen32)
	e.Buffers = e.Buffers[:0]
	p := b[ExecHeaderSize:]
	for i := 0; i < n; i++ {
		e.Buffers = append(e.Buffers, BufferDesc{
			Node:   p[10],
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
	return e.decodeTeam(p[argLen:])
}

// Alloc asks a device worker to allocate Size bytes on its memory node
// Node and to call the allocation Buffer, a number the core chooses. The
// worker answers with a Completion for ID, failed when the device is out of
// memory.
type Alloc struct {
	ID     uint64
	Node   uint32
	Buffer uint64
	Size   uint64
}

// Encode writes a into b (AllocSize bytes).
func (a *Alloc) Encode(b []byte) {
	_ = b[AllocSize-1]
	le.PutUint32(b[0:], TypeAlloc)
	le.PutUint32(b[4:], a.Node)
	le.PutUint64(b[8:], a.ID)
	le.PutUint64(b[16:], a.Buffer)
	le.PutUint64(b[24:], a.Size)
}

// Decode reads a from b.
func (a *Alloc) Decode(b []byte) error {
	if err := header(b, AllocSize, TypeAlloc); err != nil {
		return err
	}
	a.Node = le.Uint32(b[4:])
	a.ID = le.Uint64(b[8:])
	a.Buffer = le.Uint64(b[16:])
	a.Size = le.Uint64(b[24:])
	return nil
}

// Free releases a device buffer. It has no completion: the core never
// names the buffer again until it allocates it anew.
type Free struct {
	Node   uint32
	Buffer uint64
}

// Encode writes f into b (FreeSize bytes).
func (f *Free) Encode(b []byte) {
	_ = b[FreeSize-1]
	le.PutUint32(b[0:], TypeFree)
	le.PutUint32(b[4:], f.Node)
	le.PutUint64(b[8:], f.Buffer)
}

// Decode reads f from b.
func (f *Free) Decode(b []byte) error {
	if err := header(b, FreeSize, TypeFree); err != nil {
		return err
	}
	f.Node = le.Uint32(b[4:])
	f.Buffer = le.Uint64(b[8:])
	return nil
}

// Part is one part of a plugin interface's datum inside its region:
// bytes [Offset, Offset+Size) from the region's start.
type Part struct {
	Offset, Size uint64
}

// Parts tells a device worker where the parts of the plugin-interface
// datum now held by device buffer Buffer lie, so that a kernel can be given
// each part as a buffer of its own. The core sends it whenever it gives
// the buffer to such a datum (after the Alloc, or when it reuses a cached
// buffer) and before any Exec using it; it holds until the next Parts or
// Free of the buffer. It has no completion: a worker that cannot use the
// parts fails the Execs that need them, saying why.
type Parts struct {
	Node   uint32
	Buffer uint64
	Parts  []Part
}

// PartsLen is the size of a Parts message with n parts.
func PartsLen(n int) int { return PartsHeader + n*PartSize }

// Encode writes p into b (PartsLen(len(p.Parts)) bytes).
func (p *Parts) Encode(b []byte) {
	_ = b[PartsHeader-1]
	le.PutUint32(b[0:], TypeParts)
	le.PutUint32(b[4:], uint32(len(p.Parts)))
	le.PutUint32(b[8:], p.Node)
	le.PutUint32(b[12:], 0)
	le.PutUint64(b[16:], p.Buffer)
	q := b[PartsHeader:]
	for _, r := range p.Parts {
		le.PutUint64(q[0:], r.Offset)
		le.PutUint64(q[8:], r.Size)
		q = q[PartSize:]
	}
}

// Decode reads p from b, reusing p.Parts' storage.
func (p *Parts) Decode(b []byte) error {
	if err := header(b, PartsHeader, TypeParts); err != nil {
		return err
	}
	n32 := le.Uint32(b[4:])
	if !fits(b, PartsHeader, n32, PartSize, 0) {
		return fmt.Errorf("wire: parts message of %d bytes for %d parts: %w", len(b), n32, ErrShort)
	}
	p.Node = le.Uint32(b[8:])
	p.Buffer = le.Uint64(b[16:])
	p.Parts = p.Parts[:0]
	q := b[PartsHeader:]
	for i := 0; i < int(n32); i++ {
		p.Parts = append(p.Parts, Part{Offset: le.Uint64(q[0:]), Size: le.Uint64(q[8:])})
		q = q[PartSize:]
	}
	return nil
}

// CopyRange is one contiguous range of a Copy, at offsets from the start of
// the source and destination buffers.
type CopyRange struct {
	SrcOffset, DstOffset, Len uint64
}

// Copy moves ranges between two memory nodes of a worker's driver, one of
// them usually RAM (node 0, where a buffer is an arena offset); between
// two device nodes only when the source names the destination among its
// peers (driver.MemoryNode.Peers), and then on the source's worker. The
// worker answers with a Completion for ID once the data has arrived.
type Copy struct {
	ID                   uint64
	SrcNode, DstNode     uint32
	SrcBuffer, DstBuffer uint64
	Ranges               []CopyRange
}

// CopyLen is the size of a Copy with n ranges.
func CopyLen(n int) int { return CopyHeaderSize + n*CopyRangeSize }

// Encode writes c into b (CopyLen(len(c.Ranges)) bytes).
func (c *Copy) Encode(b []byte) {
	_ = b[CopyHeaderSize-1]
	le.PutUint32(b[0:], TypeCopy)
	le.PutUint32(b[4:], uint32(len(c.Ranges)))
	le.PutUint64(b[8:], c.ID)
	le.PutUint32(b[16:], c.SrcNode)
	le.PutUint32(b[20:], c.DstNode)
	le.PutUint64(b[24:], c.SrcBuffer)
	le.PutUint64(b[32:], c.DstBuffer)
	p := b[CopyHeaderSize:]
	for _, r := range c.Ranges {
		le.PutUint64(p[0:], r.SrcOffset)
		le.PutUint64(p[8:], r.DstOffset)
		le.PutUint64(p[16:], r.Len)
		p = p[CopyRangeSize:]
	}
}

// Decode reads c from b, reusing c.Ranges' storage.
func (c *Copy) Decode(b []byte) error {
	if err := header(b, CopyHeaderSize, TypeCopy); err != nil {
		return err
	}
	n32 := le.Uint32(b[4:])
	if !fits(b, CopyHeaderSize, n32, CopyRangeSize, 0) {
		return fmt.Errorf("wire: copy of %d bytes for %d ranges: %w", len(b), n32, ErrShort)
	}
	n := int(n32)
	c.ID = le.Uint64(b[8:])
	c.SrcNode = le.Uint32(b[16:])
	c.DstNode = le.Uint32(b[20:])
	c.SrcBuffer = le.Uint64(b[24:])
	c.DstBuffer = le.Uint64(b[32:])
	c.Ranges = c.Ranges[:0]
	p := b[CopyHeaderSize:]
	for i := 0; i < n; i++ {
		c.Ranges = append(c.Ranges, CopyRange{SrcOffset: le.Uint64(p[0:]), DstOffset: le.Uint64(p[8:]), Len: le.Uint64(p[16:])})
		p = p[CopyRangeSize:]
	}
	return nil
}

// Completion reports the end of an Exec, Alloc or Copy on a worker.
type Completion struct {
	ID     uint64
	Failed bool
	// Skipped: the task, flagged ExecAfter, did not run because its
	// predecessor failed or was skipped; the core schedules it again.
	Skipped bool
	// NotRun: the task failed without running (its worker refused it:
	// driver.AppWorker.Refuse), so its data are as they were; with Failed.
	NotRun  bool
	StartNs int64
	EndNs   int64
	// SleepStartNs and SleepEndNs say when the worker slept on its
	// doorbell's futex since it posted its previous completion: the start
	// of the first sleep and the end of the last (wire.Now's clock), both
	// 0 when it did not sleep. Traces show them as the worker's sleeping
	// state; driver.Rings fills them in.
	SleepStartNs, SleepEndNs int64
	// Err is the kernel's error message when Failed.
	Err []byte
}

// MaxErrLen bounds a Completion's error text: any completion ring carries
// it (a ring message holds up to half the ring, and the core's completion
// rings are far larger), so a kernel's error, however long, can always be
// reported. SetErr cuts longer texts.
const MaxErrLen = 4096

// SetErr marks c failed with err's text, cut to MaxErrLen bytes on a UTF-8
// boundary, saying how much was cut.
func (c *Completion) SetErr(err error) {
	c.Failed = true
	msg := err.Error()
	if len(msg) > MaxErrLen {
		const note = " [... %d bytes cut]"
		keep := MaxErrLen - len(note) - 8 // room for the count
		for keep > 0 && !utf8.RuneStart(msg[keep]) {
			keep--
		}
		msg = msg[:keep] + fmt.Sprintf(note, len(msg)-keep)
	}
	c.Err = append(c.Err[:0], msg...)
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
	if c.Skipped {
		f |= 2
	}
	if c.NotRun {
		f |= 4
	}
	le.PutUint32(b[4:], f)
	le.PutUint64(b[8:], c.ID)
	le.PutUint64(b[16:], uint64(c.StartNs))
	le.PutUint64(b[24:], uint64(c.EndNs))
	le.PutUint32(b[32:], uint32(len(c.Err)))
	le.PutUint32(b[36:], 0)
	le.PutUint64(b[40:], uint64(c.SleepStartNs))
	le.PutUint64(b[48:], uint64(c.SleepEndNs))
	copy(b[CompletionSize:], c.Err)
}

// Decode reads c from b; c.Err aliases b.
func (c *Completion) Decode(b []byte) error {
	if err := header(b, CompletionSize, TypeCompletion); err != nil {
		return err
	}
	f := le.Uint32(b[4:])
	c.Failed, c.Skipped, c.NotRun = f&1 != 0, f&2 != 0, f&4 != 0
	c.ID = le.Uint64(b[8:])
	c.StartNs = int64(le.Uint64(b[16:]))
	c.EndNs = int64(le.Uint64(b[24:]))
	c.SleepStartNs = int64(le.Uint64(b[40:]))
	c.SleepEndNs = int64(le.Uint64(b[48:]))
	n32 := le.Uint32(b[32:])
	if !fits(b, CompletionSize, 0, 0, n32) {
		return fmt.Errorf("wire: completion of %d bytes with a %d-byte error: %w", len(b), n32, ErrShort)
	}
	n := int(n32)
	c.Err = b[CompletionSize : CompletionSize+n]
	return nil
}

// Now is CLOCK_MONOTONIC in nanoseconds: the same clock in every process of
// the machine, so workers' timestamps line up in one trace. It is the Go
// runtime's own reading of that clock, through the vDSO: unix.ClockGettime
// is a system call, and the hot path reads the clock several times per task.
func Now() int64 { return nanotime() }

// nanotime is the runtime's CLOCK_MONOTONIC reading (not time.Now's
// monotonic part, which counts from process start).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// PutExecHeader writes an Exec message's header, for a producer that encodes
// the buffers and argument itself straight into the ring.
func PutExecHeader(b []byte, id uint64, kernel, flags uint32, nbuffers, argLen int) {
	_ = b[ExecHeaderSize-1]
	le.PutUint32(b[0:], TypeExec)
	le.PutUint32(b[4:], kernel)
	le.PutUint64(b[8:], id)
	le.PutUint32(b[16:], uint32(nbuffers))
	le.PutUint32(b[20:], uint32(argLen))
	le.PutUint32(b[24:], flags)
	le.PutUint32(b[28:], 0)
}

// SetExecAfter marks an encoded Exec message as queued behind task
// pred (ExecAfter; the two ids must be less than 2^31 apart). The core
// does it for a Push flagged PushAfter.
func SetExecAfter(b []byte, pred uint64) {
	le.PutUint32(b[24:], le.Uint32(b[24:])|ExecAfter)
	le.PutUint32(b[28:], uint32(le.Uint64(b[8:])-pred))
}

// ExecAfterOf is the predecessor an encoded Exec message flagged ExecAfter
// is queued behind, and whether it is flagged.
func ExecAfterOf(b []byte) (uint64, bool) {
	if len(b) < ExecHeaderSize || le.Uint32(b[24:])&ExecAfter == 0 {
		return 0, false
	}
	return AfterOf(le.Uint64(b[8:]), le.Uint32(b[28:])), true
}

// AfterOf is the predecessor of task id whose Exec has After field after:
// the distance is signed, since a predecessor may be submitted after its
// successor (tags).
func AfterOf(id uint64, after uint32) uint64 {
	return id - uint64(int64(int32(after)))
}
