package spent

import (
	"bytes"
	"errors"
	"time"
)

// ErrLeaseExpired is returned by [RuleEnd] when an ending that names no seq
// (an operator's or a client's that lost it) finds the pending record's lease
// run out and does not force: that outcome is unknown, and only an operator
// with Force may settle it. Stores never see it: they always get a seq.
var ErrLeaseExpired = errors.New("spent: lease expired")

// Ending is a request to end the pending claim of a key: to complete it with
// Result, or, with Release, to forget it.
type Ending struct {
	// Seq is the seq of the claim being ended. Stores always give one. The
	// zero Seq (the ledger only, for a caller that addresses the record by
	// its key or hash) matches the record's own seq.
	Seq Seq
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
//  3. A pending record written with another seq than e.Seq: [ErrSeqMismatch].
//  4. A pending record whose lease ran out, when e names no seq and does not
//     force: [ErrLeaseExpired].
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
		if !e.Release && !e.Seq.IsZero() && rec.Seq == e.Seq && bytes.Equal(rec.Result, e.Result) {
			return true, nil
		}
		return false, ErrNotPending
	case !e.Seq.IsZero() && rec.Seq != e.Seq:
		return false, ErrSeqMismatch
	case e.Seq.IsZero() && !e.Force && rec.LeaseExpiredAt(now):
		return false, ErrLeaseExpired
	}
	return false, nil
}
