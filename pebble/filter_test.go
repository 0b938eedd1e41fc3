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
		size  int // the filter is made for this many keys
		steps int
		gen   func(rng *rand.Rand) uint64
	}{
		{"Uniform", 100000, 200000, func(rng *rand.Rand) uint64 { return rng.Uint64() | 1 }},
		// Made for far fewer keys than it gets: most inserts displace
		// others, and many end in the stash.
		{"Overfull", 1000, 100000, func(rng *rand.Rand) uint64 { return rng.Uint64() | 1 }},
		// Few distinct values: many duplicates of each (multiset), more
		// than two buckets hold, so the stash counts them too.
		{"Duplicates", 10000, 100000, func(rng *rand.Rand) uint64 { return uint64(1 + rng.IntN(50)) }},
		// Values sharing their top bits share one 16-bit fingerprint.
		{"OneFingerprint", 10000, 20000, func(rng *rand.Rand) uint64 { return 0xffff<<48 | uint64(1+rng.IntN(1<<20)) }},
		// Values sharing their low 32 bits share their first bucket.
		{"OneBucket", 10000, 20000, func(rng *rand.Rand) uint64 { return uint64(1+rng.IntN(1<<20))<<40 | 12345 }},
		// A zero fingerprint field (top 16 bits) is stored as 1.
		{"ZeroTopBits", 10000, 20000, func(rng *rand.Rand) uint64 { return uint64(1 + rng.IntN(1<<40)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 1))
			f := pebble.NewFilter(tc.size)
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

// TestFilterMemory fills filters made for n keys with n uniform
// fingerprints: they must not be full (no larger filter needed), must
// place them all in buckets, and must take at most 4 bytes a key, the
// issue's bound, and at least the 2 bytes a 16-bit fingerprint needs.
func TestFilterMemory(t *testing.T) {
	for _, n := range []int{1000, 100000, 1000000} {
		f := pebble.NewFilter(n)
		rng := rand.New(rand.NewPCG(uint64(n), 4))
		for range n {
			f.Insert(rng.Uint64() | 1)
		}
		perKey := float64(f.Bytes()) / float64(n)
		if f.Full() || perKey > 4 || perKey < 2 {
			t.Errorf("NewFilter(%d) after %d inserts: full %v, %.2f bytes a key", n, n, f.Full(), perKey)
		}
		if f.Stashed() != 0 {
			t.Errorf("NewFilter(%d) after %d inserts: %d fingerprints in the stash", n, n, f.Stashed())
		}
	}
	// Filled to the load at which a store replaces it: still under 4
	// bytes a key and, on these keys, nothing stashed.
	f := pebble.NewFilter(1000000)
	rng := rand.New(rand.NewPCG(9, 9))
	n := 0
	for !f.Full() {
		f.Insert(rng.Uint64() | 1)
		n++
	}
	if perKey := float64(f.Bytes()) / float64(n); perKey > 4 || f.Stashed() != 0 {
		t.Errorf("full at %d keys: %.2f bytes a key, %d stashed", n, perKey, f.Stashed())
	}
}

// TestFilterFalsePositives measures how often absent keys are called
// present in a filter at the load a store replaces it: the design bound is
// 2 x 4 / 2^16 (about 1.2e-4); over 10^6 lookups the test allows 3e-4.
func TestFilterFalsePositives(t *testing.T) {
	f := pebble.NewFilter(1000000)
	rng := rand.New(rand.NewPCG(5, 5))
	for !f.Full() {
		f.Insert(rng.Uint64() | 1)
	}
	other := rand.New(rand.NewPCG(6, 6))
	fp := 0
	const lookups = 1000000
	for range lookups {
		if f.Contains(other.Uint64() | 1) {
			fp++
		}
	}
	if rate := float64(fp) / lookups; rate > 3e-4 {
		t.Fatalf("false-positive rate %.2g over %d lookups", rate, lookups)
	}
}

// TestFilterInsertPastFullIsBounded fills a filter with eighty times the
// keys it is made for, as a store does while a larger filter is built and
// as Open did when it replayed a long journal into a small saved filter: an
// insert that finds both its buckets full in a filter past the load its
// buckets can hold displaces nothing and goes straight to the stash, and a
// lookup in the stash reads a few slots, not the whole stash. Before, each
// such insert made maxKicks (500) displacements and a stash insert or
// lookup read every stashed fingerprint (their stash keys, small numbers,
// all had slot 0 as their home), so that filling it took time quadratic in
// the keys (a journal of 1,000,002 fingerprints: 12 min 53 s).
func TestFilterInsertPastFullIsBounded(t *testing.T) {
	f := pebble.NewFilter(0) // the smallest filter: 64 buckets, 256 lanes
	rng := rand.New(rand.NewPCG(3, 3))
	var keys []uint64
	for range 256 {
		keys = append(keys, rng.Uint64()|1)
		f.Insert(keys[len(keys)-1])
	}
	before := f.Kicks()
	const more = 20000
	for range more {
		keys = append(keys, rng.Uint64()|1)
		f.Insert(keys[len(keys)-1])
	}
	if got := f.Kicks() - before; got != 0 {
		t.Errorf("%d inserts into a full filter made %d displacements, want none", more, got)
	}
	if got := f.StashProbes(); got > 4 {
		t.Errorf("a lookup of a stashed fingerprint reads %.1f slots on average (%d stashed), want at most 4",
			got, f.Stashed())
	}
	for _, x := range keys {
		if !f.Contains(x) {
			t.Fatalf("Contains(%#x) = false for a present value", x)
		}
	}
	for _, x := range keys {
		if !f.Remove(x) {
			t.Fatalf("Remove(%#x) = false for a present value", x)
		}
	}
	if f.Len() != 0 || f.Stashed() != 0 {
		t.Fatalf("after removing everything: %d held, %d stashed", f.Len(), f.Stashed())
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

// BenchmarkFilter compares the cuckoo filter with the table of 64-bit
// fingerprints it replaced (OldFilter), side by side in one run: inserts of
// fresh fingerprints into a filter made for them (with the longest single
// insert, the decision goroutine's longest pause), lookups of stored keys
// (Hit) and of absent ones (Miss), and the bytes a key each takes.
//
//	go test ./pebble -run '^$' -bench 'Filter$' -benchtime 4000000x -count 3
func BenchmarkFilter(b *testing.B) {
	type set interface {
		Insert(uint64)
		Contains(uint64) bool
		Bytes() int
		Len() int
	}
	const keys = 4 << 20
	for _, c := range []struct {
		name string
		make func() set
	}{
		{"Cuckoo", func() set { return pebble.NewFilter(keys) }},
		{"OldFilter", func() set { return pebble.NewOldFilter(keys) }},
	} {
		b.Run("Insert/"+c.name, func(b *testing.B) {
			xs := uniform(b.N, 3)
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
			b.ReportMetric(float64(f.Bytes())/float64(f.Len()), "B/key")
		})
		f := c.make()
		stored := uniform(keys, 7)
		for _, x := range stored {
			f.Insert(x)
		}
		absent := uniform(keys, 8)
		for _, lookup := range []struct {
			name string
			xs   []uint64
		}{{"Hit", stored}, {"Miss", absent}} {
			b.Run("Contains"+lookup.name+"/"+c.name, func(b *testing.B) {
				found := 0
				for i := range b.N {
					if f.Contains(lookup.xs[i%keys]) {
						found++
					}
				}
				b.ReportMetric(float64(found)/float64(b.N), "found/op")
				b.ReportMetric(float64(f.Bytes())/float64(f.Len()), "B/key")
			})
		}
	}
}

// uniform returns n fingerprints uniform in all their bits, none zero.
func uniform(n int, seed uint64) []uint64 {
	rng := rand.New(rand.NewPCG(seed, seed))
	xs := make([]uint64, n)
	for i := range xs {
		if xs[i] = rng.Uint64(); xs[i] == 0 {
			xs[i] = 1
		}
	}
	return xs
}
