package redis_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/redis"
)

func sameRecord(a, b spent.Record) bool {
	return a.Namespace == b.Namespace && a.Hash == b.Hash && a.RawKey == b.RawKey &&
		a.FirstSeen.Equal(b.FirstSeen) && a.Place == b.Place &&
		bytes.Equal(a.Fingerprint, b.Fingerprint) && a.State == b.State &&
		bytes.Equal(a.Result, b.Result) && (a.Result == nil) == (b.Result == nil) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.LeaseUntil.Equal(b.LeaseUntil) &&
		a.LeaseUntil.IsZero() == b.LeaseUntil.IsZero() && a.Seq == b.Seq
}

var codecRecords = map[string]spent.Record{
	"Complete": {Namespace: "default", Hash: hashOf("a"), FirstSeen: t0, Place: "gate", Fingerprint: bytes.Repeat([]byte{7}, 32),
		State: spent.StateComplete, Result: []byte{0, 1, 2, 0}, ExpiresAt: t0.Add(time.Hour), Seq: spent.Seq{Node: 3, Counter: 1}},
	"EmptyResult": {Namespace: "n", Hash: hashOf("b"), FirstSeen: t0, State: spent.StateComplete, Result: []byte{},
		ExpiresAt: t0.Add(time.Nanosecond), Seq: spent.Seq{Node: math.MaxUint32, Counter: math.MaxUint64}},
	"Pending": {Namespace: "pay", Hash: hashOf("c"), RawKey: "order-17", FirstSeen: time.Unix(0, 1), Place: strings.Repeat("p", 300),
		State: spent.StatePending, LeaseUntil: t0.Add(5 * time.Second), ExpiresAt: time.Date(2262, 4, 12, 0, 0, 0, 999999999, time.UTC),
		Seq: spent.Seq{Node: 1, Counter: 1 << 62}},
	"FarFuture": {Namespace: "x", Hash: hashOf("d"), FirstSeen: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), State: spent.StateComplete,
		Result: []byte("r"), ExpiresAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), Seq: spent.Seq{Node: 1, Counter: 2}},
}

func TestRecordRoundTrip(t *testing.T) {
	for name, r := range codecRecords {
		t.Run(name, func(t *testing.T) {
			got, err := redis.DecodeRecord(r.Hash, redis.EncodeRecord(&r))
			if err != nil {
				t.Fatalf("DecodeRecord: %v", err)
			}
			if !sameRecord(got, r) {
				t.Fatalf("round trip:\ngot  %+v\nwant %+v", got, r)
			}
		})
	}
}

func TestDecodeRefusesDamage(t *testing.T) {
	r := codecRecords["Complete"]
	v := redis.EncodeRecord(&r)
	damaged := map[string][]byte{
		"Empty":       {},
		"ShortHeader": v[:40],
		"Version":     append([]byte{2}, v[1:]...),
		"State":       append(append([]byte{}, v[:1]...), append([]byte{3}, v[2:]...)...),
		"Truncated":   v[:60],
		"Flags":       append(append([]byte{}, v[:56]...), append([]byte{0x80}, v[57:]...)...),
	}
	noResult := codecRecords["Pending"]
	w := redis.EncodeRecord(&noResult)
	damaged["ResultWithoutFlag"] = append(w, 'x')
	for name, b := range damaged {
		if _, err := redis.DecodeRecord(r.Hash, b); !errors.Is(err, redis.ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
}

func TestCeilMilli(t *testing.T) {
	cases := []struct {
		t    time.Time
		want int64
	}{
		{time.UnixMilli(1500), 1500},
		{time.Unix(1, 500_000_001), 1501},
		{time.Unix(1, 999_999_999), 2000},
		{time.Unix(-1, 1), -999},
	}
	for _, tc := range cases {
		if got := redis.CeilMilli(tc.t); got != tc.want {
			t.Errorf("CeilMilli(%v): got %d, want %d", tc.t, got, tc.want)
		}
		if time.UnixMilli(redis.CeilMilli(tc.t)).Before(tc.t) {
			t.Errorf("CeilMilli(%v) is before it", tc.t)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range codecRecords {
		f.Add(redis.EncodeRecord(&r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h spent.Hash
		r, err := redis.DecodeRecord(h, b)
		if err != nil {
			return
		}
		// What decodes encodes to the same bytes.
		if again := redis.EncodeRecord(&r); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, want %x", again, b)
		}
	})
}
