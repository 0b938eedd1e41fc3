package spent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
)

func TestErrorCode(t *testing.T) {
	cause := errors.New("cause")
	e := &spent.Error{Code: spent.EUnavailable, Message: "store failure", Err: cause}
	cases := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{spent.Errorf(spent.ENotFound, "no %s", "record"), spent.ENotFound},
		{e, spent.EUnavailable},
		{fmt.Errorf("wrapped: %w", e), spent.EUnavailable},
		{cause, spent.EInternal},
	}
	for _, tc := range cases {
		if got := spent.ErrorCode(tc.err); got != tc.want {
			t.Fatalf("ErrorCode(%v): got %q, want %q", tc.err, got, tc.want)
		}
	}
	if !errors.Is(e, cause) {
		t.Fatalf("errors.Is(Error, cause): got false, want true")
	}
	if msg := e.Error(); !strings.Contains(msg, spent.EUnavailable) || !strings.Contains(msg, "cause") {
		t.Fatalf("Error(): got %q, want the code and the cause", msg)
	}
	if msg := spent.Errorf(spent.ENotFound, "no record").Error(); msg != "spent: not_found: no record" {
		t.Fatalf("Error(): got %q, want %q", msg, "spent: not_found: no record")
	}
}

func TestSweep(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	for i := range 7 {
		f.claim(t, spent.Claim{Namespace: nsRefuse, Key: fmt.Sprintf("short-%d", i), Result: []byte{}, ExpiresAt: testEpoch.Add(time.Minute)})
	}
	f.claim(t, spent.Claim{Namespace: nsRefuse, Key: "long", Result: []byte{}})
	n, err := f.ledger.Sweep(ctx, 3)
	if err != nil || n != 0 {
		t.Fatalf("Sweep before expiry: got %d, %v, want 0, nil", n, err)
	}
	f.clock.Advance(time.Minute)
	n, err = f.ledger.Sweep(ctx, 3)
	if err != nil || n != 7 {
		t.Fatalf("Sweep in batches of 3: got %d, %v, want 7, nil", n, err)
	}
	if got := f.store.Len(); got != 1 {
		t.Fatalf("records after Sweep: got %d, want 1", got)
	}
}

func TestPurge(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	// A namespace the configuration no longer has, with more records than
	// one batch: purged all the same.
	const retired = 2*spent.PurgeBatch + 500
	for i := range retired {
		h := f.ledger.HashKey("retired", fmt.Sprint(i))
		rec := spent.Record{Namespace: "retired", Hash: h, FirstSeen: testEpoch, State: spent.StateComplete,
			Result: []byte{}, ExpiresAt: testEpoch.Add(time.Hour), Seq: spent.Seq{Node: 9, Counter: uint64(i + 1)}}
		if _, err := f.store.Claim(ctx, spent.ClaimOp{Record: rec, Now: testEpoch}); err != nil {
			t.Fatal(err)
		}
	}
	f.claim(t, spent.Claim{Namespace: nsEcho, Key: "e", Fingerprint: fpA, Result: []byte("r")})
	f.claim(t, spent.Claim{Namespace: nsRefuse, Key: "r", Result: []byte{}})
	n, err := f.ledger.Purge(ctx, "retired")
	if err != nil || n != retired {
		t.Fatalf("Purge(retired): got %d, %v, want %d, nil", n, err, retired)
	}
	if n, err := f.ledger.Purge(ctx, nsEcho); err != nil || n != 1 {
		t.Fatalf("Purge(%s): got %d, %v, want 1, nil", nsEcho, n, err)
	}
	if got := f.store.Len(); got != 1 {
		t.Fatalf("records after Purge: got %d, want 1 (of %s)", got, nsRefuse)
	}
	if r := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "e", Fingerprint: fpA, Result: []byte("r")}); r.Outcome != spent.Fresh {
		t.Fatalf("Claim of a purged key: got %v, want fresh", r.Outcome)
	}
	for _, ns := range []string{"", spent.ReservedPrefix + "fence", strings.Repeat("n", 65)} {
		_, err := f.ledger.Purge(ctx, ns)
		wantCode(t, "Purge("+ns+")", err, spent.EInvalid)
	}
	f.store.SetFaults(inmem.Faults{Before: func(op string) error {
		if op == "purge" {
			return errors.New("store down")
		}
		return nil
	}})
	_, err = f.ledger.Purge(ctx, nsRefuse)
	wantCode(t, "Purge with the store down", err, spent.EUnavailable)
}

func TestUnknownOfRetakeNamespaceIsEmpty(t *testing.T) {
	f := mustOpen(t)
	f.claim(t, spent.Claim{Namespace: nsRefuse, Key: "k"})
	f.claim(t, spent.Claim{Namespace: nsEcho, Key: "k"})
	f.clock.Advance(testLease)
	recs, err := f.ledger.Unknown(context.Background(), nsRefuse, 0)
	if err != nil || len(recs) != 0 {
		t.Fatalf("Unknown(%s): got %d records, %v, want none", nsRefuse, len(recs), err)
	}
	recs, err = f.ledger.Unknown(context.Background(), "", 0)
	if err != nil || len(recs) != 1 || recs[0].Namespace != nsEcho {
		t.Fatalf("Unknown(all): got %v, %v, want the %s record", recs, err, nsEcho)
	}
}

func TestCompleteByHash(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	r := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "k"})
	// While the lease runs, the hash alone addresses the record.
	rec, err := f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Hash: r.Record.Hash, Result: []byte("r")})
	if err != nil || rec.Seq != r.Record.Seq {
		t.Fatalf("Complete by hash: got %v, %v, want the record %v", rec.Seq, err, r.Record.Seq)
	}
	// The key wins over the hash when both are given.
	p := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "p"})
	_, err = f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: "p", Hash: r.Record.Hash, Seq: p.Record.Seq, Result: []byte("r")})
	wantCode(t, "Complete by key with another hash", err, "")
}

func TestCount(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	exp := testEpoch.Add(time.Hour)
	for i := uint64(1); i <= 2; i++ {
		res, err := f.ledger.Count(ctx, "quota", "client-a", 2, exp)
		if err != nil || !res.Added || res.Value != i {
			t.Fatalf("Count %d: got %+v, %v, want value %d, added", i, res, err, i)
		}
	}
	if res, err := f.ledger.Count(ctx, "quota", "client-a", 2, exp); err != nil || res.Added || res.Value != 2 {
		t.Fatalf("Count over the limit: got %+v, %v, want value 2, not added", res, err)
	}
	// Another scope or key is another counter.
	if res, err := f.ledger.Count(ctx, "quota-2", "client-a", 2, exp); err != nil || res.Value != 1 {
		t.Fatalf("Count in another scope: got %+v, %v, want value 1", res, err)
	}
	if res, err := f.ledger.Count(ctx, "quota", "client-b", 2, exp); err != nil || res.Value != 1 {
		t.Fatalf("Count of another key: got %+v, %v, want value 1", res, err)
	}
	// Bad input is refused with a code, and nothing is counted.
	cases := []struct {
		scope, key string
		exp        time.Time
		code       string
	}{
		{"quota", "", exp, spent.EInvalid},
		{"quota", strings.Repeat("k", spent.MaxKeyLen+1), exp, spent.EKeyTooLong},
		{strings.Repeat("s", spent.MaxKeyLen+1), "k", exp, spent.EKeyTooLong},
		{"quota", "client-c", testEpoch, spent.EInvalid},
	}
	for _, tc := range cases {
		if _, err := f.ledger.Count(ctx, tc.scope, tc.key, 2, tc.exp); spent.ErrorCode(err) != tc.code {
			t.Fatalf("Count(%.10q, %.10q, %v): got %v, want code %s", tc.scope, tc.key, tc.exp, err, tc.code)
		}
	}
	if res, err := f.ledger.Count(ctx, "quota", "client-c", 2, exp); err != nil || res.Value != 1 {
		t.Fatalf("Count after refused ops: got %+v, %v, want value 1", res, err)
	}
	// At its expiry the counter starts again.
	f.clock.Set(exp)
	if res, err := f.ledger.Count(ctx, "quota", "client-a", 2, exp.Add(time.Hour)); err != nil || res.Value != 1 || !res.Added {
		t.Fatalf("Count after expiry: got %+v, %v, want value 1, added", res, err)
	}
}

func TestReservedNamespacePrefix(t *testing.T) {
	cfg := spent.DefaultConfig()
	cfg.Secret = make([]byte, spent.MinSecretLen)
	cfg.Namespaces = map[string]spent.Policy{spent.ReservedPrefix + "meta": spent.DefaultPolicy()}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "the server's own") {
		t.Fatalf("Validate with namespace %q: got %v, want a refusal", spent.ReservedPrefix+"meta", err)
	}
	cfg.Namespaces = map[string]spent.Policy{"spentmeta": spent.DefaultPolicy()}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate with namespace spentmeta: %v", err)
	}
}

// TestUnknownNamespaceListsConfigured checks that the unknown-namespace
// error names the namespaces configured, sorted, and that a long list is cut.
func TestUnknownNamespaceListsConfigured(t *testing.T) {
	f := mustOpen(t)
	_, err := f.ledger.Claim(context.Background(), spent.Claim{Namespace: "nowhere", Key: "k"})
	wantCode(t, "Claim", err, spent.EUnknownNamespace)
	if want := `unknown namespace "nowhere" (configured: ` + nsEcho + ", " + nsRefuse + ")"; !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("got %q, want it to end %q", err, want)
	}

	many := mustOpen(t, func(c *spent.Config) {
		for i := range 30 {
			c.Namespaces[fmt.Sprintf("ns-%02d", i)] = spent.DefaultPolicy()
		}
	})
	_, err = many.ledger.Get(context.Background(), "nowhere", "k")
	wantCode(t, "Get", err, spent.EUnknownNamespace)
	if want := "(configured: " + nsEcho + ", ns-00, ns-01, ns-02, ns-03, ns-04, ns-05, ns-06, ns-07, ns-08, and 22 more)"; !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("30 namespaces more: got %q, want it to end %q", err, want)
	}
}
