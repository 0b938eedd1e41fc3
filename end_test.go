package spent_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/storetest"
)

// TestRuleEnd checks spent.RuleEnd against storetest.EndCases, the table
// every store is checked against too.
func TestRuleEnd(t *testing.T) {
	for _, c := range storetest.EndCases {
		t.Run(c.Name, func(t *testing.T) {
			rec, now := c.Record(nsEcho, spent.Hash{1}, testEpoch)
			done, err := spent.RuleEnd(rec, now, c.Ending)
			if done != c.Done || !errors.Is(err, c.Err) { // errors.Is(err, nil) holds for a nil err only
				t.Fatalf("RuleEnd(%s, %+v): got %v, %v, want %v, %v", c.Situation, c.Ending, done, err, c.Done, c.Err)
			}
		})
	}
}

// TestRuleEndTableCoversEveryAnswer checks that the table covers what RuleEnd can
// answer: every answer appears in it.
func TestRuleEndTableCoversEveryAnswer(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range storetest.EndCases {
		seen[endAnswer(c.Done, c.Err)] = true
	}
	for _, want := range []string{"go ahead", "done", spent.ErrNotFound.Error(), spent.ErrNotPending.Error(),
		spent.ErrSeqMismatch.Error(), spent.ErrLeaseExpired.Error()} {
		if !seen[want] {
			t.Errorf("storetest.EndCases: no case answers %q, want one at least", want)
		}
	}
}

func endAnswer(done bool, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case done:
		return "done"
	}
	return "go ahead"
}

// endCode is the code the ledger answers a ruling's error with.
func endCode(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, spent.ErrNotFound):
		return spent.ENotFound
	case errors.Is(err, spent.ErrNotPending):
		return spent.ENotPending
	case errors.Is(err, spent.ErrSeqMismatch):
		return spent.ESeqMismatch
	case errors.Is(err, spent.ErrLeaseExpired):
		return spent.ELeaseExpired
	}
	return "unexpected error " + err.Error()
}

// TestLedgerEnd checks Ledger.Complete and Ledger.Release against
// storetest.EndCases, addressing the record by its hash (the ledger reads
// it and rules with RuleEnd) and by its key (with a seq and no force, the
// store rules), with the error codes the ruling's errors map to.
func TestLedgerEnd(t *testing.T) {
	ctx := context.Background()
	for _, by := range []string{"ByHash", "ByKey"} {
		t.Run(by, func(t *testing.T) {
			for _, c := range storetest.EndCases {
				if c.StoreOnly() {
					continue // the ledger reads a zero seq as "any"
				}
				t.Run(c.Name, func(t *testing.T) {
					f := mustOpen(t)
					h := f.ledger.HashKey(nsEcho, "k")
					rec, now := c.Build(t, f.store, nsEcho, h, testEpoch)
					f.clock.Set(now)
					var key string
					if by == "ByKey" {
						key, h = "k", spent.Hash{}
					}
					e := c.Ending
					var got spent.Record
					var err error
					if e.Release {
						err = f.ledger.Release(ctx, spent.Release{Namespace: nsEcho, Key: key, Hash: h, Seq: e.Seq, Force: e.Force})
					} else {
						got, err = f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: key, Hash: h, Seq: e.Seq, Result: e.Result, Force: e.Force})
					}
					what := "ending " + c.Name
					// The one rule the ledger adds: in a namespace that
					// holds expired leases (nsEcho), a release after the
					// lease needs force, even with the claim's seq.
					if e.Release && !e.Force && c.Situation == storetest.EndLeaseOut && c.Err == nil {
						wantCode(t, what, err, spent.ELeaseExpired)
						if !strings.Contains(err.Error(), "only an operator may release") {
							t.Fatalf("%s: got error %q, want one saying only an operator may release", what, err)
						}
						return
					}
					wantCode(t, what, err, endCode(c.Err))
					if errors.Is(c.Err, spent.ErrLeaseExpired) {
						msg := "lease ran out at " + rec.LeaseUntil.Format(time.RFC3339Nano) + "; an operator must resolve this outcome"
						if !strings.Contains(err.Error(), msg) {
							t.Fatalf("%s: got error %q, want one saying %q", what, err, msg)
						}
					}
					if err != nil {
						return
					}
					after, gerr := f.ledger.Get(ctx, nsEcho, "k")
					if e.Release {
						wantCode(t, "Get after the release", gerr, spent.ENotFound)
						return
					}
					wantCode(t, "Get after the completion", gerr, "")
					for _, r := range []spent.Record{got, after} {
						if r.State != spent.StateComplete || !bytes.Equal(r.Result, e.Result) || r.Seq != rec.Seq {
							t.Fatalf("%s: got %v %q seq %v, want complete %q seq %v", what, r.State, r.Result, r.Seq, e.Result, rec.Seq)
						}
					}
				})
			}
		})
	}
}

// TestLedgerEndOtherNamespace checks the one part of the ruling that stays
// in the ledger: a hash of a record of another namespace is not found in
// this one, whatever the ending.
func TestLedgerEndOtherNamespace(t *testing.T) {
	ctx := context.Background()
	for _, c := range storetest.EndCases {
		if c.Situation != storetest.EndPending && c.Situation != storetest.EndLeaseOut {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			f := mustOpen(t)
			h := f.ledger.HashKey(nsEcho, "k")
			_, now := c.Build(t, f.store, nsEcho, h, testEpoch)
			f.clock.Set(now)
			e := c.Ending
			var err error
			if e.Release {
				err = f.ledger.Release(ctx, spent.Release{Namespace: nsRefuse, Hash: h, Seq: e.Seq, Force: e.Force})
			} else {
				_, err = f.ledger.Complete(ctx, spent.Completion{Namespace: nsRefuse, Hash: h, Seq: e.Seq, Result: e.Result, Force: e.Force})
			}
			wantCode(t, "ending from another namespace", err, spent.ENotFound)
			if _, err := f.store.Get(ctx, h, now); err != nil {
				t.Fatalf("Get after the refused ending: got error %v, want the record untouched", err)
			}
		})
	}
}
