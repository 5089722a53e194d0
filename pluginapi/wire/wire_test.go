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
		{"done", &Done{Worker: 3, ID: 4, DurationNs: 5}, DoneSize, &Done{}},
		{"assign", &Assign{Worker: 1, ID: 2}, AssignSize, &Assign{}},
		{"assign/posted", &Assign{Worker: 1, ID: 2, Flags: AssignPosted}, AssignSize, &Assign{}},
		{"exec", &exec, ExecSize(2, 3), &Exec{}},
		{"completion", &Completion{ID: 5, Failed: true, StartNs: 1, EndNs: 2, Err: []byte("boom")}, CompletionLen(4), &Completion{}},
		{"alloc", &Alloc{ID: 8, Node: 1, Buffer: 9, Size: 1 << 33}, AllocSize, &Alloc{}},
		{"free", &Free{Node: 1, Buffer: 9}, FreeSize, &Free{}},
		{"copy", &cp, CopyLen(2), &Copy{}},
		{"workers", &Workers{Op: WorkersRemove, Seq: 3, Workers: []WorkerRef{{ID: 1, Arch: 1}, {ID: 4, Arch: 2, Node: 1}}}, WorkersLen(2), &Workers{}},
		{"workers/ack", &Workers{Op: WorkersAdd, Seq: 9}, WorkersLen(0), &Workers{}},
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
