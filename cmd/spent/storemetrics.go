package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent/pebble"
)

// storeCollector exports the embedded store's counters (pebble.Stats),
// reading them once per scrape.
type storeCollector struct {
	store *pebble.Store
	descs []*prometheus.Desc
}

// The store metrics, in the order collect emits them.
var storeMetrics = []struct {
	name, help string
	kind       prometheus.ValueType
	value      func(*pebble.Stats) float64
}{
	{"spent_store_records", "Records physically held by the store, expired but unswept ones and early claims held in memory included (the existence filter's entries: 0 while no filter is complete, and after a crash, records deleted since the filter's last save count until it is next rebuilt).",
		prometheus.GaugeValue, func(s *pebble.Stats) float64 { return float64(s.FilterEntries) }},
	{"spent_store_filter_bytes", "Memory held by the store's existence filter.",
		prometheus.GaugeValue, func(s *pebble.Stats) float64 { return float64(s.FilterBytes) }},
	{"spent_store_filter_building", "1 while the existence filter is built from the record keys in the background (at start when no saved filter could be trusted, or to replace a full one); with spent_store_filter_bytes 0, every claim reads pebble meanwhile.",
		prometheus.GaugeValue, func(s *pebble.Stats) float64 { return b2f(s.FilterBuilding) }},
	{"spent_store_filter_saves_total", "Periodic saves of the existence filter to SPENT-FILTER that completed.",
		prometheus.CounterValue, func(s *pebble.Stats) float64 { return float64(s.FilterSaves) }},
	{"spent_store_rounds_total", "Decision rounds (pebble batches) the store ran.",
		prometheus.CounterValue, func(s *pebble.Stats) float64 { return float64(s.Rounds) }},
	{"spent_store_claims_total", "Claims the store decided, each op of a batch counted.",
		prometheus.CounterValue, func(s *pebble.Stats) float64 { return float64(s.Claims) }},
	{"spent_store_inserted_total", "Claims that wrote their record.",
		prometheus.CounterValue, func(s *pebble.Stats) float64 { return float64(s.Inserted) }},
	{"spent_store_syncs_total", "WAL syncs waited for, one per round that wrote.",
		prometheus.CounterValue, func(s *pebble.Stats) float64 { return float64(s.Syncs) }},
	{"spent_store_filter_skips_total", "Lookups the existence filter answered without reading pebble.",
		prometheus.CounterValue, func(s *pebble.Stats) float64 { return float64(s.FilterSkips) }},
	{"spent_store_reads_total", "Lookups that read pebble.",
		prometheus.CounterValue, func(s *pebble.Stats) float64 { return float64(s.Reads) }},
	{"spent_store_swept_total", "Expired records the store removed.",
		prometheus.CounterValue, func(s *pebble.Stats) float64 { return float64(s.Swept) }},
	{"spent_store_held_total", "Fresh early claims (the idempotency middleware's) held in memory instead of written.",
		prometheus.CounterValue, func(s *pebble.Stats) float64 { return float64(s.Held) }},
}

// b2f is 1 for true, 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func newStoreCollector(s *pebble.Store) *storeCollector {
	c := &storeCollector{store: s}
	for _, m := range storeMetrics {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, nil, nil))
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.Stats()
	for i, m := range storeMetrics {
		ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(&st))
	}
}
