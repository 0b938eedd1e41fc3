package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/console"
	"github.com/spentledger/spent/node"
)

// BenchmarkMainPage renders the main page with 100 unknown outcomes listed
// (and a 101st, so that the page says there are more).
func BenchmarkMainPage(b *testing.B) {
	e := MustOpen(b, nil, nil)
	for i := range console.MaxUnknown + 1 {
		if _, err := e.Ledger.Claim(context.Background(), spent.Claim{Namespace: "payments", Key: "pay-" + strconv.Itoa(i)}); err != nil {
			b.Fatal(err)
		}
	}
	e.Clock.Add(2 * time.Second)
	br := e.browser(b)
	if p := br.get("/ui/"); p.Status != http.StatusOK || strings.Count(p.Body, "data-hash=") != console.MaxUnknown {
		b.Fatalf("main page: got %d with %d unknown outcomes, want 200 with %d", p.Status, strings.Count(p.Body, "data-hash="), console.MaxUnknown)
	}
	b.ReportAllocs()
	for b.Loop() {
		br.get("/ui/")
	}
}

// BenchmarkChart draws the chart from a full ring of samples (an hour of
// samples every 10 s: 361).
func BenchmarkChart(b *testing.B) {
	e := MustOpen(b, nil, nil)
	reg := prometheus.NewRegistry()
	claims := prometheus.NewCounterVec(prometheus.CounterOpts{Name: node.MetricLedgerClaims, Help: "claims"}, []string{"namespace", "outcome"})
	reg.MustRegister(claims)
	cfg := console.DefaultConfig(e.Ledger)
	cfg.Gatherer = reg
	cfg.SampleInterval, cfg.Window = time.Millisecond, 360*time.Millisecond
	c, err := console.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		claims.WithLabelValues("payments", "fresh").Inc()
		time.Sleep(100 * time.Microsecond)
	}
	cancel()
	<-done
	srv := httptest.NewServer(c)
	defer srv.Close()
	br := (&env{Srv: srv}).browser(b)
	if p := br.get("/ui/chart.svg"); !strings.Contains(p.Body, "<polyline") {
		b.Fatalf("chart: got %q, want lines", p.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		br.get("/ui/chart.svg")
	}
}
