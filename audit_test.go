package spent_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
)

// recordingAuditor keeps the events it is given, or fails while fail is set.
type recordingAuditor struct {
	mu     sync.Mutex
	calls  int
	events []spent.AuditEvent
	fail   error
}

func (a *recordingAuditor) Audit(_ context.Context, evs []spent.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return a.fail
	}
	a.calls++
	a.events = append(a.events, evs...)
	return nil
}

func withAuditor(a spent.Auditor) func(*spent.Config) {
	return func(c *spent.Config) { c.Audit = a }
}

func TestAudit(t *testing.T) {
	ctx := context.Background()
	t.Run("FreshIsAudited", func(t *testing.T) {
		aud := &recordingAuditor{}
		f := mustOpen(t, withAuditor(aud))
		a := f.claim(t, spent.Claim{Namespace: nsRefuse, Key: "k1", Place: "gate 3"})
		wantOutcome(t, "first claim", a, spent.Fresh)
		f.claim(t, spent.Claim{Namespace: nsRefuse, Key: "k1"})
		if len(aud.events) != 1 {
			t.Fatalf("events after a fresh claim and a repeat: got %d, want 1", len(aud.events))
		}
		ev := aud.events[0]
		want := spent.AuditEvent{
			Kind: spent.AuditAccepted, Time: testEpoch, Node: 1, Namespace: nsRefuse, Hash: f.ledger.HashKey(nsRefuse, "k1"),
			Seq: a.Record.Seq, Place: "gate 3", State: spent.StatePending, LeaseUntil: a.Record.LeaseUntil,
			ExpiresAt: a.Record.ExpiresAt, Retake: true,
		}
		if ev != want {
			t.Fatalf("event: got %+v, want %+v", ev, want)
		}
	})
	t.Run("HoldNamespaceIsNotRetake", func(t *testing.T) {
		aud := &recordingAuditor{}
		f := mustOpen(t, withAuditor(aud))
		f.claim(t, spent.Claim{Namespace: nsEcho, Key: "k", Fingerprint: fpA, Result: []byte("r")})
		if got := aud.events[0]; got.Retake || got.State != spent.StateComplete {
			t.Fatalf("event: got retake %v state %v, want false complete", got.Retake, got.State)
		}
	})
	t.Run("FailedAppendIsNotFresh", func(t *testing.T) {
		aud := &recordingAuditor{fail: errors.New("disk full")}
		f := mustOpen(t, withAuditor(aud))
		_, err := f.ledger.Claim(ctx, spent.Claim{Namespace: nsRefuse, Key: "k"})
		wantCode(t, "claim with a failing audit", err, spent.EUnavailable)
		aud.fail = nil
		a := f.claim(t, spent.Claim{Namespace: nsRefuse, Key: "k"})
		if a.Outcome == spent.Fresh {
			t.Fatalf("retry after a failed audit: got %v, want a repeat", a.Outcome)
		}
		if len(aud.events) != 0 {
			t.Fatalf("events: got %d, want 0", len(aud.events))
		}
	})
	t.Run("BatchAuditedInOneAppend", func(t *testing.T) {
		aud := &recordingAuditor{}
		f := mustOpen(t, withAuditor(aud))
		f.claim(t, spent.Claim{Namespace: nsRefuse, Key: "old"})
		out, err := f.ledger.ClaimBatch(ctx, []spent.Claim{
			{Namespace: nsRefuse, Key: "a"}, {Namespace: nsRefuse, Key: "old"}, {Namespace: nsRefuse, Key: "b"},
		})
		if err != nil {
			t.Fatalf("batch: got %v, want no error", err)
		}
		if aud.calls != 2 || len(aud.events) != 3 {
			t.Fatalf("appends, events: got %d, %d, want 2, 3", aud.calls, len(aud.events))
		}
		if aud.events[1].Seq != out[0].Record.Seq || aud.events[2].Seq != out[2].Record.Seq {
			t.Fatalf("batch events: got seqs %v %v, want %v %v", aud.events[1].Seq, aud.events[2].Seq, out[0].Record.Seq, out[2].Record.Seq)
		}
	})
	t.Run("FailedBatchAppendIsNotFresh", func(t *testing.T) {
		aud := &recordingAuditor{fail: errors.New("disk full")}
		f := mustOpen(t, withAuditor(aud))
		_, err := f.ledger.ClaimBatch(ctx, []spent.Claim{{Namespace: nsRefuse, Key: "a"}})
		wantCode(t, "batch with a failing audit", err, spent.EUnavailable)
	})
	t.Run("EndsAudited", func(t *testing.T) {
		aud := &recordingAuditor{}
		f := mustOpen(t, withAuditor(aud))
		a := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "c", Fingerprint: fpA})
		if _, err := f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: "c", Seq: a.Record.Seq, Result: []byte("ok")}); err != nil {
			t.Fatalf("complete: got %v, want no error", err)
		}
		b := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "r", Fingerprint: fpA})
		if err := f.ledger.Release(ctx, spent.Release{Namespace: nsEcho, Key: "r"}); err != nil {
			t.Fatalf("release: got %v, want no error", err)
		}
		if len(aud.events) != 4 {
			t.Fatalf("events: got %d, want 4", len(aud.events))
		}
		for i, want := range []struct {
			kind spent.AuditKind
			seq  spent.Seq
		}{{spent.AuditAccepted, a.Record.Seq}, {spent.AuditCompleted, a.Record.Seq}, {spent.AuditAccepted, b.Record.Seq}, {spent.AuditReleased, b.Record.Seq}} {
			if got := aud.events[i]; got.Kind != want.kind || got.Seq != want.seq {
				t.Fatalf("event %d: got %s %v, want %s %v", i, got.Kind, got.Seq, want.kind, want.seq)
			}
		}
	})
	t.Run("FailedEndAppendIsAnError", func(t *testing.T) {
		aud := &recordingAuditor{}
		f := mustOpen(t, withAuditor(aud))
		f.claim(t, spent.Claim{Namespace: nsEcho, Key: "r", Fingerprint: fpA})
		aud.fail = errors.New("disk full")
		err := f.ledger.Release(ctx, spent.Release{Namespace: nsEcho, Key: "r"})
		wantCode(t, "release with a failing audit", err, spent.EUnavailable)
	})
}

func TestKeyHash(t *testing.T) {
	f := mustOpen(t)
	for _, c := range []struct{ ns, key string }{{"default", "k"}, {"ab", "c"}, {"a", "bc"}} {
		t.Run(c.ns+"/"+c.key, func(t *testing.T) {
			if got, want := spent.KeyHash(testSecret, c.ns, c.key), f.ledger.HashKey(c.ns, c.key); got != want {
				t.Fatalf("KeyHash: got %v, want %v", got, want)
			}
		})
	}
}

// printAuditor prints each event it is given; a real one (package audit)
// appends them to a file and fsyncs it.
type printAuditor struct{}

func (printAuditor) Audit(_ context.Context, evs []spent.AuditEvent) error {
	for _, e := range evs {
		fmt.Printf("%s %s seq %s on node %d\n", e.Kind, e.Namespace, e.Seq, e.Node)
	}
	return nil
}

// A ledger with an auditor tells it of each fresh answer before answering,
// and of each release; a repeat is not told.
func ExampleAuditor() {
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("an example secret of 32 bytes...")
	cfg.Audit = printAuditor{}
	store := inmem.New()
	defer store.Close()
	l, _ := spent.NewLedger(context.Background(), store, cfg)
	ctx := context.Background()
	a, _ := l.Claim(ctx, spent.Claim{Namespace: "default", Key: "order-17"})
	l.Claim(ctx, spent.Claim{Namespace: "default", Key: "order-17"})
	l.Release(ctx, spent.Release{Namespace: "default", Key: "order-17", Seq: a.Record.Seq})
	// Output:
	// accepted default seq 1:1 on node 1
	// released default seq 1:1 on node 1
}
