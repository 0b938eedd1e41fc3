package pebble

import "math"

// oldShards is the number of tables the filter is split into, by the
// low bits of a fingerprint. A table doubles or halves on its own, so a
// resize rehashes 1/oldShards of the fingerprints (about 100,000 at 100
// million records) instead of all of them at once: the decision goroutine's
// pause is a thousandth of what it would be with one table
// (BenchmarkFilter compares it with the cuckoo filter).
const oldShards = 1 << 10

// oldFilter is the existence filter as it was before the cuckoo filter
// (filter.go), kept for the benchmarks that compare the two: a multiset of 64-bit fingerprints of the
// keys whose records are physically stored (expired-but-unswept records
// included). It answers "maybe present" for every stored key, so a key it
// calls absent needs no read; two keys with one fingerprint both count, so
// removing one leaves the other present. It is not safe for concurrent use;
// only the decision goroutine touches it.
type oldFilter struct {
	shards [oldShards]table
	n      int // fingerprints held, in all shards
	slots  int // slots, in all shards
}

// newFilter returns a filter sized to hold expect fingerprints without
// growing: each table is sized for its share of them plus four standard
// deviations of how fingerprints fall among the tables.
func newOldFilter(expect int) *oldFilter {
	f := &oldFilter{}
	share := float64(expect) / oldShards
	size := slotsFor(int(math.Ceil(share + 4*math.Sqrt(share))))
	for i := range f.shards {
		f.shards[i].resize(size)
	}
	f.slots = size * oldShards
	return f
}

// slotsFor returns the table size that holds n fingerprints under 3/4 load.
func slotsFor(n int) int {
	size := minFilterSlots
	for size*3/4 < n {
		size *= 2
	}
	return size
}

// shard returns the table that holds x: its low bits choose it, its hash
// its home slot there.
func (f *oldFilter) shard(x uint64) *table { return &f.shards[x&(oldShards-1)] }

// contains reports whether x may be present: false means certainly absent.
func (f *oldFilter) contains(x uint64) bool { return f.shard(x).contains(x) }

// insert adds one occurrence of x.
func (f *oldFilter) insert(x uint64) {
	t := f.shard(x)
	before := len(t.slots)
	t.insert(x)
	f.n++
	f.slots += len(t.slots) - before
}

// len returns the number of fingerprints held.
func (f *oldFilter) len() int { return f.n }

// bytes returns the memory held by the tables.
func (f *oldFilter) bytes() int { return f.slots * 8 }
