package redis

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/purgecursor"
)

// Store is a spent.Store kept in Redis: a single server or a Redis Cluster.
// Open it with [Open]; it is safe for concurrent use, and several processes
// (several spent servers) may share one server or cluster.
type Store struct {
	opts    Options
	log     *slog.Logger
	ks      *keyspace
	uc      goredis.UniversalClient // single or cluster
	single  *goredis.Client         // nil in cluster mode
	cluster *goredis.ClusterClient  // nil in single mode
	ap      *goredis.AutoPipeliner  // single calls, with Options.AutoPipeline

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	purgeAt   purgecursor.Cursor[purgePos] // where the last Purge stopped (purge.go)

	watchMu sync.Mutex
	watches []func() // the stops of WatchEnds's subscriptions (ends.go)
}

var (
	_ spent.Store     = (*Store)(nil)
	_ spent.SeqLister = (*Store)(nil)
)

// Errors of the store. Every other failure is a connection or server error,
// wrapped; all leave the outcome of a write unknown.
var (
	// ErrNotDurable is returned by Open when a server does not promise to
	// keep acknowledged writes and Options.AllowNonDurable is false. The
	// message says which setting to change.
	ErrNotDurable = errors.New("redis: server is not durable")
	// ErrNotReplicated is returned by a write when Options.WaitReplicas is
	// set and fewer replicas acknowledged it within WaitTimeout. The write
	// is on the primary; whether it survives a failover is unknown.
	ErrNotReplicated = errors.New("redis: write not acknowledged by enough replicas")
)

// maxCountLimit and maxSeqBlock bound the counters of Count and the blocks
// of ReserveSeq: the scripts count in doubles, exact below 2^53, and INCRBY
// in int64.
const (
	maxCountLimit = 1 << 53
	maxSeqBlock   = 1 << 62
)

// maxTrimPerTag bounds the index entries one DeleteExpired looks at in each
// hash tag, so that each trim script holds the server for a short while.
const maxTrimPerTag = 128

// Open connects to the server or cluster of opts, checks that every primary
// runs Redis 7.0 or later and is durable (appendonly yes, appendfsync
// always, no-appendfsync-on-rewrite no, and no eviction), loads the scripts,
// and checks the key layout under the prefix. A server that is not durable
// is refused with ErrNotDurable unless opts.AllowNonDurable is set, when
// Open logs what a crash can lose and goes on. Settings changed on the
// server after Open are not seen.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Store{opts: opts, log: opts.Logger, ks: newKeyspace(opts.Prefix)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.Cluster {
		s.cluster = goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs:                 opts.Addrs,
			Username:              opts.Username,
			Password:              opts.Password,
			TLSConfig:             opts.TLS,
			PoolSize:              opts.PoolSize,
			DialTimeout:           opts.DialTimeout,
			ReadTimeout:           opts.ReadTimeout,
			WriteTimeout:          opts.WriteTimeout,
			ContextTimeoutEnabled: true,
			DisableIdentity:       true,
		})
		s.uc = s.cluster
	} else {
		s.single = goredis.NewClient(&goredis.Options{
			Addr:                  opts.Addrs[0],
			DB:                    opts.DB,
			Username:              opts.Username,
			Password:              opts.Password,
			TLSConfig:             opts.TLS,
			PoolSize:              opts.PoolSize,
			DialTimeout:           opts.DialTimeout,
			ReadTimeout:           opts.ReadTimeout,
			WriteTimeout:          opts.WriteTimeout,
			ContextTimeoutEnabled: true,
			DisableIdentity:       true,
		})
		s.uc = s.single
	}
	if err := s.init(ctx); err != nil {
		s.uc.Close()
		return nil, err
	}
	if opts.AutoPipeline {
		var err error
		if s.cluster != nil {
			s.ap, err = s.cluster.AutoPipeline()
		} else {
			s.ap, err = s.single.AutoPipeline()
		}
		if err != nil {
			s.uc.Close()
			return nil, fmt.Errorf("redis: open: %w", err)
		}
	}
	return s, nil
}

// init checks the primaries, loads the scripts and checks the layout.
func (s *Store) init(ctx context.Context) error {
	nodes, err := s.primaries(ctx)
	if err != nil {
		return fmt.Errorf("redis: open: %w", err)
	}
	var problems []string
	for _, n := range nodes {
		if err := checkVersion(ctx, n); err != nil {
			return fmt.Errorf("redis: open: %w", err)
		}
		if !s.opts.Cluster {
			if err := checkNotCluster(ctx, n); err != nil {
				return fmt.Errorf("redis: open: %w", err)
			}
		}
		problems = append(problems, checkDurable(ctx, n)...)
	}
	if len(problems) > 0 {
		if !s.opts.AllowNonDurable {
			return fmt.Errorf("%w: %s (or allow it knowingly: AllowNonDurable, allow_non_durable=true, --allow-non-durable)",
				ErrNotDurable, strings.Join(problems, "; "))
		}
		for _, p := range problems {
			s.log.Warn("redis store runs on a server that is not durable (allowed): "+p, "store", "redis")
		}
	}
	for _, n := range nodes {
		for _, sc := range allScripts {
			if err := n.ScriptLoad(ctx, sc.src).Err(); err != nil {
				return fmt.Errorf("redis: open: loading script %s on %s: %w", sc.name, n.Options().Addr, err)
			}
		}
	}
	// The layout key is written without WAIT: a replica that is down now
	// fails the writes that need it, not the start.
	c := newCall(s.ks.format, scriptFormat, []string{s.ks.format}, layout)
	if err := s.exec(ctx, []*call{c}, false); err != nil {
		return fmt.Errorf("redis: open: %w", err)
	}
	if v, _ := c.cmd.Val().(string); v != layout {
		return fmt.Errorf("%w: key layout %q under prefix %q, want %q", ErrCorrupt, v, s.opts.Prefix, layout)
	}
	return nil
}

// primaries returns a client per primary: the server, or every primary of
// the cluster.
func (s *Store) primaries(ctx context.Context) ([]*goredis.Client, error) {
	if s.single != nil {
		return []*goredis.Client{s.single}, s.single.Ping(ctx).Err()
	}
	var mu sync.Mutex
	var out []*goredis.Client
	err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("%s: %w", c.Options().Addr, err)
		}
		mu.Lock()
		out = append(out, c)
		mu.Unlock()
		return nil
	})
	if err == nil && len(out) == 0 {
		err = errors.New("cluster has no primaries")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Options().Addr < out[j].Options().Addr })
	return out, err
}

// Close closes the connections. Calls after Close fail with
// spent.ErrClosed; calls in flight finish or fail with it.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.stopWatches()
		if s.ap != nil {
			s.ap.Close() // answers what is queued
		}
		s.closeErr = s.uc.Close()
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("redis: close: %w", s.closeErr)
		}
	})
	return s.closeErr
}

// fail wraps a failure of operation op, mapping a closed client to
// spent.ErrClosed.
func (s *Store) fail(op string, err error) error {
	if errors.Is(err, goredis.ErrClosed) || (s.closed.Load() && !errors.Is(err, spent.ErrClosed)) {
		err = spent.ErrClosed
	}
	return fmt.Errorf("redis: %s: %w", op, err)
}

// enter fails when the store is closed.
func (s *Store) enter(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("redis: %s: %w", op, spent.ErrClosed)
	}
	return nil
}

// timeArgs returns t as the (second, nanosecond) pair the scripts compare.
func timeArgs(t time.Time) (int64, int64) { return t.Unix(), int64(t.Nanosecond()) }

// encodeClaim validates op and returns its stored record.
func encodeClaim(op *spent.ClaimOp) ([]byte, error) {
	if err := op.Record.Validate(); err != nil {
		return nil, err
	}
	if err := checkEncodable(&op.Record); err != nil {
		return nil, err
	}
	return encodeRecord(&op.Record), nil
}

// claimScript returns the claim script's call for op, whose stored record
// is blob.
func (s *Store) claimScript(op *spent.ClaimOp, blob []byte) *call {
	r := &op.Record
	m := member(&r.Hash)
	key := s.ks.recordKey(&r.Hash, m)
	sec, nsec := timeArgs(op.Now)
	retake := "0"
	if op.Retake {
		retake = "1"
	}
	var lease int64
	if r.State == spent.StatePending {
		lease = r.LeaseUntil.UnixMilli()
	}
	return newCall(key, scriptClaim, []string{key, s.ks.pending[r.Hash[0]], s.ks.seqIndexKey(r.Hash[0], r.Seq.Node)},
		blob, sec, nsec, retake, ceilMilli(r.ExpiresAt), lease, m, max(0, op.ResultLimit), r.Seq.Counter)
}

// claimFast returns the call of the fast path for a one-step claim: a short
// script (claimNewLua) around SET key blob NX GET PXAT expiry that writes
// the record if no record is stored, with its seq index entry (a complete
// record needs no pending index), and otherwise returns the stored one. A stored record that is free by the
// ledger's clock is left for the claim script to replace. An op with a
// ResultLimit sends SET without GET, which never returns the stored record
// (its result may be long): when the key is taken, the claim script reads
// the record instead, leaving a long result on the server.
func (s *Store) claimFast(op *spent.ClaimOp, blob []byte) *call {
	r := &op.Record
	m := member(&r.Hash)
	key := s.ks.recordKey(&r.Hash, m)
	get := "1"
	if op.ResultLimit > 0 {
		get = "0"
	}
	c := newCall(key, scriptClaimNew, []string{key, s.ks.seqIndexKey(r.Hash[0], r.Seq.Node)},
		blob, ceilMilli(r.ExpiresAt), m, r.Seq.Counter, get)
	c.fast, c.noGet = true, op.ResultLimit > 0
	return c
}

// claimResult turns the reply of a claim call into op's result. again
// reports a fast call that found a record free at op.Now: only the claim
// script may replace it.
func claimResult(op *spent.ClaimOp, c *call) (res spent.ClaimAnswer, again bool, err error) {
	fast := c.fast
	if c.noGet {
		// SET NX without GET: nil when it wrote, 0 when the key is
		// taken, by a record the claim script must read and judge.
		if errors.Is(c.cmd.Err(), goredis.Nil) {
			return spent.ClaimAnswer{Inserted: true, Record: op.Record}, false, nil
		}
		if v, ok := c.cmd.Val().(int64); ok && v == 0 {
			return spent.ClaimAnswer{}, true, nil
		}
		return spent.ClaimAnswer{}, false, fmt.Errorf("%w: claim answered %T %v", ErrCorrupt, c.cmd.Val(), c.cmd.Val())
	}
	if fast && errors.Is(c.cmd.Err(), goredis.Nil) {
		return spent.ClaimAnswer{Inserted: true, Record: op.Record}, false, nil
	}
	omitted := 0
	val := c.cmd.Val()
	if v, ok := val.([]any); ok && !fast && len(v) == 2 {
		// The script left out a result over op's limit.
		n, ok := v[1].(int64)
		if !ok || n <= int64(op.ResultLimit) {
			return spent.ClaimAnswer{}, false, fmt.Errorf("%w: claim answered %v", ErrCorrupt, v)
		}
		val, omitted = v[0], int(n)
	}
	switch v := val.(type) {
	case int64:
		if v == 1 && !fast {
			return spent.ClaimAnswer{Inserted: true, Record: op.Record}, false, nil
		}
	case string:
		r, err := decodeRecord(op.Record.Hash, []byte(v))
		if err != nil {
			return spent.ClaimAnswer{}, false, err
		}
		// A record carrying op's own seq was written by op: the call ran
		// twice (a resend after a lost reply), and the first run inserted.
		if r.Seq == op.Record.Seq {
			return spent.ClaimAnswer{Inserted: true, Record: op.Record}, false, nil
		}
		if fast && spent.FreeAt(&r, op.Now, op.Retake) {
			return spent.ClaimAnswer{}, true, nil
		}
		if omitted > 0 {
			r.Result = nil
			return spent.ClaimAnswer{Record: r, ResultOmitted: true, ResultLen: omitted}, false, nil
		}
		return spent.ClaimAnswer{Record: r}, false, nil
	}
	return spent.ClaimAnswer{}, false, fmt.Errorf("%w: claim answered %T %v", ErrCorrupt, c.cmd.Val(), c.cmd.Val())
}

// claim runs the calls of ops (calls[i] is the call of ops[i]; blobs[i] its
// stored record), then the claim script for the ops whose fast call found a
// free record, in order. A replica shortfall fails the claims only when
// one of them wrote.
func (s *Store) claim(ctx context.Context, ops []spent.ClaimOp, blobs [][]byte, calls []*call) ([]spent.ClaimAnswer, error) {
	short := s.exec(ctx, calls, true)
	if short != nil && !errors.Is(short, ErrNotReplicated) {
		return nil, short
	}
	out := make([]spent.ClaimAnswer, len(ops))
	var again []int
	wrote := false
	for i := range ops {
		res, retry, err := claimResult(&ops[i], calls[i])
		if err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
		if retry {
			again = append(again, i)
			continue
		}
		out[i] = res
		wrote = wrote || res.Inserted
	}
	if len(again) > 0 {
		scripts := make([]*call, len(again))
		for j, i := range again {
			scripts[j] = s.claimScript(&ops[i], blobs[i])
		}
		err := s.exec(ctx, scripts, true)
		if err != nil && !errors.Is(err, ErrNotReplicated) {
			return nil, err
		}
		short = errors.Join(short, err)
		for j, i := range again {
			res, _, err := claimResult(&ops[i], scripts[j])
			if err != nil {
				return nil, fmt.Errorf("op %d: %w", i, err)
			}
			out[i] = res
			wrote = wrote || res.Inserted
		}
	}
	if short != nil && wrote {
		// Only a write of these claims needs the replicas: an answer from a
		// record found is no write of ours.
		return nil, short
	}
	return out, nil
}

// Claim implements [spent.Store]. A one-step claim of a key with no stored
// record is one SET NX GET with PXAT at its expiry; anything else (a
// pending record, a key whose stored record is free by op.Now, a lease
// takeover) is one run of the claim script, which reads the key, judges it
// by op.Now and writes the record if it is free. Each is atomic. The answer
// comes after the server has written it to its append-only file (with
// appendfsync always, before any reply of the same event loop), and, with
// Options.WaitReplicas, after the replicas acknowledged it.
func (s *Store) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	if err := s.enter("claim"); err != nil {
		return spent.ClaimAnswer{}, err
	}
	blob, err := encodeClaim(&op)
	if err != nil {
		return spent.ClaimAnswer{}, fmt.Errorf("redis: claim: %w", err)
	}
	var c *call
	if op.Record.State == spent.StateComplete {
		c = s.claimFast(&op, blob)
	} else {
		c = s.claimScript(&op, blob)
	}
	out, err := s.claim(ctx, []spent.ClaimOp{op}, [][]byte{blob}, []*call{c})
	if err != nil {
		return spent.ClaimAnswer{}, s.fail("claim", err)
	}
	return out[0], nil
}

// ClaimBatch implements [spent.Store]: the calls of Claim, all sent in one
// pipeline (in a cluster, one pipeline per primary, in parallel), then, in
// a second pipeline, the scripts of the ops that found a free record. Ops on
// a key that occurs more than once in the batch all run the claim script, in
// order, on one server, so each sees the earlier ones. A malformed op
// rejects the batch before anything is sent. An error from any op fails the
// batch, leaving the outcome of every op unknown.
func (s *Store) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	if err := s.enter("claim batch"); err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return []spent.ClaimAnswer{}, nil
	}
	blobs := make([][]byte, len(ops))
	seen := make(map[spent.Hash]int, len(ops))
	for i := range ops {
		b, err := encodeClaim(&ops[i])
		if err != nil {
			return nil, fmt.Errorf("redis: claim batch: op %d: %w", i, err)
		}
		blobs[i] = b
		seen[ops[i].Record.Hash]++
	}
	calls := make([]*call, len(ops))
	for i := range ops {
		if ops[i].Record.State == spent.StateComplete && seen[ops[i].Record.Hash] == 1 {
			calls[i] = s.claimFast(&ops[i], blobs[i])
		} else {
			calls[i] = s.claimScript(&ops[i], blobs[i])
		}
	}
	out, err := s.claim(ctx, ops, blobs, calls)
	if err != nil {
		return nil, s.fail("claim batch", err)
	}
	return out, nil
}

// status maps the status code of complete and release to an error.
func status(code int64) error {
	switch code {
	case 0:
		return nil
	case 1:
		return spent.ErrNotFound
	case 2:
		return spent.ErrNotPending
	case 3:
		return spent.ErrSeqMismatch
	}
	return fmt.Errorf("%w: status %d", ErrCorrupt, code)
}

// Complete implements [spent.Store] with one script run. The script
// (completeLua) rules on the stored record as [spent.RuleEnd] does, in Lua
// so that the ruling and the write are one atomic step on the server; the
// conformance suite checks it against the same table of cases as RuleEnd
// (storetest.EndCases).
func (s *Store) Complete(ctx context.Context, key spent.Hash, seq spent.Seq, result []byte, now time.Time) (spent.Record, error) {
	if err := s.enter("complete"); err != nil {
		return spent.Record{}, err
	}
	if result == nil {
		result = []byte{}
	}
	m := member(&key)
	rk := s.ks.recordKey(&key, m)
	sec, nsec := timeArgs(now)
	c := newCall(rk, scriptComplete, []string{rk, s.ks.pending[key[0]]},
		seqBytes(seq), result, sec, nsec, m, zeroLease, s.ks.ends)
	werr := s.exec(ctx, []*call{c}, true)
	if werr != nil && !errors.Is(werr, ErrNotReplicated) {
		return spent.Record{}, s.fail("complete", werr)
	}
	reply, _ := c.cmd.Val().([]any)
	if len(reply) == 0 {
		return spent.Record{}, s.fail("complete", fmt.Errorf("%w: complete script answered %v", ErrCorrupt, c.cmd.Val()))
	}
	code, _ := reply[0].(int64)
	if err := status(code); err != nil {
		return spent.Record{}, fmt.Errorf("redis: complete: %w", err)
	}
	v, ok := reply[1].(string)
	if len(reply) != 2 || !ok {
		return spent.Record{}, s.fail("complete", fmt.Errorf("%w: complete script answered %v", ErrCorrupt, reply))
	}
	if werr != nil {
		return spent.Record{}, s.fail("complete", werr)
	}
	r, err := decodeRecord(key, []byte(v))
	if err != nil {
		return spent.Record{}, s.fail("complete", err)
	}
	return r, nil
}

// Release implements [spent.Store] with one script run, whose script
// (releaseLua) rules as Complete's does.
func (s *Store) Release(ctx context.Context, key spent.Hash, seq spent.Seq, now time.Time) error {
	if err := s.enter("release"); err != nil {
		return err
	}
	m := member(&key)
	rk := s.ks.recordKey(&key, m)
	sec, nsec := timeArgs(now)
	c := newCall(rk, scriptRelease, []string{rk, s.ks.pending[key[0]], s.ks.seqIndexKey(key[0], seq.Node)},
		seqBytes(seq), sec, nsec, m, s.ks.ends)
	werr := s.exec(ctx, []*call{c}, true)
	if werr != nil && !errors.Is(werr, ErrNotReplicated) {
		return s.fail("release", werr)
	}
	code, ok := c.cmd.Val().(int64)
	if !ok {
		return s.fail("release", fmt.Errorf("%w: release script answered %v", ErrCorrupt, c.cmd.Val()))
	}
	if err := status(code); err != nil {
		return fmt.Errorf("redis: release: %w", err)
	}
	if werr != nil {
		return s.fail("release", werr)
	}
	return nil
}

// Get implements [spent.Store] with one GET, judged by now. A server with
// appendfsync always sends no reply before the writes it has applied are in
// its append-only file, so a record read is a durable record.
func (s *Store) Get(ctx context.Context, key spent.Hash, now time.Time) (spent.Record, error) {
	if err := s.enter("get"); err != nil {
		return spent.Record{}, err
	}
	v, err := s.uc.Get(ctx, s.ks.recordKey(&key, member(&key))).Bytes()
	if errors.Is(err, goredis.Nil) {
		return spent.Record{}, fmt.Errorf("redis: get: %w", spent.ErrNotFound)
	}
	if err != nil {
		return spent.Record{}, s.fail("get", err)
	}
	r, err := decodeRecord(key, v)
	if err != nil {
		return spent.Record{}, s.fail("get", err)
	}
	if !r.LiveAt(now) {
		return spent.Record{}, fmt.Errorf("redis: get: %w", spent.ErrNotFound)
	}
	return r, nil
}

// ListPending implements [spent.Store]. It runs one script per hash tag (256,
// pipelined; in a cluster, per primary in parallel), each walking its tag's
// pending index in lease order from the oldest lease, and merges them. The
// cost grows with the pending records whose lease ran out by leaseBefore
// (other namespaces' included), not with the records held. Index entries of
// records the engine has forgotten are removed on the way.
func (s *Store) ListPending(ctx context.Context, namespace string, leaseBefore time.Time, limit int) ([]spent.Record, error) {
	if err := s.enter("list pending"); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	sec, nsec := timeArgs(leaseBefore)
	bound := leaseBefore.UnixMilli()
	calls := make([]*call, numTags)
	for i := range calls {
		calls[i] = newCall(s.ks.pending[i], scriptPending, []string{s.ks.pending[i]},
			s.ks.record[i], bound, sec, nsec, namespace, limit)
	}
	if err := s.exec(ctx, calls, false); err != nil {
		return nil, s.fail("list pending", err)
	}
	var out []spent.Record
	for _, c := range calls {
		reply, _ := c.cmd.Val().([]any)
		for j := 0; j+1 < len(reply); j += 2 {
			m, _ := reply[j].(string)
			v, _ := reply[j+1].(string)
			var h spent.Hash
			if n, err := hex.Decode(h[:], []byte(m)); err != nil || n != len(h) {
				return nil, s.fail("list pending", fmt.Errorf("%w: pending index member %q", ErrCorrupt, m))
			}
			r, err := decodeRecord(h, []byte(v))
			if err != nil {
				return nil, s.fail("list pending", err)
			}
			out = append(out, r)
		}
	}
	out = spent.OldestLeaseFirst(out, limit)
	return out, nil
}

// DeleteExpired implements [spent.Store] for an engine that forgets by
// itself: each record and counter is written with PXAT at its expiry
// (rounded up to the millisecond), so Redis removes it then, on its own
// clock, and DeleteExpired has no records to remove: it returns 0. It does
// trim the pending indexes and the seq indexes (of every node that
// reserved seqs): in each hash tag it looks at the next min(limit, 128)
// entries of each, going round the index from call to call, and removes
// those of records that Redis has forgotten (or, in a seq index, that now
// carry another seq). Call it now and then
// (spent serve's sweeper does), or those entries accumulate. now is not
// used: which records are gone is for the engine's clock to say.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := s.enter("delete expired"); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	perTag := min(limit, maxTrimPerTag)
	calls := make([]*call, numTags)
	for i := range calls {
		calls[i] = newCall(s.ks.pending[i], scriptTrim, []string{s.ks.pending[i], s.ks.trim[i]}, s.ks.record[i], perTag)
	}
	if err := s.exec(ctx, calls, false); err != nil {
		return 0, s.fail("delete expired", err)
	}
	if _, err := s.trimSeq(ctx, perTag); err != nil {
		return 0, s.fail("delete expired", err)
	}
	return 0, nil
}

// ReserveSeq implements [spent.Store] with INCRBY on the node's counter key.
func (s *Store) ReserveSeq(ctx context.Context, node uint32, n uint64) (uint64, error) {
	if err := s.enter("reserve seq"); err != nil {
		return 0, err
	}
	if n == 0 || n > maxSeqBlock {
		return 0, fmt.Errorf("redis: reserve seq: block of %d: must be 1 to %d", n, uint64(maxSeqBlock))
	}
	key := s.ks.seqKey(node)
	c := newCall(key, scriptReserve, []string{key, s.ks.nodes}, n, node)
	if err := s.exec(ctx, []*call{c}, true); err != nil {
		return 0, s.fail("reserve seq", err)
	}
	last, ok := c.cmd.Val().(int64)
	if !ok || last < int64(n) {
		return 0, s.fail("reserve seq", fmt.Errorf("%w: seq counter %v after adding %d", ErrCorrupt, c.cmd.Val(), n))
	}
	return uint64(last) - n + 1, nil
}

// Count implements [spent.Store] with one script run. Limits above 2^53 are
// treated as 2^53 (the scripts count in doubles). Redis forgets a counter at
// its ExpiresAt (PXAT).
func (s *Store) Count(ctx context.Context, op spent.CountOp) (spent.CountAnswer, error) {
	if err := s.enter("count"); err != nil {
		return spent.CountAnswer{}, err
	}
	limit := min(op.Limit, maxCountLimit)
	key := s.ks.counterKey(&op.Key)
	esec, ensec := timeArgs(op.ExpiresAt)
	sec, nsec := timeArgs(op.Now)
	c := newCall(key, scriptCount, []string{key}, limit, esec, ensec, ceilMilli(op.ExpiresAt), sec, nsec)
	werr := s.exec(ctx, []*call{c}, true)
	if werr != nil && !errors.Is(werr, ErrNotReplicated) {
		return spent.CountAnswer{}, s.fail("count", werr)
	}
	reply, _ := c.cmd.Val().([]any)
	var v [4]int64
	for i := range v {
		if len(reply) != len(v) {
			break
		}
		v[i], _ = reply[i].(int64)
	}
	if len(reply) != len(v) || v[1] < 0 || v[3] < 0 || v[3] >= 1e9 {
		return spent.CountAnswer{}, s.fail("count", fmt.Errorf("%w: count script answered %v", ErrCorrupt, c.cmd.Val()))
	}
	if werr != nil && v[0] == 1 {
		return spent.CountAnswer{}, s.fail("count", werr)
	}
	return spent.CountAnswer{Added: v[0] == 1, Value: uint64(v[1]), ExpiresAt: makeTime(v[2], v[3])}, nil
}
