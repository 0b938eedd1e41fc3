package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

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

// claimBucketPrefix starts the lines of the claim endpoint's buckets of
// spent_claim_duration_seconds; the le label follows.
const claimBucketPrefix = sphttp.MetricClaimDuration + `_bucket{endpoint="claim",le="`

// readMetrics reads from the Prometheus text format in r the values of the
// named unlabelled metrics, -1 for those absent, and the buckets of the claim
// endpoint's spent_claim_duration_seconds.
func readMetrics(r io.Reader, names ...string) ([]int64, []soakBucket, error) {
	out := make([]int64, len(names))
	for i := range out {
		out[i] = -1
	}
	var buckets []soakBucket
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if rest, ok := strings.CutPrefix(line, claimBucketPrefix); ok {
			le, val, ok := strings.Cut(rest, `"} `)
			if !ok {
				return nil, nil, fmt.Errorf("bucket line %q: want le=\"…\"} count", line)
			}
			b, err := parseBucket(le, val)
			if err != nil {
				return nil, nil, fmt.Errorf("bucket line %q: %w", line, err)
			}
			buckets = append(buckets, b)
			continue
		}
		// An unlabelled sample is "name value [timestamp]".
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		for i, n := range names {
			if f[0] == n {
				v, err := strconv.ParseFloat(f[1], 64)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: value %q: %w", n, f[1], err)
				}
				out[i] = int64(v)
			}
		}
	}
	return out, buckets, sc.Err()
}

// parseBucket reads a bucket's le label and count.
func parseBucket(le, count string) (soakBucket, error) {
	var b soakBucket
	var err error
	if b.le, err = strconv.ParseFloat(le, 64); err != nil { // "+Inf" included
		return b, err
	}
	f := strings.Fields(count)
	if len(f) == 0 {
		return b, errors.New("no count")
	}
	b.count, err = strconv.ParseFloat(f[0], 64)
	return b, err
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
