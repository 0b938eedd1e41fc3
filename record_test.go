package spent_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

func TestSeqText(t *testing.T) {
	s := spent.Seq{Node: 7, Counter: 8400000}
	if got := s.String(); got != "7:8400000" {
		t.Fatalf("String: got %q, want %q", got, "7:8400000")
	}
	var back spent.Seq
	if err := back.UnmarshalText([]byte("7:8400000")); err != nil || back != s {
		t.Fatalf("UnmarshalText: got %v, %v, want %v, nil", back, err, s)
	}
	for _, bad := range []string{"", "7", "7:", ":1", "x:1", "1:y", "-1:1", "4294967296:1", "1:18446744073709551616"} {
		if _, err := spent.ParseSeq(bad); err == nil {
			t.Fatalf("ParseSeq(%q): got nil error, want one", bad)
		}
	}
	if !(spent.Seq{Node: 1, Counter: 9}).Less(spent.Seq{Node: 2, Counter: 1}) ||
		!(spent.Seq{Node: 2, Counter: 1}).Less(spent.Seq{Node: 2, Counter: 2}) ||
		(spent.Seq{Node: 2, Counter: 2}).Less(spent.Seq{Node: 2, Counter: 2}) {
		t.Fatalf("Less: got a wrong order, want by node then counter")
	}
	if !(spent.Seq{}).IsZero() || (spent.Seq{Counter: 1}).IsZero() {
		t.Fatalf("IsZero: got a wrong answer")
	}
}

func TestHashText(t *testing.T) {
	h := spent.Hash{0x00, 0x01, 0xab, 0xff}
	s := h.String()
	if len(s) != 2*spent.HashSize || !strings.HasPrefix(s, "0001abff") {
		t.Fatalf("String: got %q, want 32 lowercase hex digits starting 0001abff", s)
	}
	back, err := spent.ParseHash(s)
	if err != nil || back != h {
		t.Fatalf("ParseHash: got %v, %v, want %v, nil", back, err, h)
	}
	for _, bad := range []string{"", s[:31], s + "0", strings.Repeat("g", 32)} {
		if _, err := spent.ParseHash(bad); err == nil {
			t.Fatalf("ParseHash(%q): got nil error, want one", bad)
		}
	}
	if !(spent.Hash{}).IsZero() || h.IsZero() {
		t.Fatalf("IsZero: got a wrong answer")
	}
}

func TestStateText(t *testing.T) {
	for _, s := range []spent.State{spent.StatePending, spent.StateComplete} {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back spent.State
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Fatalf("UnmarshalText(%q): got %v, %v, want %v, nil", b, back, err, s)
		}
	}
	if _, err := spent.State(0).MarshalText(); err == nil {
		t.Fatalf("MarshalText of state 0: got nil error, want one")
	}
	var s spent.State
	if err := s.UnmarshalText([]byte("done")); err == nil {
		t.Fatalf("UnmarshalText(done): got nil error, want one")
	}
}

func TestRecordJSONRoundTrip(t *testing.T) {
	r := spent.Record{
		Namespace: "echo", Hash: spent.Hash{1, 2, 3}, RawKey: "order-1", FirstSeen: testEpoch.Add(123),
		Place: "gate 3", Fingerprint: fpA, State: spent.StatePending, ExpiresAt: testEpoch.Add(time.Hour),
		LeaseUntil: testEpoch.Add(time.Minute), Seq: spent.Seq{Node: 3, Counter: 99},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back spent.Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Hash != r.Hash || back.Seq != r.Seq || back.State != r.State || !back.FirstSeen.Equal(r.FirstSeen) ||
		!back.LeaseUntil.Equal(r.LeaseUntil) || string(back.Fingerprint) != string(r.Fingerprint) || back.RawKey != r.RawKey {
		t.Fatalf("JSON round trip: got %+v, want %+v", back, r)
	}
}

func TestRecordValidate(t *testing.T) {
	good := spent.Record{State: spent.StatePending, ExpiresAt: testEpoch, LeaseUntil: testEpoch, Seq: spent.Seq{Node: 1, Counter: 1}}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate: got %v, want nil", err)
	}
	for name, mod := range map[string]func(*spent.Record){
		"NoSeq":          func(r *spent.Record) { r.Seq = spent.Seq{} },
		"NoState":        func(r *spent.Record) { r.State = 0 },
		"UnknownState":   func(r *spent.Record) { r.State = 3 },
		"NoExpiresAt":    func(r *spent.Record) { r.ExpiresAt = time.Time{} },
		"PendingNoLease": func(r *spent.Record) { r.LeaseUntil = time.Time{} },
	} {
		r := good
		mod(&r)
		if err := r.Validate(); err == nil {
			t.Fatalf("%s: Validate got nil, want an error", name)
		}
	}
}

func TestLivenessBoundaries(t *testing.T) {
	exp := testEpoch.Add(time.Hour)
	lease := testEpoch.Add(time.Minute)
	r := spent.Record{State: spent.StatePending, ExpiresAt: exp, LeaseUntil: lease}
	cases := []struct {
		now                time.Time
		live, leaseExpired bool
		free, freeRetake   bool
	}{
		{testEpoch, true, false, false, false},
		{lease.Add(-1), true, false, false, false},
		{lease, true, true, false, true},
		{exp.Add(-1), true, true, false, true},
		{exp, false, true, true, true},
	}
	for _, tc := range cases {
		at := tc.now.Sub(testEpoch)
		if got := r.LiveAt(tc.now); got != tc.live {
			t.Fatalf("LiveAt(+%v): got %v, want %v", at, got, tc.live)
		}
		if got := r.LeaseExpiredAt(tc.now); got != tc.leaseExpired {
			t.Fatalf("LeaseExpiredAt(+%v): got %v, want %v", at, got, tc.leaseExpired)
		}
		if got := spent.FreeAt(&r, tc.now, false); got != tc.free {
			t.Fatalf("FreeAt(+%v, no retake): got %v, want %v", at, got, tc.free)
		}
		if got := spent.FreeAt(&r, tc.now, true); got != tc.freeRetake {
			t.Fatalf("FreeAt(+%v, retake): got %v, want %v", at, got, tc.freeRetake)
		}
	}
	done := spent.Record{State: spent.StateComplete, ExpiresAt: exp}
	if done.LeaseExpiredAt(exp.Add(-1)) || spent.FreeAt(&done, exp.Add(-1), true) {
		t.Fatalf("complete record: got lease expired or free before expires_at, want neither")
	}
}

func TestOutcomeValid(t *testing.T) {
	for _, o := range []spent.Outcome{spent.Fresh, spent.Replayed, spent.InProgress, spent.Refused, spent.Mismatch} {
		if !o.Valid() {
			t.Fatalf("%q.Valid(): got false, want true", o)
		}
	}
	for _, o := range []spent.Outcome{"", "FRESH", "unknown"} {
		if o.Valid() {
			t.Fatalf("%q.Valid(): got true, want false", o)
		}
	}
}
