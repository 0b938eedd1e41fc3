package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
)

// sweeper forgets expired records: once at start (records may have expired
// while the server was down) and then every interval.
type sweeper struct {
	ledger   *spent.Ledger
	interval time.Duration
	batch    int
	log      *slog.Logger

	removed  prometheus.Counter
	failures prometheus.Counter
	last     prometheus.Gauge
}

// newSweeper returns the sweeper of l. Its metrics are s.collectors(), for
// the caller to register.
func newSweeper(l *spent.Ledger, interval time.Duration, batch int, log *slog.Logger) *sweeper {
	s := &sweeper{
		ledger:   l,
		interval: interval,
		batch:    batch,
		log:      log,
		removed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spent_sweep_removed_records_total",
			Help: "Expired records forgotten by the sweeper.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spent_sweep_failures_total",
			Help: "Sweeps that ended with a store error.",
		}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spent_sweep_last_success_timestamp_seconds",
			Help: "Unix time of the end of the last sweep that succeeded.",
		}),
	}
	return s
}

// collectors returns the sweeper's metrics.
func (s *sweeper) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.removed, s.failures, s.last}
}

// run sweeps until ctx is cancelled.
func (s *sweeper) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep forgets every record expired by now.
func (s *sweeper) sweep(ctx context.Context) {
	start := time.Now()
	n, err := s.ledger.Sweep(ctx, s.batch)
	s.removed.Add(float64(n))
	if err != nil {
		if ctx.Err() == nil {
			s.failures.Inc()
			s.log.Warn("sweep failed; retrying at the next interval", "removed", n, "err", err, "next", s.interval)
		}
		return
	}
	s.last.SetToCurrentTime()
	if n > 0 {
		s.log.Debug("swept expired records", "removed", n, "took", time.Since(start))
	}
}
