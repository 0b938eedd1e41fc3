package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// EndSituation is what a key holds when an ending ([spent.Ending]) comes
// for it. Every record of a situation was written with [EndSeq] at some
// instant at (see [EndCase.Record]).
type EndSituation int

// The situations of [EndCases].
const (
	// EndNone: the key was never claimed.
	EndNone EndSituation = iota + 1
	// EndPending: a pending record whose lease still runs.
	EndPending
	// EndLeaseOut: a pending record whose lease ran out, read at the very
	// instant it ran out; the record itself is still live.
	EndLeaseOut
	// EndComplete: a complete record holding [EndResult].
	EndComplete
	// EndExpiredPending: a pending record read at its expires_at, when it
	// is forgotten.
	EndExpiredPending
	// EndExpiredComplete: a complete record holding [EndResult], read at
	// its expires_at, when it is forgotten.
	EndExpiredComplete
)

// String names the situation.
func (s EndSituation) String() string {
	switch s {
	case EndNone:
		return "none"
	case EndPending:
		return "pending"
	case EndLeaseOut:
		return "pending, lease run out"
	case EndComplete:
		return "complete"
	case EndExpiredPending:
		return "pending, expired"
	case EndExpiredComplete:
		return "complete, expired"
	}
	return "situation(" + itoa(int(s)) + ")"
}

// The timeline and the values of [EndCases]. The stored record is written
// with EndSeq at an instant at, its lease runs until at+EndLease, and it
// expires at at+EndRetention; a complete one holds EndResult.
const (
	EndLease     = 5 * time.Second
	EndRetention = 60 * time.Second
)

// The seqs and results the cases of [EndCases] are stated in. Treat them
// as constants: the cases share their bytes.
var (
	// EndSeq is the seq the stored record was written with.
	EndSeq = spent.Seq{Node: 7, Counter: 1001}
	// EndOtherSeq is the seq of another claim of the same key.
	EndOtherSeq = spent.Seq{Node: 7, Counter: 1002}
	// EndResult is the result a complete stored record holds.
	EndResult = []byte("stored result")
	// EndOtherResult is a result other than EndResult.
	EndOtherResult = []byte("other result")
)

// EndCase is one ruling on the ending of a pending claim: what the key
// holds, the ending that comes for it, and the answer. [spent.RuleEnd]
// states the rule; every store's Complete and Release, and the ledger's,
// must give exactly this answer.
type EndCase struct {
	// Name names the case, as a subtest name.
	Name string
	// Situation is what the key holds when the ending comes.
	Situation EndSituation
	// Ending is the ending that comes.
	Ending spent.Ending
	// Done is set when the ending is a retried completion that finds its
	// own result stored: it succeeds, and nothing is written.
	Done bool
	// Err is the error of the ruling (compare with errors.Is), or nil
	// when the ending goes ahead (or, with Done, has already happened).
	Err error
}

// LedgerOnly reports whether c's ending is for any seq (AnySeq). Stores
// are always given a seq, so such a case is for [spent.RuleEnd] and the
// ledger only.
func (c *EndCase) LedgerOnly() bool { return c.Ending.AnySeq }

// StoreOnly reports whether c's ending gives the zero seq as a seq (not
// AnySeq): a store must take it for another claim's. The ledger's API reads
// a zero seq as "any", so such a case is for [spent.RuleEnd] and the stores
// only.
func (c *EndCase) StoreOnly() bool { return !c.Ending.AnySeq && c.Ending.Seq.IsZero() }

// Record returns the record key holds in namespace ns in c's situation
// when it was written at at (nil for [EndNone]), and the instant at which
// the ending is ruled on. A record returned for an expired situation is the
// one that was written: the ruling at now no longer sees it.
func (c *EndCase) Record(ns string, key spent.Hash, at time.Time) (rec *spent.Record, now time.Time) {
	r := spent.Record{
		Namespace: ns, Hash: key, FirstSeen: at, Place: "end", Fingerprint: fpA,
		State: spent.StatePending, ExpiresAt: at.Add(EndRetention), LeaseUntil: at.Add(EndLease),
		Seq: EndSeq,
	}
	if c.Situation == EndComplete || c.Situation == EndExpiredComplete {
		r.State, r.Result, r.LeaseUntil = spent.StateComplete, EndResult, time.Time{}
	}
	switch c.Situation {
	case EndNone:
		return nil, at.Add(time.Second)
	case EndPending, EndComplete:
		return &r, at.Add(time.Second)
	case EndLeaseOut:
		return &r, at.Add(EndLease)
	}
	return &r, at.Add(EndRetention)
}

// endCase builds a case.
func endCase(name string, stored EndSituation, e spent.Ending, done bool, err error) EndCase {
	return EndCase{Name: name, Situation: stored, Ending: e, Done: done, Err: err}
}

// EndCases is the table of rulings on the ending of a pending claim, the
// one [spent.RuleEnd] is tested against in the root package, and every
// store by [Run] (its cases with a seq: see [EndCase.LedgerOnly]). Treat it
// as read-only.
var EndCases = func() []EndCase {
	var (
		same      = spent.Ending{Seq: EndSeq, Result: EndResult}
		sameOther = spent.Ending{Seq: EndSeq, Result: EndOtherResult}
		other     = spent.Ending{Seq: EndOtherSeq, Result: EndResult}
		release   = spent.Ending{Seq: EndSeq, Release: true}
		relOther  = spent.Ending{Seq: EndOtherSeq, Release: true}
		noSeq     = spent.Ending{AnySeq: true, Result: EndResult}
		noSeqF    = spent.Ending{AnySeq: true, Result: EndResult, Force: true}
		relNoSeq  = spent.Ending{AnySeq: true, Release: true}
		relNoSeqF = spent.Ending{AnySeq: true, Release: true, Force: true}
		zeroSeq   = spent.Ending{Result: EndResult}
		relZero   = spent.Ending{Release: true}
	)
	return []EndCase{
		endCase("NoneComplete", EndNone, same, false, spent.ErrNotFound),
		endCase("NoneRelease", EndNone, release, false, spent.ErrNotFound),
		endCase("NoneCompleteWithoutSeq", EndNone, noSeq, false, spent.ErrNotFound),
		endCase("NoneReleaseForced", EndNone, relNoSeqF, false, spent.ErrNotFound),

		endCase("PendingComplete", EndPending, same, false, nil),
		endCase("PendingCompleteOtherSeq", EndPending, other, false, spent.ErrSeqMismatch),
		endCase("PendingRelease", EndPending, release, false, nil),
		endCase("PendingReleaseOtherSeq", EndPending, relOther, false, spent.ErrSeqMismatch),
		endCase("PendingCompleteWithoutSeq", EndPending, noSeq, false, nil),
		endCase("PendingReleaseWithoutSeq", EndPending, relNoSeq, false, nil),
		// The zero seq given as a seq is no record's: another claim's.
		endCase("PendingCompleteZeroSeq", EndPending, zeroSeq, false, spent.ErrSeqMismatch),
		endCase("PendingReleaseZeroSeq", EndPending, relZero, false, spent.ErrSeqMismatch),
		endCase("LeaseOutCompleteZeroSeq", EndLeaseOut, zeroSeq, false, spent.ErrSeqMismatch),
		endCase("LeaseOutReleaseZeroSeq", EndLeaseOut, relZero, false, spent.ErrSeqMismatch),
		endCase("CompleteZeroSeq", EndComplete, zeroSeq, false, spent.ErrNotPending),

		// The store does not judge leases when it is given the seq: the
		// holder of the claim may end it at any time while it lives.
		endCase("LeaseOutComplete", EndLeaseOut, same, false, nil),
		endCase("LeaseOutCompleteOtherSeq", EndLeaseOut, other, false, spent.ErrSeqMismatch),
		endCase("LeaseOutRelease", EndLeaseOut, release, false, nil),
		endCase("LeaseOutReleaseOtherSeq", EndLeaseOut, relOther, false, spent.ErrSeqMismatch),
		endCase("LeaseOutCompleteWithoutSeq", EndLeaseOut, noSeq, false, spent.ErrLeaseExpired),
		endCase("LeaseOutReleaseWithoutSeq", EndLeaseOut, relNoSeq, false, spent.ErrLeaseExpired),
		endCase("LeaseOutCompleteForced", EndLeaseOut, noSeqF, false, nil),
		endCase("LeaseOutReleaseForced", EndLeaseOut, relNoSeqF, false, nil),

		// A complete record is ErrNotPending whatever seq it carries,
		// unless this is a retry of its own completion.
		endCase("CompleteRetried", EndComplete, same, true, nil),
		endCase("CompleteOtherBytes", EndComplete, sameOther, false, spent.ErrNotPending),
		endCase("CompleteOtherSeq", EndComplete, other, false, spent.ErrNotPending),
		endCase("CompleteRelease", EndComplete, release, false, spent.ErrNotPending),
		endCase("CompleteReleaseOtherSeq", EndComplete, relOther, false, spent.ErrNotPending),
		endCase("CompleteWithoutSeq", EndComplete, noSeq, false, spent.ErrNotPending),
		endCase("CompleteForced", EndComplete, noSeqF, false, spent.ErrNotPending),
		endCase("CompleteReleaseForced", EndComplete, relNoSeqF, false, spent.ErrNotPending),

		endCase("ExpiredPendingComplete", EndExpiredPending, same, false, spent.ErrNotFound),
		endCase("ExpiredPendingRelease", EndExpiredPending, release, false, spent.ErrNotFound),
		endCase("ExpiredPendingCompleteForced", EndExpiredPending, noSeqF, false, spent.ErrNotFound),
		endCase("ExpiredCompleteRetried", EndExpiredComplete, same, false, spent.ErrNotFound),
		endCase("ExpiredCompleteRelease", EndExpiredComplete, release, false, spent.ErrNotFound),
	}
}()

// testEndRuling checks that the store's Complete and Release give exactly
// the answers of [EndCases], each case on a key of its own in one store,
// and that an ending that went ahead wrote what it should (and a refused
// one wrote nothing). Each situation is built with Claim (and Complete) at
// the epoch and ruled on at a later now: the store judges expiry by the
// now it is given, never by its own clock (invariant 4 in
// docs/concepts.md).
func testEndRuling(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newEnv(t, h).store
	for i, c := range EndCases {
		if c.LedgerOnly() {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			key := storeKey(500 + i)
			want, now := c.Build(t, s, nsEchoHold, key, epoch)
			var got spent.Record
			var err error
			what := "Complete"
			if c.Ending.Release {
				what = "Release"
				err = s.Release(ctx, key, c.Ending.Seq, now)
			} else {
				got, err = s.Complete(ctx, key, c.Ending.Seq, c.Ending.Result, now)
			}
			what += " (" + c.Situation.String() + ", seq " + c.Ending.Seq.String() + ")"
			if c.Err != nil {
				wantErr(t, what, err, c.Err)
				if c.Err != spent.ErrNotFound {
					// A refused ending writes nothing.
					after, err := s.Get(ctx, key, now)
					wantErr(t, "Get after the refused "+what, err, nil)
					checkRecord(t, "record after the refused "+what, after, *want)
				}
				return
			}
			wantErr(t, what, err, nil)
			after, gerr := s.Get(ctx, key, now)
			if c.Ending.Release {
				wantErr(t, "Get after "+what, gerr, spent.ErrNotFound)
				return
			}
			done := *want
			if !c.Done {
				done.State, done.Result, done.LeaseUntil = spent.StateComplete, c.Ending.Result, time.Time{}
			}
			checkRecord(t, what+" answer", got, done)
			wantErr(t, "Get after "+what, gerr, nil)
			checkRecord(t, "record after "+what, after, done)
		})
	}
}

// Build writes c's situation into s as the ledger would, for key in
// namespace ns, at at: a Claim of the pending record at at, then, for a
// complete one, its Complete at at. It returns what [EndCase.Record]
// returns, and fails the test when s does not store the record as written.
func (c *EndCase) Build(tb testing.TB, s spent.Store, ns string, key spent.Hash, at time.Time) (rec *spent.Record, now time.Time) {
	tb.Helper()
	rec, now = c.Record(ns, key, at)
	if rec == nil {
		return rec, now
	}
	p := rec.Clone()
	p.State, p.Result, p.LeaseUntil = spent.StatePending, nil, at.Add(EndLease)
	put(tb, s, p, at)
	if rec.State == spent.StateComplete {
		got, err := s.Complete(context.Background(), key, rec.Seq, rec.Result, at)
		if err != nil {
			tb.Fatalf("Complete to build the situation %s: got error %v, want none", c.Situation, err)
		}
		checkRecord(tb, "record completed to build the situation "+c.Situation.String(), got, *rec)
	}
	return rec, now
}
