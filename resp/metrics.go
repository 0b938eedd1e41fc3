package resp

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
)

// metrics are the listener's Prometheus metrics (docs/operations.md).
type metrics struct {
	commands      *prometheus.CounterVec
	outcomes      *prometheus.CounterVec
	refused       *prometheus.CounterVec
	conns         prometheus.Gauge
	rollbackOpen  prometheus.Gauge
	rollbackBytes prometheus.Gauge
	rollbackDone  *prometheus.CounterVec

	// The counters of the commands and outcomes spent answers, looked up
	// once rather than by label on every command.
	byCommand map[string][2]prometheus.Counter // [ok, error]
	byOutcome map[spent.Outcome]prometheus.Counter
}

// command counts one command of label (commandLabel's), answered without
// an error reply when ok.
func (m *metrics) command(label string, ok bool) {
	i := 0
	if !ok {
		i = 1
	}
	m.byCommand[label][i].Inc()
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spent_resp_commands_total",
			Help: "RESP commands answered, by command (other for the rest) and status (ok or error)."}, []string{"command", "status"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spent_resp_claims_total",
			Help: "Claims decided through the RESP listener, by outcome."}, []string{"outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spent_resp_refused_total",
			Help: "Connections or commands refused or cut off, by reason: max_clients, evicted, not_loopback, protocol, auth, auth_failures, auth_timeout, read_timeout, write_timeout, idle, busy, rollback_budget, revoked, http."}, []string{"reason"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "spent_resp_connections",
			Help: "RESP connections open."}),
		rollbackOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "spent_resp_rollback_pending",
			Help: "Claims of rollback prefixes in their window: pending, to be completed with their value."}),
		rollbackBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "spent_resp_rollback_bytes",
			Help: "Bytes the values of claims of rollback prefixes hold while they wait for their window's end (at most max_rollback_bytes)."}),
		rollbackDone: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spent_resp_rollback_ended_total",
			Help: "Rollback windows ended, by how: completed, released (by DEL or SPENT.RELEASE, or ended by SPENT.COMPLETE), failed (left pending, an unknown outcome)."}, []string{"how"}),
	}
	m.byCommand = map[string][2]prometheus.Counter{}
	for _, name := range append(commandNames, "other") {
		label := commandLabel(name)
		m.byCommand[label] = [2]prometheus.Counter{m.commands.WithLabelValues(label, "ok"), m.commands.WithLabelValues(label, "error")}
	}
	m.byOutcome = map[spent.Outcome]prometheus.Counter{}
	for _, o := range []spent.Outcome{spent.Fresh, spent.Replayed, spent.InProgress, spent.Refused, spent.Mismatch} {
		m.byOutcome[o] = m.outcomes.WithLabelValues(string(o))
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.commands, m.outcomes, m.refused, m.conns, m.rollbackOpen, m.rollbackBytes, m.rollbackDone} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
