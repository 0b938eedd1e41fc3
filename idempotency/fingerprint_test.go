package idempotency_test

import (
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/spentledger/spent/idempotency"
)

// TestDefaultFingerprintFollowsTheFormula recomputes the fingerprint from
// its documented encoding: stored records keep matching their retries only
// while the encoding stays the same.
func TestDefaultFingerprintFollowsTheFormula(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/pay%20ments/1?b=2&a=1", nil)
	r.Header.Add("Content-Type", "application/json")
	r.Header.Add("X-Two", "one")
	r.Header.Add("X-Two", "two")
	body := []byte(`{"amount":5}`)
	var enc []byte
	str := func(s string) {
		enc = binary.BigEndian.AppendUint64(enc, uint64(len(s)))
		enc = append(enc, s...)
	}
	str("spent-idempotency-fingerprint-v1")
	str("POST")
	str("/pay%20ments/1")
	str("b=2&a=1")
	for _, h := range []struct {
		name string
		vs   []string
	}{{"Content-Type", []string{"application/json"}}, {"X-Two", []string{"one", "two"}}, {"X-Absent", nil}} {
		str(h.name)
		enc = binary.BigEndian.AppendUint32(enc, uint32(len(h.vs)))
		for _, v := range h.vs {
			str(v)
		}
	}
	str(string(body))
	want := sha256.Sum256(enc)
	for range 3 { // the pooled hasher must start clean each time
		if got := idempotency.DefaultFingerprint(r, []string{"content-type", "X-Two", "X-Absent"}, body); got != want {
			t.Fatalf("DefaultFingerprint: got %x, want %x", got, want)
		}
	}
}
