package doortest

import (
	"fmt"
	"testing"
)

// badPlaces are places a door must refuse: a place is printed to
// operators as given, so it may carry no control character (C0, DEL, C1),
// no bidirectional override, and nothing that is not UTF-8.
var badPlaces = []struct{ name, place string }{
	{"newline", "gate-1\nforged log line"},
	{"carriage return", "gate-1\rgate-2"},
	{"escape", "gate-1\x1b[31mred"},
	{"NUL", "gate-1\x00hidden"},
	{"tab", "gate\t1"},
	{"DEL", "gate-1\x7f"},
	{"C1 control", "gate-1\u0085"},
	{"bidi override", "gate-\u202e1-etag"},
	{"bidi isolate", "gate-\u20661"},
	{"invalid UTF-8", "gate-\xff\xfe"},
	{"truncated UTF-8", "gate-\xe2\x82"},
	{"surrogate in UTF-8", "gate-\xed\xa0\x80"},
}

// goodPlace is printable UTF-8 beyond ASCII: it must be accepted and kept.
const goodPlace = "Gate 7 · Zürich ✓ 東京"

// testControlCharacters claims a new key with each of badPlaces: each is
// refused with the door's documented answer and leaves no record. A claim
// with a printable UTF-8 place is accepted, and its record keeps the place
// byte for byte.
func testControlCharacters(t *testing.T, bin string, d Door) {
	c := claimer(t, d)
	want := d.Docs(defaults()).InvalidPlace
	s := startServer(t, bin, d, "")
	cl := dial(t, c, s.Addr, ClaimToken)
	for i, bp := range badPlaces {
		key := fmt.Sprintf("place-%d", i)
		ctx, cancel := opCtx()
		r, err := cl.Claim(ctx, Claim{Namespace: NSClaims, Key: key, Value: []byte("v"), Place: bp.place})
		cancel()
		if err != nil {
			t.Fatalf("place with %s: %v", bp.name, err)
		}
		if !want.Matches(r) {
			t.Errorf("place with %s (%q): got %s, want %s", bp.name, bp.place, show(r), showWant(want))
		}
		ctx, cancel = opCtx()
		rec, found, err := cl.Get(ctx, NSClaims, key)
		cancel()
		if err != nil {
			t.Fatalf("place with %s: reading the key: %v", bp.name, err)
		}
		if found {
			t.Errorf("place with %s: refused, yet the key has a record (place %q); want nothing claimed", bp.name, rec.Place)
		}
	}
	claimFresh(t, cl, Claim{Namespace: NSClaims, Key: "place-good", Value: []byte("v"), Place: goodPlace})
	ctx, cancel := opCtx()
	defer cancel()
	rec, found, err := cl.Get(ctx, NSClaims, "place-good")
	if err != nil || !found {
		t.Fatalf("reading the claim with a printable place: found %v, %v", found, err)
	}
	if rec.Place != goodPlace {
		t.Fatalf("the record's place: got %q, want %q", rec.Place, goodPlace)
	}
}
