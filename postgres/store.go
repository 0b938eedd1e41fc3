package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/purgecursor"
)

// Errors of the store, besides those of the spent.Store contract.
var (
	// ErrNonDurable is returned by Open, and by any call that has to open a
	// new connection, when the server may lose acknowledged commits
	// (synchronous_commit=off or fsync=off) and Options.AllowNonDurable is
	// not set.
	ErrNonDurable = errors.New("postgres: server may lose acknowledged commits")
	// ErrOutcomeUnknown is returned when the server says that it cannot
	// tell whether a statement took effect (SQLSTATE 40003,
	// statement_completion_unknown, which CockroachDB returns after some
	// failures). The write may or may not have happened: the ledger reads
	// the key back to find out (invariant 8 in docs/concepts.md).
	ErrOutcomeUnknown = errors.New("postgres: outcome unknown")
	// ErrCorrupt is returned when a stored row cannot be a record written by
	// this package.
	ErrCorrupt = errors.New("postgres: corrupt row")
	// ErrUnsettled is returned by a call that found its key changing under
	// it more than a few times in a row (read again, and again it changed).
	// Nothing was written by the call; it may be retried.
	ErrUnsettled = errors.New("postgres: key kept changing; nothing written")
)

// Store is a spent.Store kept in a PostgreSQL database (or one that speaks
// its protocol and SQL). Open it with [Open]; it is safe for concurrent use,
// and any number of stores, in any number of processes, may share one
// schema.
type Store struct {
	pool   *pgxpool.Pool
	opts   Options
	log    *slog.Logger
	q      queries
	closed atomic.Bool
	once   sync.Once
	// purgeAt is the last key a Purge's walk reached (purge.go).
	purgeAt purgecursor.Cursor[[]byte]
	// period is Options.PartitionPeriod in nanoseconds.
	period int64
	// partitioned is whether records is partitioned: always, but in a
	// schema a test left at version 1.
	partitioned bool
	// ends is the channel of the schema's ends (ends.go).
	ends string

	watchMu sync.Mutex
	watches []func() // the stops of WatchEnds's listeners (ends.go)
}

var (
	_ spent.Store     = (*Store)(nil)
	_ spent.SeqLister = (*Store)(nil)
)

// Open connects to the server, checks that it makes commits durable (see
// [ErrNonDurable] and Options.AllowNonDurable), creates or migrates the
// schema, and returns the store. Close it when done.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(opts.ConnString)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.MinConns = min(opts.MinConns, cfg.MaxConns)
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "spent"
	}
	// The store's statements are prepared once per connection. On the
	// partitioned records table a custom plan is made again at each run,
	// for every partition; a generic plan is made once and prunes the
	// partitions when it runs.
	if _, ok := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !ok {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	s := &Store{opts: opts, log: opts.Logger, q: newQueries(opts.Schema), period: int64(opts.PartitionPeriod), ends: endsChannel(opts.Schema)}
	if s.log == nil {
		s.log = slog.Default()
	}
	// Every new connection is checked, not only the first: a server
	// reconfigured and restarted under a running store is refused too.
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		st, err := readSettings(ctx, c, s.q.durabilitySettings)
		if err != nil {
			return fmt.Errorf("reading durability settings: %w", err)
		}
		if lost := st.losses(); len(lost) > 0 && !opts.AllowNonDurable {
			return fmt.Errorf("%w: %s; refusing to run (set AllowNonDurable, --allow-non-durable, to accept it)", ErrNonDurable, lost[0])
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	s.pool = pool
	if err := s.checkDurability(ctx); err != nil {
		pool.Close()
		if errors.Is(err, ErrNonDurable) {
			return nil, err // already says "postgres: ..." and why
		}
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if err := s.readPartitioned(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	// The partition of the current period and of the next.
	if err := s.ensurePartitions(ctx, time.Now().UnixNano()); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: making partitions: %w", err)
	}
	if err := s.warmUp(ctx, cfg.MinConns); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	return s, nil
}

// warmUp holds n connections at once, so that the pool has made them.
func (s *Store) warmUp(ctx context.Context, n int32) error {
	held := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range n {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		held = append(held, c)
	}
	return nil
}

// Close closes the connection pool, after the calls in flight have
// finished. Later calls fail with spent.ErrClosed.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		s.stopWatches()
		s.pool.Close()
	})
	return nil
}

// Pool returns the store's connection pool, for operators' tools and
// tests. Statements run through it bypass the store's checks.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema returns the schema holding the store's tables.
func (s *Store) Schema() string { return s.opts.Schema }

// do runs f, again after a serialization failure or deadlock or when the
// statement was never sent, up to Options.MaxRetries more times, and wraps
// any error as "postgres: op: ...". f must be safe to run again: the failed
// attempt's transaction was rolled back.
func (s *Store) do(ctx context.Context, op string, f func(ctx context.Context) error) error {
	if s.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, spent.ErrClosed)
	}
	for attempt := 0; ; attempt++ {
		err := f(ctx)
		if err == nil {
			return nil
		}
		if s.closed.Load() {
			return fmt.Errorf("postgres: %s: %w (%w)", op, spent.ErrClosed, err)
		}
		if errors.Is(err, ErrNonDurable) {
			return err // a new connection was refused; it says why
		}
		var pe *pgconn.PgError
		retry := false
		if errors.As(err, &pe) {
			switch pe.Code {
			case "40003": // statement_completion_unknown
				return fmt.Errorf("postgres: %s: %w: %w", op, ErrOutcomeUnknown, err)
			case "40001", "40P01": // serialization_failure, deadlock_detected
				retry = true
			}
		} else if pgconn.SafeToRetry(err) {
			retry = true
		}
		if !retry || ctx.Err() != nil {
			return fmt.Errorf("postgres: %s: %w", op, err)
		}
		if attempt >= s.opts.MaxRetries {
			return fmt.Errorf("postgres: %s: gave up after %d attempts: %w", op, attempt+1, err)
		}
		if d := s.backoff(attempt); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("postgres: %s: %w (retrying after: %w)", op, ctx.Err(), err)
			case <-t.C:
			}
		}
	}
}

// backoff returns a random wait in [b/2, b], b = RetryBackoff·2^attempt,
// capped at one second.
func (s *Store) backoff(attempt int) time.Duration {
	b := s.opts.RetryBackoff
	if b <= 0 {
		return 0
	}
	for range attempt {
		if b >= time.Second/2 {
			b = time.Second
			break
		}
		b *= 2
	}
	b = min(b, time.Second)
	return b/2 + rand.N(b/2+1)
}

// maxRereads bounds the loops that read a row again after their statement
// saw an older version of it.
const maxRereads = 10

// Claim implements [spent.Store]. It sends two statements in one round
// trip and one implicit transaction: the advisory lock on the key, then the
// claim (see sql.go). Only when the claim found the key's row gone by the
// time it would replace it (a sweep or a purge deleted it), it reads the row
// again, and claims again if the key is still free. A claim whose expiry
// falls in a period without a partition yet makes it and runs again.
func (s *Store) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	args, err := claimArgs(&op)
	if err != nil {
		return spent.ClaimAnswer{}, fmt.Errorf("postgres: claim: %w", err)
	}
	var res spent.ClaimAnswer
	err = s.do(ctx, "claim", func(ctx context.Context) error {
		return s.withPartitions(ctx, func() []int64 { return []int64{args[8].(int64)} }, func() error {
			var err error
			res, err = s.claim(ctx, &op, args)
			return err
		})
	})
	return res, err
}

func (s *Store) claim(ctx context.Context, op *spent.ClaimOp, args []any) (spent.ClaimAnswer, error) {
	for range maxRereads {
		res, ok, err := s.claimOnce(ctx, op, args)
		if err != nil || ok {
			return res, err
		}
		got, found, err := s.getAnyLimit(ctx, op.Record.Hash, op.ResultLimit)
		if err != nil {
			return res, err
		}
		if found && !spent.FreeAt(&got.Record, op.Now, op.Retake) {
			return got, nil
		}
	}
	return spent.ClaimAnswer{}, ErrUnsettled
}

// claimOnce runs the lock and the claim statement. ok is false when its
// answer cannot be trusted: no row came back, or only a row that is free at
// op.Now (one deleted since it was read).
func (s *Store) claimOnce(ctx context.Context, op *spent.ClaimOp, args []any) (res spent.ClaimAnswer, ok bool, err error) {
	b := &pgx.Batch{}
	b.Queue(s.q.lockKey, lockID(op.Record.Hash))
	b.Queue(s.q.claim, args...)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return res, false, err
	}
	rows, err := br.Query()
	if err != nil {
		return res, false, err
	}
	if res, ok, err = claimRows(rows, op); err != nil {
		return res, false, err
	}
	// Close reads the end of the implicit transaction: only then is the
	// claim committed.
	return res, ok, br.Close()
}

// lockID is the advisory lock of a key: its first 8 bytes. Keys are
// uniform hashes, so two keys share a lock only by a 2^-64 chance (and then
// merely wait for each other); the bigint locks of other applications on
// the database may also meet ours, with the same effect.
func lockID(h spent.Hash) int64 { return int64(binary.BigEndian.Uint64(h[:8])) }

// claimRows reads the answer of the claim statement.
func claimRows(rows pgx.Rows, op *spent.ClaimOp) (res spent.ClaimAnswer, ok bool, err error) {
	defer rows.Close()
	var sc scanRow
	var inserted bool
	var resultLen *int64
	dest := append(append([]any{&inserted}, sc.dest()...), &resultLen)
	found := false
	for rows.Next() {
		if found {
			return res, false, fmt.Errorf("%w: two rows for one key", ErrCorrupt)
		}
		if err := rows.Scan(dest...); err != nil {
			return res, false, err
		}
		found = true
	}
	if err := rows.Err(); err != nil {
		return res, false, err
	}
	if !found {
		return res, false, nil
	}
	if inserted {
		// What the statement wrote.
		return spent.ClaimAnswer{Inserted: true, Record: op.Record}, true, nil
	}
	if res, err = sc.limited(resultLen, op.ResultLimit); err != nil {
		return res, false, err
	}
	if spent.FreeAt(&res.Record, op.Now, op.Retake) {
		return res, false, nil
	}
	return res, true, nil
}

// ClaimBatch implements [spent.Store]. The claims go to the server in one
// pipeline, ending in a single Sync, so they run as one implicit transaction
// in one round trip and share one commit (one WAL flush). The pipeline
// starts with one statement that takes the advisory locks of all the keys,
// in ascending order, so that concurrent batches cannot deadlock; then the
// claims run in key order (ops on one key keep their order).
//
// A claim that found its key's row gone when it would replace it (see
// Claim) is settled without breaking the order: a later op of the batch on
// the same key saw the key as the batch left it, and answers for both; if
// there is none, it is settled after the commit as Claim settles it.
func (s *Store) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	if len(ops) == 0 {
		return []spent.ClaimAnswer{}, nil
	}
	args := make([][]any, len(ops))
	for i := range ops {
		a, err := claimArgs(&ops[i])
		if err != nil {
			return nil, fmt.Errorf("postgres: claim batch: ops[%d]: %w", i, err)
		}
		args[i] = a
	}
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return bytes.Compare(ops[order[a]].Record.Hash[:], ops[order[b]].Record.Hash[:]) < 0
	})
	locks := make([]int64, 0, len(ops))
	for _, i := range order {
		locks = append(locks, lockID(ops[i].Record.Hash))
	}
	slices.Sort(locks)
	locks = slices.Compact(locks)
	exps := func() []int64 {
		e := make([]int64, len(ops))
		for i := range args {
			e[i] = args[i][8].(int64)
		}
		return e
	}
	res := make([]spent.ClaimAnswer, len(ops))
	settled := make([]bool, len(ops))
	err := s.do(ctx, "claim batch", func(ctx context.Context) error {
		return s.withPartitions(ctx, exps, func() error {
			b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(ops)+1)}
			b.Queue(s.q.lockKeys, locks)
			for _, i := range order {
				b.Queue(s.q.claim, args[i]...)
			}
			br := s.pool.SendBatch(ctx, b)
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
			for _, i := range order {
				rows, err := br.Query()
				if err != nil {
					br.Close()
					return err
				}
				if res[i], settled[i], err = claimRows(rows, &ops[i]); err != nil {
					br.Close()
					return err
				}
			}
			// Close reads the end of the implicit transaction: only then is
			// the batch committed (and its commit flushed).
			return br.Close()
		})
	})
	if err != nil {
		return nil, err
	}
	for k, i := range order {
		if settled[i] {
			continue
		}
		if k+1 < len(order) {
			if j := order[k+1]; ops[j].Record.Hash == ops[i].Record.Hash && settled[j] && !res[j].Inserted &&
				!spent.FreeAt(&res[j].Record, ops[i].Now, ops[i].Retake) {
				if r, ok := shareAnswer(res[j], ops[i].ResultLimit); ok {
					res[i] = r
					continue
				}
			}
		}
		r, err := s.Claim(ctx, ops[i])
		if err != nil {
			return nil, fmt.Errorf("postgres: claim batch: ops[%d] after the batch: %w", i, err)
		}
		res[i] = r
	}
	return res, nil
}

// Complete implements [spent.Store] in one statement, plus a read when
// that statement saw an older version of the row.
func (s *Store) Complete(ctx context.Context, key spent.Hash, seq spent.Seq, result []byte, now time.Time) (spent.Record, error) {
	n, err := nanos(now)
	if err != nil {
		return spent.Record{}, fmt.Errorf("postgres: complete: now: %w", err)
	}
	var rec spent.Record
	e := spent.Ending{Seq: seq, Result: result}
	err = s.do(ctx, "complete", func(ctx context.Context) error {
		for range maxRereads {
			rows, err := s.pool.Query(ctx, s.q.complete, key[:], result, n, int64(seq.Node), int64(seq.Counter), s.ends)
			if err != nil {
				return err
			}
			var updated bool
			var sc scanRow
			found, err := scanOne(rows, append([]any{&updated}, sc.dest()...)...)
			if err != nil {
				return err
			}
			if found {
				if rec, err = sc.record(); err != nil {
					return err
				}
			}
			if updated {
				return nil
			}
			// The statement returns the row only when it is live at now.
			done, err := spent.RuleEnd(row(found, &rec), now, e)
			if done || err != nil {
				return err
			}
			// The snapshot showed our pending record, yet the update found
			// nothing to change: the row changed since. Read it again.
			rec2, found2, err := s.getAny(ctx, key)
			if err != nil {
				return err
			}
			rec = rec2
			if done, err := spent.RuleEnd(row(found2, &rec), now, e); done || err != nil {
				return err
			}
		}
		return ErrUnsettled
	})
	if err != nil {
		return spent.Record{}, err
	}
	return rec, nil
}

// row returns rec when a statement found the row, else nil: the record
// [spent.RuleEnd] rules on. When a statement that changed nothing found a
// row the ruling lets the ending go ahead on (done false, no error), that
// row was the statement's snapshot of the pending record it would have
// changed: the row has changed since, and must be read again.
func row(found bool, rec *spent.Record) *spent.Record {
	if !found {
		return nil
	}
	return rec
}

// Release implements [spent.Store] in one statement, plus a read when that
// statement saw an older version of the row.
func (s *Store) Release(ctx context.Context, key spent.Hash, seq spent.Seq, now time.Time) error {
	n, err := nanos(now)
	if err != nil {
		return fmt.Errorf("postgres: release: now: %w", err)
	}
	e := spent.Ending{Seq: seq, Release: true}
	return s.do(ctx, "release", func(ctx context.Context) error {
		for range maxRereads {
			rows, err := s.pool.Query(ctx, s.q.release, key[:], n, int64(seq.Node), int64(seq.Counter), s.ends)
			if err != nil {
				return err
			}
			var deleted bool
			var state int16
			var node, ctr int64
			found, err := scanOne(rows, &deleted, &state, &node, &ctr)
			if err != nil || deleted {
				return err
			}
			// The statement returns the state and seq of the row only, and
			// only when the row is live at now: its ExpiresAt, which
			// RuleEnd reads too, is set to an instant after now to say so.
			rec := spent.Record{State: spent.State(state), Seq: spent.Seq{Node: uint32(node), Counter: uint64(ctr)},
				ExpiresAt: now.Add(time.Nanosecond)}
			if _, err := spent.RuleEnd(row(found, &rec), now, e); err != nil {
				return err
			}
			rec, found, err = s.getAny(ctx, key)
			if err != nil {
				return err
			}
			if _, err := spent.RuleEnd(row(found, &rec), now, e); err != nil {
				return err
			}
		}
		return ErrUnsettled
	})
}

// Get implements [spent.Store]. With synchronous_commit on, a row other
// sessions can see has had its commit flushed, so Get never reports a
// record that a crash could take back.
func (s *Store) Get(ctx context.Context, key spent.Hash, now time.Time) (spent.Record, error) {
	n, err := nanos(now)
	if err != nil {
		return spent.Record{}, fmt.Errorf("postgres: get: now: %w", err)
	}
	var rec spent.Record
	err = s.do(ctx, "get", func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.q.get, key[:], n)
		if err != nil {
			return err
		}
		var sc scanRow
		found, err := scanOne(rows, sc.dest()...)
		if err != nil {
			return err
		}
		if !found {
			return spent.ErrNotFound
		}
		rec, err = sc.record()
		return err
	})
	return rec, err
}

// shareAnswer returns the answer r (of another op on the same key) for an
// op with ResultLimit limit, or false when r left out a result that this op
// may receive.
func shareAnswer(r spent.ClaimAnswer, limit int) (spent.ClaimAnswer, bool) {
	if r.ResultOmitted {
		return spent.ClaimAnswer{Record: r.Record, ResultOmitted: true, ResultLen: r.ResultLen},
			limit > 0 && r.ResultLen > limit
	}
	return spent.LimitResult(spent.ClaimAnswer{Record: r.Record}, limit), true
}

// getAnyLimit reads the row of key, live or not, in a statement of its
// own, leaving out a result longer than limit when limit is positive.
func (s *Store) getAnyLimit(ctx context.Context, key spent.Hash, limit int) (spent.ClaimAnswer, bool, error) {
	rows, err := s.pool.Query(ctx, s.q.getAnyLimit, key[:], int64(max(0, limit)))
	if err != nil {
		return spent.ClaimAnswer{}, false, err
	}
	var sc scanRow
	var n *int64
	found, err := scanOne(rows, append(sc.dest(), &n)...)
	if err != nil || !found {
		return spent.ClaimAnswer{}, false, err
	}
	res, err := sc.limited(n, limit)
	return res, err == nil, err
}

// getAny reads the row of key, live or not, in a statement of its own.
func (s *Store) getAny(ctx context.Context, key spent.Hash) (spent.Record, bool, error) {
	rows, err := s.pool.Query(ctx, s.q.getAny, key[:])
	if err != nil {
		return spent.Record{}, false, err
	}
	var sc scanRow
	found, err := scanOne(rows, sc.dest()...)
	if err != nil || !found {
		return spent.Record{}, false, err
	}
	rec, err := sc.record()
	return rec, err == nil, err
}

// ListPending implements [spent.Store] with a walk of a partial index of
// pending records in lease order.
func (s *Store) ListPending(ctx context.Context, namespace string, leaseBefore time.Time, limit int) ([]spent.Record, error) {
	out := []spent.Record{}
	if limit <= 0 {
		return out, nil
	}
	n, err := nanos(leaseBefore)
	if err != nil {
		return nil, fmt.Errorf("postgres: list pending: %w", err)
	}
	err = s.do(ctx, "list pending", func(ctx context.Context) error {
		out = out[:0]
		var rows pgx.Rows
		var err error
		if namespace == "" {
			rows, err = s.pool.Query(ctx, s.q.listPendingAll, n, limit)
		} else {
			rows, err = s.pool.Query(ctx, s.q.listPending, []byte(namespace), n, limit)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		var sc scanRow
		dest := sc.dest()
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			r, err := sc.record()
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteExpired implements [spent.Store]. It first drops, oldest first,
// the partitions of records whose whole period ended by now (see
// partition.go): each is detached, counted and dropped at a cost that does
// not grow with its rows but for the count, and the rows it held count as
// removed, so a call may return more than limit when a partition held more.
// What is left of limit then goes to one statement that walks the expiry
// indexes of the records left (those of the current period) and then of
// counters, deleting rows. It also makes the partitions of the current and
// next periods when missing.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	n, err := nanos(now)
	if err != nil {
		return 0, fmt.Errorf("postgres: delete expired: %w", err)
	}
	if s.closed.Load() {
		return 0, fmt.Errorf("postgres: delete expired: %w", spent.ErrClosed)
	}
	dropped, err := s.dropEndedPartitions(ctx, n, limit)
	if err != nil {
		return dropped, fmt.Errorf("postgres: delete expired: dropping partitions: %w", err)
	}
	// Best effort: a claim makes a missing partition itself.
	if err := s.partitionsAhead(ctx, n); err != nil && ctx.Err() == nil {
		s.log.Warn("postgres: could not make partitions ahead; claims will make them", "schema", s.opts.Schema, "error", err)
	}
	if dropped >= limit {
		return dropped, nil
	}
	var removed int64
	err = s.do(ctx, "delete expired", func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.q.deleteExpired, n, int64(limit-dropped)).Scan(&removed)
	})
	return dropped + int(removed), err
}

// ReserveSeq implements [spent.Store] in one statement.
func (s *Store) ReserveSeq(ctx context.Context, node uint32, n uint64) (uint64, error) {
	if n > math.MaxInt64 {
		return 0, fmt.Errorf("postgres: reserve seq: block of %d: at most %d", n, int64(math.MaxInt64))
	}
	var first int64
	err := s.do(ctx, "reserve seq", func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.q.reserveSeq, int64(node), int64(n)).Scan(&first)
	})
	if err != nil {
		return 0, err
	}
	return uint64(first), nil
}

// Count implements [spent.Store] in one statement, plus a read when the
// counter is at its limit but was not in the statement's snapshot.
func (s *Store) Count(ctx context.Context, op spent.CountOp) (spent.CountAnswer, error) {
	now, err := nanos(op.Now)
	if err != nil {
		return spent.CountAnswer{}, fmt.Errorf("postgres: count: now: %w", err)
	}
	exp, err := nanos(op.ExpiresAt)
	if err != nil {
		return spent.CountAnswer{}, fmt.Errorf("postgres: count: expires at: %w", err)
	}
	limit := int64(min(op.Limit, math.MaxInt64))
	var res spent.CountAnswer
	err = s.do(ctx, "count", func(ctx context.Context) error {
		for range maxRereads {
			rows, err := s.pool.Query(ctx, s.q.count, op.Key[:], exp, limit, now)
			if err != nil {
				return err
			}
			var added bool
			var value, until int64
			found, err := scanOne(rows, &added, &value, &until)
			if err != nil {
				return err
			}
			if added {
				res = spent.CountAnswer{Value: uint64(value), Added: true, ExpiresAt: fromNanos(until)}
				return nil
			}
			if judgeCount(found, value, until, limit, now, exp, &res) {
				return nil
			}
			err = s.pool.QueryRow(ctx, s.q.getCounter, op.Key[:]).Scan(&value, &until)
			found = err == nil
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if judgeCount(found, value, until, limit, now, exp, &res) {
				return nil
			}
		}
		return ErrUnsettled
	})
	return res, err
}

// judgeCount tells what a Count that added nothing returns, given the
// counter's row (if found); false when the row does not explain why
// nothing was added (it changed since): it must be read again.
func judgeCount(found bool, value, until, limit, now, exp int64, res *spent.CountAnswer) bool {
	live := found && until > now
	switch {
	case live && value >= limit:
		*res = spent.CountAnswer{Value: uint64(value), ExpiresAt: fromNanos(until)}
		return true
	case !live && limit == 0:
		*res = spent.CountAnswer{ExpiresAt: fromNanos(exp)}
		return true
	}
	return false
}

// scanOne reads at most one row into dest and reports whether there was
// one.
func scanOne(rows pgx.Rows, dest ...any) (bool, error) {
	defer rows.Close()
	found := false
	for rows.Next() {
		if found {
			return true, fmt.Errorf("%w: two rows for one key", ErrCorrupt)
		}
		if err := rows.Scan(dest...); err != nil {
			return false, err
		}
		found = true
	}
	return found, rows.Err()
}
