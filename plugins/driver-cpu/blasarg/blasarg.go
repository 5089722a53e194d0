// Package blasarg names the CPU driver's BLAS kernels and encodes their task
// arguments. It is pure Go: an application imports it to build tasks for
// those kernels without linking OpenBLAS (the kernels themselves live in the
// driver plugin, package kernels).
//
// Every argument encodes to a fixed number of bytes, little-endian: each bool
// is one byte (0 or 1), each float64 eight bytes (IEEE 754 bits), in the
// order of the struct's fields. The float32 kernels convert Alpha and Beta to
// float32 when they run.
package blasarg

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Kernel names, as the CPU driver registers them.
const (
	// Empty does nothing, whatever its buffers; for overhead measurements.
	Empty = "empty"

	// ScalF32 and ScalF64: x = Alpha*x. Buffers: [vector x RW]. Arg: ScalArg.
	ScalF32 = "scal_f32"
	ScalF64 = "scal_f64"

	// AxpyF32 and AxpyF64: y = Alpha*x + y. Buffers: [vector x R, vector y
	// RW]. Arg: AxpyArg.
	AxpyF32 = "axpy_f32"
	AxpyF64 = "axpy_f64"

	// DotF32 and DotF64: result = x.y. Buffers: [vector x R, vector y R,
	// variable result W], all of the kernel's element type. No argument.
	DotF32 = "dot_f32"
	DotF64 = "dot_f64"

	// GemmF32 and GemmF64: C = Alpha*op(A)*op(B) + Beta*C. Buffers:
	// [matrix A R, matrix B R, matrix C RW]. Arg: GemmArg.
	GemmF32 = "gemm_f32"
	GemmF64 = "gemm_f64"

	// SyrkF32 and SyrkF64: C = Alpha*op(A)*op(A)^T + Beta*C on C's lower or
	// upper triangle. Buffers: [matrix A R, matrix C RW]. Arg: SyrkArg.
	SyrkF32 = "syrk_f32"
	SyrkF64 = "syrk_f64"

	// SyrkGemmF32 and SyrkGemmF64 are SyrkF32 and SyrkF64 through a whole
	// GEMM, C = Alpha*op(A)*op(A)^T + Beta*C on both triangles of C (the
	// other triangle is written too): a variant for the machines where
	// the library's SYRK is the slower (StarPU's Cholesky example updates
	// its diagonal tiles so). Buffers and Arg as SyrkF32.
	SyrkGemmF32 = "syrk_gemm_f32"
	SyrkGemmF64 = "syrk_gemm_f64"

	// TrsmF32 and TrsmF64: B = X solving op(A)*X = Alpha*B or
	// X*op(A) = Alpha*B. Buffers: [matrix A R, matrix B RW]. Arg: TrsmArg.
	TrsmF32 = "trsm_f32"
	TrsmF64 = "trsm_f64"

	// PotrfF32 and PotrfF64: Cholesky factorization of A in place.
	// Buffers: [matrix A RW]. Arg: PotrfArg.
	PotrfF32 = "potrf_f32"
	PotrfF64 = "potrf_f64"

	// Zero sets every element of its buffer to zero, whatever the element
	// type: the usual init codelet of a sum reduction (REDUX mode).
	// Buffers: [variable, vector, matrix or block W]. No argument.
	Zero = "zero"

	// AddF32 and AddF64: dst = dst + src, element by element: the usual
	// reduction codelet of a sum (REDUX mode). Buffers: [dst RW, src R],
	// both variables, vectors or matrices of the same shape (their leading
	// dimensions may differ). No argument.
	AddF32 = "add_f32"
	AddF64 = "add_f64"

	// The parallel kernels, for codelets of type core.ForkJoin or
	// core.SPMD (they run on one worker too, as a team of one).
	//
	// ParGemmF32 and ParGemmF64 are GemmF32 and GemmF64 for a FORKJOIN
	// codelet: C's columns are cut in CombinedSize slices, each computed
	// by a goroutine calling the single-threaded BLAS. Buffers and Arg as
	// GemmF32.
	ParGemmF32 = "pgemm_f32"
	ParGemmF64 = "pgemm_f64"
	// ParPotrfF32 and ParPotrfF64 are PotrfF32 and PotrfF64 for a
	// FORKJOIN codelet: a blocked right-looking factorisation whose
	// panel solves and trailing updates are cut between CombinedSize
	// goroutines (the upper factorisation runs on one). Buffers and Arg
	// as PotrfF32.
	ParPotrfF32 = "ppotrf_f32"
	ParPotrfF64 = "ppotrf_f64"
	// SpmdScalF32 and SpmdScalF64 are ScalF32 and ScalF64 for an SPMD
	// codelet: rank r of CombinedSize scales its own slice of x (of a
	// matrix, its own columns). Buffers and Arg as ScalF32.
	SpmdScalF32 = "pscal_f32"
	SpmdScalF64 = "pscal_f64"
)

// Encoded sizes of the arguments, in bytes.
const (
	ScalArgSize  = 8
	AxpyArgSize  = 8
	GemmArgSize  = 2 + 8 + 8
	SyrkArgSize  = 2 + 8 + 8
	TrsmArgSize  = 4 + 8
	PotrfArgSize = 1
)

// ScalArg is the argument of ScalF32 and ScalF64.
type ScalArg struct {
	Alpha float64
}

// AxpyArg is the argument of AxpyF32 and AxpyF64.
type AxpyArg struct {
	Alpha float64
}

// GemmArg is the argument of GemmF32 and GemmF64: op(A) is A^T when TransA,
// op(B) is B^T when TransB.
type GemmArg struct {
	TransA, TransB bool
	Alpha, Beta    float64
}

// SyrkArg is the argument of SyrkF32 and SyrkF64: Lower picks C's triangle
// that is updated, Trans makes op(A) = A^T (A is then k x n).
type SyrkArg struct {
	Lower, Trans bool
	Alpha, Beta  float64
}

// TrsmArg is the argument of TrsmF32 and TrsmF64: Right solves X*op(A) =
// Alpha*B instead of op(A)*X = Alpha*B, Lower says A is lower triangular,
// Trans makes op(A) = A^T, UnitDiag says A's diagonal is all ones.
type TrsmArg struct {
	Right, Lower, Trans, UnitDiag bool
	Alpha                         float64
}

// PotrfArg is the argument of PotrfF32 and PotrfF64: Lower computes
// A = L*L^T in A's lower triangle, otherwise A = U^T*U in the upper one.
type PotrfArg struct {
	Lower bool
}

// Arg is any of the argument types.
type Arg interface {
	ScalArg | AxpyArg | GemmArg | SyrkArg | TrsmArg | PotrfArg
}

// Encode returns the ScalArgSize-byte encoding of a.
func (a ScalArg) Encode() []byte { return (&enc{}).f64(a.Alpha).b }

// Encode returns the AxpyArgSize-byte encoding of a.
func (a AxpyArg) Encode() []byte { return (&enc{}).f64(a.Alpha).b }

// Encode returns the GemmArgSize-byte encoding of a.
func (a GemmArg) Encode() []byte {
	return (&enc{}).bool(a.TransA).bool(a.TransB).f64(a.Alpha).f64(a.Beta).b
}

// Encode returns the SyrkArgSize-byte encoding of a.
func (a SyrkArg) Encode() []byte {
	return (&enc{}).bool(a.Lower).bool(a.Trans).f64(a.Alpha).f64(a.Beta).b
}

// Encode returns the TrsmArgSize-byte encoding of a.
func (a TrsmArg) Encode() []byte {
	return (&enc{}).bool(a.Right).bool(a.Lower).bool(a.Trans).bool(a.UnitDiag).f64(a.Alpha).b
}

// Encode returns the PotrfArgSize-byte encoding of a.
func (a PotrfArg) Encode() []byte { return (&enc{}).bool(a.Lower).b }

// DecodeScalArg decodes a ScalArg; it fails unless b is ScalArgSize bytes.
func DecodeScalArg(b []byte) (ScalArg, error) {
	d := dec{name: "ScalArg", b: b}
	if err := d.size(ScalArgSize); err != nil {
		return ScalArg{}, err
	}
	a := ScalArg{Alpha: d.f64()}
	return a, d.err
}

// DecodeAxpyArg decodes an AxpyArg; it fails unless b is AxpyArgSize bytes.
func DecodeAxpyArg(b []byte) (AxpyArg, error) {
	d := dec{name: "AxpyArg", b: b}
	if err := d.size(AxpyArgSize); err != nil {
		return AxpyArg{}, err
	}
	a := AxpyArg{Alpha: d.f64()}
	return a, d.err
}

// DecodeGemmArg decodes a GemmArg; it fails unless b is GemmArgSize bytes
// with its flags 0 or 1.
func DecodeGemmArg(b []byte) (GemmArg, error) {
	d := dec{name: "GemmArg", b: b}
	if err := d.size(GemmArgSize); err != nil {
		return GemmArg{}, err
	}
	var a GemmArg
	a.TransA = d.bool("TransA")
	a.TransB = d.bool("TransB")
	a.Alpha = d.f64()
	a.Beta = d.f64()
	if d.err != nil {
		return GemmArg{}, d.err
	}
	return a, nil
}

// DecodeSyrkArg decodes a SyrkArg; it fails unless b is SyrkArgSize bytes
// with its flags 0 or 1.
func DecodeSyrkArg(b []byte) (SyrkArg, error) {
	d := dec{name: "SyrkArg", b: b}
	if err := d.size(SyrkArgSize); err != nil {
		return SyrkArg{}, err
	}
	var a SyrkArg
	a.Lower = d.bool("Lower")
	a.Trans = d.bool("Trans")
	a.Alpha = d.f64()
	a.Beta = d.f64()
	if d.err != nil {
		return SyrkArg{}, d.err
	}
	return a, nil
}

// DecodeTrsmArg decodes a TrsmArg; it fails unless b is TrsmArgSize bytes
// with its flags 0 or 1.
func DecodeTrsmArg(b []byte) (TrsmArg, error) {
	d := dec{name: "TrsmArg", b: b}
	if err := d.size(TrsmArgSize); err != nil {
		return TrsmArg{}, err
	}
	var a TrsmArg
	a.Right = d.bool("Right")
	a.Lower = d.bool("Lower")
	a.Trans = d.bool("Trans")
	a.UnitDiag = d.bool("UnitDiag")
	a.Alpha = d.f64()
	if d.err != nil {
		return TrsmArg{}, d.err
	}
	return a, nil
}

// DecodePotrfArg decodes a PotrfArg; it fails unless b is PotrfArgSize bytes
// holding 0 or 1.
func DecodePotrfArg(b []byte) (PotrfArg, error) {
	d := dec{name: "PotrfArg", b: b}
	if err := d.size(PotrfArgSize); err != nil {
		return PotrfArg{}, err
	}
	a := PotrfArg{Lower: d.bool("Lower")}
	if d.err != nil {
		return PotrfArg{}, d.err
	}
	return a, nil
}

// Decode decodes any argument type, as the matching DecodeXxxArg does:
// Decode[GemmArg](b) is DecodeGemmArg(b).
func Decode[T Arg](b []byte) (T, error) {
	var v T
	var err error
	switch p := any(&v).(type) {
	case *ScalArg:
		*p, err = DecodeScalArg(b)
	case *AxpyArg:
		*p, err = DecodeAxpyArg(b)
	case *GemmArg:
		*p, err = DecodeGemmArg(b)
	case *SyrkArg:
		*p, err = DecodeSyrkArg(b)
	case *TrsmArg:
		*p, err = DecodeTrsmArg(b)
	case *PotrfArg:
		*p, err = DecodePotrfArg(b)
	}
	return v, err
}

type enc struct{ b []byte }

func (e *enc) bool(v bool) *enc {
	var x byte
	if v {
		x = 1
	}
	e.b = append(e.b, x)
	return e
}

func (e *enc) f64(v float64) *enc {
	e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v))
	return e
}

type dec struct {
	name string
	b    []byte
	off  int
	err  error
}

func (d *dec) size(n int) error {
	if len(d.b) != n {
		return fmt.Errorf("blasarg: %s is %d bytes, got %d", d.name, n, len(d.b))
	}
	return nil
}

func (d *dec) bool(field string) bool {
	x := d.b[d.off]
	d.off++
	if x > 1 && d.err == nil {
		d.err = fmt.Errorf("blasarg: %s.%s is byte %d, want 0 or 1", d.name, field, x)
	}
	return x == 1
}

func (d *dec) f64() float64 {
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b[d.off:]))
	d.off += 8
	return v
}
