package pebble

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/spentledger/spent"
)

// filterShards is the number of tables the filter is split into, by the
// low bits of a fingerprint. A table doubles or halves on its own, so a
// resize rehashes 1/filterShards of the fingerprints (about 100,000 at 100
// million records) instead of all of them at once: the decision goroutine's
// pause is a thousandth of what it would be with one table
// (BenchmarkFilterInsert measures both).
const filterShards = 1 << 10

// minFilterSlots is the smallest table of a shard.
const minFilterSlots = 16

// filter is the existence filter: a multiset of 64-bit fingerprints of the
// keys whose records are physically stored (expired-but-unswept records
// included). It answers "maybe present" for every stored key, so a key it
// calls absent needs no read; two keys with one fingerprint both count, so
// removing one leaves the other present. It is not safe for concurrent use;
// only the decision goroutine touches it.
type filter struct {
	shards [filterShards]table
	n      int // fingerprints held, in all shards
	slots  int // slots, in all shards
}

// table is one shard of the filter: an open-addressing table with linear
// probing and backward-shift deletion (no tombstones), 8 bytes a slot, zero
// marking an empty slot. It doubles when an insert would take it above 3/4
// full and halves when a removal leaves it under 1/8 full.
type table struct {
	slots []uint64
	shift uint // 64 - log2(len(slots)): a fingerprint's top bits are its home slot
	n     int
}

// newFilter returns a filter sized to hold expect fingerprints without
// growing: each table is sized for its share of them plus four standard
// deviations of how fingerprints fall among the tables.
func newFilter(expect int) *filter {
	f := &filter{}
	share := float64(expect) / filterShards
	size := slotsFor(int(math.Ceil(share + 4*math.Sqrt(share))))
	for i := range f.shards {
		f.shards[i].resize(size)
	}
	f.slots = size * filterShards
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

// shard returns the table that holds x: its low bits choose it, the top
// bits its home slot there.
func (f *filter) shard(x uint64) *table { return &f.shards[x&(filterShards-1)] }

// contains reports whether x may be present: false means certainly absent.
func (f *filter) contains(x uint64) bool { return f.shard(x).contains(x) }

// insert adds one occurrence of x.
func (f *filter) insert(x uint64) {
	t := f.shard(x)
	before := len(t.slots)
	t.insert(x)
	f.n++
	f.slots += len(t.slots) - before
}

// remove deletes one occurrence of x and reports whether there was one.
func (f *filter) remove(x uint64) bool {
	t := f.shard(x)
	before := len(t.slots)
	if !t.remove(x) {
		return false
	}
	f.n--
	f.slots += len(t.slots) - before
	return true
}

// len returns the number of fingerprints held.
func (f *filter) len() int { return f.n }

// bytes returns the memory held by the tables.
func (f *filter) bytes() int { return f.slots * 8 }

// fingerprint maps a hash to a non-zero 64-bit value. Both halves of the hash
// are mixed (a splitmix64 finaliser), so keys that differ only in their last
// bytes, as test keys often do, still spread over the table.
func fingerprint(h *spent.Hash) uint64 {
	x := binary.LittleEndian.Uint64(h[:8]) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(h[8:]), 29)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	if x == 0 {
		x = 1
	}
	return x
}

func (t *table) mask() int { return len(t.slots) - 1 }

func (t *table) home(x uint64) int { return int(x >> t.shift) }

// contains reports whether x may be present: false means certainly absent.
func (t *table) contains(x uint64) bool {
	m := t.mask()
	for i := t.home(x); ; i = (i + 1) & m {
		switch t.slots[i] {
		case x:
			return true
		case 0:
			return false
		}
	}
}

// insert adds one occurrence of x, doubling the table first if it would
// then be over 3/4 full.
func (t *table) insert(x uint64) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(len(t.slots) * 2)
	}
	t.place(x)
	t.n++
}

// place puts x in the first free slot from its home.
func (t *table) place(x uint64) {
	m := t.mask()
	i := t.home(x)
	for t.slots[i] != 0 {
		i = (i + 1) & m
	}
	t.slots[i] = x
}

// remove deletes one occurrence of x and reports whether there was one,
// halving the table if it is then under 1/8 full.
func (t *table) remove(x uint64) bool {
	m := t.mask()
	i := t.home(x)
	for t.slots[i] != x {
		if t.slots[i] == 0 {
			return false
		}
		i = (i + 1) & m
	}
	// Backward shift: pull later members of the probe run into the hole
	// when the hole lies on their path from home, so that no lookup ever
	// stops early at it.
	for j := (i + 1) & m; t.slots[j] != 0; j = (j + 1) & m {
		k := t.home(t.slots[j])
		if (j-k)&m >= (j-i)&m {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
	t.n--
	if len(t.slots) > minFilterSlots && t.n*8 < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
	return true
}

// resize rebuilds the table with size slots (a power of two).
func (t *table) resize(size int) {
	old := t.slots
	t.slots = make([]uint64, size)
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
	for _, x := range old {
		if x != 0 {
			t.place(x)
		}
	}
}
