package pebble

import (
	"encoding/binary"
	"math/bits"

	"github.com/spentledger/spent"
)

// minFilterSlots is the smallest filter table.
const minFilterSlots = 1 << 10

// filter is the existence filter: a multiset of 64-bit fingerprints of the
// keys whose records are physically stored (expired-but-unswept records
// included). It answers "maybe present" for every stored key, so a key it
// calls absent needs no read; two keys with one fingerprint both count, so
// removing one leaves the other present.
//
// It is an open-addressing table with linear probing and backward-shift
// deletion (no tombstones): 8 bytes a slot, zero marks an empty slot. The
// table doubles when an insert would take it above 3/4 full and halves when
// a removal leaves it under 1/8 full. It is not safe for concurrent use; only
// the decision goroutine touches it.
type filter struct {
	slots []uint64
	shift uint // 64 - log2(len(slots)): a fingerprint's top bits are its home slot
	n     int
}

// newFilter returns a filter sized to hold expect fingerprints without
// growing.
func newFilter(expect int) *filter {
	f := &filter{}
	f.resize(slotsFor(expect))
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

func (f *filter) mask() int { return len(f.slots) - 1 }

func (f *filter) home(x uint64) int { return int(x >> f.shift) }

// contains reports whether x may be present: false means certainly absent.
func (f *filter) contains(x uint64) bool {
	m := f.mask()
	for i := f.home(x); ; i = (i + 1) & m {
		switch f.slots[i] {
		case x:
			return true
		case 0:
			return false
		}
	}
}

// insert adds one occurrence of x.
func (f *filter) insert(x uint64) {
	if (f.n+1)*4 > len(f.slots)*3 {
		f.resize(len(f.slots) * 2)
	}
	f.place(x)
	f.n++
}

func (f *filter) place(x uint64) {
	m := f.mask()
	i := f.home(x)
	for f.slots[i] != 0 {
		i = (i + 1) & m
	}
	f.slots[i] = x
}

// remove deletes one occurrence of x and reports whether there was one.
func (f *filter) remove(x uint64) bool {
	m := f.mask()
	i := f.home(x)
	for f.slots[i] != x {
		if f.slots[i] == 0 {
			return false
		}
		i = (i + 1) & m
	}
	// Backward shift: pull later members of the probe run into the hole
	// when the hole lies on their path from home, so that no lookup ever
	// stops early at it.
	for j := (i + 1) & m; f.slots[j] != 0; j = (j + 1) & m {
		k := f.home(f.slots[j])
		if (j-k)&m >= (j-i)&m {
			f.slots[i] = f.slots[j]
			i = j
		}
	}
	f.slots[i] = 0
	f.n--
	if len(f.slots) > minFilterSlots && f.n*8 < len(f.slots) {
		f.resize(len(f.slots) / 2)
	}
	return true
}

// resize rebuilds the table with size slots (a power of two).
func (f *filter) resize(size int) {
	old := f.slots
	f.slots = make([]uint64, size)
	f.shift = uint(64 - bits.TrailingZeros(uint(size)))
	for _, x := range old {
		if x != 0 {
			f.place(x)
		}
	}
}

// len returns the number of fingerprints held.
func (f *filter) len() int { return f.n }

// bytes returns the memory held by the table.
func (f *filter) bytes() int { return len(f.slots) * 8 }
