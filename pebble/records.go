package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/reccodec"
)

// The records as a round sees them (engine invariant 6): lookups that read
// the overlay before the database, the writes that keep a record's index
// entries and the overlay in step, and Get, the decision that only reads.

// getReq is the part of a kindGet request.
type getReq struct {
	key spent.Hash
	now time.Time
	rec spent.Record // the answer
}

// decideGet decides a Get: the live record of q.key.
func (s *Store) decideGet(rd *round, q *getReq) error {
	if p, ok := s.held[q.key]; ok {
		// Engine invariant 4: the answer reports it, so it must be
		// durable first.
		s.materialize(rd, &q.key, p)
	}
	cur, found, shared, err := s.lookup(&q.key)
	switch {
	case err != nil:
		return err
	case !found || !cur.LiveAt(q.now):
		return spent.ErrNotFound
	}
	if shared {
		cur = cur.Clone()
	}
	q.rec = cur
	return nil
}

// lookup returns the record stored under h as this round sees it. shared
// reports that the record belongs to the overlay and must be cloned before
// it is handed out.
func (s *Store) lookup(h *spent.Hash) (rec spent.Record, found, shared bool, err error) {
	rec, _, found, shared, err = s.lookupLimit(h, 0)
	return rec, found, shared, err
}

// lookupLimit is lookup that, when limit is positive, decodes a stored
// record without a result longer than limit, never copying it out of the
// engine; omitted is then the result's length. A record of the overlay
// comes whole (its caller limits it before cloning).
func (s *Store) lookupLimit(h *spent.Hash, limit int) (rec spent.Record, omitted int, found, shared bool, err error) {
	if p, ok := s.overlay[*h]; ok {
		if p == nil {
			return rec, 0, false, false, nil
		}
		return *p, 0, true, true, nil
	}
	// Engine invariant 7: a key the filter calls absent is not stored.
	if !s.mayHold(fingerprint(h)) {
		s.stats.filterSkips.Add(1)
		return rec, 0, false, false, nil
	}
	s.stats.reads.Add(1)
	s.kbuf = appendRecordKey(s.kbuf[:0], h)
	v, closer, err := s.db.Get(s.kbuf)
	if errors.Is(err, pdb.ErrNotFound) {
		return rec, 0, false, false, nil
	} else if err != nil {
		return rec, 0, false, false, err
	}
	rec, omitted, err = reccodec.DecodeLimit(*h, v, limit)
	closer.Close()
	if err != nil {
		return rec, 0, false, false, fmt.Errorf("%w: record %s: %w", ErrCorrupt, *h, err)
	}
	return rec, omitted, true, false, nil
}

// put writes rec and its index entries (the expiry entry only when
// withExpiry is set) and records it in the overlay. rec must stay unchanged
// until the round is sealed (engine invariant 6).
func (s *Store) put(rd *round, rec *spent.Record, withExpiry bool) {
	h := &rec.Hash
	s.kbuf = appendRecordKey(s.kbuf[:0], h)
	s.vbuf = appendRecord(s.vbuf[:0], rec)
	rd.set(s.kbuf, s.vbuf)
	if withExpiry {
		// A new record: its index entries (a completion keeps them).
		s.indexSeq(rd, rec)
		s.kbuf = appendExpiryKey(s.kbuf[:0], rec.ExpiresAt, h)
		rd.set(s.kbuf, nil)
		if bytes.Compare(s.kbuf, s.sweepFrom) < 0 {
			s.sweepFrom = append(s.sweepFrom[:0], s.kbuf...)
		}
	}
	if rec.State == spent.StatePending {
		s.kbuf = appendPendingKey(s.kbuf[:0], rec.LeaseUntil, rec.Seq, h)
		rd.set(s.kbuf, []byte(rec.Namespace))
	}
	s.overlay[*h] = rec
}

// unindex deletes the index entries of the stored record cur.
func (s *Store) unindex(rd *round, cur *spent.Record) {
	s.unindexSeq(rd, cur)
	s.kbuf = appendExpiryKey(s.kbuf[:0], cur.ExpiresAt, &cur.Hash)
	rd.del(s.kbuf)
	if cur.State == spent.StatePending {
		s.kbuf = appendPendingKey(s.kbuf[:0], cur.LeaseUntil, cur.Seq, &cur.Hash)
		rd.del(s.kbuf)
	}
}

// remove deletes the stored record cur with its seq-index and pending-index
// entries, and
// its expiry-index entry unless withExpiry is false (a sweep drops those with
// one range deletion); the filter forgets the key once the round applies
// (engine invariant 7).
func (s *Store) remove(rd *round, cur *spent.Record, withExpiry bool) {
	s.kbuf = appendRecordKey(s.kbuf[:0], &cur.Hash)
	rd.del(s.kbuf)
	if withExpiry {
		s.unindex(rd, cur)
	} else {
		s.unindexSeq(rd, cur)
	}
	if !withExpiry && cur.State == spent.StatePending {
		s.kbuf = appendPendingKey(s.kbuf[:0], cur.LeaseUntil, cur.Seq, &cur.Hash)
		rd.del(s.kbuf)
	}
	s.overlay[cur.Hash] = nil
	s.removals = append(s.removals, fingerprint(&cur.Hash))
}
