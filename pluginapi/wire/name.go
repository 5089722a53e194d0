package wire

// Codelet names on the rings.
//
// A Push numbers its task's codelet (Push.Codelet) and the policy keys what
// it keeps per codelet by that number; a message for the user (dmda's
// "uncalibrated performance model") should name it. The first Push of each
// codelet to a scheduler is flagged PushName and carries, after the
// parallel section, a self-delimiting section: its own size in bytes
// (u32, a multiple of 8), the name's length (u32), then the name, padded
// with zeros to 8 bytes. The name is the codelet's performance model's
// (its ModelName, else its Name), the one model files and `starpu
// perfmodel` show.
//
// Rejected: a name in every Push (tens of bytes per task on the hot path,
// for a message printed once); a message type of its own (the host would
// have to order it with the Push it names, which one message does for
// free).

import "fmt"

// Sizes of the name section.
const (
	NameHeaderSize = 8
	// MaxName bounds a codelet's name on the wire; the core cuts longer
	// ones.
	MaxName = 1024
)

// nameLen is the size of p's name section: 0 without PushName.
func (p *Push) nameLen() int {
	if p.Flags&PushName == 0 {
		return 0
	}
	return NameHeaderSize + (len(p.Name)+7)&^7
}

// encodeName writes p's name section at the start of q.
func (p *Push) encodeName(q []byte) {
	n := p.nameLen()
	_ = q[n-1]
	le.PutUint32(q[0:], uint32(n))
	le.PutUint32(q[4:], uint32(len(p.Name)))
	clear(q[NameHeaderSize+copy(q[NameHeaderSize:], p.Name) : n])
}

// decodeName reads the name section at the start of q into p.Name (which
// aliases q) and returns its size.
func (p *Push) decodeName(q []byte) (int, error) {
	if len(q) < NameHeaderSize {
		return 0, fmt.Errorf("wire: push flagged PushName with %d bytes for the name: %w", len(q), ErrShort)
	}
	l := le.Uint32(q[4:])
	if l > MaxName {
		return 0, fmt.Errorf("wire: push names its codelet with %d bytes, at most %d", l, MaxName)
	}
	n := NameHeaderSize + (int(l)+7)&^7
	if len(q) < n {
		return 0, fmt.Errorf("wire: push of a %d-byte name with %d bytes for it: %w", l, len(q), ErrShort)
	}
	if size := le.Uint32(q); size != uint32(n) {
		return 0, fmt.Errorf("wire: push name section says %d bytes, but holds a %d-byte name (%d bytes)", size, l, n)
	}
	p.Name = q[NameHeaderSize : NameHeaderSize+int(l) : NameHeaderSize+int(l)]
	return n, nil
}
