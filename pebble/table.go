package pebble

import "math/bits"

// table is an exact multiset of non-zero 64-bit values: an open-addressing
// table with linear probing and backward-shift deletion (no tombstones), 8
// bytes a slot, zero marking an empty slot. It doubles when an insert would
// take it above 3/4 full and halves when a removal leaves it under 1/8 full.
// The filter keeps what its buckets cannot place in one (its stash); before
// the filter was a cuckoo filter, 1,024 of them were the filter
// (filter_old_test.go keeps that one, for the benchmarks' comparison).
type table struct {
	slots []uint64
	shift uint // 64 - log2(len(slots)): the top bits of a value's hash are its home slot
	n     int
}

// minFilterSlots is the smallest table.
const minFilterSlots = 16

func (t *table) mask() int { return len(t.slots) - 1 }

// home returns the slot a value's probe starts at: the top bits of its
// Fibonacci hash (x times 2^64 over the golden ratio), which spreads any
// values, not only uniform ones. The filter's stash keys are small numbers
// (a bucket and a fingerprint): their own top bits were all zero, every
// one's home was slot 0, and each insert, lookup or removal read the whole
// stash, a cost quadratic in the fingerprints a full filter took.
func (t *table) home(x uint64) int { return int(x * 0x9e3779b97f4a7c15 >> t.shift) }

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
