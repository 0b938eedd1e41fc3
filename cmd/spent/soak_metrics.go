package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	sphttp "github.com/spentledger/spent/http"
)

// soakSample is what the soak reads from the server's /metrics; -1 where a
// metric is missing.
type soakSample struct {
	rss, heap, goroutines, records, removed int64
	// claimBuckets is the cumulative histogram of the server's time per
	// claim request.
	claimBuckets []soakBucket
}

// soakBucket is one bucket of a Prometheus histogram: the count of values up
// to le seconds.
type soakBucket struct {
	le    float64
	count float64
}

// soakSampler reads the server's /metrics.
type soakSampler struct {
	url    string
	client *http.Client
}

// sample reads the figures of one row. A server without a metric (records,
// on a shared store) gives -1 for it.
func (s *soakSampler) sample(ctx context.Context) (soakSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return soakSample{}, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return soakSample{}, fmt.Errorf("reading %s: %w", s.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return soakSample{}, fmt.Errorf("reading %s: %s", s.url, resp.Status)
	}
	v, buckets, err := readMetrics(resp.Body, "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes",
		"go_goroutines", "spent_store_records", "spent_sweep_removed_records_total")
	if err != nil {
		return soakSample{}, fmt.Errorf("reading %s: %w", s.url, err)
	}
	return soakSample{rss: v[0], heap: v[1], goroutines: v[2], records: v[3], removed: v[4], claimBuckets: buckets}, nil
}

// readMetrics reads from the Prometheus text format in r (parsed by the
// Prometheus project's own expfmt) the values of the named unlabelled
// metrics, -1 for those absent, and the buckets of the claim endpoint's
// spent_claim_duration_seconds.
func readMetrics(r io.Reader, names ...string) ([]int64, []soakBucket, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, nil, err
	}
	out := make([]int64, len(names))
	for i, n := range names {
		out[i] = -1
		if f := fams[n]; f != nil {
			for _, m := range f.GetMetric() {
				if len(m.GetLabel()) == 0 {
					out[i] = int64(sampleValue(m))
				}
			}
		}
	}
	var buckets []soakBucket
	for _, m := range fams[sphttp.MetricClaimDuration].GetMetric() {
		if !hasLabel(m, "endpoint", "claim") || m.GetHistogram() == nil {
			continue
		}
		for _, b := range m.GetHistogram().GetBucket() {
			buckets = append(buckets, soakBucket{b.GetUpperBound(), float64(b.GetCumulativeCount())})
		}
	}
	return out, buckets, nil
}

// sampleValue is the value of a gauge, counter or untyped sample.
func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// hasLabel reports whether m has the label name=value.
func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}

// serverP99 returns, in milliseconds, the upper bound of the bucket that
// holds the 99th percentile of the values the histogram counted between two
// reads, and whether it is the +Inf bucket (the largest finite bound is
// returned then). It returns 0 when nothing was counted and -1 when either
// read lacks the histogram.
func serverP99(prev, cur []soakBucket) (ms float64, over bool) {
	if len(prev) == 0 || len(prev) != len(cur) {
		return -1, false
	}
	total := cur[len(cur)-1].count - prev[len(prev)-1].count
	if total <= 0 {
		return 0, false
	}
	rank := math.Ceil(0.99 * total)
	finite := 0.0
	for i := range cur {
		if math.IsInf(cur[i].le, 1) {
			return finite * 1e3, true
		}
		finite = cur[i].le
		if cur[i].count-prev[i].count >= rank {
			return cur[i].le * 1e3, false
		}
	}
	return finite * 1e3, true
}
