// Package pebble is the embedded durable store of spent, the default: a
// [spent.Store] kept in a local directory by the Pebble storage engine
// (github.com/cockroachdb/pebble/v2), for a ledger served by one process.
//
// In the common case, open it with [Open] and [DefaultOptions], hand it to
// [spent.NewLedger], and Close it when the process stops:
//
//	store, err := pebble.Open("/var/lib/spent", pebble.DefaultOptions())
//	if err != nil { ... }
//	defer store.Close()
//	ledger, err := spent.NewLedger(ctx, store, cfg)
//
// [Store.Stats] reports what the store does: rounds, claims, syncs, and the
// size of its existence filter.
//
// # How it works
//
// Every call is queued for a single decision goroutine, which decides the
// queued calls in rounds: each call sees the database with every earlier
// round applied, plus the earlier calls of its own round, so first claims
// are atomic without locks. A round's writes form one batch, applied to the
// memtable at once and synced to the write-ahead log (WAL) as one group
// commit; a waiter goroutine answers the round's callers once that sync is
// done, while the next round is already being decided. Under load a round
// holds every call that arrived during the previous sync, so each fsync
// answers many callers. A round that writes one key several times puts only
// the last write in its batch. engine.go numbers the invariants this engine
// keeps; each kind of call is decided in a file of its own (claim.go,
// end.go, ...).
//
// A fresh Early claim of a new key ([spent.ClaimOp].Early) is answered at
// once and held in memory, not written: its Complete writes the complete
// record (one write where a claim and its completion made two), its Release
// forgets it, and any other call that looks at it first writes it and waits
// for that write's sync, so that nothing it answers can be lost.
//
// The WAL is zero-filled ahead of pebble's writes (see prefill.go), so that
// a round's fdatasync overwrites blocks already written and need not commit
// the file's growth to the file system's journal, which on ext4 makes it
// slower (1.3 to 2 times, measured: see BENCHMARKS.md).
//
// An in-memory existence filter, a cuckoo filter of 16-bit fingerprints of
// the stored keys (filter.go), answers "certainly absent" for a fresh key,
// so that first claims, the common case, never read from disk; it calls an
// absent key "maybe present" about once in 8,000 lookups, which costs one
// read. It is saved to a file beside pebble's (SPENT-FILTER) now and then
// without stopping the decision goroutine, and at Close; every round also
// journals the fingerprints it inserts, in its own batch, so that Open
// loads the last save and the journal since, after a clean stop or a
// crash alike, and reads no record key (filterfile.go). Open loads a file
// only if it is the store's own latest save: each save carries a random
// save id, which the store records before the file is written and again
// in the batch that deletes the journal the file covers. A filter that
// fills up is replaced by a larger one built from a snapshot of the record
// keys in the background (filterbuild.go).
//
// Three indexes in the same keyspace keep the maintenance cheap: records in
// expiry order, which [Store.DeleteExpired] walks from its start (so a sweep
// costs what it removes, at any size), pending records in lease order,
// which [Store.ListPending] walks, and records by seq (node, counter), which
// [Store.ListSeq] walks (seqindex.go). Seq reservations live in a meta key.
// Records are encoded in a compact binary form with a version byte.
//
// # Guarantees
//
//   - Durable before reply: Claim, ClaimBatch, Complete, Release and
//     ReserveSeq return only after their writes are in a synced WAL
//     (fdatasync), so they survive a crash of the process or of the machine.
//     The one exception is asked for: a fresh Early claim
//     ([spent.ClaimOp].Early) is answered when decided, and its caller
//     waits for a later write of its own (its Complete) before anything
//     leaves the process; a crash before then forgets the claim.
//     Get and ListPending answer only after the sync covering every write
//     they could have seen, so they never report a record that a crash could
//     take back.
//   - Atomic first claim: of any number of concurrent claims of one live key,
//     exactly one is inserted, in one process.
//   - Ambiguous only when the caller gives up: a caller whose context ends
//     while it waits gets ctx.Err(), and the write may have happened (the
//     ledger reads the key back); a context that ended before its call was
//     decided writes nothing. After Close, calls fail with [spent.ErrClosed];
//     calls queued before Close are still answered.
//   - Fail closed, then recover: if pebble fails to apply or sync a round,
//     that call and every later one fail with [ErrFailed]; the store never
//     answers from state that may not be durable. It then reopens pebble by
//     itself from the files on disk (waiting, when the disk is full, until
//     there is room to replay the WAL), and serves again once a synced probe
//     write succeeds, without a restart. Records held in memory for Early
//     claims are forgotten, as a crash would forget them.
//   - A damaged store is refused, never served: the store keeps a witness
//     beside pebble's files (SPENT-WITNESS) recording how far its MANIFEST
//     was synced and the newest round of writes whose sync returned. Open
//     refuses with [ErrDamaged], naming the file, a MANIFEST that cannot be
//     read that far and a store whose newest round is older than the
//     witness's (a damaged WAL whose tail pebble took for a torn write), so
//     that no acknowledged key is answered fresh. [Options].AcceptDamage opens
//     such a store anyway, for an operator who decided to.
//   - A saved filter is trusted only as the store's own: Open loads
//     SPENT-FILTER only when its save id is the one the store recorded
//     with its journal floor, or that of the latest save begun (whose
//     floor move a crash cut short), and when its checksum, version, store id and round agree with the
//     store and a sample of 4,096 stored keys is all in it. A file from
//     another store, or from a copy of the data directory (which shares
//     the store's history and ids up to the copy), or an earlier save put
//     back, is refused and the filter rebuilt from the record keys, so no
//     file can make an acknowledged key, or the fence's canary (package
//     node reads it back through the same lookup), look absent.
//   - Expiry by the ledger's clock: every read treats a record with
//     ExpiresAt <= now as absent, whether or not a sweep has removed it yet.
//   - Reads after a restart are durable too: Open replays the WAL and
//     flushes what it replayed to synced tables before it returns, so a
//     record read after a restart cannot vanish in a second crash.
//
// # Caveats
//
//   - Damage after a power cut: the witness's round number is written after
//     every round but synced once a second, so a power cut (not a killed
//     process, which keeps it) can take back its last second; a WAL damaged
//     in those last writes as well would then pass as a torn tail. A torn
//     tail itself loses only writes whose sync never returned, so nothing
//     acknowledged.
//   - A failed MANIFEST write is fatal to pebble, which stops the process
//     (fail closed); a supervisor restarts it, and Open checks the store.
//   - One process only, no high availability: the directory is locked by the
//     process that opened it, and the store lives and dies with one machine's
//     disk. Never restore it from a backup (see invariant 7 of the design:
//     a store that goes back in time re-validates spent keys).
//   - Filter memory: 2 bytes a lane, kept between 55% and 85% full, so 2.4
//     to 3.6 bytes per stored record (100 million records: about 360 MB at
//     most), plus, while a larger one is built, both, and 11 to 21 bytes
//     for each key the full one takes past 95% (its stash) until the
//     larger one replaces it. Records that expired
//     but have not been swept still count; the filter does not shrink after
//     a mass sweep. Set [Options.ExpectedRecords] to make it once, up front.
//   - Start-up cost: Open reads the saved filter (about 3.6 bytes a record)
//     and the journal since the last save (at most an eighth of the records,
//     or a million, while saves succeed), and checks a sample of 4,096
//     stored keys against it; the log reports the progress of a long load.
//     When there is no file it can trust (none; damaged; of another
//     file version, as the first start after an upgrade that changes the
//     version finds it; not the store's own latest save; older than the
//     journal; missing a sampled key; or any file, when the store is opened
//     with its damage accepted), or the file is too small for the journal
//     since (its keys and the journal's would fill it past 95%: a filter
//     saved while the store was small, then more claims than it holds and
//     a crash before the next save), Open returns at once and the
//     filter is rebuilt from the record keys in the background, 0.5 to 0.8
//     µs per record on a 2-core machine; until then every claim reads
//     pebble, slower but never wrong ([Stats].FilterBuilding, and the log
//     reports its progress).
//   - [Store.Purge] (epoch retirement) reads every record of the store, on
//     an iterator beside the decision goroutine: claims go on meanwhile.
//   - Throughput is bounded by one decision goroutine and by the disk's
//     fsync latency; see BENCHMARKS.md for figures and the command that
//     produced them.
package pebble
