package wire

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// message is what every hot-path message type has.
type message interface {
	Encode([]byte)
	Decode([]byte) error
}

// decoders are a fresh value of each message type with its type number and
// the size of the re-encoding of a decoded value.
var decoders = []struct {
	name string
	typ  uint32
	new  func() message
	size func(message) int
}{
	{"push", TypePush, func() message { return &Push{} }, func(m message) int { return m.(*Push).Len() }},
	{"done", TypeDone, func() message { return &Done{} }, func(message) int { return DoneSize }},
	{"assign", TypeAssign, func() message { return &Assign{} }, func(message) int { return AssignSize }},
	{"exec", TypeExec, func() message { return &Exec{} }, func(m message) int { return m.(*Exec).Len() }},
	{"completion", TypeCompletion, func() message { return &Completion{} }, func(m message) int { return CompletionLen(len(m.(*Completion).Err)) }},
	{"alloc", TypeAlloc, func() message { return &Alloc{} }, func(message) int { return AllocSize }},
	{"free", TypeFree, func() message { return &Free{} }, func(message) int { return FreeSize }},
	{"copy", TypeCopy, func() message { return &Copy{} }, func(m message) int { return CopyLen(len(m.(*Copy).Ranges)) }},
	{"workers", TypeWorkers, func() message { return &Workers{} }, func(m message) int { return WorkersLen(len(m.(*Workers).Workers)) }},
	{"parts", TypeParts, func() message { return &Parts{} }, func(m message) int { return PartsLen(len(m.(*Parts).Parts)) }},
}

// seedMessages are one encoded message of each type, and some with lying
// counts.
func seedMessages() [][]byte {
	enc := func(m message, size int) []byte {
		b := make([]byte, size)
		m.Encode(b)
		return b
	}
	exec := &Exec{ID: 7, Kernel: 3, Arg: []byte("arg"), Buffers: []BufferDesc{
		{Node: 2, Offset: 1 << 40, Mode: kernel.RW, Layout: kernel.Layout{Interface: kernel.Matrix, ElemSize: 4, NX: 5, NY: 6, LD: 8}},
	}}
	execBytes := enc(exec, ExecSize(1, 3))
	pushExec := &Push{ID: 3, Flags: PushExec, Transfer: []int64{5}, Exec: execBytes}
	pushImpls := &Push{ID: 4, Flags: PushImpls | PushExec, Transfer: []int64{5}, Exec: execBytes,
		Impls: [NumArch][]Impl{{{Length: 9, Kernel: 1}, {Length: -1, Kernel: -1}}, nil, {{Length: 3, Kernel: 0}}}}
	seeds := [][]byte{
		enc(&Push{ID: 1, Priority: -3, ArchMask: 5, Worker: -1, Length: [NumArch]int64{100, -1, 7}, Transfer: []int64{0, 1234}}, PushLen(2)),
		enc(pushExec, PushLen(1)+len(execBytes)),
		enc(&Done{Worker: 3, ID: 4, DurationNs: 5}, DoneSize),
		enc(&Assign{Worker: 1, ID: 2, Flags: AssignPosted}, AssignSize),
		execBytes,
		enc(&Completion{ID: 5, Failed: true, StartNs: 1, EndNs: 2, SleepStartNs: -3, SleepEndNs: 1, Err: []byte("boom")}, CompletionLen(4)),
		enc(&Alloc{ID: 8, Node: 1, Buffer: 9, Size: 1 << 33}, AllocSize),
		enc(&Free{Node: 1, Buffer: 9}, FreeSize),
		enc(&Copy{ID: 11, DstNode: 1, Ranges: []CopyRange{{0, 0, 10}}}, CopyLen(1)),
		enc(&Workers{Op: WorkersAdd, Seq: 3, Workers: []WorkerRef{{ID: 1, Arch: 1}}}, WorkersLen(1)),
		enc(&Parts{Node: 1, Buffer: 9, Parts: []Part{{0, 40}, {512, 8}}}, PartsLen(2)),
		nil,
		{1, 0, 0},
		enc(pushImpls, pushImpls.Len()),
	}
	// Counts that claim more than the message holds, up to the largest.
	lie := func(b []byte, at int, v uint32) []byte {
		b = append([]byte(nil), b...)
		binary.LittleEndian.PutUint32(b[at:], v)
		return b
	}
	seeds = append(seeds,
		lie(seeds[0], 36, 0xffffffff),            // push: transfers
		lie(seeds[1], PushLen(1)+16, 0xffffffff), // push: its exec's buffers
		lie(seeds[1], PushLen(1)+20, 0x80000000), // push: its exec's argument
		lie(execBytes, 16, 0xffffffff),           // exec: buffers
		lie(execBytes, 20, 0xffffffff),           // exec: argument
		lie(execBytes, 20, 0x7fffffff),
		lie(seeds[5], 32, 0xffffffff),            // completion: error length
		lie(seeds[8], 4, 0xffffffff),             // copy: ranges
		lie(seeds[9], 16, 0xffffffff),            // workers
		lie(seeds[13], PushLen(1)+4, 0x00080808), // push: implementations
		lie(seeds[10], 4, 0xffffffff),            // parts
	)
	good := parallelSeeds()
	return append(seeds,
		lie(good[0], ExecSize(0, 1)+4, 0xffffffff), // exec: team members
		lie(good[1], PushLen(0)+4, 0xffffffff),     // push: parallel sizes
	)
}

// parallelSeeds are a parallel task's Exec, with its team, and Push, with
// its sizes.
func parallelSeeds() [][]byte {
	team := &Exec{ID: 9, Kernel: 1, Flags: ExecSPMD, Arg: []byte("a"), Combined: 4, Members: []int32{0, 1, 2}}
	pushPar := &Push{ID: 5, Flags: PushParallel | PushName, Parallel: []SizeLength{{Size: 2, Length: 40}, {Size: 4, Length: -1}}, Name: []byte("spmd_model")}
	var out [][]byte
	for _, m := range []interface {
		message
		Len() int
	}{team, pushPar} {
		b := make([]byte, m.Len())
		m.Encode(b)
		out = append(out, b)
	}
	return out
}

// FuzzDecode: every decoder takes arbitrary bytes without panicking; it
// refuses messages of another type and short ones; what it accepts
// encodes back to a message that decodes to the same value.
func FuzzDecode(f *testing.F) {
	for _, s := range append(seedMessages(), parallelSeeds()...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range decoders {
			m := d.new()
			err := m.Decode(data)
			if Type(data) != d.typ {
				if err == nil {
					t.Fatalf("%s: decoded a message of type %d without error", d.name, Type(data))
				}
				continue
			}
			if err != nil {
				continue
			}
			b := make([]byte, d.size(m))
			if len(b) > len(data) {
				t.Fatalf("%s: decoded %d bytes as a message of %d", d.name, len(data), len(b))
			}
			m.Encode(b)
			again := d.new()
			if err := again.Decode(b); err != nil {
				t.Fatalf("%s: re-encoded message: %v", d.name, err)
			}
			normalize(m)
			normalize(again)
			if !reflect.DeepEqual(m, again) {
				t.Fatalf("%s: decoded %+v, re-encoded and decoded %+v", d.name, m, again)
			}
			// Every proper prefix is short.
			for _, n := range []int{0, 3, len(b) / 2, len(b) - 1} {
				if n < 0 || n >= len(b) {
					continue
				}
				if err := d.new().Decode(b[:n]); !errors.Is(err, ErrShort) {
					t.Fatalf("%s: %d of %d bytes: error %v, want ErrShort", d.name, n, len(b), err)
				}
			}
		}
	})
}

// normalize makes empty and nil slices alike for DeepEqual.
func normalize(m message) {
	switch v := m.(type) {
	case *Push:
		if len(v.Transfer) == 0 {
			v.Transfer = nil
		}
		if len(v.Exec) == 0 {
			v.Exec = nil
		}
		for a := range v.Impls {
			if len(v.Impls[a]) == 0 {
				v.Impls[a] = nil
			}
		}
		if len(v.Parallel) == 0 {
			v.Parallel = nil
		}
		if len(v.Name) == 0 {
			v.Name = nil
		}
	case *Exec:
		if len(v.Buffers) == 0 {
			v.Buffers = nil
		}
		if len(v.Members) == 0 {
			v.Members = nil
		}
		if len(v.Arg) == 0 {
			v.Arg = nil
		}
	case *Completion:
		if len(v.Err) == 0 {
			v.Err = nil
		}
	case *Copy:
		if len(v.Ranges) == 0 {
			v.Ranges = nil
		}
	case *Workers:
		if len(v.Workers) == 0 {
			v.Workers = nil
		}
	case *Parts:
		if len(v.Parts) == 0 {
			v.Parts = nil
		}
	}
}

// FuzzRoundTrip: a message built from arbitrary field values decodes to
// the same values after encoding.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(7), uint32(3), int64(-1), uint8(2), []byte("arg"), true)
	f.Add(uint64(1<<63), uint32(0xffffffff), int64(-1<<63), uint8(0), []byte{}, false)
	f.Fuzz(func(t *testing.T, id uint64, u uint32, i int64, n uint8, payload []byte, flag bool) {
		n %= 8
		exec := &Exec{ID: id, Kernel: u, Arg: payload}
		for k := uint8(0); k < n; k++ {
			exec.Buffers = append(exec.Buffers, BufferDesc{Node: n + k, Offset: id + uint64(k), Mode: kernel.Mode(k),
				Layout: kernel.Layout{Interface: kernel.InterfaceID(u + uint32(k)), ElemSize: u, NX: uint64(i), NY: id, NZ: uint64(k), LD: ^id, LDZ: uint64(u)}})
		}
		execBytes := make([]byte, ExecSize(len(exec.Buffers), len(exec.Arg)))
		exec.Encode(execBytes)
		transfer := make([]int64, n)
		for k := range transfer {
			transfer[k] = i - int64(k)
		}
		refs := make([]WorkerRef, n)
		for k := range refs {
			refs[k] = WorkerRef{ID: int32(u) - int32(k), Arch: u, Node: int32(i)}
		}
		ranges := make([]CopyRange, n)
		for k := range ranges {
			ranges[k] = CopyRange{SrcOffset: id, DstOffset: uint64(i), Len: uint64(k)}
		}
		parts := make([]Part, n)
		for k := range parts {
			parts[k] = Part{Offset: id >> k, Size: uint64(i) + uint64(k)}
		}
		flags := u &^ PushExec
		var pexec []byte
		if flag {
			flags |= PushExec
			pexec = execBytes
		}
		var impls [NumArch][]Impl
		if flags&PushImpls != 0 {
			for k := uint8(0); k < n; k++ {
				impls[k%NumArch] = append(impls[k%NumArch], Impl{Length: i - int64(k), Kernel: int32(u) >> k})
			}
		}
		var sizes []SizeLength
		if flags&PushParallel != 0 {
			for k := uint8(0); k < n; k++ {
				sizes = append(sizes, SizeLength{Size: int32(k) + 2, Length: i >> k})
			}
		}
		var name []byte
		if flags&PushName != 0 {
			name = payload[:min(len(payload), MaxName)]
		}
		push := &Push{ID: id, Priority: int32(u), ArchMask: u, Worker: int32(i), ReleasedBy: int32(i >> 32), Codelet: u,
			Flags: flags, Length: [NumArch]int64{i, -i, i ^ 1}, Transfer: transfer, Impls: impls, Exec: pexec, Parallel: sizes, Name: name}
		team := &Exec{ID: id, Kernel: u, Flags: ExecSPMD, Arg: payload, Combined: int32(u)}
		if flag {
			team.Flags = ExecForkJoin
		}
		for k := uint8(0); k <= n; k++ {
			team.Members = append(team.Members, int32(u)+int32(k))
		}
		for _, c := range []struct {
			in   message
			size int
			out  message
		}{
			{push, push.Len(), &Push{}},
			{&Done{Worker: int32(u), ID: id, DurationNs: i}, DoneSize, &Done{}},
			{&Assign{Worker: int32(u), ID: id, Flags: u, Impl: ^u, At: ^id}, AssignSize, &Assign{}},
			{exec, len(execBytes), &Exec{}},
			{team, team.Len(), &Exec{}},
			{&Completion{ID: id, Failed: flag, StartNs: i, EndNs: -i, SleepStartNs: i ^ 0x55, SleepEndNs: ^i, Err: payload}, CompletionLen(len(payload)), &Completion{}},
			{&Alloc{ID: id, Node: u, Buffer: ^id, Size: uint64(i)}, AllocSize, &Alloc{}},
			{&Free{Node: u, Buffer: id}, FreeSize, &Free{}},
			{&Copy{ID: id, SrcNode: u, DstNode: ^u, SrcBuffer: uint64(i), DstBuffer: ^id, Ranges: ranges}, CopyLen(len(ranges)), &Copy{}},
			{&Workers{Op: u, Seq: id, Workers: refs}, WorkersLen(len(refs)), &Workers{}},
			{&Parts{Node: u, Buffer: id, Parts: parts}, PartsLen(len(parts)), &Parts{}},
		} {
			b := make([]byte, c.size)
			c.in.Encode(b)
			if err := c.out.Decode(b); err != nil {
				t.Fatalf("%T: %v", c.in, err)
			}
			normalize(c.in)
			normalize(c.out)
			if !reflect.DeepEqual(c.in, c.out) {
				t.Fatalf("encoded %+v, decoded %+v", c.in, c.out)
			}
		}
	})
}

// Every decoder refuses a message of another type (ErrType), and a message
// whose counts claim more than it holds (ErrShort), on 32-bit platforms
// too, where the sizes computed in int used to wrap and the decoders
// panicked.
func TestDecodeRefusesGarbage(t *testing.T) {
	seeds := seedMessages()
	for _, d := range decoders {
		for _, c := range []struct {
			name string
			msg  []byte
			want error
		}{
			{"type 0", make([]byte, 256), ErrType},
			{"type 99", binary.LittleEndian.AppendUint32(nil, 99), ErrShort},
			{"type 99, long", append(binary.LittleEndian.AppendUint32(nil, 99), make([]byte, 252)...), ErrType},
		} {
			if err := d.new().Decode(c.msg); !errors.Is(err, c.want) {
				t.Errorf("%s, %s: error %v, want %v", d.name, c.name, err, c.want)
			}
		}
	}
	for i, msg := range seeds[14:] { // the lying counts
		for _, d := range decoders {
			if Type(msg) != d.typ {
				continue
			}
			if err := d.new().Decode(msg); !errors.Is(err, ErrShort) {
				t.Errorf("%s with a lying count (seed %d): error %v, want ErrShort", d.name, 14+i, err)
			}
		}
	}
}
