package privacypass_test

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
)

// vectorsDir is the package's testdata folder, which holds the public test
// vectors it uses (see testdata/README.md for their sources).
const vectorsDir = "testdata"

// loadJSON reads a vector file of testdata into v.
func loadJSON(tb testing.TB, name string, v any) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(vectorsDir, name))
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
}

// hexVectors is a vector file whose entries are maps of hex strings.
func hexVectors(tb testing.TB, name string) []map[string]string {
	tb.Helper()
	var vs []map[string]string
	loadJSON(tb, name, &vs)
	if len(vs) == 0 {
		tb.Fatalf("%s holds no vectors", name)
	}
	return vs
}

func unhex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatalf("hex %q: %v", s, err)
	}
	return b
}

// newMem returns an in-memory store.
func newMem() spent.Store { return inmem.New() }

// newServer starts an httptest server that stops at the end of the test
// and returns its URL.
func newServer(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}
