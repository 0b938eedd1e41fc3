// Package etcd is the spent store that survives losing a machine: a
// [spent.Store] kept in an etcd cluster (go.etcd.io/etcd/client/v3), which
// any number of spent servers share.
//
// In the common case, parse a DSN with [ParseURL], [Open] the store, hand it
// to [spent.NewLedger], and Close it when the process stops:
//
//	opts, err := etcd.ParseURL("etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/spent")
//	if err != nil { ... }
//	store, err := etcd.Open(ctx, opts)
//	if err != nil { ... }
//	defer store.Close()
//	ledger, err := spent.NewLedger(ctx, store, cfg)
//
// List every member in the DSN: the client fails over between them.
//
// # How it works
//
// Every key lives under Options.Prefix: records under r/ (keyed by the hex
// of the key's hash), an index of pending records under p/ (by namespace,
// then lease end, then seq), an index by seq under q/ (by node, then
// counter), counters under c/, each node's last reserved seq under s/, and
// the lease of each expiry bucket under l/. Records are
// encoded in a compact binary form with a version byte; m/format holds the
// layout's version, checked by Open.
//
// A claim is one etcd transaction: If the record's key was never created,
// Then put the record (and, for a pending record, its index entry), Else get
// the stored record. etcd answers after the Raft commit, so the answer is on
// the fsynced WAL of a majority of members. etcd compares cannot look inside
// a value, so when the stored record is free at the claim's Now (it expired
// by the ledger's clock, or it is pending past its lease and the namespace
// retakes), a second transaction replaces it on condition that its
// ModRevision is still the one just read; a writer that lost that race reads
// the winner's record and answers from it. Complete, Release, Count and
// ReserveSeq work the same way: read, then write If the ModRevision is
// unchanged, retried while other writers win. Stores judge expiry and leases
// only by the Now the ledger passes, never by a server's clock.
//
// ClaimBatch sends, per round, one transaction holding one nested
// transaction (the claim's If/Then/Else) per key, up to MaxTxnOps-3 keys and
// MaxTxnBytes of records per transaction, several transactions at once; a key
// that appears again in the batch goes into a later round, or is answered
// from the record the earlier op left, so each op sees the ones before it.
//
// Expiry belongs to etcd: records are attached to leases, one lease per
// time bucket of Options.LeaseBucket (1 minute by default), never one per
// key. A record goes to the lease of the first bucket that ends at or after
// its ExpiresAt; the lease is granted with a TTL that runs to that end on
// the real clock, so etcd deletes the record no earlier than ExpiresAt, and
// in the normal case less than a bucket and a second or two later. The
// lease's ID is published under l/ (attached to the lease itself), so every
// server sharing the prefix uses the same lease for a bucket. Granted leases
// are cached; a write that etcd refuses because its lease is gone (expired
// or revoked) drops it from the cache and is retried with a new one, never
// answered without being written. Reads treat a record whose ExpiresAt has
// passed at the ledger's now as absent, whether etcd has deleted it yet or
// not. [Store.DeleteExpired] therefore removes nothing and returns 0.
//
// [Store.ListPending] for one namespace reads that namespace's pending index
// in key order (which is lease order) up to leaseBefore, in pages of 256
// keys, then reads the records they name in transactions of up to MaxTxnOps
// gets. It costs in proportion to the index entries it reads (the
// namespace's pending records whose lease ran out by leaseBefore), not to
// the store's size. For all namespaces it first finds the namespaces that
// have pending records, one one-key read each, and merges their lists.
//
// # Guarantees
//
//   - Durable before reply: every write (Claim, ClaimBatch, Complete,
//     Release, Count, ReserveSeq) returns only after etcd committed it
//     through Raft: it is on the fsynced WAL of a majority of members, and
//     survives the loss of any minority of them, a kill -9 or a power loss
//     of every member at once included. Reads are linearizable: etcd answers
//     them only with committed data.
//   - Survives failover while a majority lives: when the leader dies, the
//     others elect a new one within a few seconds (etcd's election timeout,
//     1s by default, plus the vote), and every acknowledged claim is still
//     there. This package's tests kill the leader with SIGKILL twice under
//     load and check exactly that, with a linearizability check
//     (porcupine) of the history.
//   - Atomic first claim: of any number of concurrent claims of one live
//     key, through any number of stores and servers, exactly one is
//     inserted: etcd serializes the transactions, and each inserts only If
//     the key is still as it was read.
//   - Fail closed (invariant 5 in docs/concepts.md): a request etcd does
//     not commit is an error, never an insert; an error (a leader change
//     mid-request, a timeout) leaves the outcome unknown, and the ledger
//     reads the key back to settle it (invariant 8).
//   - Start-up check: Open asks every endpoint for its status at once and
//     refuses to run (ErrUnhealthy) unless a majority answer within
//     DialTimeout, they agree on a leader, and none reports an alarm
//     (NOSPACE, CORRUPT); the endpoints that do not answer are logged. It
//     also refuses a prefix written in another layout (ErrCorrupt).
//
// # Caveats
//
//   - Durability depends on the members' settings, which a client cannot
//     read: a member started with --unsafe-no-fsync loses acknowledged
//     claims in a power loss. Options.AllowNonDurable is therefore accepted
//     and has no effect; Open logs that when it is set.
//   - etcd keeps every revision until it is compacted, so the database
//     grows with every claim, completion and expiry until the quota
//     (--quota-backend-bytes, 2 GiB by default) raises NOSPACE and every
//     write fails (closed). Run etcd with --auto-compaction-retention (say
//     1h) and defragment from time to time. The store never reads old
//     revisions.
//   - A leader change restarts every lease's TTL unless the members run
//     with --feature-gates=LeaseCheckpoint=true,LeaseCheckpointPersist=true,
//     so records can outlive their bucket by up to their whole TTL after
//     each election: kept longer, never forgotten early. With checkpoints
//     the extra time is at most the checkpoint interval (5 minutes).
//   - When a bucket's lease expires, etcd deletes all its records in one
//     Raft entry. At high claim rates, prefer shorter buckets (a bucket
//     holds rate × LeaseBucket records; each bucket is one live lease).
//   - etcd forgets by the real clock of the process that wrote a record: a
//     ledger whose clock runs behind sees records vanish before its own
//     ExpiresAt, by the difference (a fake clock set in the past would see
//     them vanish within seconds). Keep the servers' clocks in sync.
//   - A record that expires beyond etcd's longest lease (about 285 years)
//     gets no lease and stays until it is overwritten.
//   - One Raft group: every write goes through the leader and is fsynced on
//     a majority, so throughput is bounded by one machine and the members'
//     fsync latency (see BENCHMARKS.md), and the live records must fit in
//     the database quota (8 GiB is etcd's suggested maximum). A record
//     larger than the members' --max-request-bytes (1.5 MiB by default)
//     cannot be stored.
//   - [Store.Purge] (epoch retirement) reads every record of the prefix,
//     and each deletion is a revision too (see compaction above).
//   - Never restore the cluster from a snapshot or backup: a store that goes
//     back in time re-validates spent keys (invariant 7 in docs/concepts.md).
package etcd
