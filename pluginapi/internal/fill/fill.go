// Package fill sets every field of a value to distinct non-zero values, for
// round-trip tests of the plugin adapters.
package fill

import "reflect"

// Fill sets every field of the value v points to, recursively, to distinct
// non-zero values (slices get two elements), so that a round trip that drops
// or garbles a field, including one added to the contract later and not to
// the adapters, fails a DeepEqual.
func Fill(v any) {
	n := uint64(0)
	fillValue(reflect.ValueOf(v).Elem(), &n)
}

func fillValue(v reflect.Value, n *uint64) {
	*n++
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fillValue(v.Field(i), n)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := 0; i < 2; i++ {
			fillValue(v.Index(i), n)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillValue(v.Elem(), n)
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(*n)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	default:
		panic("fill: unsupported kind " + v.Kind().String())
	}
}
