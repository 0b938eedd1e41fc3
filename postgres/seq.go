package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/spentledger/spent"
)

// ListSeq implements [spent.SeqLister] with one statement that walks the
// index by seq (seq_node, seq_counter) of every partition, merged in
// counter order, and stops at q.Limit rows: it reads the records it
// returns, those in range that expired but are not swept yet, and an index
// page per partition. Results stay on the server; only their lengths come
// back. Counters are stored as bigint: a range is read up to 2^63-1.
func (s *Store) ListSeq(ctx context.Context, q spent.SeqQuery) ([]spent.SeqRecord, error) {
	out := []spent.SeqRecord{}
	if q.Limit <= 0 || q.From > q.To || q.From > math.MaxInt64 {
		return out, nil
	}
	now, err := nanos(q.Now)
	if err != nil {
		return nil, fmt.Errorf("postgres: list seq: %w", err)
	}
	to := int64(min(q.To, math.MaxInt64))
	stmt := s.q.listSeq
	if q.Descending {
		stmt = s.q.listSeqDesc
	}
	err = s.do(ctx, "list seq", func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, stmt, int64(q.Node), int64(q.From), to, now, q.Limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		var sc scanRow
		var n *int64
		dest := append(sc.dest(), &n)
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			r, err := sc.record()
			if err != nil {
				return err
			}
			sr := spent.SeqRecord{Record: r}
			if n != nil {
				sr.ResultLen = int(*n)
			}
			out = append(out, sr)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
