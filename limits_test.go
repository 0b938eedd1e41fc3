package spent_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

func TestKeyLength(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	longest := strings.Repeat("k", spent.MaxKeyLen)
	tooLong := longest + "k"
	r := f.claim(t, spent.Claim{Namespace: nsEcho, Key: longest})
	wantOutcome(t, "claim of a 512-byte key", r, spent.Fresh)
	if _, err := f.ledger.Get(ctx, nsEcho, longest); err != nil {
		t.Fatalf("Get of a 512-byte key: got %v, want the record", err)
	}
	if _, err := f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: longest, Seq: r.Record.Seq, Result: []byte("r")}); err != nil {
		t.Fatalf("Complete of a 512-byte key: got %v, want nil", err)
	}

	_, err := f.ledger.Claim(ctx, spent.Claim{Namespace: nsEcho, Key: tooLong})
	wantCode(t, "Claim of a 513-byte key", err, spent.EKeyTooLong)
	_, err = f.ledger.Get(ctx, nsEcho, tooLong)
	wantCode(t, "Get of a 513-byte key", err, spent.EKeyTooLong)
	_, err = f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: tooLong, Force: true})
	wantCode(t, "Complete of a 513-byte key", err, spent.EKeyTooLong)
	err = f.ledger.Release(ctx, spent.Release{Namespace: nsEcho, Key: tooLong, Force: true})
	wantCode(t, "Release of a 513-byte key", err, spent.EKeyTooLong)
	_, err = f.ledger.Claim(ctx, spent.Claim{Namespace: nsEcho})
	wantCode(t, "Claim of an empty key", err, spent.EInvalid)
	_, err = f.ledger.Get(ctx, nsEcho, "")
	wantCode(t, "Get of an empty key", err, spent.EInvalid)
}

func TestFingerprintLength(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	for _, n := range []int{0, spent.FingerprintLen} {
		c := spent.Claim{Namespace: nsEcho, Key: "ok-" + string(rune('a'+n)), Fingerprint: make([]byte, n)}
		if _, err := f.ledger.Claim(ctx, c); err != nil {
			t.Fatalf("fingerprint of %d bytes: got %v, want nil", n, err)
		}
	}
	for _, n := range []int{1, spent.FingerprintLen - 1, spent.FingerprintLen + 1, 64} {
		_, err := f.ledger.Claim(ctx, spent.Claim{Namespace: nsEcho, Key: "bad", Fingerprint: make([]byte, n)})
		wantCode(t, "fingerprint of "+strconv.Itoa(n)+" bytes", err, spent.EInvalid)
	}
}

func TestPlaceLength(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	r := f.claim(t, spent.Claim{Namespace: nsRefuse, Key: "k", Place: strings.Repeat("p", spent.MaxPlaceLen), Result: []byte{}})
	if len(r.Record.Place) != spent.MaxPlaceLen {
		t.Fatalf("place: got %d bytes, want %d", len(r.Record.Place), spent.MaxPlaceLen)
	}
	_, err := f.ledger.Claim(ctx, spent.Claim{Namespace: nsRefuse, Key: "k2", Place: strings.Repeat("p", spent.MaxPlaceLen+1)})
	wantCode(t, "place over the limit", err, spent.EInvalid)
}

func TestResultSize(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	r := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "max", Result: make([]byte, testMaxRes)})
	wantOutcome(t, "claim with a result of MaxResult bytes", r, spent.Fresh)
	_, err := f.ledger.Claim(ctx, spent.Claim{Namespace: nsEcho, Key: "over", Result: make([]byte, testMaxRes+1)})
	wantCode(t, "claim with a result over MaxResult", err, spent.ETooLarge)

	p := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "two-step"})
	_, err = f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: "two-step", Seq: p.Record.Seq, Result: make([]byte, testMaxRes+1)})
	wantCode(t, "Complete with a result over MaxResult", err, spent.ETooLarge)
	rec, err := f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: "two-step", Seq: p.Record.Seq, Result: make([]byte, testMaxRes)})
	if err != nil || len(rec.Result) != testMaxRes {
		t.Fatalf("Complete with a result of MaxResult bytes: got %d bytes, %v, want %d, nil", len(rec.Result), err, testMaxRes)
	}
}

func TestCompleteWithNilResultStoresEmpty(t *testing.T) {
	f := mustOpen(t)
	p := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "k"})
	rec, err := f.ledger.Complete(context.Background(), spent.Completion{Namespace: nsEcho, Key: "k", Seq: p.Record.Seq})
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != spent.StateComplete || len(rec.Result) != 0 {
		t.Fatalf("Complete without result: got %v with %d bytes, want complete with none", rec.State, len(rec.Result))
	}
	wantOutcome(t, "repeat", f.claim(t, spent.Claim{Namespace: nsEcho, Key: "k"}), spent.Replayed)
}

func TestExpiresAtMustBeInTheFuture(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	for _, at := range []time.Time{testEpoch.Add(-time.Hour), testEpoch} {
		_, err := f.ledger.Claim(ctx, spent.Claim{Namespace: nsEcho, Key: "k", ExpiresAt: at})
		wantCode(t, "expires_at "+at.String(), err, spent.EInvalid)
	}
	r := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "k", ExpiresAt: testEpoch.Add(time.Nanosecond)})
	if !r.Record.ExpiresAt.Equal(testEpoch.Add(time.Nanosecond)) || !r.Record.LeaseUntil.Equal(r.Record.ExpiresAt) {
		t.Fatalf("expires_at, lease_until: got %v, %v, want both %v", r.Record.ExpiresAt, r.Record.LeaseUntil, testEpoch.Add(time.Nanosecond))
	}
}
