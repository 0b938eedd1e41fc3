package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/purgecursor"
)

// Store is the etcd store. Open it with [Open]; it is safe for concurrent use
// by many goroutines, and many processes may open the same cluster and
// prefix at once.
type Store struct {
	cli    *clientv3.Client
	opts   Options
	log    *slog.Logger
	keys   keys
	leases *leases

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	purgeAt   purgecursor.Cursor[string] // the last record key a Purge looked at (purge.go)
}

var (
	_ spent.Store     = (*Store)(nil)
	_ spent.SeqLister = (*Store)(nil)
)

// maxAttempts bounds the optimistic retries of one operation on one key: a
// retry happens only when another writer changed the key between the read
// and the conditional write, or when a lease vanished.
const maxAttempts = 32

// Errors returned by the store, besides the spent ones.
var (
	// ErrUnhealthy is returned by Open when the start-up check fails: too
	// few members answer, a member reports no leader or another leader than
	// the others, or an alarm (NOSPACE, CORRUPT) is raised.
	ErrUnhealthy = errors.New("etcd: cluster unhealthy")
	// ErrContention is returned when an operation lost its conditional
	// write to other writers of the same key 32 times in a row. That
	// operation wrote nothing (earlier ops of a ClaimBatch may have).
	ErrContention = errors.New("etcd: too much contention on one key")
)

// Open connects to the cluster, checks that it is healthy (see the package
// documentation) and that the prefix holds this store's format, and returns
// the store. Close it when done.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   opts.Endpoints,
		DialTimeout: opts.DialTimeout,
		TLS:         opts.TLS,
		Username:    opts.Username,
		Password:    opts.Password,
		Logger:      zap.NewNop(),
		// Requests carry whole records (up to a MiB of result) and
		// batches: let the server's --max-request-bytes be the limit.
		MaxCallSendMsgSize: max(opts.MaxTxnBytes+(1<<20), 2<<20),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: open: %w", err)
	}
	k := keys{prefix: opts.Prefix}
	s := &Store{cli: cli, opts: opts, log: log, keys: k, leases: newLeases(cli, k, opts.LeaseBucket)}
	if err := s.check(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	if err := s.checkFormat(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	if opts.AllowNonDurable {
		log.Warn("etcd: allow-non-durable has no effect: etcd syncs its WAL on a majority of members before it answers; " +
			"a member started with --unsafe-no-fsync would lose acknowledged claims in a power loss, and a client cannot detect that")
	}
	return s, nil
}

// check is the start-up check: every endpoint is asked for its status at
// once; a majority of them must answer within DialTimeout, agree on a
// leader, and report no alarm. Members that do not answer are logged.
func (s *Store) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
	defer cancel()
	type answer struct {
		ep  string
		st  *clientv3.StatusResponse
		err error
	}
	answers := make([]answer, len(s.opts.Endpoints))
	var wg sync.WaitGroup
	for i, ep := range s.opts.Endpoints {
		wg.Go(func() {
			st, err := s.cli.Status(ctx, ep)
			answers[i] = answer{ep, st, err}
		})
	}
	wg.Wait()
	var leader uint64
	ok := 0
	var failed []string
	for _, a := range answers {
		if isAuthError(a.err) {
			return fmt.Errorf("etcd: open: %s: %w", a.ep, a.err)
		}
		if a.err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", a.ep, a.err))
			continue
		}
		if len(a.st.Errors) > 0 {
			return fmt.Errorf("%w: %s reports %s", ErrUnhealthy, a.ep, strings.Join(a.st.Errors, ", "))
		}
		if a.st.Leader == 0 {
			return fmt.Errorf("%w: %s has no leader", ErrUnhealthy, a.ep)
		}
		if leader != 0 && a.st.Leader != leader {
			return fmt.Errorf("%w: members disagree on the leader (%x and %x)", ErrUnhealthy, leader, a.st.Leader)
		}
		leader = a.st.Leader
		ok++
	}
	if 2*ok <= len(answers) {
		return fmt.Errorf("%w: %d of %d endpoints answered: %s", ErrUnhealthy, ok, len(answers), strings.Join(failed, "; "))
	}
	for _, f := range failed {
		s.log.Warn("etcd: a member did not answer the start-up check; the store runs on the others", "error", f)
	}
	return nil
}

// isAuthError reports whether err is etcd refusing the credentials, which
// no other member would accept either.
func isAuthError(err error) bool {
	for _, e := range []error{rpctypes.ErrUserEmpty, rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied, rpctypes.ErrInvalidAuthToken} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// checkFormat writes the format marker under a new prefix, and refuses a
// prefix written in another format.
func (s *Store) checkFormat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
	defer cancel()
	key := s.keys.format()
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, formatVersion)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("etcd: open: %w", err)
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 || string(kvs[0].Value) != formatVersion {
		return fmt.Errorf("%w: prefix %q holds format %q, want %q", ErrCorrupt, s.opts.Prefix, kvsValue(kvs), formatVersion)
	}
	return nil
}

func kvsValue(kvs []*mvccpb.KeyValue) string {
	if len(kvs) == 0 {
		return ""
	}
	return string(kvs[0].Value)
}

// begin starts a call: it fails when the store is closed, and bounds ctx by
// RequestTimeout.
func (s *Store) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, spent.ErrClosed
	}
	if s.opts.RequestTimeout > 0 {
		ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		return ctx, cancel, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	return ctx, cancel, nil
}

// fail wraps err for operation op, as spent.ErrClosed when the store was
// closed under the call.
func (s *Store) fail(op string, err error) error {
	if s.closed.Load() && !errors.Is(err, spent.ErrClosed) {
		err = fmt.Errorf("%w (%w)", spent.ErrClosed, err)
	}
	return fmt.Errorf("etcd: %s: %w", op, err)
}

// writeOps returns the operations that write rec (attached to lease) over
// old, the record it replaces, if any.
func (s *Store) writeOps(rk string, val []byte, rec *spent.Record, lease clientv3.LeaseID, old *spent.Record) []clientv3.Op {
	ops := make([]clientv3.Op, 0, maxNestedOps)
	ops = append(ops, clientv3.OpPut(rk, string(val), clientv3.WithLease(lease)),
		clientv3.OpPut(s.keys.seqIndex(rec.Seq), string(rec.Hash[:]), clientv3.WithLease(lease)))
	if rec.State == spent.StatePending {
		ops = append(ops, clientv3.OpPut(s.keys.pending(rec), "", clientv3.WithLease(lease)))
	}
	if old != nil {
		if old.State == spent.StatePending {
			ops = append(ops, clientv3.OpDelete(s.keys.pending(old)))
		}
		if old.Seq != rec.Seq {
			ops = append(ops, clientv3.OpDelete(s.keys.seqIndex(old.Seq)))
		}
	}
	return ops
}

// Claim implements [spent.Store] with one transaction in the common case:
// If the record's key was never created, Then put the record (and its
// pending-index entry) attached to its bucket's lease, Else get the record.
// When the record it gets is free at op.Now (expired by the ledger's clock,
// or pending past its lease under retake), a second transaction replaces it
// on condition that its ModRevision is still the one read, and so on while
// other writers win. The answer comes after the Raft commit, so it is on the
// WAL of a majority. An error leaves the outcome unknown.
func (s *Store) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	if err := op.Record.Validate(); err != nil {
		return spent.ClaimAnswer{}, fmt.Errorf("etcd: claim: %w", err)
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return spent.ClaimAnswer{}, fmt.Errorf("etcd: claim: %w", err)
	}
	defer cancel()
	res, err := s.claim(ctx, &op)
	if err != nil {
		return spent.ClaimAnswer{}, s.fail("claim", err)
	}
	return res, nil
}

func (s *Store) claim(ctx context.Context, op *spent.ClaimOp) (spent.ClaimAnswer, error) {
	rk := s.keys.record(op.Record.Hash)
	val := appendRecord(nil, &op.Record)
	cmp := clientv3.Compare(clientv3.CreateRevision(rk), "=", 0)
	var old *spent.Record
	for range maxAttempts {
		lease, bucket, err := s.leases.forExpiry(ctx, op.Record.ExpiresAt)
		if err != nil {
			return spent.ClaimAnswer{}, err
		}
		resp, err := s.cli.Txn(ctx).If(cmp).
			Then(s.writeOps(rk, val, &op.Record, lease, old)...).
			Else(clientv3.OpGet(rk)).
			Commit()
		if err != nil {
			if isLeaseNotFound(err) {
				s.leases.drop(bucket, lease)
				continue
			}
			return spent.ClaimAnswer{}, err
		}
		if resp.Succeeded {
			return spent.ClaimAnswer{Inserted: true, Record: op.Record.Clone()}, nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			// A retry's ModRevision compare failed because the record
			// was deleted (released, or forgotten by etcd): the key is
			// absent now, so start over.
			cmp, old = clientv3.Compare(clientv3.CreateRevision(rk), "=", 0), nil
			continue
		}
		cur, omitted, err := decodeRecordLimit(op.Record.Hash, kvs[0].Value, op.ResultLimit)
		if err != nil {
			return spent.ClaimAnswer{}, err
		}
		if !spent.FreeAt(&cur, op.Now, op.Retake) {
			return spent.ClaimAnswer{Record: cur, ResultOmitted: omitted > 0, ResultLen: omitted}, nil
		}
		cmp, old = clientv3.Compare(clientv3.ModRevision(rk), "=", kvs[0].ModRevision), &cur
	}
	return spent.ClaimAnswer{}, ErrContention
}

// read returns the stored record of h with its ModRevision, or ErrNotFound
// when no record is stored. It does not judge expiry.
func (s *Store) read(ctx context.Context, h spent.Hash) (spent.Record, int64, error) {
	resp, err := s.cli.Get(ctx, s.keys.record(h))
	if err != nil {
		return spent.Record{}, 0, err
	}
	if len(resp.Kvs) == 0 {
		return spent.Record{}, 0, spent.ErrNotFound
	}
	rec, err := decodeRecord(h, resp.Kvs[0].Value)
	return rec, resp.Kvs[0].ModRevision, err
}

// Get implements [spent.Store] with one linearizable read, which etcd
// answers only with committed (so durable) data.
func (s *Store) Get(ctx context.Context, key spent.Hash, now time.Time) (spent.Record, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return spent.Record{}, fmt.Errorf("etcd: get: %w", err)
	}
	defer cancel()
	rec, _, err := s.read(ctx, key)
	if err == nil && !rec.LiveAt(now) {
		err = spent.ErrNotFound
	}
	if err != nil {
		return spent.Record{}, s.fail("get", err)
	}
	return rec, nil
}

// end reads the record of key with its ModRevision and rules on ending e
// at now with [spent.RuleEnd]. done reports a retried completion, whose
// answer is rec; otherwise, with no error, rec is the pending record to end
// If its ModRevision is still rev.
func (s *Store) end(ctx context.Context, key spent.Hash, now time.Time, e spent.Ending) (rec spent.Record, rev int64, done bool, err error) {
	rec, rev, err = s.read(ctx, key)
	switch {
	case errors.Is(err, spent.ErrNotFound):
		_, err = spent.RuleEnd(nil, now, e)
	case err == nil:
		done, err = spent.RuleEnd(&rec, now, e)
	}
	return rec, rev, done, err
}

// Complete implements [spent.Store]: a read, then a transaction that writes
// the completed record (keeping its lease) and deletes its pending-index
// entry If the record's ModRevision is still the one read; a lost race
// starts over. The read is ruled on by [spent.RuleEnd], which states the
// errors and their precedence, and accepts a retry with the same bytes.
func (s *Store) Complete(ctx context.Context, key spent.Hash, seq spent.Seq, result []byte, now time.Time) (spent.Record, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return spent.Record{}, fmt.Errorf("etcd: complete: %w", err)
	}
	defer cancel()
	if result == nil {
		result = []byte{}
	}
	for range maxAttempts {
		rec, rev, done, err := s.end(ctx, key, now, spent.Ending{Seq: seq, Result: result})
		if err != nil {
			return spent.Record{}, s.fail("complete", err)
		}
		if done {
			return rec, nil
		}
		completed := rec.Clone()
		completed.State, completed.LeaseUntil = spent.StateComplete, time.Time{}
		completed.Result = append(make([]byte, 0, len(result)), result...)
		rk := s.keys.record(key)
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(rk), "=", rev)).
			Then(clientv3.OpPut(rk, string(appendRecord(nil, &completed)), clientv3.WithIgnoreLease()),
				clientv3.OpDelete(s.keys.pending(&rec))).
			Commit()
		if err != nil {
			return spent.Record{}, s.fail("complete", err)
		}
		if resp.Succeeded {
			return completed, nil
		}
	}
	return spent.Record{}, s.fail("complete", ErrContention)
}

// Release implements [spent.Store] as Complete does, deleting the record and
// its pending-index and seq-index entries, under the same ruling.
func (s *Store) Release(ctx context.Context, key spent.Hash, seq spent.Seq, now time.Time) error {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("etcd: release: %w", err)
	}
	defer cancel()
	for range maxAttempts {
		rec, rev, _, err := s.end(ctx, key, now, spent.Ending{Seq: seq, Release: true})
		if err != nil {
			return s.fail("release", err)
		}
		rk := s.keys.record(key)
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(rk), "=", rev)).
			Then(clientv3.OpDelete(rk), clientv3.OpDelete(s.keys.pending(&rec)), clientv3.OpDelete(s.keys.seqIndex(rec.Seq))).
			Commit()
		if err != nil {
			return s.fail("release", err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return s.fail("release", ErrContention)
}

// DeleteExpired implements [spent.Store]: it removes nothing and returns 0.
// etcd forgets records by itself, when the lease of their expiry bucket runs
// out (see the package documentation); reads treat a record whose ExpiresAt
// has passed at the caller's now as absent in the meantime.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("etcd: delete expired: %w", spent.ErrClosed)
	}
	return 0, nil
}

// ReserveSeq implements [spent.Store]: the node's last reserved counter is a
// key without lease, advanced by a transaction conditional on its
// ModRevision (retried while other reservations of the node win). The first
// counter of a node is 1.
func (s *Store) ReserveSeq(ctx context.Context, node uint32, n uint64) (uint64, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("etcd: reserve seq: %w", err)
	}
	defer cancel()
	first, err := s.reserveSeq(ctx, node, n)
	if err != nil {
		return 0, s.fail("reserve seq", err)
	}
	return first, nil
}

func (s *Store) reserveSeq(ctx context.Context, node uint32, n uint64) (uint64, error) {
	key := s.keys.seq(node)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	kvs := resp.Kvs
	for attempt := range 4 * maxAttempts {
		var last uint64
		var rev int64
		if len(kvs) == 1 {
			if last, err = strconv.ParseUint(string(kvs[0].Value), 10, 64); err != nil {
				return 0, fmt.Errorf("%w: seq of node %d: %q", ErrCorrupt, node, kvs[0].Value)
			}
			rev = kvs[0].ModRevision
		}
		if last+n < last {
			return 0, fmt.Errorf("seq of node %d: counter space exhausted", node)
		}
		txn, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, strconv.FormatUint(last+n, 10))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return 0, err
		}
		if txn.Succeeded {
			return last + 1, nil
		}
		kvs = txn.Responses[0].GetResponseRange().Kvs
		if attempt >= 4 {
			// Many reservations of one node at once: spread them out.
			time.Sleep(time.Duration(rand.IntN(1000*(attempt-3))) * time.Microsecond)
		}
	}
	return 0, ErrContention
}

// Count implements [spent.Store]. The counter is one key attached to the
// lease of its expiry's bucket; a new counter is created by a transaction If
// the key was never created, and a live one is advanced If its ModRevision
// is still the one read (retried while other counts win). A counter at its
// limit answers without a write.
func (s *Store) Count(ctx context.Context, op spent.CountOp) (spent.CountAnswer, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return spent.CountAnswer{}, fmt.Errorf("etcd: count: %w", err)
	}
	defer cancel()
	res, err := s.count(ctx, &op)
	if err != nil {
		return spent.CountAnswer{}, s.fail("count", err)
	}
	return res, nil
}

func (s *Store) count(ctx context.Context, op *spent.CountOp) (spent.CountAnswer, error) {
	ck := s.keys.counter(op.Key)
	fresh := spent.CountAnswer{Value: 1, Added: true, ExpiresAt: op.ExpiresAt}
	if op.Limit == 0 {
		// Nothing can be added: read what there is.
		resp, err := s.cli.Get(ctx, ck)
		if err != nil {
			return spent.CountAnswer{}, err
		}
		if len(resp.Kvs) == 0 {
			return spent.CountAnswer{ExpiresAt: op.ExpiresAt}, nil
		}
		c, err := decodeCounter(op.Key, resp.Kvs[0].Value)
		if err != nil {
			return spent.CountAnswer{}, err
		}
		if !op.Now.Before(c.expiresAt) {
			return spent.CountAnswer{ExpiresAt: op.ExpiresAt}, nil
		}
		return spent.CountAnswer{Value: c.value, ExpiresAt: c.expiresAt}, nil
	}
	cmp := clientv3.Compare(clientv3.CreateRevision(ck), "=", 0)
	newVal := string(appendCounter(nil, counter{value: 1, expiresAt: op.ExpiresAt}))
	for range maxAttempts {
		// Create (or recreate over an expired one) a counter holding 1.
		lease, bucket, err := s.leases.forExpiry(ctx, op.ExpiresAt)
		if err != nil {
			return spent.CountAnswer{}, err
		}
		resp, err := s.cli.Txn(ctx).If(cmp).
			Then(clientv3.OpPut(ck, newVal, clientv3.WithLease(lease))).
			Else(clientv3.OpGet(ck)).
			Commit()
		if err != nil {
			if isLeaseNotFound(err) {
				s.leases.drop(bucket, lease)
				continue
			}
			return spent.CountAnswer{}, err
		}
		if resp.Succeeded {
			return fresh, nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		for len(kvs) == 1 {
			c, err := decodeCounter(op.Key, kvs[0].Value)
			if err != nil {
				return spent.CountAnswer{}, err
			}
			if !op.Now.Before(c.expiresAt) {
				break // expired: recreate it
			}
			if c.value >= op.Limit {
				return spent.CountAnswer{Value: c.value, ExpiresAt: c.expiresAt}, nil
			}
			c.value++
			txn, err := s.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(ck), "=", kvs[0].ModRevision)).
				Then(clientv3.OpPut(ck, string(appendCounter(nil, c)), clientv3.WithIgnoreLease())).
				Else(clientv3.OpGet(ck)).
				Commit()
			if err != nil {
				return spent.CountAnswer{}, err
			}
			if txn.Succeeded {
				return spent.CountAnswer{Value: c.value, Added: true, ExpiresAt: c.expiresAt}, nil
			}
			kvs = txn.Responses[0].GetResponseRange().Kvs
		}
		if len(kvs) == 1 {
			cmp = clientv3.Compare(clientv3.ModRevision(ck), "=", kvs[0].ModRevision)
		} else {
			cmp = clientv3.Compare(clientv3.CreateRevision(ck), "=", 0)
		}
	}
	return spent.CountAnswer{}, ErrContention
}

// listPage is how many pending-index keys ListPending reads at once.
const listPage = 256

// ListPending implements [spent.Store]. For one namespace it reads that
// namespace's pending index (ordered by lease end, then seq) in pages of
// keys up to leaseBefore, and reads the records those keys name in
// transactions of up to MaxTxnOps gets; it costs in proportion to the
// entries it reads, which are the namespace's pending records whose lease
// ran out by leaseBefore (plus, until etcd removes them, those already
// expired by the caller's clock), never the whole store. For all namespaces
// (an empty namespace) it first finds each namespace that has pending
// records (one read per namespace) and merges their first limit entries.
func (s *Store) ListPending(ctx context.Context, namespace string, leaseBefore time.Time, limit int) ([]spent.Record, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd: list pending: %w", err)
	}
	defer cancel()
	out := []spent.Record{}
	if limit <= 0 {
		return out, nil
	}
	if namespace != "" {
		out, err = s.listPending(ctx, s.keys.pendingNS(namespace), s.keys.pendingBound(namespace, leaseBefore), leaseBefore, limit)
		if err != nil {
			return nil, s.fail("list pending", err)
		}
		return out, nil
	}
	names, err := s.pendingNamespaces(ctx)
	if err != nil {
		return nil, s.fail("list pending", err)
	}
	for _, nsHex := range names {
		from := s.keys.pendingAll() + nsHex + "/"
		recs, err := s.listPending(ctx, from, from+hexTime(leaseBefore.Add(time.Nanosecond)), leaseBefore, limit)
		if err != nil {
			return nil, s.fail("list pending", err)
		}
		out = append(out, recs...)
	}
	out = spent.OldestLeaseFirst(out, limit)
	return out, nil
}

// pendingNamespaces returns the namespaces (hex) that have pending-index
// entries, reading one key per namespace.
func (s *Store) pendingNamespaces(ctx context.Context) ([]string, error) {
	all := s.keys.pendingAll()
	end := clientv3.GetPrefixRangeEnd(all)
	var names []string
	from := all
	for {
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(1), clientv3.WithKeysOnly())
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 0 {
			return names, nil
		}
		nsHex, _, err := s.keys.parsePending(string(resp.Kvs[0].Key))
		if err != nil {
			return nil, err
		}
		names = append(names, nsHex)
		// '0' follows '/': skip the rest of this namespace.
		from = all + nsHex + "0"
	}
}

// listPending reads the pending index in [from, to) and returns up to limit
// records that are still pending with the lease and seq their entry names,
// and live at leaseBefore.
func (s *Store) listPending(ctx context.Context, from, to string, leaseBefore time.Time, limit int) ([]spent.Record, error) {
	out := []spent.Record{}
	for len(out) < limit {
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(to), clientv3.WithLimit(listPage), clientv3.WithKeysOnly())
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 0 {
			break
		}
		entries := make([]pendingEntry, len(resp.Kvs))
		for i, kv := range resp.Kvs {
			if _, entries[i], err = s.keys.parsePending(string(kv.Key)); err != nil {
				return nil, err
			}
		}
		recs, err := s.readRecords(ctx, entries)
		if err != nil {
			return nil, err
		}
		for i, e := range entries {
			r := recs[i]
			if r == nil || r.State != spent.StatePending || r.Seq != e.seq || !r.LeaseUntil.Equal(e.lease) || !r.LiveAt(leaseBefore) {
				continue
			}
			out = append(out, *r)
			if len(out) == limit {
				break
			}
		}
		if !resp.More {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return out, nil
}

// readRecords reads the records the entries name, in transactions of up to
// MaxTxnOps gets; a missing record is nil.
func (s *Store) readRecords(ctx context.Context, entries []pendingEntry) ([]*spent.Record, error) {
	out := make([]*spent.Record, len(entries))
	for start := 0; start < len(entries); start += s.opts.MaxTxnOps {
		chunk := entries[start:min(start+s.opts.MaxTxnOps, len(entries))]
		ops := make([]clientv3.Op, len(chunk))
		for i, e := range chunk {
			ops[i] = clientv3.OpGet(s.keys.record(e.hash))
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, err
		}
		for i, r := range resp.Responses {
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue
			}
			rec, err := decodeRecord(chunk[i].hash, kvs[0].Value)
			if err != nil {
				return nil, err
			}
			out[start+i] = &rec
		}
	}
	return out, nil
}

// Close implements [spent.Store]. Later calls fail with spent.ErrClosed;
// calls in flight fail with an error that wraps it. Close revokes no lease:
// the records need them.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			s.closeErr = fmt.Errorf("etcd: close: %w", err)
		}
	})
	return s.closeErr
}
