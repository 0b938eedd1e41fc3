package pebble

import (
	"context"
	"fmt"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
)

// Purge walks the record keys outside the decision goroutine, on pebble's
// consistent iterators, and collects the hashes of the namespace's records;
// each batch of them is then forgotten by one request (kindPurge) decided in
// a round like any other write, which looks each record up again (the
// round's overlay first) and removes it only if it still belongs to the
// namespace. Claims go on being decided while Purge walks.

// purgeReq is the part of a kindPurge request: the records of keys to
// forget, if they still belong to namespace.
type purgeReq struct {
	namespace string
	keys      []spent.Hash
	removed   int // the answer: records forgotten
}

// purgeScanBatch bounds the records one walk looks at between two checks
// of its context.
const purgeScanBatch = 256

// Purge implements [spent.Store]. It walks the record keys in order,
// reading and decoding every record, from where the previous call for the
// same namespace stopped to the end and round from the start to there
// again, and stops once it has collected limit records of namespace and
// forgotten them; so a call that returns fewer than limit has read every
// record. The records are deleted with their expiry- and pending-index
// entries by one request per batch, decided in a round like any write and
// durable (WAL synced) on return; the existence filter forgets their keys
// once that round is applied, as for a sweep. The walk runs beside the
// decision goroutine, so claims go on meanwhile. A whole purge, the calls
// of a caller's loop together, reads every record of the store about
// twice: a sequential read of the records, slower than Open's rebuild of
// the filter, which reads their keys only.
func (s *Store) Purge(ctx context.Context, namespace string, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	// start is the last record key the previous call looked at, nil for
	// the start.
	start, _ := s.purgeAt.Start(namespace)
	defer s.purgeAt.Done()
	// The walk goes from just after start to the end of the records, then
	// from their beginning up to start, included.
	type span struct{ lower, upper []byte }
	spans := []span{{[]byte(prefixRecord), prefixEnd(prefixRecord)}}
	if start != nil {
		spans = []span{{keyAfter(start), prefixEnd(prefixRecord)}, {[]byte(prefixRecord), keyAfter(start)}}
	}
	removed := 0
	for _, sp := range spans {
		lower := sp.lower
		for {
			keys, last, more, err := s.collect(ctx, namespace, lower, sp.upper, limit-removed)
			if err != nil {
				return removed, fmt.Errorf("pebble: purge: %w", err)
			}
			if len(keys) > 0 {
				n, err := s.forget(ctx, namespace, keys)
				removed += n
				if err != nil {
					return removed, fmt.Errorf("pebble: purge: %w", err)
				}
			}
			if removed >= limit {
				s.purgeAt.Set(last)
				return removed, nil
			}
			if !more {
				break
			}
			// Some records collected were gone by the time their
			// round was decided: walk on.
			lower = keyAfter(last)
		}
	}
	return removed, nil
}

// keyAfter returns the first key after k.
func keyAfter(k []byte) []byte { return append(append(make([]byte, 0, len(k)+1), k...), 0) }

// collect walks the record keys in [lower, upper) and returns the hashes of
// up to want records of namespace, the last key it looked at, and whether
// it stopped for having found want (more keys may follow) rather than at
// upper.
func (s *Store) collect(ctx context.Context, namespace string, lower, upper []byte, want int) (keys []spent.Hash, last []byte, more bool, err error) {
	unlock, err := s.readLock(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	defer unlock()
	it, err := s.db.NewIter(&pdb.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, nil, false, err
	}
	seen := 0
	for ok := it.First(); ok; ok = it.Next() {
		if seen++; seen%purgeScanBatch == 0 {
			if err := ctx.Err(); err != nil {
				it.Close()
				return nil, nil, false, err
			}
		}
		k := it.Key()
		if len(k) != recordKeyLen {
			it.Close()
			return nil, nil, false, fmt.Errorf("%w: record key %x", ErrCorrupt, k)
		}
		var h spent.Hash
		copy(h[:], k[len(prefixRecord):])
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, nil, false, err
		}
		rec, err := decodeRecord(h, v)
		if err != nil {
			it.Close()
			return nil, nil, false, err
		}
		last = append(last[:0], k...)
		if rec.Namespace != namespace {
			continue
		}
		keys = append(keys, h)
		if len(keys) == want {
			more = true
			break
		}
	}
	if err := it.Close(); err != nil {
		return nil, nil, false, err
	}
	return keys, last, more, nil
}

// forget queues the purge of keys and returns how many records it removed.
func (s *Store) forget(ctx context.Context, namespace string, keys []spent.Hash) (int, error) {
	r := newRequest(kindPurge, ctx)
	defer recycle(r)
	r.purge.namespace, r.purge.keys = namespace, keys
	if err := s.do(ctx, r); err != nil {
		return 0, err
	}
	return r.purge.removed, nil
}

// decidePurge decides a kindPurge request within rd: each record of q.keys
// that still belongs to q.namespace, live or expired, is deleted with its
// index entries.
func (s *Store) decidePurge(rd *round, q *purgeReq) error {
	for i := range q.keys {
		cur, found, _, err := s.lookup(&q.keys[i])
		if err != nil {
			return err
		}
		if !found || cur.Namespace != q.namespace {
			continue
		}
		s.remove(rd, &cur, true)
		q.removed++
	}
	return nil
}
