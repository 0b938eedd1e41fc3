package spent_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

func TestHashKeySeparatesNamespaceFromKey(t *testing.T) {
	l := mustOpen(t).ledger
	pairs := [][2][2]string{
		{{"ab", "c"}, {"a", "bc"}},
		{{"", "abc"}, {"abc", ""}},
		{{"a\x00", "b"}, {"a", "\x00b"}},
	}
	for _, p := range pairs {
		x, y := l.HashKey(p[0][0], p[0][1]), l.HashKey(p[1][0], p[1][1])
		if x == y {
			t.Fatalf("HashKey(%q, %q) = HashKey(%q, %q) = %v, want distinct hashes", p[0][0], p[0][1], p[1][0], p[1][1], x)
		}
	}
}

func TestHashKeyFollowsTheFormula(t *testing.T) {
	l := mustOpen(t).ledger
	for _, tc := range [][2]string{{"echo", "order-17"}, {"tickets", ""}, {"n", "\x00\xff"}} {
		ns, key := tc[0], tc[1]
		m := hmac.New(sha256.New, testSecret)
		m.Write([]byte{byte(len(ns) >> 8), byte(len(ns))})
		m.Write([]byte(ns))
		m.Write([]byte(key))
		var want spent.Hash
		copy(want[:], m.Sum(nil))
		if got := l.HashKey(ns, key); got != want {
			t.Fatalf("HashKey(%q, %q): got %v, want %v", ns, key, got, want)
		}
	}
}

func TestHashKeyDependsOnSecret(t *testing.T) {
	a := mustOpen(t).ledger
	b := mustOpen(t).ledger
	c := mustOpen(t, func(cfg *spent.Config) { cfg.Secret = []byte("another secret, also 32+ bytes long") }).ledger
	if a.HashKey(nsEcho, "k") != b.HashKey(nsEcho, "k") {
		t.Fatalf("HashKey under one secret: got two hashes, want one")
	}
	if a.HashKey(nsEcho, "k") == c.HashKey(nsEcho, "k") {
		t.Fatalf("HashKey under two secrets: got %v twice, want distinct hashes", a.HashKey(nsEcho, "k"))
	}
}

func TestStoreSeesOnlyHashes(t *testing.T) {
	f := mustOpen(t, func(cfg *spent.Config) {
		cfg.Namespaces["raw"] = spent.Policy{Mode: spent.ModeEcho, Retention: time.Hour, Lease: time.Second, OnLeaseExpiry: spent.LeaseExpiryHold, StoreRawKey: true}
	})
	for _, tc := range []struct {
		ns, raw string
	}{{nsEcho, ""}, {nsRefuse, ""}, {"raw", "key-1"}} {
		r := f.claim(t, spent.Claim{Namespace: tc.ns, Key: "key-1", Result: []byte("r")})
		if r.Record.Hash != f.ledger.HashKey(tc.ns, "key-1") {
			t.Fatalf("%s: record key: got %v, want HashKey", tc.ns, r.Record.Hash)
		}
		stored, err := f.store.Get(context.Background(), r.Record.Hash, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if stored.RawKey != tc.raw {
			t.Fatalf("%s: stored raw key: got %q, want %q", tc.ns, stored.RawKey, tc.raw)
		}
	}
}
