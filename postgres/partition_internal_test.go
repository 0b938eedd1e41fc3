package postgres

import (
	"math"
	"testing"
	"time"
)

func TestPeriodOf(t *testing.T) {
	const h = int64(time.Hour)
	day := int64(24 * time.Hour)
	cases := []struct {
		name  string
		e     int64
		per   int64
		parts []partition
		want  partition
	}{
		{"Aligned", 3*day + 5, day, nil, partition{lo: 3 * day, hi: 4 * day}},
		{"AtTheStart", 3 * day, day, nil, partition{lo: 3 * day, hi: 4 * day}},
		{"BeforeTheEpoch", -5, day, nil, partition{lo: -day, hi: 0}},
		{"CutByAnOlderPartition", 3*day + 2*h, day, []partition{{lo: 2 * day, hi: 3*day + h}}, partition{lo: 3*day + h, hi: 4 * day}},
		{"CutByANewerPartition", 3*day + 5, day, []partition{{lo: 3*day + 2*h, hi: 3*day + 3*h}}, partition{lo: 3 * day, hi: 3*day + 2*h}},
		{"CutOnBothSides", 3*day + 5*h, day, []partition{{lo: 3 * day, hi: 3*day + h}, {lo: 3*day + 6*h, hi: 4 * day}},
			partition{lo: 3*day + h, hi: 3*day + 6*h}},
		{"FarPartitionsDoNotCut", 3*day + 5, day, []partition{{loMin: true, hi: day}, {lo: 9 * day, hiMax: true}}, partition{lo: 3 * day, hi: 4 * day}},
		{"Newest", math.MaxInt64, day, nil, partition{lo: math.MaxInt64 - math.MaxInt64%day, hiMax: true}},
		{"Oldest", math.MinInt64, day, nil, partition{loMin: true, hi: math.MinInt64 - math.MinInt64%day}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := periodOf(tc.e, tc.per, tc.parts)
			got.name = ""
			if got != tc.want {
				t.Fatalf("periodOf(%d, %d, %v): got %+v, want %+v", tc.e, tc.per, tc.parts, got, tc.want)
			}
			if !got.covers(tc.e) {
				t.Fatalf("periodOf(%d): %+v does not cover it", tc.e, got)
			}
		})
	}
}

func TestPartitionName(t *testing.T) {
	lo := time.Date(2031, 3, 14, 0, 0, 0, 0, time.UTC).UnixNano()
	if got := partitionName(partition{lo: lo}); got != "records_20310314t000000" {
		t.Fatalf("got %q", got)
	}
	if got := partitionName(partition{loMin: true}); got != "records_min" {
		t.Fatalf("got %q", got)
	}
}

func TestParseBound(t *testing.T) {
	for in, want := range map[string]int64{"'123'": 123, "-5": -5, "'-9223372036854775808'": math.MinInt64} {
		v, inf, err := parseBound(in)
		if err != nil || inf || v != want {
			t.Fatalf("parseBound(%q): got %d, %v, %v, want %d", in, v, inf, err, want)
		}
	}
	for _, in := range []string{"MINVALUE", "MAXVALUE"} {
		if _, inf, err := parseBound(in); err != nil || !inf {
			t.Fatalf("parseBound(%q): got %v, %v, want infinite", in, inf, err)
		}
	}
	if _, _, err := parseBound("'x'"); err == nil {
		t.Fatal("parseBound of a non-number: got no error")
	}
}
