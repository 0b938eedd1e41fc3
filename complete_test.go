package spent_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
)

func TestCompleteRetriedAfterAmbiguousFailure(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	fresh := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "k", Fingerprint: fpA})
	wantOutcome(t, "claim", fresh, spent.Fresh)

	// The completion commits, but its answer is lost.
	lost := errors.New("connection reset")
	f.store.SetFaults(inmem.Faults{After: func(op string) error {
		if op == "complete" {
			return lost
		}
		return nil
	}})
	_, err := f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: "k", Seq: fresh.Record.Seq, Result: []byte("receipt")})
	wantCode(t, "lost Complete", err, spent.EUnavailable)
	f.store.SetFaults(inmem.Faults{})

	t.Run("SameBytesSucceed", func(t *testing.T) {
		rec, err := f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: "k", Seq: fresh.Record.Seq, Result: []byte("receipt")})
		wantCode(t, "retried Complete", err, "")
		if !bytes.Equal(rec.Result, []byte("receipt")) || rec.State != spent.StateComplete {
			t.Fatalf("retried Complete: got %q %v, want %q complete", rec.Result, rec.State, "receipt")
		}
	})
	t.Run("OtherBytesConflict", func(t *testing.T) {
		_, err := f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: "k", Seq: fresh.Record.Seq, Result: []byte("other")})
		wantCode(t, "Complete with other bytes", err, spent.ENotPending)
	})
	t.Run("WithoutSeqConflicts", func(t *testing.T) {
		_, err := f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: "k", Result: []byte("receipt")})
		wantCode(t, "Complete without seq", err, spent.ENotPending)
	})
	t.Run("ReplayHasTheBytes", func(t *testing.T) {
		r := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "k", Fingerprint: fpA})
		wantOutcome(t, "replay", r, spent.Replayed)
		if !bytes.Equal(r.Record.Result, []byte("receipt")) {
			t.Fatalf("replay: got %q, want %q", r.Record.Result, "receipt")
		}
	})
}
