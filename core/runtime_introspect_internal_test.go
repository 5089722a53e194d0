package core

import (
	"strings"
	"testing"
	"time"
)

// TestParseSchedstat: the first field of a thread's schedstat is its time
// on CPU; an empty file or a field that is not a number is an error
// naming the file.
func TestParseSchedstat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"123456789 42 7\n", 123456789, ""},
		{"5", 5, ""},
		{"", 0, "/x is empty"},
		{" \n", 0, "/x is empty"},
		{"12a 3 4", 0, `/x: strconv.ParseInt: parsing "12a"`},
	} {
		got, err := parseSchedstat("/x", []byte(tc.in))
		if tc.err == "" {
			if err != nil || got != tc.want {
				t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: %v, %v; want an error with %q", tc.in, got, err, tc.err)
		}
	}
}
