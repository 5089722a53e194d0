package loader

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkLaunch measures a plugin's start: process start, go-plugin
// handshake (with AutoMTLS, two certificates generated), dispense and
// PluginInfo, then Kill.
func BenchmarkLaunch(b *testing.B) {
	a := newArena(b)
	c := Candidate{Path: filepath.Join(binDir, "sched-fake"), Kind: "sched", Name: "fake"}
	b.ResetTimer()
	for range b.N {
		p, err := Launch(context.Background(), c, Options{Arena: a})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		p.Kill()
		b.StartTimer()
	}
}
