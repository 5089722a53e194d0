package kernel_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/kernel"
)

type params struct {
	Alpha float64
	n     int32 // unexported fields pack too
	Flags [3]bool
	Pos   struct{ X, Y float32 }
	Steps int
}

// sameShape is params under another name, as a kernel compiled in another
// binary would declare it.
type sameShape struct {
	A float64
	B int32
	C [3]bool
	D struct{ X, Y float32 }
	E int
}

type celsius float64

type pair [2]complex64

func mustPack(t testing.TB, vals ...any) []byte {
	t.Helper()
	b, err := kernel.Pack(vals...)
	if err != nil {
		t.Fatalf("Pack: %v", err)
	}
	return b
}

func TestPackUnpackRoundTrip(t *testing.T) {
	p := params{Alpha: 2.5, n: -7, Flags: [3]bool{true, false, true}, Pos: struct{ X, Y float32 }{1, -2}, Steps: 1 << 40}
	grid := [2][3]int16{{1, 2, 3}, {-4, -5, -6}}
	in := []any{true, int(-3), int8(-8), int16(-16), int32(-32), int64(math.MinInt64), uint(3), uint8(8), uint16(16),
		uint32(32), uint64(math.MaxUint64), float32(1.5), math.Pi, complex64(1 + 2i), complex128(3 - 4i),
		"héllo", []byte{1, 2, 3}, []float32{0.5, 1.5}, []float64(nil), []int64{-1, 1 << 62}, p, grid, celsius(21.5),
		pair{1i, 2}, []params{p, {Alpha: 1}}, [0]int32{}, struct{}{}, ""}
	arg := mustPack(t, in...)
	if n, err := kernel.NumArgs(arg); err != nil || n != len(in) {
		t.Fatalf("NumArgs = %d, %v; want %d", n, err, len(in))
	}
	var (
		b    bool
		i    int
		i8   int8
		i16  int16
		i32  int32
		i64  int64
		u    uint
		u8   uint8
		u16  uint16
		u32  uint32
		u64  uint64
		f32  float32
		f64  float64
		c64  complex64
		c128 complex128
		s    string
		bs   []byte
		fs   []float32
		fnil []float64
		is   []int64
		pp   params
		gr   [2][3]int16
		c    celsius
		pr   pair
		ps   []params
		z    [0]int32
		e    struct{}
		es   string
	)
	ptrs := []any{&b, &i, &i8, &i16, &i32, &i64, &u, &u8, &u16, &u32, &u64, &f32, &f64, &c64, &c128, &s, &bs, &fs, &fnil,
		&is, &pp, &gr, &c, &pr, &ps, &z, &e, &es}
	if err := kernel.Unpack(arg, ptrs...); err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	for k := range in {
		got := reflect.ValueOf(ptrs[k]).Elem().Interface()
		if !reflect.DeepEqual(got, in[k]) {
			t.Errorf("argument %d: got %#v, want %#v", k, got, in[k])
		}
	}
}

func TestUnpackSameShapeOtherType(t *testing.T) {
	p := params{Alpha: 1, n: 2, Flags: [3]bool{false, true, false}, Steps: 3}
	p.Pos.Y = 4
	var s sameShape
	if err := kernel.Unpack(mustPack(t, p), &s); err != nil {
		t.Fatal(err)
	}
	if s.A != 1 || s.B != 2 || s.C != [3]bool{false, true, false} || s.D.Y != 4 || s.E != 3 {
		t.Fatalf("got %+v", s)
	}
}

func TestAppendPack(t *testing.T) {
	arg := mustPack(t, int32(1))
	arg, err := kernel.AppendPack(arg, "two", 3.0)
	if err != nil {
		t.Fatal(err)
	}
	var (
		a int32
		b string
		c float64
	)
	if err := kernel.Unpack(arg, &a, &b, &c); err != nil || a != 1 || b != "two" || c != 3 {
		t.Fatalf("got %v %q %v, %v", a, b, c, err)
	}
	if _, err := kernel.AppendPack([]byte{1, 2, 3}, 1); !errors.Is(err, kernel.ErrArgFormat) {
		t.Fatalf("AppendPack to raw bytes: %v, want ErrArgFormat", err)
	}
	// A failed AppendPack leaves its destination as it was.
	before := string(arg)
	if _, err := kernel.AppendPack(arg, 1, make(chan int)); err == nil || string(arg) != before {
		t.Fatalf("AppendPack of a channel: %v, destination changed: %v", err, string(arg) != before)
	}
}

func TestUnpackSkipAndContext(t *testing.T) {
	ctx := &kernel.Context{Arg: mustPack(t, "skipped", []int32{1, 2}, params{Alpha: 3}, 4.5)}
	var f float64
	if err := ctx.Unpack(nil, nil, nil, &f); err != nil || f != 4.5 {
		t.Fatalf("got %v, %v", f, err)
	}
}

func TestUnpackReusesSliceCapacity(t *testing.T) {
	buf := make([]float32, 1, 8)
	arg := mustPack(t, []float32{1, 2, 3})
	if err := kernel.Unpack(arg, &buf); err != nil {
		t.Fatal(err)
	}
	if len(buf) != 3 || cap(buf) != 8 || buf[2] != 3 {
		t.Fatalf("got %v (cap %d)", buf, cap(buf))
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := kernel.Unpack(arg, &buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Unpack into a slice with room: %v allocations, want 0", allocs)
	}
}

func TestUnpackBoolNormalised(t *testing.T) {
	arg := mustPack(t, [2]bool{true, true}, true)
	arg[len(arg)-3] = 2 // bb[1]
	arg[len(arg)-1] = 7 // b
	var (
		b  bool
		bb [2]bool
	)
	if err := kernel.Unpack(arg, &bb, &b); err != nil {
		t.Fatal(err)
	}
	if !b || !bb[1] || b != true || bb[1] != true {
		t.Fatalf("got %v %v", b, bb)
	}
	// Memory holds a real true: comparisons and conversions behave.
	if x := *(*uint8)(unsafe.Pointer(&bb[1])); x != 1 {
		t.Fatalf("bool holds %d, want 1", x)
	}
}

func TestUnpackMismatch(t *testing.T) {
	arg := mustPack(t, int32(1), float32(2), params{}, []float64{1}, "s")
	var (
		i32 int32
		f32 float32
		f64 float64
		p   params
		fs  []float64
		s   string
		i64 int64
		ss  struct{ A, B float64 }
		fs2 []float32
		bs  []byte
	)
	for _, c := range []struct {
		name string
		ptrs []any
		want error
		msg  []string
	}{
		{"too few", []any{&i32, &f32}, kernel.ErrArgMismatch, []string{"5 arguments packed", "asks for 2"}},
		{"too many", []any{&i32, &f32, &p, &fs, &s, &s}, kernel.ErrArgMismatch, []string{"5 arguments packed", "asks for 6"}},
		{"scalar", []any{&i32, &f64, &p, &fs, &s}, kernel.ErrArgMismatch, []string{"argument 1", "packed as float32", "asks for float64"}},
		{"int size", []any{&i64, &f32, &p, &fs, &s}, kernel.ErrArgMismatch, []string{"argument 0", "packed as int32", "asks for int64"}},
		{"struct shape", []any{&i32, &f32, &ss, &fs, &s}, kernel.ErrArgMismatch, []string{"argument 2", "kernel_test.params", "struct { A float64; B float64 }"}},
		{"slice elem", []any{&i32, &f32, &p, &fs2, &s}, kernel.ErrArgMismatch, []string{"argument 3", "packed as []float64", "asks for []float32"}},
		{"string vs bytes", []any{&i32, &f32, &p, &fs, &bs}, kernel.ErrArgMismatch, []string{"argument 4", "packed as string", "asks for []uint8"}},
		{"not a pointer", []any{i32, &f32, &p, &fs, &s}, kernel.ErrArgType, []string{"argument 0", "needs a pointer"}},
		{"nil pointer", []any{(*params)(nil), &f32, &p, &fs, &s}, kernel.ErrArgType, []string{"argument 0", "nil *kernel_test.params"}},
		{"unsupported", []any{new(*int32), &f32, &p, &fs, &s}, kernel.ErrArgType, []string{"argument 0", "*int32 is a ptr"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := kernel.Unpack(arg, c.ptrs...)
			if !errors.Is(err, c.want) {
				t.Fatalf("Unpack = %v, want %v", err, c.want)
			}
			for _, m := range c.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
		})
	}
}

func TestPackRefuses(t *testing.T) {
	x := 1
	for _, c := range []struct {
		name string
		val  any
		msg  string
	}{
		{"nil", nil, "nil has no type"},
		{"pointer", &x, "*int is a ptr"},
		{"map", map[int]int{}, "is a map"},
		{"func", func() {}, "is a func"},
		{"uintptr", uintptr(1), "is a uintptr"},
		{"struct with string", struct{ Name string }{}, ".Name is a string"},
		{"struct with slice", struct{ V []int }{}, ".V is a []int"},
		{"array of strings", [2]string{}, "[2]string holds string"},
		{"slice of strings", []string{"a"}, "slices of string cannot be packed"},
		{"slice of slices", [][]byte{{1}}, "slices of []uint8 cannot be packed"},
		{"interface", []any{1}, "slices of interface {} cannot be packed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := kernel.Pack(int32(0), c.val)
			if !errors.Is(err, kernel.ErrArgType) || !strings.Contains(err.Error(), "value 1") || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Pack = %v, want ErrArgType naming value 1 and saying %q", err, c.msg)
			}
		})
	}
}

func TestUnpackMalformed(t *testing.T) {
	good := mustPack(t, int32(1), "abc", []float64{1, 2}, params{})
	var (
		i   int32
		s   string
		fs  []float64
		p   params
		all = []any{&i, &s, &fs, &p}
	)
	cases := map[string][]byte{
		"empty":       nil,
		"raw":         {1, 2, 3, 4, 5, 6, 7, 8, 9},
		"version":     append([]byte{'S', 'P', 'A', 9}, good[4:]...),
		"count":       append(append([]byte{}, good[:4]...), 0xff, 0xff, 0xff, 0x7f),
		"trailing":    append(append([]byte{}, good...), 0),
		"bad kind":    append(append([]byte{}, good[:8]...), 0xee),
		"string long": func() []byte { b := append([]byte{}, good...); b[8+5+1] = 0xff; return b }(),
	}
	for n := 9; n < len(good); n += 3 {
		cases["truncated"+strconv.Itoa(n)] = good[:n]
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			err := kernel.Unpack(b, all...)
			if !errors.Is(err, kernel.ErrArgFormat) && !errors.Is(err, kernel.ErrArgMismatch) {
				t.Fatalf("Unpack = %v, want ErrArgFormat or ErrArgMismatch", err)
			}
		})
	}
}

// TestUnpackDoesNotAllocate: a kernel's Unpack of numbers, arrays and
// structs into its locals allocates nothing, so its locals stay on its
// stack.
func TestUnpackDoesNotAllocate(t *testing.T) {
	arg := mustPack(t, int32(3), float32(2), 1.5, true, int(7))
	allocs := testing.AllocsPerRun(100, func() { kernelScalars(arg) })
	if allocs != 0 {
		t.Errorf("Unpack of scalars: %v allocations, want 0", allocs)
	}
	arg = mustPack(t, params{Alpha: 1}, celsius(2), complex128(1i), [4]float64{})
	allocs = testing.AllocsPerRun(100, func() { kernelStruct(arg) })
	if allocs != 0 {
		t.Errorf("Unpack of a struct, a named float, a complex and an array: %v allocations, want 0", allocs)
	}
}

//go:noinline
func kernelScalars(arg []byte) float64 {
	var (
		n     int32
		alpha float32
		beta  float64
		trans bool
		steps int
	)
	if err := kernel.Unpack(arg, &n, &alpha, &beta, &trans, &steps); err != nil {
		panic(err)
	}
	return float64(n) * float64(alpha) * beta * float64(steps)
}

//go:noinline
func kernelStruct(arg []byte) float64 {
	var (
		p params
		c celsius
		z complex128
		a [4]float64
	)
	if err := kernel.Unpack(arg, &p, &c, &z, &a); err != nil {
		panic(err)
	}
	return p.Alpha + float64(c) + real(z) + a[0]
}

func BenchmarkUnpack(b *testing.B) {
	b.Run("scalars5", func(b *testing.B) {
		arg := mustPack(b, int32(3), float32(2), 1.5, true, int(7))
		b.ReportAllocs()
		for b.Loop() {
			kernelScalars(arg)
		}
	})
	b.Run("struct+named+complex+array", func(b *testing.B) {
		arg := mustPack(b, params{Alpha: 1}, celsius(2), complex128(1i), [4]float64{})
		b.ReportAllocs()
		for b.Loop() {
			kernelStruct(arg)
		}
	})
	b.Run("slice1k-reused", func(b *testing.B) {
		arg := mustPack(b, make([]float64, 1024))
		var v []float64
		b.ReportAllocs()
		for b.Loop() {
			if err := kernel.Unpack(arg, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkPack(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kernel.Pack(int32(3), float32(2), 1.5, true, int(7)); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzUnpack: Unpack never panics, whatever the bytes and whatever it is
// asked for; what it accepts packs again and unpacks to the same values.
func FuzzUnpack(f *testing.F) {
	p := params{Alpha: 1, n: 2, Steps: 3}
	for _, vals := range [][]any{
		{int32(1), float32(2)},
		{1.5, "str", []float32{1, 2}},
		{p},
		{[]params{p, p}},
		{true, int(-1), uint(1), complex128(1i), [3]int16{1, 2, 3}},
		{"", []byte(nil)},
	} {
		f.Add(mustPack(f, vals...))
	}
	f.Add([]byte{})
	f.Add([]byte{'S', 'P', 'A', 1, 1, 0, 0, 0, byte(18), 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = kernel.NumArgs(data)
		for _, mk := range []func() []any{
			func() []any { return []any{new(int32), new(float32)} },
			func() []any { return []any{new(float64), new(string), new([]float32)} },
			func() []any { return []any{new(params)} },
			func() []any { return []any{new([]params)} },
			func() []any { return []any{new(bool), new(int), new(uint), new(complex128), new([3]int16)} },
			func() []any { return []any{new(string), new([]byte)} },
			func() []any { return []any{nil, nil} },
			func() []any { return []any{nil} },
		} {
			ptrs := mk()
			if kernel.Unpack(data, ptrs...) != nil {
				continue
			}
			vals := make([]any, 0, len(ptrs))
			for _, ptr := range ptrs {
				if ptr == nil {
					return // skipped values cannot be packed again
				}
				vals = append(vals, reflect.ValueOf(ptr).Elem().Interface())
			}
			again := mk()
			if err := kernel.Unpack(mustPack(t, vals...), again...); err != nil {
				t.Fatalf("unpacked %v, which does not unpack once packed again: %v", vals, err)
			}
			for k := range again {
				if got := reflect.ValueOf(again[k]).Elem().Interface(); !reflect.DeepEqual(got, vals[k]) && !isNaN(got) {
					t.Fatalf("argument %d: %#v packed again unpacks as %#v", k, vals[k], got)
				}
			}
		}
	})
}

func isNaN(v any) bool {
	s := reflect.ValueOf(v)
	switch s.Kind() {
	case reflect.Float32, reflect.Float64:
		return math.IsNaN(s.Float())
	case reflect.Complex64, reflect.Complex128:
		c := s.Complex()
		return math.IsNaN(real(c)) || math.IsNaN(imag(c))
	}
	return true // structs and slices may hold NaNs: DeepEqual cannot tell
}

func ExampleUnpack() {
	type params struct {
		Alpha float64
		N     int32
	}
	// The application packs the task's argument (core.Value does it).
	arg, _ := kernel.Pack(params{Alpha: 2, N: 3}, "label", []float32{1, 2})

	// The kernel unpacks it, checking each type.
	var (
		p     params
		label string
		xs    []float32
	)
	if err := kernel.Unpack(arg, &p, &label, &xs); err != nil {
		fmt.Println(err)
	}
	fmt.Println(p.Alpha, p.N, label, xs)
	var wrong []float64
	fmt.Println(kernel.Unpack(arg, &p, &label, &wrong))
	// Output:
	// 2 3 label [1 2]
	// task arguments do not match: argument 2 was packed as []float32, Unpack asks for []float64
}
