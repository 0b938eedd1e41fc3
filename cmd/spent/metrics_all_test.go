package main_test

import (
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/privacypass"
)

// metricsScrape is one read of a server's /metrics.
type metricsScrape map[string]*dto.MetricFamily

// scrapeMetrics reads s's /metrics with the Prometheus project's parser.
func scrapeMetrics(tb testing.TB, s *Server) metricsScrape {
	tb.Helper()
	resp, err := http.Get(s.Addr + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("/metrics: got %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatalf("/metrics: %v", err)
	}
	return fams
}

// sum returns the sum of the samples of metric name whose labels include
// labels (name=value pairs): counter and gauge values, histogram counts.
func (m metricsScrape) sum(name string, labels ...string) float64 {
	var total float64
	f := m[name]
	if f == nil {
		return 0
	}
next:
	for _, s := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range s.GetLabel() {
				found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			if !found {
				continue next
			}
		}
		switch {
		case s.GetCounter() != nil:
			total += s.GetCounter().GetValue()
		case s.GetGauge() != nil:
			total += s.GetGauge().GetValue()
		case s.GetHistogram() != nil:
			total += float64(s.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// postJSON sends a JSON body to the server's path and returns the status.
func postJSON(tb testing.TB, s *Server, path, body string) int {
	tb.Helper()
	resp, err := http.Post(s.Addr+path, "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestMetricsEveryRoute calls every route of a server with the Privacy Pass
// and e-cash sections on, and checks that each is counted and timed in
// /metrics under its route, that the ledger counts the claims of every
// front end by namespace, that Privacy Pass counts issuance and
// redemption, and that the e-cash issuer's books balance: issued = charged
// + outstanding, with the values the wallet saw.
func TestMetricsEveryRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("generates RSA keys; skipped with -short")
	}
	const attester = "attester-token-0123456789abcdef"
	// Both token types and e-cash's defaults (issue_value 100), with an
	// easy proof of work.
	cfg := WriteConfig(t, `
[privacypass]
issuer_name = "issuer.example"
attester_tokens = ["`+attester+`"]
[ecash]
issuer_name = "bank.example"
difficulty = 8
`)
	e := env{"SPENT_KEK": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}
	s := MustServe(t, t.TempDir(), e, nil, "--config", cfg)
	before := scrapeMetrics(t, s)

	// The /v1 API and the probes.
	if st := postJSON(t, s, "/v1/claim", `{"namespace":"default","key":"one","result":""}`); st != http.StatusOK {
		t.Fatalf("claim: got %d", st)
	}
	postJSON(t, s, "/v1/claim", `{"namespace":"default","key":"one","result":""}`) // replayed
	postJSON(t, s, "/v1/claims", `{"claims":[{"namespace":"default","key":"two"},{"namespace":"default","key":"three"}]}`)
	postJSON(t, s, "/v1/complete", `{"namespace":"default","key":"two","result":""}`)
	postJSON(t, s, "/v1/release", `{"namespace":"default","key":"three"}`)
	postJSON(t, s, "/v1/get", `{"namespace":"default","key":"one"}`)
	postJSON(t, s, "/v1/unknown", `{}`)
	postJSON(t, s, "/v1/claim", `{"namespace":"nowhere","key":"k"}`) // unknown namespace: 400
	for _, p := range []string{"/healthz", "/readyz", "/nowhere"} {
		resp, err := http.Get(s.Addr + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	scrapeMetrics(t, s) // /metrics itself

	// Privacy Pass: the directory, a token, spent once and presented again.
	MustRun(t, nil, "token", "directory", "--issuer", s.Addr)
	tok := strings.TrimSpace(MustRun(t, nil, "token", "fetch", "--issuer", s.Addr, "--origin", s.Addr+privacypass.RedeemPath, "--attester-token", attester))
	MustRun(t, nil, "token", "redeem", "--origin", s.Addr+privacypass.RedeemPath, "--token", tok)
	if r := Run(t, nil, "token", "redeem", "--origin", s.Addr+privacypass.RedeemPath, "--token", tok); r.Code == 0 {
		t.Fatal("second redeem of one token: exit 0, want a double spend refused")
	}

	// E-cash: two issuances of 100, a spend of 30.
	w := t.TempDir() + "/wallet.json"
	MustRun(t, nil, "wallet", "init", "--wallet", w, "--issuer", s.Addr)
	MustRun(t, nil, "wallet", "issue", "--wallet", w, "--count", "2")
	MustRun(t, nil, "wallet", "spend", "--wallet", w, "--min-age", "0s", "30")
	if out := MustRun(t, nil, "wallet", "balance", "--wallet", w); !strings.Contains(out, "170") {
		t.Fatalf("balance after spending 30 of 200: got %q, want 170", out)
	}

	m := scrapeMetrics(t, s)
	for _, route := range []string{
		"/v1/claim", "/v1/claims", "/v1/complete", "/v1/release", "/v1/get", "/v1/unknown",
		"/healthz", "/readyz", "/metrics", "other",
		privacypass.DirectoryPath, privacypass.DefaultRequestPath, privacypass.RedeemPath,
		ecash.KeysPath, ecash.ChallengePath, ecash.IssuePath, ecash.SpendPath,
	} {
		for _, name := range []string{"spent_http_requests_total", "spent_http_request_duration_seconds"} {
			if d := m.sum(name, "route", route) - before.sum(name, "route", route); d < 1 {
				t.Errorf("%s{route=%q} moved by %v, want at least 1", name, route, d)
			}
		}
	}
	// No raw path is a label value.
	for _, f := range m {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetValue() == "/nowhere" || l.GetValue() == "nowhere" {
					t.Errorf("%s has the label %s=%q from a request", f.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}

	// The ledger's claims, whichever front end made them.
	for _, c := range []struct {
		namespace, outcome string
		want               float64
	}{
		{"default", "fresh", 3}, {"default", "replayed", 1},
		{"privacypass", "fresh", 1}, {"privacypass", "refused", 1},
		{"ecash-issue", "fresh", 2},
	} {
		if got := m.sum("spent_ledger_claims_total", "namespace", c.namespace, "outcome", c.outcome); got != c.want {
			t.Errorf("spent_ledger_claims_total{namespace=%q,outcome=%q}: got %v, want %v", c.namespace, c.outcome, got, c.want)
		}
	}
	if got := m.sum("spent_ledger_claims_total", "namespace", "ecash-spend", "outcome", "fresh"); got < 1 {
		t.Errorf("spent_ledger_claims_total{namespace=\"ecash-spend\",outcome=\"fresh\"}: got %v, want at least 1", got)
	}
	if got := m.sum("spent_ledger_errors_total", "op", "claim", "code", "unknown_namespace"); got != 1 {
		t.Errorf("spent_ledger_errors_total{op=\"claim\",code=\"unknown_namespace\"}: got %v, want 1", got)
	}
	if got := m.sum("spent_ledger_operation_seconds", "op", "count"); got < 1 {
		t.Errorf("spent_ledger_operation_seconds{op=\"count\"} (the issuer's quota): got %v, want at least 1", got)
	}

	// Privacy Pass.
	if got := m.sum(privacypass.MetricTokenRequests, "outcome", "issued"); got != 1 {
		t.Errorf("%s{outcome=\"issued\"}: got %v, want 1", privacypass.MetricTokenRequests, got)
	}
	if got := m.sum(privacypass.MetricRedemptions, "outcome", "redeemed"); got != 1 {
		t.Errorf("%s{outcome=\"redeemed\"}: got %v, want 1", privacypass.MetricRedemptions, got)
	}
	if got := m.sum(privacypass.MetricRedemptions, "outcome", privacypass.CodeDoubleSpend); got != 1 {
		t.Errorf("%s{outcome=\"double_spend\"}: got %v, want 1", privacypass.MetricRedemptions, got)
	}

	// E-cash: the books balance, at the values the wallet saw.
	issued, charged, outstanding := m.sum(ecash.MetricValueIssued), m.sum(ecash.MetricValueCharged), m.sum(ecash.MetricValueOutstanding)
	if issued != 200 || charged != 30 || outstanding != 170 || issued != charged+outstanding {
		t.Errorf("e-cash books: issued %v, charged %v, outstanding %v; want 200 = 30 + 170", issued, charged, outstanding)
	}
	spends := m.sum(ecash.MetricSpends, "outcome", "fresh")
	if spends < 1 || spends != m.sum("spent_ledger_claims_total", "namespace", "ecash-spend", "outcome", "fresh") {
		t.Errorf("%s{outcome=\"fresh\"}: got %v, want at least 1 and one ledger claim each", ecash.MetricSpends, spends)
	}
	if got := m.sum(ecash.MetricIssuances, "outcome", "fresh"); got != 2 {
		t.Errorf("%s{outcome=\"fresh\"}: got %v, want 2", ecash.MetricIssuances, got)
	}
}
