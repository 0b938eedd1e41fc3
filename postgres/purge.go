package postgres

import (
	"bytes"
	"context"

	"github.com/spentledger/spent"
)

// purgePage is how many rows one statement of Purge walks at most.
const purgePage = 10000

var (
	// keyMin sorts before every key, keyMax after every key (keys are 16
	// bytes; bytea compares bytes, then lengths).
	keyMin = []byte{}
	keyMax = bytes.Repeat([]byte{0xff}, spent.HashSize+1)
)

// Purge implements [spent.Store] in statements that each walk a page of up
// to 10,000 rows of the primary key in order, read the namespace of every
// row they pass (the table has no index by namespace), and delete the rows
// of namespace found there, up to what is left of limit, by primary key;
// each statement commits on its own, durable on return with
// synchronous_commit on, and holds its locks for one page only. The walk
// goes on from where the previous call for the same namespace stopped, to
// the end of the key space and round from its start to there again, so a
// call that returns fewer than limit has walked every row. A whole purge
// reads every row of the table about twice (an index scan with a heap fetch
// per row); the deleted rows are left for autovacuum, as a sweep's are.
func (s *Store) Purge(ctx context.Context, namespace string, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	// start is the last key the previous call's walk reached, nil for the
	// start.
	start, _ := s.purgeAt.Start(namespace)
	defer s.purgeAt.Done()
	// Keys after start, then keys up to start, included.
	type span struct{ after, upTo []byte }
	spans := []span{{keyMin, keyMax}}
	if start != nil {
		spans = []span{{start, keyMax}, {keyMin, start}}
	}
	ns := []byte(namespace)
	removed := 0
	for _, sp := range spans {
		after := sp.after
		for {
			want := limit - removed
			var walked, found, deleted int64
			var lastWalked, lastFound []byte
			err := s.do(ctx, "purge", func(ctx context.Context) error {
				return s.pool.QueryRow(ctx, s.q.purge, ns, after, sp.upTo, int64(want), int64(max(purgePage, want))).
					Scan(&walked, &lastWalked, &found, &lastFound, &deleted)
			})
			removed += int(deleted)
			switch {
			case err != nil:
				return removed, err
			case removed >= limit:
				s.purgeAt.Set(lastFound)
				return removed, nil
			case found == int64(want):
				// Some rows found were gone by the time of the
				// delete: go on after the last one.
				after = lastFound
				continue
			case walked < int64(max(purgePage, want)):
				// The span holds no more rows.
			default:
				after = lastWalked
				continue
			}
			break
		}
	}
	return removed, nil
}
