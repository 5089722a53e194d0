package wire

// Parallel tasks on the rings.
//
// A parallel task (an SPMD or FORKJOIN codelet's) may run on a combined
// worker: several workers of one driver at once (core/task_parallel.go).
// Two messages say so.
//
// The Push of such a task is flagged PushParallel and carries, after the
// implementations section (a parallel task never carries an Exec: the
// policy host does not post it), a self-delimiting section: its own size
// in bytes (u32), the number of entries (u32), then SizeLengthSize bytes
// per combined worker size the task may run on, in increasing order: the
// size (u32), 4 zero bytes, the predicted length of the task on a combined
// worker of that size (i64, -1 while uncalibrated).
//
// The Exec the core posts to each member of the combined worker is flagged
// ExecSPMD or ExecForkJoin and carries, after the argument, the team: the
// combined worker's ID (u32), the number of members (u32), then each
// member's worker ID (u32), the master first. Every member gets the same
// bytes and finds its rank as its place in the list, so the core encodes
// the team once per task.
//
// Rejected: rank and size in the header's After field, which chained tasks
// use and parallel ones do not (four bytes cannot name the members, which
// the driver needs to know whether a missing member can still come, and
// which a kernel may ask for); a message type of its own (every driver
// would need a second decoder for what is an Exec with a few more bytes).

import "fmt"

// Sizes of the parallel parts.
const (
	// ParallelHeaderSize and SizeLengthSize: the Push's parallel section.
	ParallelHeaderSize = 8
	SizeLengthSize     = 16
	// TeamHeaderSize and TeamMemberSize: the Exec's team.
	TeamHeaderSize = 8
	TeamMemberSize = 4
	// MaxTeam bounds the members of a team and the sizes of a Push's
	// parallel section: no machine the runtime drives has more workers.
	MaxTeam = 1024
)

// ExecParallel is either parallel flag of an Exec.
const ExecParallel = ExecSPMD | ExecForkJoin

// SizeLength is one combined worker size a parallel task may run on and
// its predicted length there in ns (-1 while uncalibrated).
type SizeLength struct {
	Size   int32
	Length int64
}

// parallelLen is the size of p's parallel section: 0 without PushParallel.
func (p *Push) parallelLen() int {
	if p.Flags&PushParallel == 0 {
		return 0
	}
	return ParallelHeaderSize + len(p.Parallel)*SizeLengthSize
}

// encodeParallel writes p's parallel section at the start of q.
func (p *Push) encodeParallel(q []byte) {
	n := p.parallelLen()
	_ = q[n-1]
	le.PutUint32(q[0:], uint32(n))
	le.PutUint32(q[4:], uint32(len(p.Parallel)))
	e := q[ParallelHeaderSize:]
	for _, s := range p.Parallel {
		le.PutUint32(e[0:], uint32(s.Size))
		le.PutUint32(e[4:], 0)
		le.PutUint64(e[8:], uint64(s.Length))
		e = e[SizeLengthSize:]
	}
}

// decodeParallel reads the parallel section at the start of q into
// p.Parallel (reset by the caller) and returns its size.
func (p *Push) decodeParallel(q []byte) (int, error) {
	if len(q) < ParallelHeaderSize {
		return 0, fmt.Errorf("wire: push flagged PushParallel with %d bytes for its sizes: %w", len(q), ErrShort)
	}
	count := le.Uint32(q[4:])
	if !fits(q, ParallelHeaderSize, count, SizeLengthSize, 0) {
		return 0, fmt.Errorf("wire: push of %d combined worker sizes with %d bytes for them: %w", count, len(q), ErrShort)
	}
	if count > MaxTeam {
		return 0, fmt.Errorf("wire: push lists %d combined worker sizes, at most %d", count, MaxTeam)
	}
	n := ParallelHeaderSize + int(count)*SizeLengthSize
	if size := le.Uint32(q); size != uint32(n) {
		return 0, fmt.Errorf("wire: push parallel section says %d bytes, but lists %d sizes (%d bytes)", size, count, n)
	}
	e := q[ParallelHeaderSize:]
	for range count {
		p.Parallel = append(p.Parallel, SizeLength{Size: int32(le.Uint32(e[0:])), Length: int64(le.Uint64(e[8:]))})
		e = e[SizeLengthSize:]
	}
	return n, nil
}

// TeamLen is the size of the team of n members an Exec carries.
func TeamLen(n int) int { return TeamHeaderSize + n*TeamMemberSize }

// Len is the size of the encoded e: ExecSize, plus the team of a parallel
// task.
func (e *Exec) Len() int {
	n := ExecSize(len(e.Buffers), len(e.Arg))
	if e.Flags&ExecParallel != 0 {
		n += TeamLen(len(e.Members))
	}
	return n
}

// PutExecTeam writes the team of a parallel task's Exec at the start of q
// (TeamLen(len(members)) bytes), for a producer that encodes the Exec
// straight into a ring after PutExecHeader, the buffers and the argument.
func PutExecTeam(q []byte, combined int32, members []int32) {
	_ = q[TeamLen(len(members))-1]
	le.PutUint32(q[0:], uint32(combined))
	le.PutUint32(q[4:], uint32(len(members)))
	for i, m := range members {
		le.PutUint32(q[TeamHeaderSize+i*TeamMemberSize:], uint32(m))
	}
}

func (e *Exec) encodeTeam(q []byte) { PutExecTeam(q, e.Combined, e.Members) }

// decodeTeam reads the team at the start of q when e is flagged parallel,
// and empties it otherwise.
func (e *Exec) decodeTeam(q []byte) error {
	e.Members = e.Members[:0]
	e.Combined = 0
	if e.Flags&ExecParallel == 0 {
		return nil
	}
	if e.Flags&ExecParallel == ExecParallel {
		return fmt.Errorf("wire: exec %d flagged both SPMD and FORKJOIN", e.ID)
	}
	if len(q) < TeamHeaderSize {
		return fmt.Errorf("wire: parallel exec with %d bytes for its team: %w", len(q), ErrShort)
	}
	n := le.Uint32(q[4:])
	if !fits(q, TeamHeaderSize, n, TeamMemberSize, 0) {
		return fmt.Errorf("wire: parallel exec with %d bytes for a team of %d: %w", len(q), n, ErrShort)
	}
	if n == 0 || n > MaxTeam {
		return fmt.Errorf("wire: parallel exec with a team of %d members (want 1 to %d)", n, MaxTeam)
	}
	e.Combined = int32(le.Uint32(q[0:]))
	for i := range int(n) {
		e.Members = append(e.Members, int32(le.Uint32(q[TeamHeaderSize+i*TeamMemberSize:])))
	}
	return nil
}

// Rank is the place of worker in e's team (its rank in a parallel task),
// or -1 when it is not a member.
func (e *Exec) Rank(worker int) int {
	for i, m := range e.Members {
		if int(m) == worker {
			return i
		}
	}
	return -1
}
