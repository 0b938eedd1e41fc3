package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spentledger/spent"
)

// batchParallel is how many transactions of one ClaimBatch round are in
// flight at once.
const batchParallel = 4

// maxNestedOps is the most operations in a branch of one claim's nested
// transaction (put the record, its pending entry and its seq entry, delete
// the pending and seq entries of the record it replaces). etcd counts a
// nested transaction's operations against what its parent leaves of
// --max-txn-ops, so a transaction holds MaxTxnOps - maxNestedOps claims at
// most: 123 by default.
const maxNestedOps = 5

// batchKey is one key of a ClaimBatch: its unanswered ops, in order, and
// what the batch knows of the key's stored record.
type batchKey struct {
	rk      string
	ops     []int         // indices of the key's unanswered ops, in order
	limit   int           // the largest ResultLimit of ops, or 0 when one has none
	known   bool          // cur and rev say what is stored, as of the last round
	cur     *spent.Record // the stored record; nil when absent
	omitted int           // the length of cur's result, when left out (over limit)
	rev     int64         // its ModRevision
	lost    int           // conditional writes that found the key changed
}

// ClaimBatch implements [spent.Store] in rounds. A round sends, for each key
// that still has ops, its next op as a nested transaction (If the key was
// never created, or still has the ModRevision last read, Then put, Else
// get), many keys per transaction: up to MaxTxnOps-5 of them (etcd counts
// the nested operations too) and MaxTxnBytes of records, several
// transactions at once. Between rounds, the ops of a
// key whose stored record is live (and not retakable) are answered from it
// without a write. A batch of distinct fresh keys thus takes one round trip
// per 123 keys by default; a key that appears k times takes at most k rounds, so
// each op sees the ops before it. A malformed op rejects the batch before
// anything is written. On error, some ops may have been written.
func (s *Store) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	for i := range ops {
		if err := ops[i].Record.Validate(); err != nil {
			return nil, fmt.Errorf("etcd: claim batch: op %d: %w", i, err)
		}
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd: claim batch: %w", err)
	}
	defer cancel()
	if len(ops) == 0 {
		return []spent.ClaimAnswer{}, nil
	}
	out, err := s.claimBatch(ctx, ops)
	if err != nil {
		return nil, s.fail("claim batch", err)
	}
	return out, nil
}

func (s *Store) claimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	out := make([]spent.ClaimAnswer, len(ops))
	vals := make([][]byte, len(ops))
	byHash := make(map[spent.Hash]*batchKey, len(ops))
	var order []*batchKey
	for i := range ops {
		h := ops[i].Record.Hash
		k, ok := byHash[h]
		if !ok {
			k = &batchKey{rk: s.keys.record(h), limit: ops[i].ResultLimit}
			byHash[h] = k
			order = append(order, k)
		}
		k.ops = append(k.ops, i)
		if k.limit > 0 {
			// A record read for the key keeps a result that any of its
			// ops may receive, and leaves out one that none may.
			k.limit = max(k.limit, ops[i].ResultLimit)
			if ops[i].ResultLimit <= 0 {
				k.limit = 0
			}
		}
	}
	for {
		var todo []*batchKey
		for _, k := range order {
			for len(k.ops) > 0 && k.known && k.cur != nil {
				op := &ops[k.ops[0]]
				if spent.FreeAt(k.cur, op.Now, op.Retake) {
					break
				}
				out[k.ops[0]] = k.answer(op.ResultLimit)
				k.ops = k.ops[1:]
			}
			if len(k.ops) > 0 {
				todo = append(todo, k)
			}
		}
		if len(todo) == 0 {
			return out, nil
		}
		if err := s.batchRound(ctx, ops, vals, todo, out); err != nil {
			return nil, err
		}
	}
}

// answer is the answer from the live record cur to an op of the key with
// ResultLimit limit.
func (k *batchKey) answer(limit int) spent.ClaimAnswer {
	if k.omitted > 0 {
		// Left out because it was longer than every op's limit.
		c := *k.cur
		return spent.ClaimAnswer{Record: c.Clone(), ResultOmitted: true, ResultLen: k.omitted}
	}
	res := spent.LimitResult(spent.ClaimAnswer{Record: *k.cur}, limit)
	res.Record = res.Record.Clone()
	return res
}

// batchRound sends the next op of every key in todo, in transactions cut at
// MaxTxnOps keys and MaxTxnBytes, batchParallel of them at once.
func (s *Store) batchRound(ctx context.Context, ops []spent.ClaimOp, vals [][]byte, todo []*batchKey, out []spent.ClaimAnswer) error {
	var chunks [][]*batchKey
	start, size := 0, 0
	for j, k := range todo {
		i := k.ops[0]
		if vals[i] == nil {
			vals[i] = appendRecord(nil, &ops[i].Record)
		}
		n := len(vals[i]) + 3*len(k.rk) + 64
		if ops[i].Record.State == spent.StatePending {
			n += 2 * (len(k.rk) + len(ops[i].Record.Namespace) + pendingTail)
		}
		if j > start && (j-start == s.opts.MaxTxnOps-maxNestedOps || size+n > s.opts.MaxTxnBytes) {
			chunks = append(chunks, todo[start:j])
			start, size = j, 0
		}
		size += n
	}
	chunks = append(chunks, todo[start:])
	if len(chunks) == 1 {
		return s.batchTxn(ctx, ops, vals, chunks[0], out)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, batchParallel)
	errs := make([]error, len(chunks))
	for c, chunk := range chunks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[c] = s.batchTxn(ctx, ops, vals, chunk, out)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// batchTxn sends one transaction holding the next op of every key of chunk
// and records what it did.
func (s *Store) batchTxn(ctx context.Context, ops []spent.ClaimOp, vals [][]byte, chunk []*batchKey, out []spent.ClaimAnswer) error {
	type used struct {
		bucket int64
		lease  clientv3.LeaseID
	}
	for range maxAttempts {
		leases := make([]used, 0, 4)
		nested := make([]clientv3.Op, len(chunk))
		for j, k := range chunk {
			i := k.ops[0]
			rec := &ops[i].Record
			lease, bucket, err := s.leases.forExpiry(ctx, rec.ExpiresAt)
			if err != nil {
				return err
			}
			if len(leases) == 0 || leases[len(leases)-1].bucket != bucket {
				leases = append(leases, used{bucket, lease})
			}
			cmp := clientv3.Compare(clientv3.CreateRevision(k.rk), "=", 0)
			if k.known && k.cur != nil {
				cmp = clientv3.Compare(clientv3.ModRevision(k.rk), "=", k.rev)
			}
			nested[j] = clientv3.OpTxn([]clientv3.Cmp{cmp},
				s.writeOps(k.rk, vals[i], rec, lease, k.cur),
				[]clientv3.Op{clientv3.OpGet(k.rk)})
		}
		resp, err := s.cli.Txn(ctx).Then(nested...).Commit()
		if err != nil {
			if isLeaseNotFound(err) {
				for _, u := range leases {
					s.leases.drop(u.bucket, u.lease)
				}
				continue
			}
			return err
		}
		if len(resp.Responses) != len(chunk) {
			return fmt.Errorf("etcd answered %d of %d nested transactions", len(resp.Responses), len(chunk))
		}
		for j, k := range chunk {
			r := resp.Responses[j].GetResponseTxn()
			if r == nil {
				return fmt.Errorf("etcd answered nested transaction %d with %T", j, resp.Responses[j].Response)
			}
			i := k.ops[0]
			if r.Succeeded {
				out[i] = spent.ClaimAnswer{Inserted: true, Record: ops[i].Record.Clone()}
				k.known, k.cur, k.omitted, k.rev = true, &ops[i].Record, 0, resp.Header.Revision
				k.ops = k.ops[1:]
				continue
			}
			if k.lost++; k.lost > maxAttempts {
				return ErrContention
			}
			kvs := r.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				k.known, k.cur, k.omitted, k.rev = true, nil, 0, 0
				continue
			}
			cur, omitted, err := decodeRecordLimit(ops[i].Record.Hash, kvs[0].Value, k.limit)
			if err != nil {
				return err
			}
			k.known, k.cur, k.omitted, k.rev = true, &cur, omitted, kvs[0].ModRevision
		}
		return nil
	}
	return ErrContention
}
