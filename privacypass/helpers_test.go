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

// vectorsDir finds shared/testvectors by walking up from the package
// directory (it sits beside the checkout: ../shared/testvectors from the
// repository root). It skips the test when the folder is absent, except
// under CI, where that is a failure.
func vectorsDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", "testvectors")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	msg := "shared/testvectors not found above the package directory (expected at ../shared/testvectors from the repository root)"
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// loadJSON reads a vector file of shared/testvectors into v.
func loadJSON(tb testing.TB, name string, v any) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(vectorsDir(tb), name))
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
