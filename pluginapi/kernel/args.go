package kernel

// Typed task arguments: Pack on the application's side, Unpack in the
// kernel; StarPU's STARPU_VALUE and starpu_codelet_unpack_args.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// Errors of Pack and Unpack, wrapped with which argument and why.
var (
	// ErrArgType: a value (Pack) or pointer (Unpack) of a type that
	// cannot be packed: pointers, maps, channels, functions,
	// interfaces, uintptr, and structs or arrays holding one of those or
	// a string or a slice.
	ErrArgType = errors.New("unsupported task argument type")
	// ErrArgMismatch: Unpack asks for other arguments than were packed:
	// another count, or another type at some position.
	ErrArgMismatch = errors.New("task arguments do not match")
	// ErrArgFormat: the bytes are not arguments Pack wrote (none, another
	// encoding, truncated or corrupted).
	ErrArgFormat = errors.New("malformed packed task arguments")
)

// The packed form, little-endian throughout:
//
//	header  'S' 'P' 'A' version(1)  count uint32
//	value   kind(1) then, by kind:
//	        bool, ints, uints, floats, complexes: the value (int and uint
//	                as 8 bytes)
//	        string: length uint32, bytes
//	        array or struct: size uint32, signature uint32, name length
//	                uint8, name, then size bytes: its fields in order,
//	                packed with no padding, as encoding/binary writes them
//	        slice: the element's kind (and for an array or struct element
//	                its size, signature and name), length uint32, elements
//
// The signature hashes the shape of an array or struct (its fields'
// kinds, array lengths, nesting), so that a kernel compiled in another
// binary, with its own copy of the type under another name, still
// unpacks it; the name only serves error messages.
const (
	argVersion = 1
	argHeader  = 8
)

type argKind uint8

const (
	kBool argKind = 1 + iota
	kInt8
	kInt16
	kInt32
	kInt64
	kUint8
	kUint16
	kUint32
	kUint64
	kFloat32
	kFloat64
	kComplex64
	kComplex128
	kInt
	kUint
	kString
	kSlice
	kComposite
	kindEnd
)

var kindSize = [kindEnd]int{kBool: 1, kInt8: 1, kInt16: 2, kInt32: 4, kInt64: 8, kUint8: 1, kUint16: 2, kUint32: 4,
	kUint64: 8, kFloat32: 4, kFloat64: 8, kComplex64: 8, kComplex128: 16, kInt: 8, kUint: 8}

var kindName = [kindEnd]string{kBool: "bool", kInt8: "int8", kInt16: "int16", kInt32: "int32", kInt64: "int64",
	kUint8: "uint8", kUint16: "uint16", kUint32: "uint32", kUint64: "uint64", kFloat32: "float32",
	kFloat64: "float64", kComplex64: "complex64", kComplex128: "complex128", kInt: "int", kUint: "uint",
	kString: "string", kSlice: "slice", kComposite: "struct or array"}

func (k argKind) scalar() bool { return k >= kBool && k <= kUint }

func (k argKind) String() string {
	if k != 0 && k < kindEnd {
		return kindName[k]
	}
	return "kind#" + strconv.Itoa(int(k))
}

// memSize is the size of a scalar kind in memory: int and uint travel as
// 8 bytes whatever their size here.
func (k argKind) memSize() int {
	if k == kInt || k == kUint {
		return intSize
	}
	return kindSize[k]
}

const intSize = int(unsafe.Sizeof(int(0)))

// littleEndian tells whether memory holds the packed form's byte order,
// so that runs of numbers are copied as they are.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

var le = binary.LittleEndian

// Pack packs values for a kernel's Unpack: bools, integers (int and uint
// travel as 64 bits), floats, complexes, arrays and structs of those
// (encoding/binary's fixed-size values, unexported fields included),
// strings, and slices of fixed-size values ([]byte among them). The
// result is self-describing: Unpack checks each value's type and size.
// Pointers and the like cannot reach a kernel in another process: pass
// the values.
func Pack(vals ...any) ([]byte, error) { return AppendPack(nil, vals...) }

// AppendPack packs vals after the arguments already packed in dst (nil
// or empty starts a new set): several values given one after the other
// unpack as one list, in order.
func AppendPack(dst []byte, vals ...any) ([]byte, error) {
	count := 0
	if len(dst) == 0 {
		if cap(dst) < 64 {
			dst = make([]byte, 0, 64) // room for a few numbers: one allocation
		}
		dst = append(dst, 'S', 'P', 'A', argVersion, 0, 0, 0, 0)
	} else {
		n, err := NumArgs(dst)
		if err != nil {
			return nil, fmt.Errorf("AppendPack: %w", err)
		}
		count = n
	}
	out := dst
	for i, v := range vals {
		var err error
		if out, err = appendValue(out, v); err != nil {
			return nil, fmt.Errorf("%w: value %d: %w", ErrArgType, i, err)
		}
	}
	if uint64(count)+uint64(len(vals)) > math.MaxUint32 {
		return nil, fmt.Errorf("%w: more than %d values", ErrArgType, uint32(math.MaxUint32))
	}
	le.PutUint32(out[4:], uint32(count+len(vals)))
	return out, nil
}

// NumArgs returns the number of arguments packed in arg.
func NumArgs(arg []byte) (int, error) {
	if len(arg) < argHeader || arg[0] != 'S' || arg[1] != 'P' || arg[2] != 'A' {
		return 0, fmt.Errorf("%w: %d bytes that Pack did not write", ErrArgFormat, len(arg))
	}
	if arg[3] != argVersion {
		return 0, fmt.Errorf("%w: packed by version %d, this kernel reads version %d", ErrArgFormat, arg[3], argVersion)
	}
	n := le.Uint32(arg[4:])
	if uint64(n) > uint64(len(arg)-argHeader) { // every value takes a byte at least
		return 0, fmt.Errorf("%w: %d values claimed in %d bytes", ErrArgFormat, n, len(arg))
	}
	return int(n), nil
}

// appendValue packs one value; the common types go without reflection.
func appendValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, errors.New("nil has no type to pack")
	case bool:
		b := byte(0)
		if x {
			b = 1
		}
		return append(dst, byte(kBool), b), nil
	case int:
		return le.AppendUint64(append(dst, byte(kInt)), uint64(x)), nil
	case int8:
		return append(dst, byte(kInt8), byte(x)), nil
	case int16:
		return le.AppendUint16(append(dst, byte(kInt16)), uint16(x)), nil
	case int32:
		return le.AppendUint32(append(dst, byte(kInt32)), uint32(x)), nil
	case int64:
		return le.AppendUint64(append(dst, byte(kInt64)), uint64(x)), nil
	case uint:
		return le.AppendUint64(append(dst, byte(kUint)), uint64(x)), nil
	case uint8:
		return append(dst, byte(kUint8), x), nil
	case uint16:
		return le.AppendUint16(append(dst, byte(kUint16)), x), nil
	case uint32:
		return le.AppendUint32(append(dst, byte(kUint32)), x), nil
	case uint64:
		return le.AppendUint64(append(dst, byte(kUint64)), x), nil
	case float32:
		return le.AppendUint32(append(dst, byte(kFloat32)), math.Float32bits(x)), nil
	case float64:
		return le.AppendUint64(append(dst, byte(kFloat64)), math.Float64bits(x)), nil
	case string:
		return appendBytes(append(dst, byte(kString)), x)
	case []byte:
		return appendBytes(append(dst, byte(kSlice), byte(kUint8)), string(x))
	}
	rv := reflect.ValueOf(v)
	ti := infoOf(rv.Type())
	if ti.err != nil {
		return nil, ti.err
	}
	switch ti.kind {
	case kString:
		return appendBytes(append(dst, byte(kString)), rv.String())
	case kSlice:
		n := rv.Len()
		if uint64(n) > math.MaxUint32 || uint64(n)*uint64(ti.elem.size) > math.MaxUint32 {
			return nil, fmt.Errorf("%s of %d elements is too large to pack", ti.t, n)
		}
		dst = ti.elem.appendDesc(append(dst, byte(kSlice)))
		dst = le.AppendUint32(dst, uint32(n))
		if n == 0 || ti.elem.size == 0 {
			return dst, nil
		}
		off := len(dst)
		dst = grow(dst, n*ti.elem.size)
		base, stride := rv.UnsafePointer(), ti.elem.t.Size()
		for i := 0; i < n; i++ {
			ti.elem.put(dst[off+i*ti.elem.size:], unsafe.Add(base, uintptr(i)*stride))
		}
		return dst, nil
	}
	// A fixed-size value: copy it where it can be addressed.
	pv := reflect.New(ti.t)
	pv.Elem().Set(rv)
	dst = ti.appendDesc(dst)
	off := len(dst)
	dst = grow(dst, ti.size)
	ti.put(dst[off:], pv.UnsafePointer())
	return dst, nil
}

func appendBytes(dst []byte, s string) ([]byte, error) {
	if uint64(len(s)) > math.MaxUint32 {
		return nil, fmt.Errorf("%d bytes are too many to pack", len(s))
	}
	return append(le.AppendUint32(dst, uint32(len(s))), s...), nil
}

func grow(b []byte, n int) []byte {
	b = append(b, make([]byte, n)...)
	return b
}

// typeInfo is what Pack and Unpack know of a Go type, found once per type.
type typeInfo struct {
	t    reflect.Type
	kind argKind // a scalar kind, kString, kSlice or kComposite
	// size is a fixed-size type's packed size (0 for strings and slices).
	size int
	// sig and name describe an array or struct (kComposite).
	sig  uint32
	name string
	// ops map a fixed-size value's packed bytes, in order, to its memory.
	ops []op
	// elem is a slice's element.
	elem *typeInfo
	// err says why the type cannot be packed.
	err error
}

// op is a run of n scalars of one kind at off in memory, packed one
// after the other; or, with sub set, n elements of an array of arrays or
// structs, stride bytes apart in memory.
type op struct {
	off    uintptr
	kind   argKind
	n      int
	sub    *typeInfo
	stride uintptr
}

func (ti *typeInfo) fixed() bool { return ti.err == nil && (ti.kind.scalar() || ti.kind == kComposite) }

// typeName is the type's name for messages.
func (ti *typeInfo) typeName() string { return ti.t.String() }

var typeCache sync.Map // reflect.Type -> *typeInfo

func infoOf(t reflect.Type) *typeInfo {
	if v, ok := typeCache.Load(t); ok {
		return v.(*typeInfo)
	}
	v, _ := typeCache.LoadOrStore(t, buildInfo(t))
	return v.(*typeInfo)
}

func scalarKind(k reflect.Kind) argKind {
	switch k {
	case reflect.Bool:
		return kBool
	case reflect.Int8:
		return kInt8
	case reflect.Int16:
		return kInt16
	case reflect.Int32:
		return kInt32
	case reflect.Int64:
		return kInt64
	case reflect.Uint8:
		return kUint8
	case reflect.Uint16:
		return kUint16
	case reflect.Uint32:
		return kUint32
	case reflect.Uint64:
		return kUint64
	case reflect.Float32:
		return kFloat32
	case reflect.Float64:
		return kFloat64
	case reflect.Complex64:
		return kComplex64
	case reflect.Complex128:
		return kComplex128
	case reflect.Int:
		return kInt
	case reflect.Uint:
		return kUint
	}
	return 0
}

// maxNameLen bounds the type name a packed struct or array carries.
const maxNameLen = 255

func buildInfo(t reflect.Type) *typeInfo {
	ti := &typeInfo{t: t}
	switch k := t.Kind(); {
	case scalarKind(k) != 0:
		ti.kind = scalarKind(k)
		ti.size = kindSize[ti.kind]
		ti.ops = []op{{kind: ti.kind, n: 1}}
	case k == reflect.String:
		ti.kind = kString
	case k == reflect.Slice:
		ti.kind = kSlice
		ti.elem = infoOf(t.Elem())
		if !ti.elem.fixed() {
			ti.err = fmt.Errorf("%s: slices of %s cannot be packed, only slices of fixed-size values", t, t.Elem())
		}
	case k == reflect.Array || k == reflect.Struct:
		ti.kind = kComposite
		h := sigHash(2166136261)
		size, err := ti.flatten(t, 0, &h, t.String())
		if err == nil && size > math.MaxUint32 {
			err = fmt.Errorf("%s is too large to pack (%d bytes)", t, size)
		}
		ti.size, ti.sig, ti.err = int(size), uint32(h), err
		ti.name = t.String()
		if len(ti.name) > maxNameLen {
			ti.name = ti.name[:maxNameLen]
		}
	default:
		ti.err = fmt.Errorf("%s is a %s: only numbers, bools, strings, slices of fixed-size values, and arrays and structs of numbers and bools can reach a kernel", t, k)
	}
	return ti
}

// sigHash is FNV-1a over the shape of an array or struct.
type sigHash uint32

func (h *sigHash) add(v uint64) {
	for ; ; v >>= 8 {
		*h = (*h ^ sigHash(v&0xff)) * 16777619
		if v < 256 {
			return
		}
	}
}

// flatten appends to ti.ops the ops of fixed-size type t, found at off in
// memory (path names it in messages), and returns its packed size.
func (ti *typeInfo) flatten(t reflect.Type, off uintptr, h *sigHash, path string) (uint64, error) {
	k := t.Kind()
	if sk := scalarKind(k); sk != 0 {
		h.add(uint64(sk))
		ti.appendRun(op{off: off, kind: sk, n: 1})
		return uint64(kindSize[sk]), nil
	}
	switch k {
	case reflect.Array:
		n := t.Len()
		h.add('A')
		h.add(uint64(n))
		if sk := scalarKind(t.Elem().Kind()); sk != 0 {
			h.add(uint64(sk))
			if n > 0 {
				ti.appendRun(op{off: off, kind: sk, n: n})
			}
			return uint64(n) * uint64(kindSize[sk]), nil
		}
		sub := infoOf(t.Elem())
		if !sub.fixed() {
			if sub.err != nil {
				return 0, sub.err
			}
			return 0, fmt.Errorf("%s: %s holds %s, which is not fixed-size", path, t, t.Elem())
		}
		h.add(uint64(sub.sig))
		if n == 0 || sub.size == 0 {
			return 0, nil
		}
		if len(sub.ops) == 1 && sub.ops[0].sub == nil && uintptr(sub.ops[0].n*sub.ops[0].kind.memSize()) == t.Elem().Size() {
			// Arrays of arrays of numbers are one run.
			ti.appendRun(op{off: off, kind: sub.ops[0].kind, n: n * sub.ops[0].n})
		} else {
			ti.ops = append(ti.ops, op{off: off, n: n, sub: sub, stride: t.Elem().Size()})
		}
		return uint64(n) * uint64(sub.size), nil
	case reflect.Struct:
		h.add('S')
		h.add(uint64(t.NumField()))
		var size uint64
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			s, err := ti.flatten(f.Type, off+f.Offset, h, path+"."+f.Name)
			if err != nil {
				return 0, err
			}
			size += s
		}
		h.add('E')
		return size, nil
	}
	return 0, fmt.Errorf("%s is a %s: structs and arrays packed for a kernel hold numbers and bools only (pack strings and slices as values of their own)", path, t)
}

// appendRun appends o, merging it with the run before when it continues it.
func (ti *typeInfo) appendRun(o op) {
	if n := len(ti.ops); n > 0 {
		last := &ti.ops[n-1]
		if last.sub == nil && last.kind == o.kind && last.off+uintptr(last.n*o.kind.memSize()) == o.off {
			last.n += o.n
			return
		}
	}
	ti.ops = append(ti.ops, o)
}

// appendDesc appends the kind of a fixed-size type and, for an array or
// struct, its size, signature and name.
func (ti *typeInfo) appendDesc(dst []byte) []byte {
	dst = append(dst, byte(ti.kind))
	if ti.kind != kComposite {
		return dst
	}
	dst = le.AppendUint32(dst, uint32(ti.size))
	dst = le.AppendUint32(dst, ti.sig)
	dst = append(dst, byte(len(ti.name)))
	return append(dst, ti.name...)
}

// put packs the fixed-size value at p into dst[:ti.size].
func (ti *typeInfo) put(dst []byte, p unsafe.Pointer) {
	w := 0
	for _, o := range ti.ops {
		if o.sub != nil {
			for i := 0; i < o.n; i++ {
				o.sub.put(dst[w:], unsafe.Add(p, o.off+uintptr(i)*o.stride))
				w += o.sub.size
			}
			continue
		}
		putRun(dst[w:], unsafe.Add(p, o.off), o.kind, o.n)
		w += o.n * kindSize[o.kind]
	}
}

// get unpacks src[:ti.size] into the fixed-size value at p.
func (ti *typeInfo) get(p unsafe.Pointer, src []byte) error {
	r := 0
	for _, o := range ti.ops {
		if o.sub != nil {
			for i := 0; i < o.n; i++ {
				if err := o.sub.get(unsafe.Add(p, o.off+uintptr(i)*o.stride), src[r:]); err != nil {
					return err
				}
				r += o.sub.size
			}
			continue
		}
		if err := getRun(unsafe.Add(p, o.off), src[r:], o.kind, o.n); err != nil {
			return err
		}
		r += o.n * kindSize[o.kind]
	}
	return nil
}

// putRun packs n scalars of kind k from memory at p.
func putRun(dst []byte, p unsafe.Pointer, k argKind, n int) {
	size := n * kindSize[k]
	switch {
	case k == kBool:
		for i, b := range unsafe.Slice((*bool)(p), n) {
			dst[i] = 0
			if b {
				dst[i] = 1
			}
		}
	case (k == kInt || k == kUint) && intSize == 4:
		for i, v := range unsafe.Slice((*int32)(p), n) {
			w := uint64(int64(v))
			if k == kUint {
				w = uint64(uint32(v))
			}
			le.PutUint64(dst[8*i:], w)
		}
	case littleEndian:
		copy(dst[:size], unsafe.Slice((*byte)(p), size))
	default:
		swap(dst[:size], unsafe.Slice((*byte)(p), size), componentSize(k))
	}
}

// getRun unpacks n scalars of kind k into memory at p.
func getRun(p unsafe.Pointer, src []byte, k argKind, n int) error {
	size := n * kindSize[k]
	switch {
	case k == kBool:
		// Any byte but 0 is true: memory must only ever hold 0 or 1.
		d := unsafe.Slice((*bool)(p), n)
		for i := range d {
			d[i] = src[i] != 0
		}
	case (k == kInt || k == kUint) && intSize == 4:
		d := unsafe.Slice((*int32)(p), n)
		for i := range d {
			w := le.Uint64(src[8*i:])
			if k == kInt && int64(w) != int64(int32(w)) || k == kUint && w > math.MaxUint32 {
				return fmt.Errorf("%w: %s value %d does not fit in %d bits", ErrArgMismatch, k, w, 8*intSize)
			}
			d[i] = int32(w)
		}
	case littleEndian:
		copy(unsafe.Slice((*byte)(p), size), src[:size])
	default:
		swap(unsafe.Slice((*byte)(p), size), src[:size], componentSize(k))
	}
	return nil
}

// componentSize is the size of the numbers a scalar of kind k is made of
// (a complex is two floats).
func componentSize(k argKind) int {
	if k == kComplex64 || k == kComplex128 {
		return kindSize[k] / 2
	}
	return kindSize[k]
}

// swap copies src to dst reversing the bytes of each cs-byte number: the
// big-endian hosts' path.
func swap(dst, src []byte, cs int) {
	for i := 0; i+cs <= len(src); i += cs {
		for j := 0; j < cs; j++ {
			dst[i+j] = src[i+cs-1-j]
		}
	}
}

// Unpack unpacks the arguments Pack packed into the values ptrs point to,
// in order: each pointer's type must be the packed value's (a named type
// matches its underlying kind for numbers; arrays and structs match by
// shape and size). A nil (untyped) pointer skips its argument. Unpack
// fails, naming the argument, when the count or a type differs; it never
// panics on malformed bytes. Slices reuse the capacity of the slice they
// unpack into; numbers, bools, arrays and structs unpack without
// allocating.
func Unpack(arg []byte, ptrs ...any) error {
	n, err := NumArgs(arg)
	if err != nil {
		return err
	}
	if n != len(ptrs) {
		return fmt.Errorf("%w: %d arguments packed, Unpack asks for %d", ErrArgMismatch, n, len(ptrs))
	}
	r := reader{b: arg, off: argHeader}
	for i, ptr := range ptrs {
		if err := r.unpack(i, ptr); err != nil {
			return err
		}
	}
	if r.off != len(arg) {
		return fmt.Errorf("%w: %d bytes after the last argument", ErrArgFormat, len(arg)-r.off)
	}
	return nil
}

// Unpack unpacks the task's argument into ptrs: Unpack(c.Arg, ptrs...).
func (c *Context) Unpack(ptrs ...any) error { return Unpack(c.Arg, ptrs...) }

// sliceHeader is a slice as memory holds it.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// reader walks packed arguments.
type reader struct {
	b   []byte
	off int
	i   int // the argument being read, for messages
}

func (r *reader) formatErr(what string) error {
	return fmt.Errorf("%w: argument %d: %s at byte %d of %d", ErrArgFormat, r.i, what, r.off, len(r.b))
}

// take returns the next n bytes.
func (r *reader) take(n uint64) ([]byte, error) {
	if n > uint64(len(r.b)-r.off) {
		return nil, r.formatErr(fmt.Sprintf("%d bytes needed, %d left", n, len(r.b)-r.off))
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *reader) u32() (uint32, error) {
	b, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return le.Uint32(b), nil
}

// desc is a packed type: a kind and, for arrays and structs, their shape.
type desc struct {
	kind argKind
	size uint32
	sig  uint32
	name string // only read for messages
}

// readDesc reads a fixed-size type's description.
func (r *reader) readDesc(withName bool) (desc, error) {
	b, err := r.take(1)
	if err != nil {
		return desc{}, err
	}
	d := desc{kind: argKind(b[0])}
	if d.kind.scalar() {
		return d, nil
	}
	if d.kind != kComposite {
		r.off--
		return desc{}, r.formatErr(fmt.Sprintf("kind %d is no fixed-size type", b[0]))
	}
	if d.size, err = r.u32(); err != nil {
		return desc{}, err
	}
	if d.sig, err = r.u32(); err != nil {
		return desc{}, err
	}
	nl, err := r.take(1)
	if err != nil {
		return desc{}, err
	}
	name, err := r.take(uint64(nl[0]))
	if err != nil {
		return desc{}, err
	}
	if withName {
		d.name = printable(name)
	}
	return d, nil
}

func printable(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

func (d desc) String() string {
	if d.kind == kComposite {
		return fmt.Sprintf("%s (%d bytes)", d.name, d.size)
	}
	return d.kind.String()
}

// matches tells whether the packed type d unpacks into ti.
func (d desc) matches(ti *typeInfo) bool {
	if d.kind != ti.kind {
		return false
	}
	return d.kind != kComposite || int64(d.size) == int64(ti.size) && d.sig == ti.sig
}

// packedType describes the value at start, for a mismatch message.
func (r *reader) packedType(start int) string {
	s := reader{b: r.b, off: start, i: r.i}
	if s.off >= len(s.b) {
		return "nothing"
	}
	switch k := argKind(s.b[s.off]); k {
	case kString:
		return "string"
	case kSlice:
		s.off++
		d, err := s.readDesc(true)
		if err != nil {
			return "a malformed slice"
		}
		if d.kind == kComposite {
			return "[]" + d.name
		}
		return "[]" + d.String()
	default:
		d, err := s.readDesc(true)
		if err != nil {
			return k.String()
		}
		if d.kind == kComposite {
			return d.name
		}
		return d.String()
	}
}

func (r *reader) mismatch(start int, asked string) error {
	return fmt.Errorf("%w: argument %d was packed as %s, Unpack asks for %s", ErrArgMismatch, r.i, r.packedType(start), asked)
}

// scalar checks that the next value is a scalar of kind k and returns its
// bytes.
func (r *reader) scalar(k argKind) ([]byte, error) {
	if r.off >= len(r.b) {
		return nil, r.formatErr("value missing")
	}
	if argKind(r.b[r.off]) != k {
		return nil, r.mismatch(r.off, k.String())
	}
	r.off++
	return r.take(uint64(kindSize[k]))
}

// unpack unpacks argument i into ptr: the common types without
// reflection, the others through their typeInfo.
func (r *reader) unpack(i int, ptr any) error {
	r.i = i
	switch p := ptr.(type) {
	case nil:
		return r.skip()
	case *bool:
		b, err := r.scalar(kBool)
		if err != nil {
			return err
		}
		*p = b[0] != 0
	case *int:
		b, err := r.scalar(kInt)
		if err != nil {
			return err
		}
		v := int64(le.Uint64(b))
		if int64(int(v)) != v {
			return fmt.Errorf("%w: argument %d: int value %d does not fit in %d bits", ErrArgMismatch, i, v, 8*intSize)
		}
		*p = int(v)
	case *int8:
		b, err := r.scalar(kInt8)
		if err != nil {
			return err
		}
		*p = int8(b[0])
	case *int16:
		b, err := r.scalar(kInt16)
		if err != nil {
			return err
		}
		*p = int16(le.Uint16(b))
	case *int32:
		b, err := r.scalar(kInt32)
		if err != nil {
			return err
		}
		*p = int32(le.Uint32(b))
	case *int64:
		b, err := r.scalar(kInt64)
		if err != nil {
			return err
		}
		*p = int64(le.Uint64(b))
	case *uint:
		b, err := r.scalar(kUint)
		if err != nil {
			return err
		}
		v := le.Uint64(b)
		if uint64(uint(v)) != v {
			return fmt.Errorf("%w: argument %d: uint value %d does not fit in %d bits", ErrArgMismatch, i, v, 8*intSize)
		}
		*p = uint(v)
	case *uint8:
		b, err := r.scalar(kUint8)
		if err != nil {
			return err
		}
		*p = b[0]
	case *uint16:
		b, err := r.scalar(kUint16)
		if err != nil {
			return err
		}
		*p = le.Uint16(b)
	case *uint32:
		b, err := r.scalar(kUint32)
		if err != nil {
			return err
		}
		*p = le.Uint32(b)
	case *uint64:
		b, err := r.scalar(kUint64)
		if err != nil {
			return err
		}
		*p = le.Uint64(b)
	case *float32:
		b, err := r.scalar(kFloat32)
		if err != nil {
			return err
		}
		*p = math.Float32frombits(le.Uint32(b))
	case *float64:
		b, err := r.scalar(kFloat64)
		if err != nil {
			return err
		}
		*p = math.Float64frombits(le.Uint64(b))
	default:
		t := reflect.TypeOf(ptr)
		if t.Kind() != reflect.Pointer {
			return fmt.Errorf("%w: argument %d: Unpack needs a pointer, got a %s", ErrArgType, i, t)
		}
		v := reflect.ValueOf(ptr)
		if v.IsNil() {
			return fmt.Errorf("%w: argument %d: Unpack got a nil %s", ErrArgType, i, t)
		}
		ti := infoOf(t.Elem())
		if ti.err != nil {
			return fmt.Errorf("%w: argument %d: %w", ErrArgType, i, ti.err)
		}
		return r.value(ti, v.UnsafePointer())
	}
	return nil
}

// value unpacks the next value into p, of the type ti describes.
func (r *reader) value(ti *typeInfo, p unsafe.Pointer) error {
	start := r.off
	if start >= len(r.b) {
		return r.formatErr("value missing")
	}
	switch ti.kind {
	case kString:
		if argKind(r.b[start]) != kString {
			return r.mismatch(start, ti.typeName())
		}
		r.off++
		n, err := r.u32()
		if err != nil {
			return err
		}
		b, err := r.take(uint64(n))
		if err != nil {
			return err
		}
		*(*string)(p) = string(b)
		return nil
	case kSlice:
		if argKind(r.b[start]) != kSlice {
			return r.mismatch(start, ti.typeName())
		}
		r.off++
		d, err := r.readDesc(false)
		if err != nil {
			return err
		}
		if !d.matches(ti.elem) {
			return r.mismatch(start, ti.typeName())
		}
		n, err := r.u32()
		if err != nil {
			return err
		}
		src, err := r.take(uint64(n) * uint64(ti.elem.size))
		if err != nil {
			return err
		}
		if uint64(n) > math.MaxInt {
			return r.formatErr(fmt.Sprintf("%d elements", n))
		}
		// Through the slice's header rather than reflect.NewAt, which
		// would make every pointer given to Unpack escape.
		s := (*sliceHeader)(p)
		if s.cap >= int(n) {
			s.len = int(n)
		} else {
			s.data, s.len, s.cap = reflect.MakeSlice(ti.t, int(n), int(n)).UnsafePointer(), int(n), int(n)
		}
		if n == 0 || ti.elem.size == 0 {
			return nil
		}
		base, stride := s.data, ti.elem.t.Size()
		if ti.elem.kind.scalar() {
			return r.wrap(getRun(base, src, ti.elem.kind, int(n)))
		}
		for j := 0; j < int(n); j++ {
			if err := ti.elem.get(unsafe.Add(base, uintptr(j)*stride), src[j*ti.elem.size:]); err != nil {
				return r.wrap(err)
			}
		}
		return nil
	}
	d, err := r.readDesc(false)
	if err != nil {
		return err
	}
	if !d.matches(ti) {
		return r.mismatch(start, ti.typeName())
	}
	src, err := r.take(uint64(ti.size))
	if err != nil {
		return err
	}
	return r.wrap(ti.get(p, src))
}

func (r *reader) wrap(err error) error {
	if err != nil {
		return fmt.Errorf("argument %d: %w", r.i, err)
	}
	return nil
}

// skip steps over the next value, checking only that it is well formed.
func (r *reader) skip() error {
	if r.off >= len(r.b) {
		return r.formatErr("value missing")
	}
	switch argKind(r.b[r.off]) {
	case kString:
		r.off++
		n, err := r.u32()
		if err != nil {
			return err
		}
		_, err = r.take(uint64(n))
		return err
	case kSlice:
		r.off++
		d, err := r.readDesc(false)
		if err != nil {
			return err
		}
		n, err := r.u32()
		if err != nil {
			return err
		}
		_, err = r.take(uint64(n) * uint64(d.packedSize()))
		return err
	}
	d, err := r.readDesc(false)
	if err != nil {
		return err
	}
	_, err = r.take(uint64(d.packedSize()))
	return err
}

// packedSize is the packed size of a value of the fixed-size type d.
func (d desc) packedSize() uint32 {
	if d.kind == kComposite {
		return d.size
	}
	return uint32(kindSize[d.kind])
}
