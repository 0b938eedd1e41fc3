package metricstest_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent/internal/metricstest"
)

func TestCollected(t *testing.T) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "X."}, []string{"b", "a"})
	c.WithLabelValues("2", "1").Add(3)
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "y_seconds", Help: "Y.", Buckets: []float64{1}})
	h.Observe(0.5)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, h)
	text := metricstest.Gathered(t, reg)
	want := "x_total{a=\"1\",b=\"2\"} 3\n" +
		"y_seconds_bucket{le=\"1\"} 1\ny_seconds_bucket{le=\"+Inf\"} 1\ny_seconds_sum 0.5\ny_seconds_count 1\n"
	if text != want {
		t.Fatalf("got\n%s\nwant\n%s", text, want)
	}
	metricstest.Want(t, text, `x_total{a="1",b="2"}`, 3)
	metricstest.Want(t, text, `y_seconds_count`, 1)
	if got := metricstest.Collected(t, c); got != "x_total{a=\"1\",b=\"2\"} 3\n" {
		t.Fatalf("Collected: got %q", got)
	}
}
