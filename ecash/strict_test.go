package ecash_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/ecash"
)

// TestClientReadsStrictly serves answers and problem documents that break
// the rules of strict JSON: the client refuses the answer, and reads no
// code from the problem document, instead of repairing either.
func TestClientReadsStrictly(t *testing.T) {
	e := newEnv(t, nil, nil)
	resp, err := http.Get(e.url + ecash.KeysPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	list := strings.TrimSpace(string(raw))
	if !strings.HasPrefix(list, `{"issuer":"issuer.test",`) {
		t.Fatalf("key list %.100s: want it to start with the issuer", list)
	}
	serve := func(t *testing.T, status int, ctype, body string) *ecash.Client {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.WriteHeader(status)
			io.WriteString(w, body)
		}))
		t.Cleanup(hs.Close)
		return &ecash.Client{URL: hs.URL}
	}
	t.Run("Answer", func(t *testing.T) {
		for name, body := range map[string]string{
			"CaseDiffers": strings.Replace(list, `"issuer"`, `"Issuer"`, 1),
			"Duplicate":   strings.Replace(list, `{"issuer":"issuer.test",`, `{"issuer":"other","issuer":"issuer.test",`, 1),
			"InvalidUTF8": strings.Replace(list, `"issuer.test"`, "\"issuer\xff\"", 1),
			"Trailing":    list + ` {}`,
		} {
			t.Run(name, func(t *testing.T) {
				if l, err := serve(t, 200, "application/json", body).Keys(context.Background()); err == nil {
					t.Fatalf("got %+v, want an error", l)
				}
			})
		}
		ext := strings.Replace(list, `{"issuer"`, `{"x-extension":[1,{"a":2}],"issuer"`, 1)
		if l, err := serve(t, 200, "application/json", ext).Keys(context.Background()); err != nil || l.Issuer != "issuer.test" || len(l.Keys) == 0 {
			t.Fatalf("an unknown member: got %+v, %v; want it skipped", l, err)
		}
	})
	t.Run("Problem", func(t *testing.T) {
		// The rules' cases are in internal/problem; here, that the
		// client reads problems through it.
		dup := serve(t, 409, "application/problem+json", `{"code":"double_spend","code":"internal","status":409}`)
		var pe *ecash.Error
		if _, err := dup.Keys(context.Background()); err == nil || errors.As(err, &pe) {
			t.Fatalf("a duplicate code: got %v, want an error that is not an *ecash.Error", err)
		}
	})
	t.Run("BadBodyOverHTTP", func(t *testing.T) {
		// A request body that does not parse is answered with the
		// issuer's problem document, which the client reads back.
		_, err := e.client.Send(context.Background(), ecash.SpendPath, []byte{0x01, 0x00})
		var pe *ecash.Error
		if !errors.As(err, &pe) || pe.Code != ecash.CodeBadRequest || pe.Status != http.StatusBadRequest ||
			pe.Type != ecash.ProblemType+ecash.CodeBadRequest || pe.Title != "Bad request" {
			t.Fatalf("got %#v, want an *ecash.Error with %s", err, ecash.CodeBadRequest)
		}
	})
}

// TestKeyFileReadStrictly edits a key file so that a member's name differs
// in case: a restarted issuer refuses the file rather than read it.
func TestKeyFileReadStrictly(t *testing.T) {
	dir := t.TempDir()
	cfg := ecash.KeysConfig{Dir: dir, KEK: make([]byte, 32), IssuerName: "issuer.test",
		Denominations: []uint64{1}, Epoch: 24 * time.Hour, Grace: time.Hour, GenerateRSAKey: keyGen(t)}
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	keys, err := ecash.OpenKeys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Prepare(now); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.key"))
	ents, _ := os.ReadDir(dir)
	if len(files) == 0 || len(ents) != len(files) {
		t.Fatalf("key directory holds %d entries, %d key files: want key files only", len(ents), len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(strings.Replace(string(b), `"issuer"`, `"Issuer"`, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	again, err := ecash.OpenKeys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Prepare(now); err == nil || !strings.Contains(err.Error(), "key file") {
		t.Fatalf("got %v, want the edited key file refused", err)
	}
}
