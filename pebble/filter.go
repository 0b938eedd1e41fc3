package pebble

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/spentledger/spent"
)

// The existence filter is a cuckoo filter (Fan, Andersen, Kaminsky and
// Mitzenmacher, "Cuckoo Filter: Practically Better Than Bloom", CoNEXT
// 2014): buckets of four 16-bit fingerprints, each key in one of two
// buckets, the second derived from the first and the fingerprint alone, so
// that a fingerprint can move between its two buckets without its key. It
// holds about 2/load bytes a key (2.4 to 3.6 at the loads it is kept at),
// against 12 to 19 for the table of 64-bit fingerprints it replaced, and
// answers a stored key "maybe present" always, an absent one "maybe
// present" about once in 8,000 lookups at full load (a needless read,
// never a wrong answer).
//
// A filter does not grow in place: the filter of a store that fills one
// past growLoad is replaced by a larger one built from the database in the
// background (filterbuild.go), the full one answering meanwhile. Until the
// larger one takes its place, the full one takes every insert: past
// placeLoad, one that finds its two buckets full goes straight to the
// stash, so an insert costs at most maxKicks displacements and a stash
// insert (a constant time) however far past full the filter is pushed.
// Open does not load a saved filter whose journal would take it past
// placeLoad (filterfile.go).

const (
	lanes     = 4 // fingerprints a bucket holds
	laneBits  = 16
	laneMask  = 1<<laneBits - 1
	laneOnes  = 0x0001_0001_0001_0001
	laneHighs = 0x8000_8000_8000_8000
	// maxKicks bounds how many fingerprints an insert displaces before it
	// gives up and puts the homeless one in the stash.
	maxKicks = 500
	// minBuckets is the smallest filter.
	minBuckets = 64
	// targetLoad is the load a filter is made for: a new filter for n
	// keys has n/targetLoad lanes, 2/targetLoad = 3.6 bytes a key.
	targetLoad = 0.55
	// growLoad is the load above which a larger filter is built. A cuckoo
	// filter of four-lane buckets places keys up to about 95% full; the
	// margin absorbs the claims decided while the larger one is built.
	growLoad = 0.85
	// placeLoad is the load up to which an insert displaces fingerprints
	// to place a new one in the buckets. Four-lane buckets place keys up
	// to about 95% full, and the displacements an insert makes grow
	// steeply as they fill; further, nearly every insert would make
	// maxKicks displacements only to end in the stash. So past placeLoad
	// an insert that finds its two buckets full goes straight to the stash
	// (TestFilterInsertPastFullIsBounded counts the displacements).
	placeLoad = 0.95
)

// filter is the existence filter: a multiset of the fingerprints of the
// keys whose records are physically stored (expired-but-unswept records
// included). It answers "maybe present" for every key inserted and not
// removed since, so a key it calls absent needs no read. Keys whose
// fingerprints and buckets coincide are indistinguishable to it and each
// counts: removing one leaves the others present. A key must only be
// removed as often as it was inserted, or another key's fingerprint may go
// with it. It is not safe for concurrent use; only the decision goroutine
// touches it, a save reading it through cow.
type filter struct {
	buckets []uint64 // lanes of laneBits bits; a zero lane is empty
	m       uint64   // len(buckets)
	n       int      // fingerprints held, stash included
	// stash holds, exactly, the fingerprints an insert could not place
	// (as stashKey values): few, unless the filter is kept past full.
	stash table
	rng   uint64          // xorshift state: which fingerprint to displace
	cow   *filterSnapshot // a save in progress, or nil (filterfile.go)
	// placeMax is the most fingerprints held (placeLoad) for which an
	// insert displaces others to place a new one.
	placeMax int
	// kicks counts the displacements its inserts made: the work an insert
	// does beyond its two buckets (the tests measure it).
	kicks int
}

// newFilter returns an empty filter made for records keys at targetLoad.
func newFilter(records int) *filter {
	m := uint64(math.Ceil(float64(records) / (lanes * targetLoad)))
	return newFilterBuckets(max(m, minBuckets))
}

// newFilterBuckets returns an empty filter of m buckets.
func newFilterBuckets(m uint64) *filter {
	f := &filter{buckets: make([]uint64, m), m: m, rng: 0x9e3779b97f4a7c15,
		placeMax: int(placeLoad * float64(lanes*m))}
	f.stash.resize(minFilterSlots)
	return f
}

// fingerprint maps a hash to a non-zero 64-bit value. Both halves of the hash
// are mixed (a splitmix64 finaliser), so keys that differ only in their last
// bytes, as test keys often do, still spread over the filter. The filter
// takes its bucket from the low 32 bits and its fingerprint from the top 16.
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

// locate returns the fingerprint of x in its lanes and its first bucket.
func (f *filter) locate(x uint64) (fp, i uint64) {
	fp = x >> (64 - laneBits)
	if fp == 0 {
		fp = 1
	}
	return fp, (x & math.MaxUint32) * f.m >> 32
}

// alt returns the other bucket of fingerprint fp in bucket i:
// (h(fp) - i) mod m, which maps the other bucket back to i for any m.
func (f *filter) alt(i, fp uint64) uint64 {
	h := (fp * 0x9e3779b97f4a7c15 >> 32) * f.m >> 32
	if h >= i {
		return h - i
	}
	return h + f.m - i
}

// stashKey names fingerprint fp in bucket i the same way from either of its
// buckets: the lower of the two, then the fingerprint; never zero.
func (f *filter) stashKey(i, fp uint64) uint64 {
	return min(i, f.alt(i, fp))<<laneBits | fp
}

// hasLane reports whether a lane of bucket w holds v (zero: a free lane).
func hasLane(w, v uint64) bool {
	d := w ^ v*laneOnes
	return (d-laneOnes)&^d&laneHighs != 0
}

// contains reports whether x may be present: false means certainly absent.
func (f *filter) contains(x uint64) bool {
	fp, i := f.locate(x)
	if hasLane(f.buckets[i], fp) || hasLane(f.buckets[f.alt(i, fp)], fp) {
		return true
	}
	return f.stash.n > 0 && f.stash.contains(f.stashKey(i, fp))
}

// insert adds one occurrence of x. It always succeeds: a fingerprint that
// finds no lane after maxKicks displacements goes to the stash, and so does
// one that finds its two buckets full in a filter past placeLoad.
func (f *filter) insert(x uint64) {
	f.n++
	fp, i := f.locate(x)
	j := f.alt(i, fp)
	if f.place(i, fp) || f.place(j, fp) {
		return
	}
	if f.n > f.placeMax {
		f.stash.insert(f.stashKey(i, fp))
		return
	}
	if f.next()&1 == 0 {
		i = j
	}
	for range maxKicks {
		f.kicks++
		// Displace a random lane of bucket i; the displaced fingerprint
		// goes to its other bucket.
		shift := (f.next() & (lanes - 1)) * laneBits
		f.touch(i)
		w := f.buckets[i]
		fp, f.buckets[i] = w>>shift&laneMask, w&^(laneMask<<shift)|fp<<shift
		i = f.alt(i, fp)
		if f.place(i, fp) {
			return
		}
	}
	f.stash.insert(f.stashKey(i, fp))
}

// place puts fp in a free lane of bucket i, if it has one.
func (f *filter) place(i, fp uint64) bool {
	w := f.buckets[i]
	if !hasLane(w, 0) {
		return false
	}
	for shift := uint64(0); shift < 64; shift += laneBits {
		if w>>shift&laneMask == 0 {
			f.touch(i)
			f.buckets[i] = w | fp<<shift
			return true
		}
	}
	return false
}

// remove deletes one occurrence of x and reports whether there was one.
func (f *filter) remove(x uint64) bool {
	fp, i := f.locate(x)
	if f.clear(i, fp) || f.clear(f.alt(i, fp), fp) ||
		(f.stash.n > 0 && f.stash.remove(f.stashKey(i, fp))) {
		f.n--
		return true
	}
	return false
}

// clear empties one lane of bucket i that holds fp, if one does.
func (f *filter) clear(i, fp uint64) bool {
	w := f.buckets[i]
	if !hasLane(w, fp) {
		return false
	}
	for shift := uint64(0); shift < 64; shift += laneBits {
		if w>>shift&laneMask == fp {
			f.touch(i)
			f.buckets[i] = w &^ (laneMask << shift)
			return true
		}
	}
	return false
}

// next returns the next value of the filter's xorshift generator.
func (f *filter) next() uint64 {
	f.rng ^= f.rng << 13
	f.rng ^= f.rng >> 7
	f.rng ^= f.rng << 17
	return f.rng
}

// len returns the number of fingerprints held.
func (f *filter) len() int { return f.n }

// bytes returns the memory held by the buckets and the stash.
func (f *filter) bytes() int { return 8*len(f.buckets) + 8*len(f.stash.slots) }

// full reports whether the filter is past growLoad: time for a larger one.
func (f *filter) full() bool { return float64(f.n) > growLoad*float64(lanes*f.m) }

// touch is called before bucket i changes: a save in progress keeps the
// chunk's contents as they were when it began.
func (f *filter) touch(i uint64) {
	if f.cow != nil {
		f.cow.keep(f.buckets, i/snapshotChunk)
	}
}

// snapshotChunk is how many buckets a save copies at a time (128 KiB).
const snapshotChunk = 1 << 14

// filterSnapshot is a copy-on-write view of a filter's buckets as they were
// when a save began: the saver reads chunks from it while the decision
// goroutine goes on changing the filter, which first keeps a copy of any
// chunk the saver has not read yet. The decision goroutine pauses for one
// chunk copy at most, never for the whole filter.
type filterSnapshot struct {
	mu   sync.Mutex
	next uint64              // chunks below next have been read
	kept map[uint64][]uint64 // chunks changed since the save began, as they were
}

// keep copies chunk c of buckets before its first change, unless the saver
// has read it already.
func (s *filterSnapshot) keep(buckets []uint64, c uint64) {
	s.mu.Lock()
	if c >= s.next && s.kept[c] == nil {
		s.kept[c] = slices.Clone(chunkOf(buckets, c))
	}
	s.mu.Unlock()
}

// read appends chunk c as it was when the save began to buf. Chunks are
// read in order.
func (s *filterSnapshot) read(buckets []uint64, c uint64, buf []uint64) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = c + 1
	if k, ok := s.kept[c]; ok {
		delete(s.kept, c)
		return append(buf, k...)
	}
	return append(buf, chunkOf(buckets, c)...)
}

// chunkOf returns chunk c of buckets.
func chunkOf(buckets []uint64, c uint64) []uint64 {
	lo := c * snapshotChunk
	return buckets[lo:min(lo+snapshotChunk, uint64(len(buckets)))]
}
