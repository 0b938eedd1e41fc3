package ecash_test

import (
	"context"
	"testing"

	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/internal/metricstest"
)

func TestMetrics(t *testing.T) {
	// The books balance: issued = charged + outstanding, with the charge of
	// an issuance (value not asked for) and of a spend (input less change).
	ctx := context.Background()
	e := newEnv(t, nil, nil)
	issue, p := e.issueBody(t, 8, 4) // 15 issued, 3 charged
	a, err := e.client.Send(ctx, ecash.IssuePath, issue)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Send(ctx, ecash.IssuePath, issue); err != nil { // replayed
		t.Fatal(err)
	}
	coins, _, err := p.Finish(a.Response)
	if err != nil {
		t.Fatal(err)
	}
	spend, _ := e.spendBody(t, coins[0], 4, 2, 1) // 8 in, 7 back: 1 charged
	if _, err := e.client.Send(ctx, ecash.SpendPath, spend); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Send(ctx, ecash.SpendPath, spend); err != nil { // replayed
		t.Fatal(err)
	}
	other, _ := e.spendBody(t, coins[0], 8)
	if _, err := e.client.Send(ctx, ecash.SpendPath, other); code(err) != ecash.CodeDoubleSpend {
		t.Fatalf("spending the coin again with other bytes: got %v, want double_spend", err)
	}
	if _, err := e.client.Send(ctx, ecash.SpendPath, []byte("junk")); code(err) != ecash.CodeBadRequest {
		t.Fatalf("a spend that does not parse: got %v, want bad_request", err)
	}

	want := `spent_ecash_issuances_total{outcome="fresh"} 1
spent_ecash_issuances_total{outcome="replayed"} 1
spent_ecash_signatures_total 5
spent_ecash_spends_total{outcome="bad_request"} 1
spent_ecash_spends_total{outcome="double_spend"} 1
spent_ecash_spends_total{outcome="fresh"} 1
spent_ecash_spends_total{outcome="replayed"} 1
spent_ecash_value_charged_total 4
spent_ecash_value_issued_total 15
spent_ecash_value_outstanding 11
`
	if got := metricstest.Collected(t, e.iss.Metrics()); got != want {
		t.Fatalf("metrics: got\n%s\nwant\n%s", got, want)
	}
}
