// Package postgres is a [spent.Store] kept in PostgreSQL (through
// github.com/jackc/pgx/v5), for several spent servers that share one
// ledger on a database they already run.
//
// In the common case, parse the DSN with [ParseURL], [Open] the store, hand
// it to [spent.NewLedger], and Close it when the process stops:
//
//	opts, err := postgres.ParseURL("postgres://spent@db.internal/ledger?sslmode=verify-full")
//	if err != nil { ... }
//	store, err := postgres.Open(ctx, opts)
//	if err != nil { ... }
//	defer store.Close()
//	ledger, err := spent.NewLedger(ctx, store, cfg)
//
// # How it works
//
// Open checks the server's durability settings on every connection it
// makes, then creates or migrates its schema ([Options.Schema], default
// "spent") from migrations embedded in the binary, in one transaction under
// an advisory lock, so that servers starting at once take turns.
//
// Records are kept in a table partitioned by range of expires_at, one
// partition per period of [Options.PartitionPeriod] (default a day, counted
// from the Unix epoch). A partitioned table cannot have a unique index on
// the key alone (its unique indexes must hold expires_at), so one row per
// key is kept by a per-key lock instead: a claim is two statements sent in
// one round trip and one implicit transaction, pg_advisory_xact_lock on
// the key's first 8 bytes, then one statement that reads the key's row in
// every partition and inserts the claim's record when there is none,
// replaces the row when it is free (expired, or pending with its lease run
// out when the claim may retake it; the row moves to the partition of its
// new expiry), or else returns it. Under READ COMMITTED the second
// statement's snapshot is taken after the lock, so it sees the commit of the
// claim before it; every write that adds a row is a claim, so concurrent
// claims of one key, whatever their expiries, are settled one after the
// other and exactly one is fresh. Complete, Release, Count and ReserveSeq
// are one statement each.
//
// A partition is made when a claim finds none for its expiry (the claim then
// runs again), under an advisory lock, with the next period's; Open and each
// sweep make the current and next periods' ahead of time. There is no
// DEFAULT partition.
//
// ClaimBatch sends its claims in one pipeline that ends in a single Sync:
// one round trip and one implicit transaction, so one commit (one WAL flush)
// for the whole batch, in which every claim sees the earlier ones. The
// pipeline starts with one statement taking the locks of all its keys in
// ascending order, so concurrent batches cannot deadlock.
//
// Expired rows are swept by [Store.DeleteExpired]: it drops whole the
// partitions whose period has ended (detach, count, drop: no row is
// deleted, nothing is left for vacuum), and deletes the expired rows of the
// current period as before: it lists up to limit keys in expiry order from
// an index on expires_at, then deletes those keys, so a sweep reads what it
// removes (a test checks the plan). A call that drops a partition counts
// its rows, and may return more than limit.
//
// Migration 0002 turns the plain records table of 0001 into the partitioned
// one at Open, in the migration's one transaction: the old table is locked
// (claims wait), the partitions its rows need are made, and the rows are
// copied; see docs/stores.md for how long that takes.
//
// Times are stored as int8 nanoseconds since the Unix epoch (timestamptz
// holds microseconds only), so the expiry boundary is exact to the
// nanosecond; the store accepts times from 1678 to 2262. Every read treats
// a row with expires_at <= now as absent, swept or not. Pending records are
// listed through partial indexes in lease order, and [Store.ListSeq] walks an
// index on (seq_node, seq_counter) of every partition (migration 3).
//
// # Guarantees
//
//   - Durable before reply: every write returns after its commit, and Open
//     refuses a server whose commits may be lost (synchronous_commit=off,
//     fsync=off) unless [Options.AllowNonDurable] is set. The values on,
//     local, remote_write and remote_apply all flush the WAL locally before a
//     commit is acknowledged. A read sees only committed rows, and a commit
//     becomes visible to other sessions only after it is flushed, so a read
//     never reports what a crash could take back.
//   - Atomic first claim, across any number of spent servers sharing the
//     schema: the per-key advisory lock orders the claims of a key.
//   - Fail closed: any error is returned as an error (the ledger answers
//     "unavailable"), never as a fresh claim.
//   - Serialization failures (SQLSTATE 40001) and deadlocks (40P01) are
//     retried, up to [Options.MaxRetries] times with jittered backoff; they
//     roll the whole statement (or batch) back. SQLSTATE 40003 (statement
//     completion unknown) is returned as [ErrOutcomeUnknown]: the write may
//     have happened, and the ledger reads the key back. This is what
//     CockroachDB and YugabyteDB, which speak this SQL, need to run the
//     store. Neither has been tested here: the tests run PostgreSQL 15 only,
//     and the partitioned records table (declarative partitioning, ATTACH
//     and DETACH PARTITION) and the per-key advisory locks are PostgreSQL's:
//     CockroachDB has neither.
//     On CockroachDB, Open skips the synchronous_commit and fsync checks
//     (its commits are replicated by Raft) and, as it has no advisory locks,
//     migrates without one, retrying when a concurrent first start wins.
//   - Crash of the server: with the settings above, every acknowledged
//     claim survives pg_ctl stop -m immediate (tested) and a power loss
//     (fsync on).
//
// # Caveats
//
//   - Failover: with a synchronous standby (synchronous_standby_names set,
//     synchronous_commit on or remote_apply) a promoted standby holds every
//     acknowledged claim. With only asynchronous standbys, a failover can
//     lose acknowledged claims; Open logs this when no synchronous standby is
//     configured. If a session waiting for its standby is cancelled, the
//     commit is already durable on the primary and becomes visible there
//     without the standby (PostgreSQL warns about this); the claim's caller
//     gets an error, not an answer.
//   - One primary: throughput is bounded by one server's WAL flushes; see
//     BENCHMARKS.md for figures and the commands that produced them.
//   - A connection that dies mid-statement leaves the outcome unknown; the
//     store returns the error, and the ledger reads the key back.
//   - The durability check reads the settings of each new session, at
//     connect time; a server reconfigured with a reload (fsync is reloadable)
//     is only noticed by connections made after it.
//   - [Store.Purge] (epoch retirement) walks the whole primary key, with a
//     heap fetch per row: no index by namespace is kept for it, since every
//     claim would pay for one.
//   - Each claim looks its key up in every partition (one index probe
//     each, and a lock on each partition and its indexes): keep the number
//     of partitions, about the longest retention over
//     [Options.PartitionPeriod], small (docs/stores.md has figures). The
//     store's sessions use generic plans (plan_cache_mode), which prune
//     partitions when they run.
//   - The per-key locks are bigint advisory locks: another application
//     using bigint advisory locks on the same database may share one with a
//     key now and then, and then only waits.
//   - Never restore the database from a backup or a snapshot that goes back
//     in time: it would re-validate spent keys (invariant 7 in docs/concepts.md).
package postgres
