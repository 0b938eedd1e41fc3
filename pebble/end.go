package pebble

import (
	"errors"
	"time"

	"github.com/spentledger/spent"
)

// endReq is the part of a kindEnd request: the ending of the pending claim
// of key, a Complete (e with its result) or a Release (e.Release set).
type endReq struct {
	key spent.Hash
	now time.Time
	e   spent.Ending // with the claim's seq, always
	rec spent.Record // a Complete's answer: the complete record
}

// decideEnd decides a Complete or a Release by the one rule that ends a pending
// claim, spent.RuleEnd: a completion writes the complete record, a release
// deletes the record.
func (s *Store) decideEnd(rd *round, q *endReq) error {
	if p, ok := s.held[q.key]; ok {
		return s.endHeld(rd, q, p)
	}
	cur, found, shared, err := s.lookup(&q.key)
	if err != nil {
		return err
	}
	var stored *spent.Record
	if found {
		stored = &cur
	}
	done, err := spent.RuleEnd(stored, q.now, q.e)
	switch {
	case err != nil:
		return err
	case done:
		// A retried completion: already done, with these very bytes.
		if shared {
			cur = cur.Clone()
		}
		q.rec = cur
		return nil
	case q.e.Release:
		s.remove(rd, &cur, true)
		return nil
	}
	// The overlay keeps rec until the round is sealed (engine invariant 6).
	rec := new(spent.Record)
	*rec = cur
	if shared {
		*rec = cur.Clone()
	}
	complete(rec, q.e.Result)
	s.kbuf = appendPendingKey(s.kbuf[:0], cur.LeaseUntil, cur.Seq, &cur.Hash)
	rd.del(s.kbuf)
	// The expiry entry stays: expires_at does not change.
	s.put(rd, rec, false)
	q.rec = rec.Clone()
	return nil
}

// endHeld decides the ending of the held record p of q.key, which was never
// written (held.go): a completion writes the complete record with its
// expiry entry, a release forgets it.
func (s *Store) endHeld(rd *round, q *endReq, p *spent.Record) error {
	_, err := spent.RuleEnd(p, q.now, q.e)
	if errors.Is(err, spent.ErrNotFound) {
		// Expired: forgotten, as a sweep would.
		s.dropHeld(&q.key)
	}
	if err != nil {
		return err
	}
	if q.e.Release {
		// Never written: forgetting it is enough.
		s.dropHeld(&q.key)
		return nil
	}
	delete(s.held, q.key)
	complete(p, q.e.Result)
	s.put(rd, p, true)
	q.rec = p.Clone()
	return nil
}

// complete turns the pending record rec into a complete one holding a copy
// of result.
func complete(rec *spent.Record, result []byte) {
	rec.State = spent.StateComplete
	rec.Result = append(make([]byte, 0, len(result)), result...)
	rec.LeaseUntil = time.Time{}
}
