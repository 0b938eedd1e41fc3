package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spentledger/spent"
)

// ListSeq implements [spent.SeqLister]. It reads the node's part of the
// seq index (q/ node / counter, fixed-width hex, so key order is counter
// order) over [q.From, q.To], ascending or descending, in pages of 256
// entries, then reads the records they name in transactions of up to
// MaxTxnOps gets, without copying results longer than a byte. Index
// entries live on their record's lease and leave with it, and every write
// that replaces or deletes a record deletes its entry in the same
// transaction, so it steps over about what it returns, plus the entries of
// records that expired by q.Now but that etcd has not forgotten yet. Reads
// are linearizable.
func (s *Store) ListSeq(ctx context.Context, q spent.SeqQuery) ([]spent.SeqRecord, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd: list seq: %w", err)
	}
	defer cancel()
	out, err := s.listSeq(ctx, &q)
	if err != nil {
		return nil, s.fail("list seq", err)
	}
	return out, nil
}

func (s *Store) listSeq(ctx context.Context, q *spent.SeqQuery) ([]spent.SeqRecord, error) {
	out := []spent.SeqRecord{}
	if q.Limit <= 0 || q.From > q.To {
		return out, nil
	}
	from := s.keys.seqIndex(spent.Seq{Node: q.Node, Counter: q.From})
	end := s.keys.seqIndex(spent.Seq{Node: q.Node, Counter: q.To}) + "\x00"
	for len(out) < q.Limit {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPage)}
		if q.Descending {
			opts = append(opts, clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
		}
		resp, err := s.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 0 {
			break
		}
		entries := make([]spent.Seq, len(resp.Kvs))
		ops := make([]clientv3.Op, len(resp.Kvs))
		hashes := make([]spent.Hash, len(resp.Kvs))
		for i, kv := range resp.Kvs {
			if entries[i], err = s.keys.parseSeqIndex(string(kv.Key)); err != nil {
				return nil, err
			}
			if len(kv.Value) != spent.HashSize {
				return nil, fmt.Errorf("%w: seq index entry %q holds %d bytes", ErrCorrupt, kv.Key, len(kv.Value))
			}
			copy(hashes[i][:], kv.Value)
			ops[i] = clientv3.OpGet(s.keys.record(hashes[i]))
		}
		for start := 0; start < len(ops) && len(out) < q.Limit; start += s.opts.MaxTxnOps {
			stop := min(start+s.opts.MaxTxnOps, len(ops))
			tr, err := s.cli.Txn(ctx).Then(ops[start:stop]...).Commit()
			if err != nil {
				return nil, err
			}
			for i, r := range tr.Responses {
				kvs := r.GetResponseRange().Kvs
				if len(kvs) == 0 {
					continue
				}
				rec, omitted, err := decodeRecordLimit(hashes[start+i], kvs[0].Value, 1)
				if err != nil {
					return nil, err
				}
				if !spent.SeqIndexWanted(q, &rec, entries[start+i]) {
					continue
				}
				sr := spent.NewSeqRecord(rec)
				if omitted > 0 {
					sr.ResultLen = omitted
				}
				out = append(out, sr)
				if len(out) == q.Limit {
					break
				}
			}
		}
		if !resp.More {
			break
		}
		last := string(resp.Kvs[len(resp.Kvs)-1].Key)
		if q.Descending {
			end = last
		} else {
			from = last + "\x00"
		}
	}
	return out, nil
}
