package resp

import "github.com/prometheus/client_golang/prometheus"

// metrics are the listener's Prometheus metrics (docs/operations.md).
type metrics struct {
	commands     *prometheus.CounterVec
	outcomes     *prometheus.CounterVec
	refused      *prometheus.CounterVec
	conns        prometheus.Gauge
	rollbackOpen prometheus.Gauge
	rollbackDone *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spent_resp_commands_total",
			Help: "RESP commands answered, by command (other for the rest) and status (ok or error)."}, []string{"command", "status"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spent_resp_claims_total",
			Help: "Claims decided through the RESP listener, by outcome."}, []string{"outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spent_resp_refused_total",
			Help: "Connections or commands refused before any command ran, by reason: max_clients, not_loopback, protocol, auth, http."}, []string{"reason"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "spent_resp_connections",
			Help: "RESP connections open."}),
		rollbackOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "spent_resp_rollback_pending",
			Help: "Claims of rollback prefixes in their window: pending, to be completed with their value."}),
		rollbackDone: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spent_resp_rollback_ended_total",
			Help: "Rollback windows ended, by how: completed, released (by DEL), failed (left pending, an unknown outcome)."}, []string{"how"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.commands, m.outcomes, m.refused, m.conns, m.rollbackOpen, m.rollbackDone} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
