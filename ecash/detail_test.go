package ecash_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/spentledger/spent/ecash"
)

// TestDetailQuotesAPrefix sends a 64 KiB Content-Type: the problem's detail
// quotes its start, not all of it.
func TestDetailQuotesAPrefix(t *testing.T) {
	e := newEnv(t, nil, nil)
	req, err := http.NewRequest(http.MethodPost, e.url+ecash.SpendPath, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/"+strings.Repeat("x", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p struct {
		Code, Detail string
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("answer %d %.200s: %v", resp.StatusCode, b, err)
	}
	if p.Code != ecash.CodeBadRequest {
		t.Fatalf("code: got %q, want %q", p.Code, ecash.CodeBadRequest)
	}
	if len(p.Detail) > 256 || !strings.Contains(p.Detail, "text/xxx") {
		t.Fatalf("detail of %d bytes (%.100s): want the start of the content type, at most 256 bytes", len(p.Detail), p.Detail)
	}
}
