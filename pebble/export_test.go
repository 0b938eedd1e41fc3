package pebble

import (
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

// Table is one table of the filter: a filter in one table, as the filter was
// before it was split, for BenchmarkFilterInsert's comparison.
type Table = table

// NewTable returns an empty table of the smallest size.
func NewTable() *Table {
	t := &table{}
	t.resize(minFilterSlots)
	return t
}

// Insert adds one occurrence of x.
func (t *table) Insert(x uint64) { t.insert(x) }

// Bytes returns the memory held by the table.
func (t *table) Bytes() int { return len(t.slots) * 8 }

// Len returns the number of fingerprints held.
func (t *table) Len() int { return t.n }

// Slots returns the number of slots of all the filter's tables.
func (f *filter) Slots() int { return f.slots }

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
