package privacypass_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent/internal/metricstest"
	"github.com/spentledger/spent/privacypass"
)

// wantMetrics fails the test unless c exports exactly the samples of want.
func wantMetrics(t *testing.T, c prometheus.Collector, want string) {
	t.Helper()
	if got := metricstest.Collected(t, c); got != strings.TrimLeft(want, "\n") {
		t.Fatalf("metrics: got\n%s\nwant\n%s", got, want)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, nil)
	redeem := e.issuer.URL + privacypass.RedeemPath
	request := e.issuer.URL + e.cfg.RequestPath

	// Token requests: refused before the body is read, refused for the
	// quota, issued.
	post(t, request, privacypass.RequestMediaType, "not-an-attester", e.tokenRequest(t, privacypass.TypeBlindRSA))
	post(t, request, privacypass.RequestMediaType, attester, []byte{0x00, 0x07, 1, 2, 3})
	chs := wantRefused(t, send(t, http.MethodPost, redeem, nil), privacypass.CodeTokenRequired)
	var tok2, tok1 []byte
	for i := range chs {
		tok, err := e.client.Issue(context.Background(), e.issuer.URL, &chs[i])
		if err != nil {
			t.Fatal(err)
		}
		if chs[i].TokenChallenge.TokenType == privacypass.TypeBlindRSA {
			tok2 = tok
		} else {
			tok1 = tok
		}
	}
	// Redemptions: two of type 2 (one a double spend), one of type 1, one
	// that does not parse.
	send(t, http.MethodPost, redeem, tok2)
	wantRefused(t, send(t, http.MethodPost, redeem, tok2), privacypass.CodeDoubleSpend)
	send(t, http.MethodPost, redeem, tok1)
	send(t, http.MethodPost, redeem, []byte{0, 2, 1})

	want := `
spent_privacypass_redemptions_total{outcome="bad_request",token_type="2"} 1
spent_privacypass_redemptions_total{outcome="double_spend",token_type="2"} 1
spent_privacypass_redemptions_total{outcome="redeemed",token_type="1"} 1
spent_privacypass_redemptions_total{outcome="redeemed",token_type="2"} 1
spent_privacypass_redemptions_total{outcome="token_required",token_type="unknown"} 1
spent_privacypass_token_requests_total{outcome="issued",token_type="1"} 1
spent_privacypass_token_requests_total{outcome="issued",token_type="2"} 1
spent_privacypass_token_requests_total{outcome="unauthorized",token_type="unknown"} 1
spent_privacypass_token_requests_total{outcome="unsupported_token_type",token_type="unknown"} 1
`
	wantMetrics(t, e.srv.Metrics(), want)
}

func TestOriginMetrics(t *testing.T) {
	// An origin of its own counts the redemptions of its middleware.
	e := newEnv(t, nil)
	o, err := privacypass.NewOrigin(e.ledger, privacypass.OriginConfig{
		IssuerName: e.cfg.IssuerName, OriginInfo: []string{"origin.example"}, TokenTypes: []privacypass.TokenType{privacypass.TypeVOPRF},
		Keys: e.srv.Keyring(), Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	origin := httptest.NewServer(o.Middleware(okHandler))
	t.Cleanup(origin.Close)
	tok := e.issue(t, origin.URL, privacypass.TypeVOPRF)
	if a := send(t, http.MethodGet, origin.URL, tok); a.status != http.StatusOK {
		t.Fatalf("first presentation: got %d %q", a.status, a.problem.Code)
	}
	wantRefused(t, send(t, http.MethodGet, origin.URL, tok), privacypass.CodeDoubleSpend)

	want := `
spent_privacypass_redemptions_total{outcome="double_spend",token_type="1"} 1
spent_privacypass_redemptions_total{outcome="redeemed",token_type="1"} 1
spent_privacypass_redemptions_total{outcome="token_required",token_type="unknown"} 1
`
	wantMetrics(t, o.Metrics(), want)
}
