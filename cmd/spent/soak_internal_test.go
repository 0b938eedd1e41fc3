package main

import (
	"math"
	"strings"
	"testing"
)

func TestReadMetrics(t *testing.T) {
	const text = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
process_resident_memory_bytes 1.2345678e+08
# TYPE spent_claim_duration_seconds histogram
spent_claim_duration_seconds_bucket{endpoint="claim",le="0.001"} 90
spent_claim_duration_seconds_bucket{endpoint="claim",le="0.002"} 99
spent_claim_duration_seconds_bucket{endpoint="claim",le="+Inf"} 100
spent_claim_duration_seconds_sum{endpoint="claim"} 0.1
spent_claim_duration_seconds_count{endpoint="claim"} 100
spent_claim_duration_seconds_bucket{endpoint="claims",le="0.001"} 7
spent_claim_duration_seconds_bucket{endpoint="claims",le="+Inf"} 7
spent_claim_duration_seconds_sum{endpoint="claims"} 0.1
spent_claim_duration_seconds_count{endpoint="claims"} 7
spent_claims_total{namespace="go_goroutines",outcome="fresh"} 5
`
	v, buckets, err := readMetrics(strings.NewReader(text), "go_goroutines", "process_resident_memory_bytes", "spent_store_records")
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != 42 || v[1] != 123456780 || v[2] != -1 {
		t.Fatalf("values: got %v, want [42 123456780 -1]", v)
	}
	if len(buckets) != 3 || buckets[0] != (soakBucket{0.001, 90}) || buckets[2].count != 100 {
		t.Fatalf("buckets: got %v, want the claim endpoint's three", buckets)
	}
}

func TestServerP99(t *testing.T) {
	hist := func(a, b, c float64) []soakBucket {
		return []soakBucket{{0.001, a}, {0.002, a + b}, {math.Inf(1), a + b + c}}
	}
	for _, tc := range []struct {
		name      string
		prev, cur []soakBucket
		wantMS    float64
		wantOver  bool
	}{
		{"InFirstBucket", hist(10, 0, 0), hist(1010, 0, 0), 1, false},
		{"InSecondBucket", hist(0, 0, 0), hist(98, 2, 0), 2, false},
		{"AboveTheLargest", hist(0, 0, 0), hist(90, 0, 10), 2, true},
		{"NothingCounted", hist(5, 5, 5), hist(5, 5, 5), 0, false},
		{"NotRead", nil, hist(5, 5, 5), -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, over := serverP99(tc.prev, tc.cur)
			if ms != tc.wantMS || over != tc.wantOver {
				t.Fatalf("got %g ms, over %v; want %g ms, over %v", ms, over, tc.wantMS, tc.wantOver)
			}
		})
	}
}
