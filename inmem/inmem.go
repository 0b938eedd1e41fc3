// Package inmem is a map-backed [spent.Store] for tests. It is not for
// production: it keeps nothing on disk, so a restart forgets every claim.
//
// Use [New] in tests of code built on the ledger. [Store.Reopen] simulates a
// restart that keeps the data, and [Store.Faults] injects store failures,
// including ambiguous ones (the write happens, then an error is returned).
//
// # Guarantees
//
// Every operation is atomic under one mutex; DeleteExpired and Purge scan the
// whole map, and ListSeq sorts the index entries of the node it lists
// (acceptable for tests only).
package inmem

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/spentledger/spent"
)

// Faults injects failures. Each hook is called with the operation name
// ("claim", "claim_batch", "complete", "release", "get", "list_pending",
// "delete_expired", "purge", "reserve_seq", "count", "list_seq"); a non-nil error is returned to the caller.
// Before runs before the operation (nothing is written), After runs after it
// (the write happened: an ambiguous failure).
type Faults struct {
	Before func(op string) error
	After  func(op string) error
}

type data struct {
	mu      sync.Mutex
	recs    map[spent.Hash]spent.Record
	bySeq   map[uint32]map[uint64]spent.Hash // the index by seq: node, counter
	seqs    map[uint32]uint64
	counts  map[spent.Hash]spent.CountAnswer
	faults  Faults
	closed  bool
	version int
}

// Store is the map-backed store. It is not for production.
type Store struct {
	d       *data
	version int
}

var (
	_ spent.Store     = (*Store)(nil)
	_ spent.SeqLister = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{d: &data{recs: map[spent.Hash]spent.Record{}, seqs: map[uint32]uint64{}, bySeq: map[uint32]map[uint64]spent.Hash{},
		counts: map[spent.Hash]spent.CountAnswer{}}}
}

// Reopen returns a new Store over the same data, as a restart of a durable
// store would; the old Store behaves as closed from then on. For tests.
func (s *Store) Reopen() *Store {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.version++
	s.d.closed = false
	return &Store{d: s.d, version: s.d.version}
}

// SetFaults installs failure hooks. For tests.
func (s *Store) SetFaults(f Faults) {
	s.d.mu.Lock()
	s.d.faults = f
	s.d.mu.Unlock()
}

// Len returns the number of records held, expired or not. For tests.
func (s *Store) Len() int {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return len(s.d.recs)
}

// lock takes the mutex and runs the Before hook; the caller must unlock.
func (s *Store) lock(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.d.mu.Lock()
	if s.d.closed || s.version != s.d.version {
		s.d.mu.Unlock()
		return spent.ErrClosed
	}
	if f := s.d.faults.Before; f != nil {
		if err := f(op); err != nil {
			s.d.mu.Unlock()
			return err
		}
	}
	return nil
}

func (s *Store) after(op string) error {
	if f := s.d.faults.After; f != nil {
		return f(op)
	}
	return nil
}

func (s *Store) claim(op spent.ClaimOp) (spent.ClaimAnswer, error) {
	if err := op.Record.Validate(); err != nil {
		return spent.ClaimAnswer{}, err
	}
	if r, ok := s.d.recs[op.Record.Hash]; ok && !spent.FreeAt(&r, op.Now, op.Retake) {
		// A result over the op's limit is left out before the copy, so
		// that it is never copied.
		res := spent.LimitResult(spent.ClaimAnswer{Record: r}, op.ResultLimit)
		return spent.ClaimAnswer{Record: res.Record.Clone(), ResultOmitted: res.ResultOmitted, ResultLen: res.ResultLen}, nil
	}
	if r, ok := s.d.recs[op.Record.Hash]; ok {
		s.d.unindex(r.Seq)
	}
	rec := op.Record.Clone()
	s.d.recs[rec.Hash] = rec
	s.d.index(rec.Seq, rec.Hash)
	return spent.ClaimAnswer{Inserted: true, Record: rec.Clone()}, nil
}

// Claim implements [spent.Store].
func (s *Store) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	if err := s.lock(ctx, "claim"); err != nil {
		return spent.ClaimAnswer{}, err
	}
	defer s.d.mu.Unlock()
	res, err := s.claim(op)
	if err != nil {
		return res, err
	}
	return res, s.after("claim")
}

// ClaimBatch implements [spent.Store].
func (s *Store) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	if err := s.lock(ctx, "claim_batch"); err != nil {
		return nil, err
	}
	defer s.d.mu.Unlock()
	out := make([]spent.ClaimAnswer, len(ops))
	for i := range ops {
		r, err := s.claim(ops[i])
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, s.after("claim_batch")
}

// end rules on ending e of key's record at now with [spent.RuleEnd], and
// returns the record (the zero Record when there is none); the caller holds
// the mutex.
func (s *Store) end(key spent.Hash, now time.Time, e spent.Ending) (spent.Record, bool, error) {
	var stored *spent.Record
	r, ok := s.d.recs[key]
	if ok {
		stored = &r
	}
	done, err := spent.RuleEnd(stored, now, e)
	return r, done, err
}

// Complete implements [spent.Store].
func (s *Store) Complete(ctx context.Context, key spent.Hash, seq spent.Seq, result []byte, now time.Time) (spent.Record, error) {
	if err := s.lock(ctx, "complete"); err != nil {
		return spent.Record{}, err
	}
	defer s.d.mu.Unlock()
	r, done, err := s.end(key, now, spent.Ending{Seq: seq, Result: result})
	if err != nil {
		return spent.Record{}, err
	}
	if !done {
		r.State = spent.StateComplete
		r.Result = append([]byte{}, result...)
		r.LeaseUntil = time.Time{}
		s.d.recs[key] = r
	}
	return r.Clone(), s.after("complete")
}

// Release implements [spent.Store].
func (s *Store) Release(ctx context.Context, key spent.Hash, seq spent.Seq, now time.Time) error {
	if err := s.lock(ctx, "release"); err != nil {
		return err
	}
	defer s.d.mu.Unlock()
	r, _, err := s.end(key, now, spent.Ending{Seq: seq, Release: true})
	if err != nil {
		return err
	}
	s.d.unindex(r.Seq)
	delete(s.d.recs, key)
	return s.after("release")
}

// Get implements [spent.Store].
func (s *Store) Get(ctx context.Context, key spent.Hash, now time.Time) (spent.Record, error) {
	if err := s.lock(ctx, "get"); err != nil {
		return spent.Record{}, err
	}
	defer s.d.mu.Unlock()
	r, ok := s.d.recs[key]
	if !ok || !r.LiveAt(now) {
		return spent.Record{}, spent.ErrNotFound
	}
	return r.Clone(), s.after("get")
}

// ListPending implements [spent.Store].
func (s *Store) ListPending(ctx context.Context, namespace string, leaseBefore time.Time, limit int) ([]spent.Record, error) {
	if err := s.lock(ctx, "list_pending"); err != nil {
		return nil, err
	}
	defer s.d.mu.Unlock()
	var out []spent.Record
	for _, r := range s.d.recs {
		if r.State == spent.StatePending && r.LiveAt(leaseBefore) && !r.LeaseUntil.After(leaseBefore) &&
			(namespace == "" || r.Namespace == namespace) {
			out = append(out, r.Clone())
		}
	}
	out = spent.OldestLeaseFirst(out, limit)
	return out, s.after("list_pending")
}

// DeleteExpired implements [spent.Store]. It scans the whole map: tests only.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := s.lock(ctx, "delete_expired"); err != nil {
		return 0, err
	}
	defer s.d.mu.Unlock()
	n := 0
	for k, r := range s.d.recs {
		if n >= limit {
			break
		}
		if !r.LiveAt(now) {
			s.d.unindex(r.Seq)
			delete(s.d.recs, k)
			n++
		}
	}
	for k, c := range s.d.counts {
		if n >= limit {
			break
		}
		if !now.Before(c.ExpiresAt) {
			delete(s.d.counts, k)
			n++
		}
	}
	return n, s.after("delete_expired")
}

// Purge implements [spent.Store]. It scans the whole map: tests only.
func (s *Store) Purge(ctx context.Context, namespace string, limit int) (int, error) {
	if err := s.lock(ctx, "purge"); err != nil {
		return 0, err
	}
	defer s.d.mu.Unlock()
	n := 0
	for k, r := range s.d.recs {
		if n >= limit {
			break
		}
		if r.Namespace == namespace {
			s.d.unindex(r.Seq)
			delete(s.d.recs, k)
			n++
		}
	}
	return n, s.after("purge")
}

// index adds the index entry of the record of h written with seq; the
// caller holds the mutex.
func (d *data) index(seq spent.Seq, h spent.Hash) {
	m := d.bySeq[seq.Node]
	if m == nil {
		m = map[uint64]spent.Hash{}
		d.bySeq[seq.Node] = m
	}
	m[seq.Counter] = h
}

// unindex removes the index entry of seq; the caller holds the mutex.
func (d *data) unindex(seq spent.Seq) {
	if m := d.bySeq[seq.Node]; m != nil {
		delete(m, seq.Counter)
	}
}

// SeqLen returns the number of entries in the index by seq. For tests.
func (s *Store) SeqLen() int {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	n := 0
	for _, m := range s.d.bySeq {
		n += len(m)
	}
	return n
}

// ListSeq implements [spent.SeqLister]. It sorts the index entries of the
// node in the range: tests only.
func (s *Store) ListSeq(ctx context.Context, q spent.SeqQuery) ([]spent.SeqRecord, error) {
	if err := s.lock(ctx, "list_seq"); err != nil {
		return nil, err
	}
	defer s.d.mu.Unlock()
	var ctrs []uint64
	for c := range s.d.bySeq[q.Node] {
		if c >= q.From && c <= q.To {
			ctrs = append(ctrs, c)
		}
	}
	slices.Sort(ctrs)
	if q.Descending {
		slices.Reverse(ctrs)
	}
	out := []spent.SeqRecord{}
	for _, c := range ctrs {
		if len(out) >= q.Limit {
			break
		}
		want := spent.Seq{Node: q.Node, Counter: c}
		r, ok := s.d.recs[s.d.bySeq[q.Node][c]]
		if !ok || !spent.SeqIndexWanted(&q, &r, want) {
			continue
		}
		out = append(out, spent.NewSeqRecord(r.Clone()))
	}
	return out, s.after("list_seq")
}

// ReserveSeq implements [spent.Store].
func (s *Store) ReserveSeq(ctx context.Context, node uint32, n uint64) (uint64, error) {
	if err := s.lock(ctx, "reserve_seq"); err != nil {
		return 0, err
	}
	defer s.d.mu.Unlock()
	first := s.d.seqs[node] + 1
	s.d.seqs[node] = first + n - 1
	return first, s.after("reserve_seq")
}

// Count implements [spent.Store].
func (s *Store) Count(ctx context.Context, op spent.CountOp) (spent.CountAnswer, error) {
	if err := s.lock(ctx, "count"); err != nil {
		return spent.CountAnswer{}, err
	}
	defer s.d.mu.Unlock()
	c, ok := s.d.counts[op.Key]
	if !ok || !op.Now.Before(c.ExpiresAt) {
		c = spent.CountAnswer{ExpiresAt: op.ExpiresAt}
	}
	c.Added = c.Value < op.Limit
	if c.Added {
		c.Value++
		s.d.counts[op.Key] = c
	}
	return c, s.after("count")
}

// Close implements [spent.Store].
func (s *Store) Close() error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.version == s.d.version {
		s.d.closed = true
	}
	return nil
}

// Dirs hands out one Store per directory name and reopens it (see
// [Store.Reopen]) when the same name comes again, as a durable store kept in
// that directory would be after a restart. It fits storetest's Harness.Open.
// For tests. The zero value is ready to use.
type Dirs struct {
	mu     sync.Mutex
	stores map[string]*Store
}

// Open returns a new Store for a directory not seen before, and the reopened
// Store of one seen before.
func (d *Dirs) Open(dir string) *Store {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stores == nil {
		d.stores = map[string]*Store{}
	}
	s, ok := d.stores[dir]
	if ok {
		s = s.Reopen()
	} else {
		s = New()
	}
	d.stores[dir] = s
	return s
}
