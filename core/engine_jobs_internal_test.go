package core

import (
	"math/rand"
	"testing"
)

// TestJobTable checks the table against a map under a random mix of puts
// (some replacing), gets and takes, with ids that collide in the
// direct-mapped slots (ids jobSlots apart) and ids far apart.
func TestJobTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spread uint64 // ids are drawn from [0, spread)
	}{
		{"dense", 1000},
		{"colliding", 4 * jobSlots},
		{"sparse", 1 << 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(1))
			tab, ref := newJobTable(), map[uint64]*job{}
			var ids []uint64
			for i := 0; i < 200000; i++ {
				var id uint64
				if len(ids) > 0 && rng.Intn(2) == 0 {
					id = ids[rng.Intn(len(ids))]
				} else {
					id = uint64(rng.Int63n(int64(tc.spread)))
					// Its slot's neighbours jobSlots apart, to collide.
					if rng.Intn(4) == 0 {
						id += jobSlots
					}
					ids = append(ids, id)
				}
				switch rng.Intn(3) {
				case 0:
					j := &job{id: id}
					tab.put(j)
					ref[id] = j
				case 1:
					if got, want := tab.get(id), ref[id]; got != want {
						t.Fatalf("op %d: get(%d) = %p, want %p", i, id, got, want)
					}
				case 2:
					if got, want := tab.take(id), ref[id]; got != want {
						t.Fatalf("op %d: take(%d) = %p, want %p", i, id, got, want)
					}
					delete(ref, id)
				}
				if tab.len() != len(ref) {
					t.Fatalf("op %d: len %d, want %d", i, tab.len(), len(ref))
				}
			}
			seen := map[uint64]bool{}
			tab.each(func(j *job) bool {
				if ref[j.id] != j || seen[j.id] {
					t.Fatalf("each visited job %d (%p) wrongly or twice", j.id, j)
				}
				seen[j.id] = true
				return true
			})
			if len(seen) != len(ref) {
				t.Fatalf("each visited %d jobs, want %d", len(seen), len(ref))
			}
		})
	}
}
