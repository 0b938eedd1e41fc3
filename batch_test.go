package spent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/spentledger/spent"
)

func TestClaimBatchAnswersInOrder(t *testing.T) {
	f := mustOpen(t)
	cs := []spent.Claim{
		{Namespace: nsEcho, Key: "a", Fingerprint: fpA, Result: []byte("ra")},
		{Namespace: nsEcho, Key: "b", Fingerprint: fpA},
		{Namespace: nsEcho, Key: "a", Fingerprint: fpA, Result: []byte("ignored")},
		{Namespace: nsEcho, Key: "a", Fingerprint: fpB, Result: []byte("ignored")},
		{Namespace: nsEcho, Key: "b", Fingerprint: fpA},
		{Namespace: nsRefuse, Key: "a", Result: []byte{}},
		{Namespace: nsRefuse, Key: "a", Result: []byte{}},
	}
	want := []spent.Outcome{spent.Fresh, spent.Fresh, spent.Replayed, spent.Mismatch, spent.InProgress, spent.Fresh, spent.Refused}
	res, err := f.ledger.ClaimBatch(context.Background(), cs)
	if err != nil {
		t.Fatalf("ClaimBatch: %v", err)
	}
	if len(res) != len(want) {
		t.Fatalf("results: got %d, want %d", len(res), len(want))
	}
	for i := range want {
		if res[i].Outcome != want[i] {
			t.Fatalf("claims[%d]: got %v, want %v", i, res[i].Outcome, want[i])
		}
	}
	// Seqs follow the order of the batch.
	if !res[0].Record.Seq.Less(res[1].Record.Seq) || !res[1].Record.Seq.Less(res[5].Record.Seq) {
		t.Fatalf("fresh seqs: got %v, %v, %v, want increasing", res[0].Record.Seq, res[1].Record.Seq, res[5].Record.Seq)
	}
	if string(res[2].Record.Result) != "ra" {
		t.Fatalf("claims[2] result: got %q, want %q", res[2].Record.Result, "ra")
	}
	if n := f.store.Len(); n != 3 {
		t.Fatalf("records: got %d, want 3", n)
	}
}

func TestClaimBatchRejectsMalformedItem(t *testing.T) {
	good := spent.Claim{Namespace: nsEcho, Key: "good", Result: []byte("r")}
	cases := []struct {
		name string
		bad  spent.Claim
		code string
	}{
		{"KeyTooLong", spent.Claim{Namespace: nsEcho, Key: strings.Repeat("k", spent.MaxKeyLen+1)}, spent.EKeyTooLong},
		{"EmptyKey", spent.Claim{Namespace: nsEcho}, spent.EInvalid},
		{"ShortFingerprint", spent.Claim{Namespace: nsEcho, Key: "k", Fingerprint: fpA[:16]}, spent.EInvalid},
		{"PlaceTooLong", spent.Claim{Namespace: nsEcho, Key: "k", Place: strings.Repeat("p", spent.MaxPlaceLen+1)}, spent.EInvalid},
		{"ResultTooLarge", spent.Claim{Namespace: nsEcho, Key: "k", Result: make([]byte, testMaxRes+1)}, spent.ETooLarge},
		{"UnknownNamespace", spent.Claim{Namespace: "nowhere", Key: "k"}, spent.EUnknownNamespace},
		{"ExpiresInThePast", spent.Claim{Namespace: nsEcho, Key: "k", ExpiresAt: testEpoch}, spent.EInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := mustOpen(t)
			second := good
			second.Key = "also good"
			res, err := f.ledger.ClaimBatch(context.Background(), []spent.Claim{good, second, tc.bad, good})
			wantCode(t, "ClaimBatch", err, tc.code)
			if res != nil {
				t.Fatalf("ClaimBatch: got %d results, want none", len(res))
			}
			if !strings.Contains(err.Error(), "claims[2]") {
				t.Fatalf("ClaimBatch error: got %q, want it to name claims[2]", err)
			}
			if n := f.store.Len(); n != 0 {
				t.Fatalf("records after a rejected batch: got %d, want 0", n)
			}
			wantOutcome(t, "claim after the rejected batch", f.claim(t, good), spent.Fresh)
		})
	}
}

func TestClaimBatchSize(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	res, err := f.ledger.ClaimBatch(ctx, nil)
	if err != nil || len(res) != 0 {
		t.Fatalf("empty ClaimBatch: got %v, %v, want no results and no error", res, err)
	}
	_, err = f.ledger.ClaimBatch(ctx, make([]spent.Claim, spent.MaxBatch+1))
	wantCode(t, "ClaimBatch over MaxBatch", err, spent.ETooLarge)
	cs := make([]spent.Claim, spent.MaxBatch)
	for i := range cs {
		cs[i] = spent.Claim{Namespace: nsRefuse, Key: "k" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Result: []byte{}}
	}
	res, err = f.ledger.ClaimBatch(ctx, cs)
	if err != nil || len(res) != spent.MaxBatch {
		t.Fatalf("ClaimBatch of MaxBatch: got %d results, %v, want %d, nil", len(res), err, spent.MaxBatch)
	}
}
