package wire

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParallelRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		exec Exec
		rank map[int]int // worker -> rank
	}{
		{"spmd", Exec{ID: 3, Kernel: 2, Flags: ExecSPMD, Arg: []byte("xy"), Combined: 9, Members: []int32{4, 5, 6, 7}},
			map[int]int{4: 0, 7: 3, 8: -1}},
		{"forkjoin, no argument", Exec{ID: 1, Flags: ExecForkJoin | ExecAsync, Combined: 2, Members: []int32{0, 1}},
			map[int]int{0: 0, 1: 1}},
		{"sequential", Exec{ID: 5, Arg: []byte("z")}, map[int]int{0: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, tt.exec.Len())
			tt.exec.Encode(b)
			// Decoded into a value that held a team before: a sequential
			// Exec must come out without one.
			got := Exec{Combined: 77, Members: []int32{1, 2, 3}}
			if err := got.Decode(b); err != nil {
				t.Fatal(err)
			}
			if got.Combined != tt.exec.Combined || !reflect.DeepEqual(append([]int32{}, got.Members...), append([]int32{}, tt.exec.Members...)) {
				t.Fatalf("decoded team %d %v, want %d %v", got.Combined, got.Members, tt.exec.Combined, tt.exec.Members)
			}
			for w, r := range tt.rank {
				if got := got.Rank(w); got != r {
					t.Errorf("Rank(%d) = %d, want %d", w, got, r)
				}
			}
			// Cut anywhere, the message is short.
			for n := ExecHeaderSize; n < len(b); n++ {
				if err := new(Exec).Decode(b[:n]); !errors.Is(err, ErrShort) {
					t.Fatalf("%d of %d bytes: %v, want ErrShort", n, len(b), err)
				}
			}
		})
	}
}

func TestParallelRefused(t *testing.T) {
	enc := func(e *Exec) []byte {
		b := make([]byte, e.Len())
		e.Encode(b)
		return b
	}
	both := enc(&Exec{ID: 1, Flags: ExecSPMD, Members: []int32{0}})
	le.PutUint32(both[24:], ExecSPMD|ExecForkJoin)
	empty := enc(&Exec{ID: 2, Flags: ExecForkJoin, Members: []int32{0}})
	le.PutUint32(empty[ExecSize(0, 0)+4:], 0)
	tests := []struct {
		name string
		msg  []byte
		want string
	}{
		{"both kinds", both, "both SPMD and FORKJOIN"},
		{"no member", empty, "team of 0 members"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := new(Exec).Decode(tt.msg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestPushParallelSection(t *testing.T) {
	p := Push{ID: 8, Flags: PushParallel | PushImpls, Transfer: []int64{3},
		Impls:    [NumArch][]Impl{{{Length: 5, Kernel: 0}, {Length: -1, Kernel: 1}}},
		Parallel: []SizeLength{{Size: 2, Length: 100}, {Size: 4, Length: -1}, {Size: 8, Length: 30}}}
	b := make([]byte, p.Len())
	p.Encode(b)
	var got Push
	if err := got.Decode(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Parallel, p.Parallel) || !reflect.DeepEqual(got.Impls, p.Impls) {
		t.Fatalf("decoded sizes %v impls %v, want %v %v", got.Parallel, got.Impls, p.Parallel, p.Impls)
	}
	// A push without the flag decoded into the same value has no sizes.
	q := Push{ID: 9}
	b = make([]byte, q.Len())
	q.Encode(b)
	if err := got.Decode(b); err != nil || len(got.Parallel) != 0 {
		t.Fatalf("decoded a sequential push: sizes %v, error %v", got.Parallel, err)
	}
	// The section's own size must match its count.
	p = Push{ID: 8, Flags: PushParallel, Parallel: []SizeLength{{Size: 2, Length: 1}}}
	b = make([]byte, p.Len())
	p.Encode(b)
	le.PutUint32(b[PushLen(0):], 999)
	if err := got.Decode(b); err == nil || !strings.Contains(err.Error(), "says 999 bytes") {
		t.Fatalf("Decode of a lying section: %v", err)
	}
}
