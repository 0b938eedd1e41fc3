package pebble

import (
	"errors"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
)

// countReq is the part of a kindCount request.
type countReq struct {
	op  spent.CountOp
	res spent.CountAnswer // the answer
}

// decideCount decides one Count.
func (s *Store) decideCount(rd *round, q *countReq) error {
	op := &q.op
	h := &op.Key
	cur, found, err := s.lookupCounter(h)
	if err != nil {
		return err
	}
	if found && !op.Now.Before(cur.ExpiresAt) {
		// Expired: start again from zero with the new expiry.
		s.kbuf = appendCounterExpiryKey(s.kbuf[:0], cur.ExpiresAt, h)
		rd.del(s.kbuf)
		found = false
	}
	if !found {
		cur = spent.CountAnswer{ExpiresAt: op.ExpiresAt}
	}
	if cur.Value >= op.Limit {
		q.res = cur
		return nil
	}
	cur.Value++
	cur.Added = true
	s.kbuf = appendCounterKey(s.kbuf[:0], h)
	s.vbuf = appendCounter(s.vbuf[:0], &cur)
	rd.set(s.kbuf, s.vbuf)
	if !found {
		s.kbuf = appendCounterExpiryKey(s.kbuf[:0], cur.ExpiresAt, h)
		rd.set(s.kbuf, nil)
	}
	c := cur
	c.Added = false
	s.counters[*h] = &c
	q.res = cur
	return nil
}

// lookupCounter returns the counter h as this round sees it (engine
// invariant 6).
func (s *Store) lookupCounter(h *spent.Hash) (c spent.CountAnswer, found bool, err error) {
	if p, ok := s.counters[*h]; ok {
		if p == nil {
			return c, false, nil
		}
		return *p, true, nil
	}
	s.kbuf = appendCounterKey(s.kbuf[:0], h)
	v, closer, err := s.db.Get(s.kbuf)
	if errors.Is(err, pdb.ErrNotFound) {
		return c, false, nil
	} else if err != nil {
		return c, false, err
	}
	c, err = decodeCounter(v)
	closer.Close()
	return c, err == nil, err
}
