package core

import (
	"sync"
	"testing"
)

// TestChainClaimRacesRelease: Submit chains a task while the engine may be
// releasing it. Exactly one of them may push it: chainReady reports true
// (the release found it chained) exactly when chainClaim succeeded. Once
// released, a task is never chained. TestUnregisterRacingSubmit met the
// lost race under load as a task pushed twice and a hang.
func TestChainClaimRacesRelease(t *testing.T) {
	rt := &Runtime{}
	t.Run("released first", func(t *testing.T) {
		p, s := &job{id: 1}, &job{id: 2}
		if rt.chainReady(s, true) {
			t.Fatal("chainReady took an unchained job as chained")
		}
		if s.chainClaim(p) {
			t.Fatal("a released job was chained")
		}
	})
	t.Run("one successor per predecessor", func(t *testing.T) {
		p, s, s2 := &job{id: 1}, &job{id: 2}, &job{id: 3}
		if !s.chainClaim(p) {
			t.Fatal("a waiting job was not chained")
		}
		if s2.chainClaim(p) {
			t.Fatal("a second job was chained behind the same predecessor")
		}
		if !rt.chainReady(s, true) {
			t.Fatal("chainReady did not see the chained job")
		}
	})
	t.Run("race", func(t *testing.T) {
		for i := 0; i < 2000; i++ {
			p, s := &job{id: 1}, &job{id: 2}
			var claimed, readied bool
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); claimed = s.chainClaim(p) }()
			go func() { defer wg.Done(); readied = rt.chainReady(s, true) }()
			wg.Wait()
			if claimed != readied {
				t.Fatalf("round %d: chainClaim %v, chainReady %v: the job is pushed twice or never", i, claimed, readied)
			}
		}
	})
}
