package storetest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/spentledger/spent"
)

// diffRecord lists the fields in which got differs from want, or "" when
// they agree. Times compare with Equal, byte slices by content (nil and empty
// alike).
func diffRecord(got, want spent.Record) string {
	var d []string
	field := func(name string, equal bool, g, w any) {
		if !equal {
			d = append(d, fmt.Sprintf("%s: got %v, want %v", name, g, w))
		}
	}
	field("Namespace", got.Namespace == want.Namespace, got.Namespace, want.Namespace)
	field("Key", got.Hash == want.Hash, got.Hash, want.Hash)
	field("RawKey", got.RawKey == want.RawKey, got.RawKey, want.RawKey)
	field("FirstSeen", got.FirstSeen.Equal(want.FirstSeen), got.FirstSeen, want.FirstSeen)
	field("Place", got.Place == want.Place, got.Place, want.Place)
	field("Fingerprint", bytes.Equal(got.Fingerprint, want.Fingerprint), got.Fingerprint, want.Fingerprint)
	field("State", got.State == want.State, got.State, want.State)
	field("Result", bytes.Equal(got.Result, want.Result), short(got.Result), short(want.Result))
	field("ExpiresAt", got.ExpiresAt.Equal(want.ExpiresAt), got.ExpiresAt, want.ExpiresAt)
	field("LeaseUntil", got.LeaseUntil.Equal(want.LeaseUntil), got.LeaseUntil, want.LeaseUntil)
	field("Seq", got.Seq == want.Seq, got.Seq, want.Seq)
	return strings.Join(d, "; ")
}

// checkRecord fails the test when got differs from want.
func checkRecord(tb testing.TB, what string, got, want spent.Record) {
	tb.Helper()
	if d := diffRecord(got, want); d != "" {
		tb.Fatalf("%s: %s", what, d)
	}
}

// short prints a byte slice, abbreviated when long.
func short(b []byte) string {
	if len(b) > 24 {
		return fmt.Sprintf("%x...(%d bytes)", b[:24], len(b))
	}
	return fmt.Sprintf("%x(%d bytes)", b, len(b))
}
