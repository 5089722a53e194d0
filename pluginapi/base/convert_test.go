package base

import (
	"reflect"
	"testing"
)

// TestPluginInfoConvert: an Info survives pluginInfoToProto then
// pluginInfoFromProto unchanged.
func TestPluginInfoConvert(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *Info
	}{
		{"zero", &Info{}},
		{"no API versions", &Info{Kind: KindDriver, Name: "cpu", Version: "0.1"}},
		{"one API version", &Info{Kind: KindScheduler, Name: "ws", APIVersions: []int{APIVersion}}},
		{"every field", &Info{Kind: KindInterface, Name: "csr", Version: "1.2.3", APIVersions: []int{1, 2, 7}, Description: "CSR sparse matrices"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pluginInfoFromProto(pluginInfoToProto(tc.in)); !reflect.DeepEqual(got, tc.in) {
				t.Errorf("round trip gave %+v, want %+v", got, tc.in)
			}
		})
	}
}

// TestConfigSchemaConvert: a Schema survives configSchemaToProto then
// configSchemaFromProto unchanged; a nil schema comes back empty.
func TestConfigSchemaConvert(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *Schema
		// want is what comes back, when it is not in.
		want *Schema
	}{
		{"nil", nil, &Schema{}},
		{"empty", &Schema{}, nil},
		{"zero attribute", &Schema{Attrs: []Attr{{}}}, nil},
		{"every type", &Schema{Attrs: []Attr{
			{Name: "s", Type: AttrString, Default: "x", Doc: "a string"},
			{Name: "i", Type: AttrInt, Required: true},
			{Name: "f", Type: AttrFloat, Default: "0.5"},
			{Name: "b", Type: AttrBool, Default: "true", Required: true, Doc: "a flag"},
		}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = tc.in
			}
			if got := configSchemaFromProto(configSchemaToProto(tc.in)); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip gave %+v, want %+v", got, want)
			}
		})
	}
}

// TestAttrConvert: an Attr survives attrToProto then attrFromProto
// unchanged.
func TestAttrConvert(t *testing.T) {
	for _, in := range []Attr{
		{},
		{Name: "n", Type: AttrInt},
		{Name: "level", Type: AttrString, Default: "info", Required: true, Doc: "log level"},
	} {
		if got := attrFromProto(attrToProto(in)); got != in {
			t.Errorf("round trip of %+v gave %+v", in, got)
		}
	}
}

// TestSpanConvert: a Span survives SpanToProto then SpanFromProto
// unchanged.
func TestSpanConvert(t *testing.T) {
	for _, in := range []Span{{}, {Offset: 64}, {Size: 8}, {Offset: 1 << 40, Size: 1<<64 - 1}} {
		if got := SpanFromProto(SpanToProto(in)); got != in {
			t.Errorf("round trip of %+v gave %+v", in, got)
		}
	}
}
