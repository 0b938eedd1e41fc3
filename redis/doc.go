// Package redis is a [spent.Store] kept in Redis: one server, or a Redis
// Cluster, shared by any number of spent servers. It uses
// github.com/redis/go-redis/v9.
//
// In the common case, parse a DSN with [ParseURL], open the store with
// [Open], hand it to [spent.NewLedger], and Close it when the process stops:
//
//	opts, err := redis.ParseURL("redis://127.0.0.1:6379")
//	if err != nil { ... }
//	store, err := redis.Open(ctx, opts)
//	if err != nil { ... } // also when the server is not durable: see below
//	defer store.Close()
//	ledger, err := spent.NewLedger(ctx, store, cfg)
//
// The server must run with appendonly yes and appendfsync always (and the
// default no-appendfsync-on-rewrite no, and no eviction: maxmemory-policy
// noeviction, or no maxmemory). Open reads these
// settings on every primary and refuses a server without them with
// [ErrNotDurable], saying what to set, unless [Options.AllowNonDurable] is
// set; it then logs what a crash can lose.
//
// # How it works
//
// Every operation is one atomic step on one server. A one-step claim of a
// key with no stored record, the common case, is a single SET key record NX
// GET PXAT expiry: it writes the record if the key is absent and returns the
// stored record otherwise. Everything else is one Lua script (EVALSHA, with
// EVAL when a server lost its script cache), which Redis runs atomically:
// the claim script reads the key, judges the record found by the ledger's
// now (expired, or a pending record whose lease may be retaken), and writes
// the new record with SET ... PXAT in the same step; complete, release and
// count are a script each. A record is one string value in a compact binary
// form whose fixed header the scripts read. Redis forgets each record at its
// expiry on its own (PXAT, rounded up to the millisecond), so
// [Store.DeleteExpired] removes nothing; until then, every read judges
// expiry by the ledger's clock, to the nanosecond.
//
// Keys are the hex of the record hashes, under a prefix ([Options.Prefix])
// and a hash tag derived from the hash's first byte: 256 tags, chosen to sit
// at evenly spaced cluster slots, so records spread evenly over the
// primaries of a cluster however its slot range is split. Each tag has its
// own pending index (a sorted set by lease), which the claim, complete and
// release scripts of that tag keep, so every script touches one slot.
// [Store.ListPending] walks the 256 indexes in one pipeline and merges them.
// Each tag also keeps, per node, an index by seq (a sorted set by counter),
// written by the claim scripts; [Store.ListSeq] asks the 256 of a node and
// merges them (seq.go).
// [Store.ClaimBatch] sends its calls in one pipeline (in a cluster, one
// per primary, in parallel). The single calls of concurrent callers are
// autopipelined ([Options.AutoPipeline]): sent together on one connection
// per server, so that one write, one read and one fsync of the server
// answer many of them. Seq reservations are INCRBY on a counter per node.
//
// # Guarantees
//
//   - Durable before reply, on the primary: with appendfsync always, Redis
//     writes and fsyncs its append-only file before it sends any reply of
//     the same event loop, so a claim answered (and a record read, by Get
//     or by a claim that finds it) is in the file and survives kill -9 of
//     redis-server and a power loss.
//   - Atomic first claim: each command or script runs alone on its server;
//     of any number of concurrent claims of one live key, on any number of
//     spent servers, exactly one is inserted.
//   - No silent resends: go-redis is told never to resend a write by itself
//     after a network error (it may still follow MOVED and ASK, which mean
//     the command did not run). A write whose reply is lost returns an
//     error and its outcome is unknown; the ledger reads the key back. A
//     claim run twice anyway recognises its own seq and reports itself
//     inserted.
//   - Fail closed: a value the store did not write (another program under
//     the same prefix) is an error wrapping [ErrCorrupt], never a free key.
//   - Expiry by the ledger's clock, forgetting by the engine's: reads treat
//     a record with ExpiresAt <= now as absent; Redis deletes it once its
//     own clock passes ExpiresAt.
//
// # Caveats
//
//   - Failover loses acknowledged claims. Replication in Redis (Sentinel or
//     Cluster) is asynchronous: a primary that dies before its replicas got a
//     claim takes the claim with it, and the promoted replica lets the key
//     be claimed again. [Options.WaitReplicas] makes every write wait
//     (WAIT) for that many replicas, which shrinks the window but does not
//     close it: WAIT is no consensus, a replica acknowledges what it
//     received, not what it fsynced, and a write whose WAIT fell short is
//     still on the primary (an error wrapping [ErrNotReplicated], outcome
//     unknown; the ledger's read-back may then find it and answer fresh).
//     Use the etcd store, or PostgreSQL with a synchronous standby, when a
//     claim must survive losing a machine.
//   - Settings are checked once, at Open, on the primaries of that moment.
//     Configure every node (replicas too) the same way, and do not change
//     appendfsync at run time.
//   - The clocks of the spent servers and of Redis must agree to well
//     within the shortest retention: a record whose ExpiresAt is already
//     past on Redis's clock is forgotten at once.
//   - The pending index keeps an entry for a pending record that Redis
//     forgot at its expiry until [Store.DeleteExpired] (spent serve's
//     sweeper, 128 entries per hash tag per call) or [Store.ListPending]
//     trims it.
//   - Scripts block the server while they run: a claim script takes a few
//     microseconds; ListPending's scan is bounded by the pending records
//     whose lease has run out. Throughput is bounded by one Redis thread
//     per primary and by the disk's fsync latency; see BENCHMARKS.md.
//   - [Store.Purge] (epoch retirement) SCANs every key of every primary,
//     other prefixes' and types' included, and GETs each record key: it
//     costs in proportion to the whole database, not to what it removes.
//   - Resharding a cluster while it serves can fail calls whose keys are
//     being moved (TRYAGAIN); they fail closed, and the ledger retries
//     nothing by itself.
//   - Redis 7.0 or later is required (SET with NX and GET together). Sentinel
//     is not supported: give the primary's address, or use a cluster.
package redis
