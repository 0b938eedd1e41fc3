package spent

import (
	"bytes"
	"errors"
	"time"
)

// ErrLeaseExpired is returned by [RuleEnd] when an ending for any seq
// (Ending.AnySeq: an operator's, or a client's that lost its seq) finds the pending record's lease
// run out and does not force: that outcome is unknown, and only an operator
// with Force may settle it. Stores never see it: they are always given a
// seq.
var ErrLeaseExpired = errors.New("spent: lease expired")

// Ending is a request to end the pending claim of a key: to complete it with
// Result, or, with Release, to forget it.
type Ending struct {
	// Seq is the seq of the claim being ended. Stores always give one; no
	// record holds the zero Seq, so a zero Seq is another claim's, unless
	// AnySeq says otherwise.
	Seq Seq
	// AnySeq (the ledger only, for a caller that addresses the record by
	// its key or hash without the seq of its claim) matches the record's own
	// seq, whatever it is, in place of Seq; the lease then limits it (rule 4
	// of [RuleEnd]).
	AnySeq bool
	// Release asks to forget the record rather than complete it.
	Release bool
	// Result is the completion's result; unused by a release.
	Result []byte
	// Force lets an ending without a seq settle a record whose lease ran
	// out (an operator resolving an unknown outcome).
	Force bool
}

// RuleEnd rules on ending e against rec, the key's stored record (nil when
// the store holds none), at now. It is the one statement of the rule that
// [Store.Complete], [Store.Release], [Ledger.Complete] and [Ledger.Release]
// apply, checked in this order:
//
//  1. No record, or one no longer live at now: [ErrNotFound].
//  2. A complete record: [ErrNotPending], whatever seq it carries, unless e
//     completes it with its seq and identical result bytes. That is a
//     retried completion: done is true, and nothing is to be written.
//  3. A pending record written with another seq than e.Seq, unless e is
//     for any seq (AnySeq): [ErrSeqMismatch].
//  4. A pending record whose lease ran out, when e is for any seq and does
//     not force: [ErrLeaseExpired].
//
// Otherwise done is false and err nil: the store goes on to write the ending.
// The state is checked before the seq, so a completion that raced with a
// retake of its key reports the key as complete, not as taken by another
// claim.
//
// The table storetest.EndCases states these answers case by case; RuleEnd,
// the ledger and every store (including those whose engine must rule in its
// own language, such as the Redis scripts) are tested against it.
func RuleEnd(rec *Record, now time.Time, e Ending) (done bool, err error) {
	switch {
	case rec == nil || !rec.LiveAt(now):
		return false, ErrNotFound
	case rec.State != StatePending:
		if !e.Release && !e.AnySeq && rec.Seq == e.Seq && bytes.Equal(rec.Result, e.Result) {
			return true, nil
		}
		return false, ErrNotPending
	case !e.AnySeq && rec.Seq != e.Seq:
		return false, ErrSeqMismatch
	case e.AnySeq && !e.Force && rec.LeaseExpiredAt(now):
		return false, ErrLeaseExpired
	}
	return false, nil
}
