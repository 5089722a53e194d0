package base

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestConfigRoundTrip: every value keeps its Go type across the wire, whole
// floats included (a policy's alpha = 2.0 must not arrive as an int).
func TestConfigRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
	}{
		{"whole float", Config{"alpha": 2.0}},
		{"zero float", Config{"beta": 0.0}},
		{"negative whole float", Config{"x": -3.0}},
		{"fractional float", Config{"x": 0.125}},
		{"large float", Config{"x": 1e300}},
		{"tiny float", Config{"x": 5e-324}},
		{"int", Config{"n": int64(4)}},
		{"huge int", Config{"n": int64(math.MaxInt64)}},
		{"mixed", Config{"steal": true, "mode": "fifo", "n": int64(-1), "f": 10.0}},
		{"empty", Config{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := MarshalConfig(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := UnmarshalConfig(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.cfg) {
				t.Fatalf("%s came back as %#v, want %#v", b, got, c.cfg)
			}
		})
	}
}

func TestConfigDecode(t *testing.T) {
	cases := []struct {
		json string
		want Config
		err  string
	}{
		{`{"n": 3}`, Config{"n": int64(3)}, ""},
		{`{"n": 3.0}`, Config{"n": 3.0}, ""},
		{`{"n": 3e0}`, Config{"n": 3.0}, ""},
		{`{"n": 1e400}`, nil, `attribute "n": bad number`},
		{`{"n": 99999999999999999999}`, Config{"n": 1e20}, ""},
		{`{"n": `, nil, "decode plugin config"},
	}
	for _, c := range cases {
		got, err := UnmarshalConfig([]byte(c.json))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.json, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %#v, %v; want %#v", c.json, got, err, c.want)
		}
	}
	if _, err := MarshalConfig(Config{"x": math.NaN()}); err == nil {
		t.Error("NaN encoded without error")
	}
}
