package spent

import (
	"context"
	"slices"
	"time"
)

// ClaimOp asks a store to record a first claim.
type ClaimOp struct {
	// Record is written if the key is free. Its Seq is never zero.
	Record Record
	// Now is the ledger's time for this claim. A store judges expiry and leases
	// by Now, never by its own clock, so that every store agrees with the
	// ledger (and with a fake clock in tests).
	Now time.Time
	// Retake allows replacing a pending record whose lease has run out at Now.
	Retake bool
	// Early allows the store to answer an inserted pending record before it
	// is durable, and to keep it in memory only until its Complete or
	// Release (see [Claim].Early). A store may ignore it. Stores must still
	// make any other answer durable first, and must decide later claims of
	// the key against the record as usual.
	Early bool
	// ResultLimit, when positive, bounds the result bytes the answer may
	// carry: a live record found (the op did not insert) whose Result is
	// longer than ResultLimit is returned without it, with
	// ClaimAnswer.ResultOmitted set and ResultLen its length. Zero or less
	// means no limit. It changes only what is returned, never what is
	// decided or written. The ledger sets it on the ops of a batch, so that
	// one answer cannot gather many large results (see
	// [Config].MaxBatchResult).
	ResultLimit int
}

// ClaimAnswer is a store's answer to a [ClaimOp] (the ledger's answer to a
// claim is an [Answer]).
type ClaimAnswer struct {
	// Inserted is true when Record is the record just written.
	Inserted bool
	// Record is the record just written, or the live record that prevented the
	// write. Its Result is nil when ResultOmitted is set.
	Record Record
	// ResultOmitted is set when the live record's result was longer than
	// the op's ResultLimit and was left out of Record.
	ResultOmitted bool
	// ResultLen is the length of the omitted result, when ResultOmitted is
	// set; zero otherwise.
	ResultLen int
}

// LimitResult returns res with the result of its record left out, as
// [ClaimOp].ResultLimit asks, when res is not an insert, limit is positive
// and the result is longer than limit. Stores that hold the result bytes
// anyway use it; stores that can leave a long result where it is (in the
// engine, unread) should do so instead.
func LimitResult(res ClaimAnswer, limit int) ClaimAnswer {
	if res.Inserted || limit <= 0 || len(res.Record.Result) <= limit {
		return res
	}
	res.ResultLen = len(res.Record.Result)
	res.ResultOmitted = true
	res.Record.Result = nil
	return res
}

// CountOp asks a store to add one to a bounded counter (a per-client quota,
// say).
type CountOp struct {
	// Key names the counter. Counters live apart from records: a counter and
	// a record with the same Key are unrelated.
	Key Hash
	// Limit is the most the counter may hold; at Limit, Count adds nothing.
	Limit uint64
	// ExpiresAt is the expiry of a counter this op creates. A live counter
	// keeps the expiry it was created with.
	ExpiresAt time.Time
	// Now is the ledger's time for this op, as for ClaimOp.Now.
	Now time.Time
}

// CountAnswer is a store's answer to a [CountOp], and the ledger's to
// [Ledger.Count]: the counter after the op.
type CountAnswer struct {
	// Value is the counter's value after the op.
	Value uint64
	// Added is true when the op added one, false when the counter was
	// already at the limit.
	Added bool
	// ExpiresAt is when the counter is forgotten.
	ExpiresAt time.Time
}

// Store is the durable memory under a Ledger. Every method is safe for
// concurrent use. Stores never interpret policies beyond what a method's
// arguments say; they only make each operation atomic and durable.
//
// A key is free at time now when no record exists for it, when its record has
// expired (now >= ExpiresAt), or when the op allows a retake and the record is
// pending with now >= LeaseUntil.
//
// Optional capabilities are separate small interfaces ([SeqLister],
// [EndWatcher]) that a store implements beside Store and that are checked at
// run time, always with [StoreAs], never with a bare type assertion. A store
// that wraps another (a tracing store, say) implements only Store and names
// the store it wraps with a method Unwrap() Store; StoreAs looks through it,
// so that wrapping a store never takes a capability away.
type Store interface {
	// Claim atomically writes op.Record if its key is free at op.Now and
	// reports Inserted; otherwise it writes nothing and returns the live record.
	// Of any number of concurrent Claims of one key, at most one is Inserted.
	// When Claim returns without error the answer is durable: the inserted
	// record (or the record returned, whoever wrote it) survives a crash. An
	// error leaves the outcome unknown: the write may or may not have happened.
	//
	// When op.ResultLimit is positive and the live record returned holds a
	// result longer than it, the record comes without its result
	// (ResultOmitted, ResultLen): the store must not copy those bytes into
	// the answer, and should not read them out of its engine where the
	// engine allows.
	Claim(ctx context.Context, op ClaimOp) (ClaimAnswer, error)

	// ClaimBatch applies each op as Claim does, in order (an op sees the
	// records of earlier ops on the same key), and returns one result per op.
	// Each op is atomic on its own; the batch as a whole is not. Everything is
	// durable when ClaimBatch returns without error. Each op's ResultLimit
	// applies to its own result, as in Claim.
	ClaimBatch(ctx context.Context, ops []ClaimOp) ([]ClaimAnswer, error)

	// Complete atomically turns the live pending record of key, written with
	// seq, into a complete record holding result. It returns the updated
	// record, durable on return. Completing a record that is already complete
	// with the same seq and identical result bytes succeeds again (so an
	// ambiguous completion can be retried). Errors: ErrNotFound when no live
	// record exists at now, ErrNotPending when it is complete (unless this is
	// the retry just described), ErrSeqMismatch when it is pending with another
	// seq. The state is checked before the seq, so a complete record is
	// ErrNotPending whatever seq it carries.
	Complete(ctx context.Context, key Hash, seq Seq, result []byte, now time.Time) (Record, error)

	// Release atomically deletes the live pending record of key written with
	// seq, durable on return. Errors: ErrNotFound, ErrSeqMismatch,
	// ErrNotPending, as for Complete.
	Release(ctx context.Context, key Hash, seq Seq, now time.Time) error

	// Get returns the live record of key at now, or ErrNotFound. It never
	// returns a record that is not yet durable.
	Get(ctx context.Context, key Hash, now time.Time) (Record, error)

	// ListPending returns up to limit pending records of namespace whose lease
	// ran out at or before leaseBefore and that are still live at
	// leaseBefore, oldest lease first. An empty namespace lists all.
	ListPending(ctx context.Context, namespace string, leaseBefore time.Time, limit int) ([]Record, error)

	// DeleteExpired forgets up to limit records with ExpiresAt <= now and
	// returns how many it removed. It must cost time in proportion to what it
	// removes, not to what the store holds. A store that forgets a whole
	// expiry period at once (PostgreSQL drops a partition whose records have
	// all expired) may remove more than limit in one call, and says so in
	// the count: limit bounds the work of removing records one by one.
	DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error)

	// Purge forgets up to limit records of namespace, whatever their state
	// (pending or complete) and whether live or expired, with their index
	// entries, and returns how many it removed; the removals are durable on
	// return. A caller repeats it until it returns fewer than limit: a call
	// returns fewer only after it has itself looked at every record the store
	// holds. Records of other namespaces and the counters of Count are never
	// touched. A limit of zero or less removes nothing.
	//
	// Purge is an operator's tool, for epoch retirement. Stores keep no index
	// by namespace, so it may read every record of the store, at a cost in
	// proportion to all the records held, not to those it removes: each call
	// goes on from where the previous call for the same namespace stopped, so
	// that a caller's loop reads the store about once, plus once more in the
	// call that confirms nothing is left. Forgetting a record before its
	// ExpiresAt breaks the rule "forget only when harmless" unless its key
	// can no longer be presented: purge only token namespaces whose issuing
	// keys were retired. A record claimed in namespace while Purge runs may
	// remain.
	Purge(ctx context.Context, namespace string, limit int) (int, error)

	// ReserveSeq durably reserves n counters for node and returns the first;
	// the block [first, first+n) is never returned again for node, across
	// restarts.
	ReserveSeq(ctx context.Context, node uint32, n uint64) (first uint64, err error)

	// Count atomically adds one to the counter op.Key unless it already holds
	// op.Limit. A counter that does not exist, or whose ExpiresAt <= op.Now,
	// counts as zero and is created with op.ExpiresAt. Of any number of
	// concurrent Counts on one counter, at most Limit add, counting those
	// before. The answer is durable on return; an error leaves it unknown.
	// DeleteExpired forgets expired counters too (and counts them).
	Count(ctx context.Context, op CountOp) (CountAnswer, error)

	// Close releases the store. In-flight calls finish or fail with ErrClosed.
	Close() error
}

// FreeAt reports whether a key whose live record is r is free for a claim at
// now, as [Store.Claim] defines it. Stores use it so that they all agree.
func FreeAt(r *Record, now time.Time, retake bool) bool {
	if !r.LiveAt(now) {
		return true
	}
	return retake && r.LeaseExpiredAt(now)
}

// OldestLeaseFirst sorts recs by LeaseUntil, oldest first, ties by seq, and
// returns the first limit of them (none when limit <= 0): the order and the
// count [Store.ListPending] answers with. Stores that gather pending records
// from several places (shards, pages) use it so that they all agree.
func OldestLeaseFirst(recs []Record, limit int) []Record {
	slices.SortStableFunc(recs, func(a, b Record) int {
		if c := a.LeaseUntil.Compare(b.LeaseUntil); c != 0 {
			return c
		}
		switch {
		case a.Seq.Less(b.Seq):
			return -1
		case b.Seq.Less(a.Seq):
			return 1
		}
		return 0
	})
	return recs[:min(len(recs), max(limit, 0))]
}
