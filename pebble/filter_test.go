package pebble_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
)

// TestFilterNeverForgetsAPresentKey drives the filter through random inserts
// and removals, with duplicates, clustered fingerprints, growth and shrinking,
// against a counting model: every fingerprint the model holds must be found.
func TestFilterNeverForgetsAPresentKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps int
		gen   func(rng *rand.Rand) uint64
	}{
		{"Uniform", 200000, func(rng *rand.Rand) uint64 { return rng.Uint64() | 1 }},
		// Few distinct values: many duplicates of each (multiset).
		{"Duplicates", 100000, func(rng *rand.Rand) uint64 { return uint64(1 + rng.IntN(50)) }},
		// Values sharing their top bits share a home slot: long probe runs
		// that wrap around the end of the table.
		{"OneHomeSlot", 20000, func(rng *rand.Rand) uint64 { return 0xffff<<48 | uint64(1+rng.IntN(1<<20)) }},
		{"TwoHomeSlots", 20000, func(rng *rand.Rand) uint64 { return uint64(rng.IntN(2))<<63 | uint64(1+rng.IntN(1<<20)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 1))
			f := pebble.NewFilter(0)
			model := map[uint64]int{}
			var present []uint64 // with repetition, one per occurrence
			total := 0
			for step := 0; step < tc.steps; step++ {
				// Phases of growth, then of shrinking, so that the table
				// doubles and halves several times.
				grow := (step/(tc.steps/8))%2 == 0
				if len(present) == 0 || (grow && rng.IntN(4) != 0) || (!grow && rng.IntN(4) == 0) {
					x := tc.gen(rng)
					f.Insert(x)
					model[x]++
					present = append(present, x)
					total++
				} else {
					i := rng.IntN(len(present))
					x := present[i]
					present[i] = present[len(present)-1]
					present = present[:len(present)-1]
					if !f.Remove(x) {
						t.Fatalf("step %d: Remove(%#x) = false for a present value", step, x)
					}
					if model[x]--; model[x] == 0 {
						delete(model, x)
					}
					total--
				}
				if f.Len() != total {
					t.Fatalf("step %d: Len() = %d, want %d", step, f.Len(), total)
				}
				if step%(tc.steps/40) == 0 || step < 2000 {
					for x := range model {
						if !f.Contains(x) {
							t.Fatalf("step %d: Contains(%#x) = false for a present value", step, x)
						}
					}
				}
			}
			for x := range model {
				if !f.Contains(x) {
					t.Fatalf("end: Contains(%#x) = false for a present value", x)
				}
			}
			// Removing every occurrence empties the filter.
			for _, x := range present {
				if !f.Remove(x) {
					t.Fatalf("final Remove(%#x) = false", x)
				}
			}
			for x := range model {
				if f.Contains(x) {
					t.Fatalf("empty filter: Contains(%#x) = true", x)
				}
			}
			if f.Len() != 0 {
				t.Fatalf("Len() = %d after removing everything", f.Len())
			}
		})
	}
}

func TestFilterLoad(t *testing.T) {
	f := pebble.NewFilter(0)
	rng := rand.New(rand.NewPCG(2, 2))
	for i := 1; i <= 1<<20; i++ {
		f.Insert(rng.Uint64() | 1)
		if load := float64(f.Len()) / float64(f.Slots()); load > 0.75 {
			t.Fatalf("%d entries: load %.3f above 3/4", i, load)
		}
	}
	if got, want := f.Bytes(), 8*f.Slots(); got != want {
		t.Fatalf("Bytes() = %d, want %d", got, want)
	}
	if f := pebble.NewFilter(1000000); f.Slots() != 1<<21 {
		t.Fatalf("NewFilter(1e6): got %d slots, want %d", f.Slots(), 1<<21)
	}
}

func TestFingerprintSpreadsNonUniformKeys(t *testing.T) {
	// Keys that differ only in their last byte must not share a fingerprint.
	seen := map[uint64]bool{}
	for i := 0; i < 256; i++ {
		var h spent.Hash
		h[spent.HashSize-1] = byte(i)
		x := pebble.Fingerprint(h)
		if x == 0 || seen[x] {
			t.Fatalf("key %d: fingerprint %#x is zero or repeated", i, x)
		}
		seen[x] = true
	}
}

// BenchmarkFilterInsert inserts b.N fresh fingerprints into an empty filter
// (1,024 tables) and, side by side, into one table of the same kind (the
// filter before it was split), and reports the mean cost of an insert and
// the longest single insert: the longest pause a resize gives the decision
// goroutine.
//
//	go test ./pebble -run '^$' -bench FilterInsert -benchtime 4000000x -count 2
func BenchmarkFilterInsert(b *testing.B) {
	type inserter interface {
		Insert(uint64)
		Bytes() int
		Len() int
	}
	for _, c := range []struct {
		name string
		make func() inserter
	}{
		{"Filter", func() inserter { return pebble.NewFilter(0) }},
		{"OneTable", func() inserter { return pebble.NewTable() }},
	} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 3))
			xs := make([]uint64, b.N)
			for i := range xs {
				// Uniform in all bits, as fingerprints are (not
				// "| 1", which would use half the tables).
				if xs[i] = rng.Uint64(); xs[i] == 0 {
					xs[i] = 1
				}
			}
			f := c.make()
			var longest time.Duration
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				f.Insert(xs[i])
				if d := time.Since(t0); d > longest {
					longest = d
				}
			}
			b.ReportMetric(float64(longest.Nanoseconds())/1e3, "max-µs/insert")
			b.ReportMetric(float64(f.Bytes())/float64(f.Len()), "B/fingerprint")
		})
	}
}

// TestFilterSizedUpFrontDoesNotGrow fills a filter made for n fingerprints
// with n of them: no table may have had to grow.
func TestFilterSizedUpFrontDoesNotGrow(t *testing.T) {
	// 778,240 is 760 a table: just under a table's 3/4 of 1,024 slots, so
	// the tables that draw more than their share would grow without slack.
	for _, n := range []int{1000, 100000, 778240, 1000000} {
		f := pebble.NewFilter(n)
		slots := f.Slots()
		rng := rand.New(rand.NewPCG(uint64(n), 4))
		for range n {
			// Fingerprints are uniform in all their bits (not "| 1",
			// which would leave the tables of even low bits empty).
			x := rng.Uint64()
			if x == 0 {
				x = 1
			}
			f.Insert(x)
		}
		if f.Slots() != slots {
			t.Errorf("NewFilter(%d) then %d inserts: %d slots, was %d: a table grew", n, n, f.Slots(), slots)
		}
	}
}
