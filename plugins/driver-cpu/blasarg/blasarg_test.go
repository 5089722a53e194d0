package blasarg

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
)

// roundTrip encodes v, checks the size, decodes it back both ways and checks
// it is unchanged, and that every other length fails to decode.
func roundTrip[T Arg](t *testing.T, v T, size int, enc func(T) []byte, decode func([]byte) (T, error)) {
	t.Helper()
	b := enc(v)
	if len(b) != size {
		t.Fatalf("%#v encodes to %d bytes, want %d", v, len(b), size)
	}
	got, err := decode(b)
	if err != nil {
		t.Fatalf("decode %#v: %v", v, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("round trip: got %#v, want %#v", got, v)
	}
	got, err = Decode[T](b)
	if err != nil || !reflect.DeepEqual(got, v) {
		t.Fatalf("Decode[%T]: got %#v, %v, want %#v", v, got, err, v)
	}
	for _, n := range []int{0, size - 1, size + 1, 2 * size} {
		bad := make([]byte, n)
		copy(bad, b)
		if _, err := decode(bad); err == nil || !strings.Contains(err.Error(), "bytes, got") {
			t.Errorf("decode of %d bytes: err = %v, want a length error", n, err)
		}
		if _, err := Decode[T](bad); err == nil {
			t.Errorf("Decode[%T] of %d bytes: no error", v, n)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	floats := []float64{0, 1, -2.5, math.Pi, math.SmallestNonzeroFloat64, math.MaxFloat64, math.Inf(-1)}
	bools := []bool{false, true}
	t.Run("scal", func(t *testing.T) {
		for _, f := range floats {
			roundTrip(t, ScalArg{f}, ScalArgSize, ScalArg.Encode, DecodeScalArg)
		}
	})
	t.Run("axpy", func(t *testing.T) {
		for _, f := range floats {
			roundTrip(t, AxpyArg{f}, AxpyArgSize, AxpyArg.Encode, DecodeAxpyArg)
		}
	})
	t.Run("gemm", func(t *testing.T) {
		for _, ta := range bools {
			for _, tb := range bools {
				for i, f := range floats {
					v := GemmArg{ta, tb, f, floats[(i+3)%len(floats)]}
					roundTrip(t, v, GemmArgSize, GemmArg.Encode, DecodeGemmArg)
				}
			}
		}
	})
	t.Run("syrk", func(t *testing.T) {
		for _, lo := range bools {
			for _, tr := range bools {
				for i, f := range floats {
					v := SyrkArg{lo, tr, f, floats[(i+1)%len(floats)]}
					roundTrip(t, v, SyrkArgSize, SyrkArg.Encode, DecodeSyrkArg)
				}
			}
		}
	})
	t.Run("trsm", func(t *testing.T) {
		for mask := 0; mask < 16; mask++ {
			v := TrsmArg{mask&1 != 0, mask&2 != 0, mask&4 != 0, mask&8 != 0, floats[mask%len(floats)]}
			roundTrip(t, v, TrsmArgSize, TrsmArg.Encode, DecodeTrsmArg)
		}
	})
	t.Run("potrf", func(t *testing.T) {
		for _, lo := range bools {
			roundTrip(t, PotrfArg{lo}, PotrfArgSize, PotrfArg.Encode, DecodePotrfArg)
		}
	})
}

func TestNaNAlpha(t *testing.T) {
	got, err := DecodeScalArg(ScalArg{math.NaN()}.Encode())
	if err != nil || !math.IsNaN(got.Alpha) {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestWireFormat(t *testing.T) {
	cases := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"scal", ScalArg{1}.Encode(), []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}},
		{"gemm", GemmArg{TransA: false, TransB: true, Alpha: 1, Beta: -2}.Encode(),
			[]byte{0, 1, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0xc0}},
		{"trsm", TrsmArg{Right: true, UnitDiag: true, Alpha: 2}.Encode(),
			[]byte{1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x40}},
		{"potrf", PotrfArg{Lower: true}.Encode(), []byte{1}},
	}
	for _, c := range cases {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s: % x, want % x", c.name, c.got, c.want)
		}
	}
}

func TestBadFlags(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"gemm", func() error {
			b := GemmArg{}.Encode()
			b[1] = 2
			_, err := DecodeGemmArg(b)
			return err
		}(), "GemmArg.TransB is byte 2"},
		{"syrk", func() error {
			b := SyrkArg{}.Encode()
			b[0] = 0xff
			_, err := DecodeSyrkArg(b)
			return err
		}(), "SyrkArg.Lower is byte 255"},
		{"trsm", func() error {
			b := TrsmArg{}.Encode()
			b[3] = 7
			_, err := Decode[TrsmArg](b)
			return err
		}(), "TrsmArg.UnitDiag is byte 7"},
		{"potrf", func() error { _, err := DecodePotrfArg([]byte{'L'}); return err }(), "PotrfArg.Lower"},
		{"nil", func() error { _, err := DecodeGemmArg(nil); return err }(), "GemmArg is 18 bytes, got 0"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, c.err, c.want)
		}
	}
}
