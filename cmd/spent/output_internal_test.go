package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// TestPlacesPrintedQuoted (issue 31, finding 10): `spent unknown list` and
// the record fields printed a claim's place (and a raw key) as given, so a
// claimer could forge rows of the list with a newline and send escape
// sequences to the operator's terminal. A place or key that is not plain
// printable text is printed quoted; a plain one as it is.
func TestPlacesPrintedQuoted(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	recs := []spent.Record{
		{Namespace: "payments", Place: "gate-1\nffffffffffffffffffffffffffffffff  payments  1:1  forged", RawKey: "k\x1b[2Jcleared", State: spent.StatePending, FirstSeen: now, LeaseUntil: now, ExpiresAt: now.Add(time.Hour)},
		{Namespace: "payments", Place: "gate-2", RawKey: "order-2", State: spent.StatePending, FirstSeen: now, LeaseUntil: now, ExpiresAt: now.Add(time.Hour)},
		{Namespace: "payments", Place: "north gate", State: spent.StatePending, FirstSeen: now, LeaseUntil: now, ExpiresAt: now.Add(time.Hour)},
	}
	var b bytes.Buffer
	p := &printer{w: &b, now: now}
	p.unknown(recs)
	out := b.String()
	if n := strings.Count(out, "\n"); n != len(recs)+1 {
		t.Fatalf("unknown list: %d lines, want %d (a header and one a record: no forged row)\n%s", n, len(recs)+1, out)
	}
	if strings.ContainsRune(out, 0x1b) {
		t.Fatalf("unknown list: an escape character reached the terminal\n%q", out)
	}
	for _, want := range []string{`"gate-1\nffff`, `"k\x1b[2Jcleared"`, " gate-2 ", " order-2", `"north gate"`} {
		if !strings.Contains(out, want) {
			t.Errorf("unknown list: want %q in\n%s", want, out)
		}
	}
	b.Reset()
	p.fields(recs[0])
	for l := range strings.Lines(b.String()) {
		if !strings.HasPrefix(l, "  ") {
			t.Fatalf("record fields: the place broke its line: %q\n%s", l, b.String())
		}
	}
}
