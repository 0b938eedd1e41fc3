package main

import (
	"math"
	"math/bits"
)

// The histogram keeps 2^histSubBits buckets per power of two, so a value is
// reported within 1/2^histSubBits (under 0.8%) of what was recorded, from one
// nanosecond to the largest uint64, in a fixed 58 KiB.
const (
	histSubBits    = 7
	histSubCount   = 1 << histSubBits
	histNumBuckets = (64 - histSubBits + 1) * histSubCount
)

// histogram counts values (latencies in nanoseconds) in log-linear buckets,
// in the manner of an HDR histogram: values below 2^(histSubBits+1) have a
// bucket each; above, every power of two is split into histSubCount equal
// buckets. It is not safe for concurrent use: give each worker its own and
// merge them.
type histogram struct {
	counts   [histNumBuckets]uint64
	total    uint64
	min, max uint64
}

// histBucket returns the index of the bucket holding v.
func histBucket(v uint64) int {
	if v < 2*histSubCount {
		return int(v)
	}
	shift := bits.Len64(v) - 1 - histSubBits
	return shift*histSubCount + int(v>>shift)
}

// histBounds returns the smallest and largest values bucket i holds.
func histBounds(i int) (lo, hi uint64) {
	if i < 2*histSubCount {
		return uint64(i), uint64(i)
	}
	shift := i/histSubCount - 1
	mant := uint64(i - shift*histSubCount)
	lo = mant << shift
	return lo, lo + (1<<shift - 1)
}

// record counts one value.
func (h *histogram) record(v uint64) {
	h.counts[histBucket(v)]++
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total++
}

// merge adds o's counts to h.
func (h *histogram) merge(o *histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.total += o.total
}

// quantile returns the value at quantile q (0 to 1): the largest value of the
// bucket that holds the ceil(q·total)-th smallest recorded value, clipped to
// the recorded minimum and maximum. It returns 0 when nothing was recorded.
func (h *histogram) quantile(q float64) uint64 {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = max(rank, 1)
	rank = min(rank, h.total)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := histBounds(i)
			return min(max(hi, h.min), h.max)
		}
	}
	return h.max
}
