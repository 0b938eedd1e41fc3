package pebble

import (
	"context"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spentledger/spent"
)

// Test-only exports for the black-box tests in package pebble_test.

// Filter is the existence filter.
type Filter = filter

// NewFilter returns an empty filter sized for expect fingerprints.
func NewFilter(expect int) *Filter { return newFilter(expect) }

// Fingerprint returns the filter fingerprint of h.
func Fingerprint(h spent.Hash) uint64 { return fingerprint(&h) }

// Insert adds one occurrence of x.
func (f *filter) Insert(x uint64) { f.insert(x) }

// Remove deletes one occurrence of x.
func (f *filter) Remove(x uint64) bool { return f.remove(x) }

// Contains reports whether x may be present.
func (f *filter) Contains(x uint64) bool { return f.contains(x) }

// Len returns the number of fingerprints held.
func (f *filter) Len() int { return f.len() }

// Bytes returns the memory held by the table.
func (f *filter) Bytes() int { return f.bytes() }

// OldFilter is the existence filter before the cuckoo filter: 1,024 tables
// of 64-bit fingerprints (filter_old_test.go), for the benchmarks that
// compare the two.
type OldFilter = oldFilter

// NewOldFilter returns an empty old filter sized for expect fingerprints.
func NewOldFilter(expect int) *OldFilter { return newOldFilter(expect) }

// Insert adds one occurrence of x.
func (f *oldFilter) Insert(x uint64) { f.insert(x) }

// Contains reports whether x may be present.
func (f *oldFilter) Contains(x uint64) bool { return f.contains(x) }

// Len returns the number of fingerprints held.
func (f *oldFilter) Len() int { return f.len() }

// Bytes returns the memory held by the tables.
func (f *oldFilter) Bytes() int { return f.bytes() }

// Full reports whether the filter is past the load at which a store
// replaces it with a larger one.
func (f *filter) Full() bool { return f.full() }

// Stashed returns the number of fingerprints in the stash.
func (f *filter) Stashed() int { return f.stash.n }

// WithFilterSaveEvery returns o set to save the filter after every n
// inserts.
func WithFilterSaveEvery(o Options, n int) Options {
	o.filterSaveEvery = n
	return o
}

// WithoutJournal returns o set to write no filter journal, as a spent of
// before the journal did.
func WithoutJournal(o Options) Options {
	o.noJournal = true
	return o
}

// SetFilterHooks sets the hooks a save calls after each chunk and a build
// after each key (nil: none). Not safe while a store is open.
func SetFilterHooks(save func(chunk uint64), build func(read int)) {
	filterSaveHook, filterBuildHook = save, build
}

// FilterFile is the name of the saved filter in a store's directory.
const FilterFile = filterFile

// WithFS returns o set to use fs instead of the operating system's files.
func WithFS(o Options, fs vfs.FS) Options {
	o.fs = fs
	return o
}

// WithPlainWAL returns o set not to zero-fill the WAL ahead of writes.
func WithPlainWAL(o Options) Options {
	o.plainWAL = true
	return o
}

// EncodeRecord returns the stored value of r.
func EncodeRecord(r *spent.Record) []byte { return appendRecord(nil, r) }

// DecodeRecord decodes a stored value under key h.
func DecodeRecord(h spent.Hash, v []byte) (spent.Record, error) { return decodeRecord(h, v) }

// RecordKey returns the pebble key of the record of h.
func RecordKey(h spent.Hash) []byte { return recordKey(&h) }

// CountKeys returns the number of keys under prefix ("r/" records, "x/"
// expiry index, "p/" pending index, ...).
func (s *Store) CountKeys(prefix string) (int, error) {
	it, err := s.db.NewIter(&pdb.IterOptions{LowerBound: []byte(prefix), UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Close()
}

// Flush flushes the memtable to a table, so that the records written so far
// leave the WAL.
func (s *Store) Flush() error { return s.db.Flush() }

// SetSeqIndex turns the index by seq on or off for stores opened from then
// on, so that the benchmarks can compare a claim's cost with and without
// it; a store opened without it is an older store, whose index Open builds
// when it is on again.
func SetSeqIndex(on bool) { noSeqIndex.Store(!on) }

// SetSeqIterStats sets the function each ListSeq gives its iterator's
// stats (nil: none).
func SetSeqIterStats(f func(pdb.IteratorStats)) {
	if f == nil {
		seqIterStats.Store(nil)
		return
	}
	seqIterStats.Store(&f)
}

// CompactedSize flushes the memtable, compacts every key into tables and
// returns the bytes of the store's tables (its live data, without the WAL).
func (s *Store) CompactedSize() (uint64, error) {
	if err := s.db.Flush(); err != nil {
		return 0, err
	}
	if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false); err != nil {
		return 0, err
	}
	return uint64(s.db.Metrics().Total().TablesSize), nil
}

// Kicks returns the number of displacements the filter's inserts made.
func (f *filter) Kicks() int { return f.kicks }

// StashProbes returns how many slots a lookup of a stashed fingerprint
// reads, on average over the stash (1 when each is in its home slot).
func (f *filter) StashProbes() float64 {
	t := &f.stash
	if t.n == 0 {
		return 0
	}
	total := 0
	for i, x := range t.slots {
		if x != 0 {
			total += (i-t.home(x))&t.mask() + 1
		}
	}
	return float64(total) / float64(t.n)
}

// SetProgressEvery sets how often a long load or build of the filter logs
// its progress (5 s unless set), and returns the previous setting. Not
// safe while a store is open.
func SetProgressEvery(d time.Duration) time.Duration {
	old := progressEvery
	progressEvery = d
	return old
}
