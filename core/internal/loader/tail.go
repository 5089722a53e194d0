package loader

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// tailWriter keeps the last max bytes written to it: the end of a plugin's
// stderr, for the error that says why the plugin failed to start.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// Write implements io.Writer.
func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

// Tail is the last n non-empty lines, each indented, with hclog JSON lines
// rendered as "[LEVEL] message: key=value ...".
func (w *tailWriter) Tail(n int) string {
	w.mu.Lock()
	lines := strings.Split(string(w.buf), "\n")
	w.mu.Unlock()
	var out []string
	for _, l := range lines {
		if l = strings.TrimRight(l, "\r "); l != "" {
			out = append(out, "    "+renderLogLine(l))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

// renderLogLine turns an hclog JSON line into text; other lines are
// returned as they are.
func renderLogLine(line string) string {
	if !strings.HasPrefix(line, "{") {
		return line
	}
	var entry map[string]any
	d := json.NewDecoder(bytes.NewReader([]byte(line)))
	d.UseNumber()
	if err := d.Decode(&entry); err != nil {
		return line
	}
	msg, ok := entry["@message"].(string)
	if !ok {
		return line
	}
	level, _ := entry["@level"].(string)
	var keys []string
	for k := range entry {
		if !strings.HasPrefix(k, "@") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	if level != "" {
		fmt.Fprintf(&b, "[%s] ", strings.ToUpper(level))
	}
	b.WriteString(msg)
	for i, k := range keys {
		if i == 0 {
			b.WriteString(":")
		}
		fmt.Fprintf(&b, " %s=%v", k, entry[k])
	}
	return b.String()
}
