package etcd_test

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/etcd"
	"github.com/spentledger/spent/internal/etcdtest"
	"github.com/spentledger/spent/storetest"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(tb testing.TB, dir string) spent.Store {
			return MustOpen(tb, testOptions(tb, prefixFor(dir)))
		},
		NativeExpiry: true,
	})
}

// prefixFor returns the key prefix of the store kept "in" dir: the suite's
// directories become keyspaces of the shared cluster, so that opening the
// same dir again finds the same records and other dirs find none.
func prefixFor(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "/spent-test/" + hex.EncodeToString(sum[:8]) + "/"
}

// testOptions returns options for the shared cluster under prefix, with
// 1-second lease buckets.
func testOptions(tb testing.TB, prefix string) etcd.Options {
	tb.Helper()
	o := etcd.DefaultOptions()
	o.Endpoints = etcdtest.Shared(tb)
	o.Prefix = prefix
	o.LeaseBucket = time.Second
	o.Logger = quietLogger()
	return o
}

// quietLogger discards the store's messages.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// MustOpen opens a store with opts and closes it when the test ends.
func MustOpen(tb testing.TB, opts etcd.Options) *etcd.Store {
	tb.Helper()
	s, err := etcd.Open(tb.Context(), opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
