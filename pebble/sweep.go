package pebble

import (
	"bytes"
	"fmt"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
)

// sweepReq is the part of a kindSweep request: a DeleteExpired.
type sweepReq struct {
	now     time.Time
	limit   int
	removed int // the answer: records and counters removed
}

// decideSweep decides a DeleteExpired: up to q.limit expired records, then
// counters while the limit allows. It is the first request of its round
// (engine invariant 8).
func (s *Store) decideSweep(rd *round, q *sweepReq) error {
	n, err := s.sweep(rd, q.now, q.limit)
	q.removed = n
	if err != nil || n >= q.limit {
		return err
	}
	n, err = s.sweepCounters(rd, q.now, q.limit-n)
	q.removed += n
	return err
}

// sweep removes up to limit records with expires_at <= now, walking the
// expiry index from s.sweepFrom, and drops the walked span of the index with
// one range deletion.
func (s *Store) sweep(rd *round, now time.Time, limit int) (int, error) {
	s.forgetHeld(now)
	upper := expiryBound(now)
	if bytes.Compare(s.sweepFrom, upper) >= 0 {
		return 0, nil
	}
	it, err := s.db.NewIter(&pdb.IterOptions{LowerBound: s.sweepFrom, UpperBound: upper})
	if err != nil {
		return 0, err
	}
	var first, last []byte
	removed := 0
	ok := it.First()
	for ; ok && removed < limit; ok = it.Next() {
		k := it.Key()
		h, exp, err := parseExpiryKey(k)
		if err != nil {
			it.Close()
			return 0, err
		}
		if first == nil {
			first = append([]byte(nil), k...)
		}
		last = append(last[:0], k...)
		cur, found, _, err := s.lookup(&h)
		if err != nil {
			it.Close()
			return 0, err
		}
		var enc [timeLen]byte
		putTime(enc[:], cur.ExpiresAt)
		if !found || !bytes.Equal(enc[:], exp) {
			continue // a stale entry: the range deletion drops it
		}
		s.remove(rd, &cur, false)
		removed++
	}
	exhausted := !ok
	if err := it.Close(); err != nil {
		return 0, err
	}
	if first != nil {
		end := append(last, 0)
		rd.delRange(first, end)
		s.sweepFrom = append(s.sweepFrom[:0], end...)
	}
	if exhausted {
		s.sweepFrom = append(s.sweepFrom[:0], upper...)
	}
	s.stats.swept.Add(uint64(removed))
	return removed, nil
}

// sweepCounters forgets up to limit counters with expires_at <= now. Counters
// are few (one per client and epoch), so the walk of their index starts at
// its beginning each time; entries are deleted one by one.
func (s *Store) sweepCounters(rd *round, now time.Time, limit int) (int, error) {
	upper := make([]byte, len(prefixCExpiry)+timeLen)
	copy(upper, prefixCExpiry)
	putTime(upper[len(prefixCExpiry):], now.Add(time.Nanosecond))
	it, err := s.db.NewIter(&pdb.IterOptions{LowerBound: []byte(prefixCExpiry), UpperBound: upper})
	if err != nil {
		return 0, err
	}
	removed := 0
	for ok := it.First(); ok && removed < limit; ok = it.Next() {
		k := it.Key()
		if len(k) != len(prefixCExpiry)+timeLen+spent.HashSize {
			it.Close()
			return 0, fmt.Errorf("%w: counter expiry key %x", ErrCorrupt, k)
		}
		var h spent.Hash
		copy(h[:], k[len(prefixCExpiry)+timeLen:])
		rd.del(k)
		cur, found, err := s.lookupCounter(&h)
		if err != nil {
			it.Close()
			return 0, err
		}
		if !found || now.Before(cur.ExpiresAt) {
			continue // a stale entry
		}
		s.kbuf = appendCounterKey(s.kbuf[:0], &h)
		rd.del(s.kbuf)
		s.counters[h] = nil
		removed++
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	return removed, nil
}
