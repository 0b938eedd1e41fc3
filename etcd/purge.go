package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spentledger/spent"
)

// purgePage is how many records Purge reads at once.
const purgePage = 256

// purgeTarget is a record to delete: its key, the revision it was read at,
// and its pending-index key ("" for a complete record).
type purgeTarget struct {
	key, pending, seq string
	rev               int64
	hash              spent.Hash
}

// Purge implements [spent.Store]. It reads the record keys with their values
// in pages of 256, in key order, decodes every record, and deletes those of
// namespace, with their pending-index and seq-index entries, in transactions of up to
// MaxTxnOps operations, each If the record's ModRevision is still the one
// read (a record changed since is read again and deleted if it still belongs
// to namespace). Leases are untouched: a lease whose keys are all gone
// simply runs out. The walk goes on from where the previous call for the
// same namespace stopped, to the end of the records and round from their
// start to there again, so a call that returns fewer than limit has read
// every record. A whole purge reads every record of the store about twice;
// each delete is a Raft commit, on a majority's WAL on return.
func (s *Store) Purge(ctx context.Context, namespace string, limit int) (int, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("etcd: purge: %w", err)
	}
	defer cancel()
	if limit <= 0 {
		return 0, nil
	}
	// start is the last record key the previous call looked at, "" for
	// the start.
	start, _ := s.purgeAt.Start(namespace)
	defer s.purgeAt.Done()
	first := s.keys.prefix + nsRecord
	end := clientv3.GetPrefixRangeEnd(first)
	// Keys after start, then keys from the first up to start, included.
	type span struct{ from, to string }
	spans := []span{{first, end}}
	if start != "" {
		spans = []span{{start + "\x00", end}, {first, start + "\x00"}}
	}
	removed := 0
	for _, sp := range spans {
		from := sp.from
		for {
			resp, err := s.cli.Get(ctx, from, clientv3.WithRange(sp.to), clientv3.WithLimit(purgePage))
			if err != nil {
				return removed, s.fail("purge", err)
			}
			var targets []purgeTarget
			last := ""
			for _, kv := range resp.Kvs {
				h, err := s.keys.hashOfRecordKey(kv.Key)
				if err != nil {
					return removed, s.fail("purge", err)
				}
				rec, err := decodeRecord(h, kv.Value)
				if err != nil {
					return removed, s.fail("purge", err)
				}
				last = string(kv.Key)
				if rec.Namespace != namespace {
					continue
				}
				targets = append(targets, s.purgeTarget(&rec, kv.ModRevision))
				if len(targets) == limit-removed {
					break
				}
			}
			n, err := s.purgeTargets(ctx, namespace, targets)
			removed += n
			if err != nil {
				return removed, s.fail("purge", err)
			}
			if removed >= limit {
				s.purgeAt.Set(last)
				return removed, nil
			}
			if len(resp.Kvs) == 0 || (!resp.More && last == string(resp.Kvs[len(resp.Kvs)-1].Key)) {
				break // the span holds no more
			}
			from = last + "\x00"
		}
	}
	return removed, nil
}

func (s *Store) purgeTarget(rec *spent.Record, rev int64) purgeTarget {
	t := purgeTarget{key: s.keys.record(rec.Hash), rev: rev, hash: rec.Hash, seq: s.keys.seqIndex(rec.Seq)}
	if rec.State == spent.StatePending {
		t.pending = s.keys.pending(rec)
	}
	return t
}

// purgeTargets deletes the targets, in transactions of up to MaxTxnOps
// operations, and returns how many records it deleted. A transaction whose
// records changed since they were read is replaced by one per record.
func (s *Store) purgeTargets(ctx context.Context, namespace string, targets []purgeTarget) (int, error) {
	removed := 0
	for len(targets) > 0 {
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		n := 0
		for _, t := range targets {
			k := len(t.deletes())
			if len(ops)+k > s.opts.MaxTxnOps {
				break
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(t.key), "=", t.rev))
			ops = append(ops, t.deletes()...)
			n++
		}
		chunk := targets[:n]
		targets = targets[n:]
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return removed, err
		}
		if resp.Succeeded {
			removed += len(chunk)
			continue
		}
		for _, t := range chunk {
			ok, err := s.purgeOne(ctx, namespace, t)
			if err != nil {
				return removed, err
			}
			if ok {
				removed++
			}
		}
	}
	return removed, nil
}

func (t *purgeTarget) deletes() []clientv3.Op {
	ops := []clientv3.Op{clientv3.OpDelete(t.key), clientv3.OpDelete(t.seq)}
	if t.pending != "" {
		ops = append(ops, clientv3.OpDelete(t.pending))
	}
	return ops
}

// purgeOne deletes the record of t If its ModRevision is still the one
// read, Else reads it again and, while it still belongs to namespace, tries
// again at its new revision. It reports whether it deleted a record.
func (s *Store) purgeOne(ctx context.Context, namespace string, t purgeTarget) (bool, error) {
	for range maxAttempts {
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(t.key), "=", t.rev)).
			Then(t.deletes()...).
			Else(clientv3.OpGet(t.key)).
			Commit()
		if err != nil {
			return false, err
		}
		if resp.Succeeded {
			return true, nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return false, nil // released, or forgotten by etcd
		}
		rec, err := decodeRecord(t.hash, kvs[0].Value)
		if err != nil {
			return false, err
		}
		if rec.Namespace != namespace {
			return false, nil
		}
		t = s.purgeTarget(&rec, kvs[0].ModRevision)
	}
	return false, ErrContention
}
