package http_test

import (
	"net/http/httptest"
	"testing"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/pebble"
	"github.com/spentledger/spent/storetest"
)

// wrap serves l over loopback HTTP and returns the Go client of it, so that
// the conformance suite runs every behavioural test through the wire.
func wrap(tb testing.TB, l *spent.Ledger) spent.Service {
	tb.Helper()
	srv, err := sphttp.NewServer(l, sphttp.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	tb.Cleanup(ts.Close)
	return sphttp.NewClient(ts.URL, sphttp.ClientConfig{})
}

// pebbleHarness opens the embedded pebble store kept in dir.
func pebbleHarness(tb testing.TB, dir string) spent.Store {
	s, err := pebble.Open(dir, pebble.DefaultOptions())
	if err != nil {
		tb.Fatalf("pebble: open %s: %v", dir, err)
	}
	return s
}

func TestConformancePebble(t *testing.T) {
	storetest.Run(t, storetest.Harness{Open: pebbleHarness, Wrap: wrap})
}
