package wire

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/starpu-go/starpu/pluginapi/kernel"
)

// Every message survives encoding, and a truncated one is refused.
func TestRoundTrip(t *testing.T) {
	type codec interface {
		Decode([]byte) error
	}
	exec := Exec{ID: 7, Kernel: 3, Flags: ExecAsync, Arg: []byte("arg"), Buffers: []BufferDesc{
		{Node: 2, Offset: 1 << 40, Mode: kernel.RW, Layout: kernel.Layout{Interface: kernel.Matrix, ElemSize: 4, NX: 5, NY: 6, LD: 8}},
		{Offset: 64, Mode: kernel.R, Layout: kernel.Layout{Interface: kernel.FirstPluginInterface + 1, ElemSize: 8, NX: 1, NY: 2, NZ: 3, LD: 4, LDZ: 5}},
	}}
	push := Push{ID: 1 << 50, Priority: -3, ArchMask: 5, Worker: -1, ReleasedBy: 2, Codelet: 9, Flags: PushLocality,
		Length: [NumArch]int64{100, -1, 7}, Transfer: []int64{0, 1234}}
	execBytes := make([]byte, ExecSize(2, 3))
	exec.Encode(execBytes)
	impls := [NumArch][]Impl{{{Length: 100, Kernel: 3}, {Length: -1, Kernel: -1}, {Length: 7, Kernel: 0}}, nil, {{Length: -1, Kernel: 2}}}
	pushImpls := Push{ID: 4, Flags: PushImpls, Transfer: []int64{5}, Impls: impls}
	pushBoth := Push{ID: 5, Flags: PushImpls | PushExec, Transfer: []int64{5, 6}, Impls: impls, Exec: execBytes}
	cp := Copy{ID: 11, SrcNode: 0, DstNode: 1, SrcBuffer: 4096, DstBuffer: 17, Ranges: []CopyRange{{0, 0, 10}, {20, 10, 5}}}
	for _, tc := range []struct {
		name string
		in   interface{ Encode([]byte) }
		size int
		out  codec
	}{
		{"push", &push, PushLen(2), &Push{}},
		{"push/no nodes", &Push{ID: 2, Length: [NumArch]int64{-1, -1, -1}}, PushLen(0), &Push{}},
		{"push/exec", &Push{ID: 3, Flags: PushExec, Transfer: []int64{5}, Exec: execBytes}, PushLen(1) + len(execBytes), &Push{}},
		{"push/impls", &pushImpls, PushLen(1) + ImplsHeaderSize + 4*ImplSize, &Push{}},
		{"push/impls, none listed", &Push{ID: 6, Flags: PushImpls}, PushLen(0) + ImplsHeaderSize, &Push{}},
		{"push/impls and exec", &pushBoth, pushBoth.Len(), &Push{}},
		{"push/name and exec", &Push{ID: 7, Flags: PushName | PushExec, Name: []byte("chol_model_22"), Exec: execBytes}, PushLen(0) + NameHeaderSize + 16 + len(execBytes), &Push{}},
		{"push/empty name", &Push{ID: 8, Flags: PushName, Name: []byte{}}, PushLen(0) + NameHeaderSize, &Push{}},
		{"done", &Done{Worker: 3, ID: 4, DurationNs: 5}, DoneSize, &Done{}},
		{"assign", &Assign{Worker: 1, ID: 2}, AssignSize, &Assign{}},
		{"assign/posted", &Assign{Worker: 1, ID: 2, Flags: AssignPosted}, AssignSize, &Assign{}},
		{"assign/impl", &Assign{Worker: 1, ID: 2, Flags: AssignPosted | AssignImpl, Impl: 7, At: 1 << 40}, AssignSize, &Assign{}},
		{"exec", &exec, ExecSize(2, 3), &Exec{}},
		{"completion", &Completion{ID: 5, Failed: true, StartNs: 1, EndNs: 2, SleepStartNs: -7, SleepEndNs: 1, Err: []byte("boom")}, CompletionLen(4), &Completion{}},
		{"completion not run", &Completion{ID: 6, Failed: true, NotRun: true, StartNs: 1, EndNs: 1, Err: []byte("refused")}, CompletionLen(7), &Completion{}},
		{"alloc", &Alloc{ID: 8, Node: 1, Buffer: 9, Size: 1 << 33}, AllocSize, &Alloc{}},
		{"free", &Free{Node: 1, Buffer: 9}, FreeSize, &Free{}},
		{"copy", &cp, CopyLen(2), &Copy{}},
		{"workers", &Workers{Op: WorkersRemove, Seq: 3, Workers: []WorkerRef{{ID: 1, Arch: 1}, {ID: 4, Arch: 2, Node: 1}}}, WorkersLen(2), &Workers{}},
		{"workers/ack", &Workers{Op: WorkersAdd, Seq: 9}, WorkersLen(0), &Workers{}},
		{"parts", &Parts{Node: 1, Buffer: 17, Parts: []Part{{0, 40}, {512, 0}, {1024, 1 << 40}}}, PartsLen(3), &Parts{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, tc.size)
			tc.in.Encode(b)
			if err := tc.out.Decode(b); err != nil {
				t.Fatal(err)
			}
			got, want := tc.out, tc.in
			if p, ok := got.(*Push); ok && len(p.Transfer) == 0 {
				p.Transfer = want.(*Push).Transfer
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %+v, want %+v", got, want)
			}
			if err := tc.out.Decode(b[:tc.size-1]); !errors.Is(err, ErrShort) {
				t.Fatalf("truncated message: error %v, want ErrShort", err)
			}
		})
	}
}

// A Push's implementations section lies after the transfers and before
// the Exec, and Decode refuses one whose counts or size do not add up.
func TestPushImplsSection(t *testing.T) {
	execBytes := make([]byte, ExecSize(0, 2))
	(&Exec{ID: 9, Kernel: 1, Arg: []byte("ab")}).Encode(execBytes)
	p := Push{ID: 9, Flags: PushImpls | PushExec, Transfer: []int64{1, 2, 3},
		Impls: [NumArch][]Impl{{{Length: 10, Kernel: 4}, {Length: 20, Kernel: 5}}}, Exec: execBytes}
	if got, want := p.ExecOffset(), PushLen(3)+ImplsHeaderSize+2*ImplSize; got != want {
		t.Fatalf("ExecOffset = %d, want %d", got, want)
	}
	b := make([]byte, p.Len())
	p.Encode(b)
	if Type(b[p.ExecOffset():]) != TypeExec {
		t.Fatalf("no Exec at ExecOffset %d", p.ExecOffset())
	}
	var q Push
	if err := q.Decode(b); err != nil || len(q.Impls[0]) != 2 || q.Impls[0][1] != (Impl{Length: 20, Kernel: 5}) || len(q.Exec) != len(execBytes) {
		t.Fatalf("decoded %+v, %v", q, err)
	}
	// Decoding into a Push that held more implementations drops them.
	q.Impls[2] = append(q.Impls[2], Impl{Kernel: 1})
	p.Flags &^= PushImpls
	b2 := make([]byte, p.Len())
	p.Encode(b2)
	if err := q.Decode(b2); err != nil || len(q.Impls[0])+len(q.Impls[2]) != 0 {
		t.Fatalf("a push without PushImpls decoded to implementations %v (error %v)", q.Impls, err)
	}
	off := PushLen(3)
	for _, c := range []struct {
		name string
		edit func(b []byte)
		want string
	}{
		{"too many", func(b []byte) { b[off+5] = MaxImpls + 1 }, "at most 8"},
		{"size word", func(b []byte) { le.PutUint32(b[off:], 9) }, "says 9 bytes"},
		{"counts beyond the message", func(b []byte) { b[off+4] = MaxImpls }, ErrShort.Error()},
	} {
		bad := append([]byte(nil), b...)
		c.edit(bad)
		if err := new(Push).Decode(bad); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

// Now reads CLOCK_MONOTONIC itself, the clock other processes read: it must
// agree with the system call.
func TestNowIsClockMonotonic(t *testing.T) {
	var ts unix.Timespec
	before := Now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	after := Now()
	if sys := ts.Nano(); sys < before || sys > after {
		t.Fatalf("CLOCK_MONOTONIC %d outside Now's [%d, %d]", sys, before, after)
	}
}

// SetErr keeps short errors whole and cuts long ones on a rune boundary
// within MaxErrLen, saying how much it cut.
func TestCompletionSetErr(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  string
		cut  bool
	}{
		{"short", "kernel failed", false},
		{"exactly the bound", strings.Repeat("x", MaxErrLen), false},
		{"ascii over", strings.Repeat("x", MaxErrLen+1), true},
		{"multi-byte runes", strings.Repeat("é", 40000), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Completion
			c.SetErr(errors.New(tc.msg))
			if !c.Failed || len(c.Err) > MaxErrLen || !utf8.Valid(c.Err) {
				t.Fatalf("failed %v, %d bytes, valid UTF-8 %v", c.Failed, len(c.Err), utf8.Valid(c.Err))
			}
			if got := strings.Contains(string(c.Err), "bytes cut]"); got != tc.cut {
				t.Fatalf("cut note %v, want %v: %q", got, tc.cut, c.Err[max(0, len(c.Err)-40):])
			}
			if !tc.cut && string(c.Err) != tc.msg {
				t.Fatal("a short error changed")
			}
			b := make([]byte, CompletionLen(len(c.Err)))
			c.Encode(b)
			var d Completion
			if err := d.Decode(b); err != nil || string(d.Err) != string(c.Err) {
				t.Fatalf("round trip: %v", err)
			}
		})
	}
}

func TestExecAfter(t *testing.T) {
	for _, c := range []struct{ id, pred uint64 }{{10, 9}, {10, 1}, {5, 9}, {1 << 40, 1<<40 - 1<<30}, {7, 1<<31 + 6}} {
		var e Exec
		e.ID = c.id
		b := make([]byte, ExecSize(0, 0))
		e.Encode(b)
		if _, ok := ExecAfterOf(b); ok {
			t.Fatalf("a plain Exec reads as chained")
		}
		SetExecAfter(b, c.pred)
		got, ok := ExecAfterOf(b)
		if !ok || got != c.pred {
			t.Errorf("id %d after %d: read back %d, %v", c.id, c.pred, got, ok)
		}
		var d Exec
		if err := d.Decode(b); err != nil || d.Flags&ExecAfter == 0 || AfterOf(d.ID, d.After) != c.pred {
			t.Errorf("id %d after %d: decoded %+v, %v", c.id, c.pred, d, err)
		}
	}
}
