package main

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestHistogramBuckets(t *testing.T) {
	for _, v := range []uint64{0, 1, 255, 256, 257, 1000, 123456789, 1 << 40, math.MaxUint64} {
		i := histBucket(v)
		if i < 0 || i >= histNumBuckets {
			t.Fatalf("bucket of %d: got %d, outside [0, %d)", v, i, histNumBuckets)
		}
		lo, hi := histBounds(i)
		if v < lo || v > hi {
			t.Fatalf("bucket %d of %d: bounds [%d, %d] do not hold it", i, v, lo, hi)
		}
		if lo > 0 && float64(hi-lo) > float64(lo)/histSubCount {
			t.Fatalf("bucket %d: [%d, %d] wider than 1/%d of its value", i, lo, hi, histSubCount)
		}
	}
	// Buckets tile the values: each starts right after the previous one.
	for i := 1; i < histNumBuckets; i++ {
		_, prevHi := histBounds(i - 1)
		lo, _ := histBounds(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, prevHi+1)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var a, b histogram
	rnd := rand.New(rand.NewPCG(1, 2))
	var vals []uint64
	for i := range 100000 {
		v := uint64(rnd.ExpFloat64() * 1e6) // latencies around 1 ms, long tail
		vals = append(vals, v)
		if i%2 == 0 {
			a.record(v)
		} else {
			b.record(v)
		}
	}
	a.merge(&b)
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.99, 0.999, 1} {
		want := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := a.quantile(q)
		if math.Abs(float64(got)-float64(want)) > float64(want)/histSubCount+1 {
			t.Errorf("quantile %g: got %d, want %d within 1/%d", q, got, want, histSubCount)
		}
	}
	if a.max != vals[len(vals)-1] || a.min != vals[0] || a.total != uint64(len(vals)) {
		t.Errorf("min, max, total: got %d, %d, %d", a.min, a.max, a.total)
	}
	var empty histogram
	if got := empty.quantile(0.5); got != 0 {
		t.Errorf("empty histogram: got %d, want 0", got)
	}
}
