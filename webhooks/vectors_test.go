package webhooks_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/spentledger/spent/webhooks"
)

// vector is one entry of testdata/vectors.json (see testdata/README.md).
type vector struct {
	Name           string `json:"name"`
	From           string `json:"from"`
	Secret         string `json:"secret"`
	SigningKeySeed string `json:"signing_key_seed"`
	ID             string `json:"id"`
	Timestamp      int64  `json:"timestamp"`
	Payload        string `json:"payload"`
	PayloadBytes   bool   `json:"payload_bytes_0_to_255"`
	Signature      string `json:"signature"`
	Valid          bool   `json:"valid"`
}

func (v *vector) body() []byte {
	if v.PayloadBytes {
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}
	return []byte(v.Payload)
}

func (v *vector) header() http.Header {
	h := http.Header{}
	h.Set(webhooks.HeaderID, v.ID)
	h.Set(webhooks.HeaderTimestamp, strconv.FormatInt(v.Timestamp, 10))
	h.Set(webhooks.HeaderSignature, v.Signature)
	return h
}

// keys returns the vector's secrets and public keys: the ed25519 public key
// is derived from the published seed by crypto/ed25519.
func (v *vector) keys(t testing.TB) (secrets, publicKeys []string) {
	if v.Secret != "" {
		secrets = []string{v.Secret}
	}
	if v.SigningKeySeed != "" {
		seed, err := base64.StdEncoding.DecodeString(v.SigningKeySeed)
		if err != nil || len(seed) != ed25519.SeedSize {
			t.Fatalf("%s: seed: %v (%d bytes)", v.Name, err, len(seed))
		}
		pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
		publicKeys = []string{webhooks.PublicKeyPrefix + base64.StdEncoding.EncodeToString(pub)}
	}
	return secrets, publicKeys
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 7 {
		t.Fatalf("vectors: got %d, want at least 7", len(vs))
	}
	return vs
}

// TestVectors verifies the Standard Webhooks libraries' published vectors:
// the valid ones verify at their timestamp, the others fail with
// ErrSignature; all fail with ErrTimestamp a tolerance and a second later.
func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			secrets, keys := v.keys(t)
			ver, err := webhooks.NewVerifier(secrets, keys, 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			at := time.Unix(v.Timestamp, 0)
			m, err := ver.Verify(v.header(), v.body(), at)
			switch {
			case v.Valid && err != nil:
				t.Fatalf("Verify: %v, want valid (%s)", err, v.From)
			case v.Valid && (m.ID != v.ID || !m.Timestamp.Equal(at)):
				t.Fatalf("message: got %+v, want id %s at %v", m, v.ID, at)
			case !v.Valid && !errors.Is(err, webhooks.ErrSignature):
				t.Fatalf("Verify: got %v, want ErrSignature (%s)", err, v.From)
			}
			if _, err := ver.Verify(v.header(), v.body(), at.Add(5*time.Minute+time.Second)); !errors.Is(err, webhooks.ErrTimestamp) {
				t.Fatalf("later: got %v, want ErrTimestamp", err)
			}
			if v.Valid {
				body := append(v.body(), ' ')
				if _, err := ver.Verify(v.header(), body, at); !errors.Is(err, webhooks.ErrSignature) {
					t.Fatalf("body with one more byte: got %v, want ErrSignature", err)
				}
			}
		})
	}
}

// TestVectorThroughReceiver delivers the v1 sign vector to a receiver whose
// clock is at its timestamp: handled once, then a duplicate.
func TestVectorThroughReceiver(t *testing.T) {
	v := loadVectors(t)[0]
	o := testOptions()
	o.Secrets, o.PublicKeys = v.keys(t)
	e := newEnv(t, o)
	e.clock.Advance(time.Unix(v.Timestamp, 0).Sub(e.clock.Now()))
	m := msg{id: v.ID, ts: time.Unix(v.Timestamp, 0), body: v.body(), sig: v.Signature}
	if w := e.deliver(m.request()); w.Code != 200 || w.Header().Get(webhooks.HeaderDuplicate) != "" {
		t.Fatalf("first: got %d %s", w.Code, w.Body.String())
	}
	if w := e.deliver(m.request()); w.Code != 200 || w.Header().Get(webhooks.HeaderDuplicate) != "true" {
		t.Fatalf("second: got %d dup=%q", w.Code, w.Header().Get(webhooks.HeaderDuplicate))
	}
	if got := e.calls.Load(); got != 1 {
		t.Fatalf("handler calls: got %d, want 1", got)
	}
}

// FuzzParseHeaders checks that ParseHeaders never panics, and that what
// it accepts is within the limits and reads back to the header's bytes.
func FuzzParseHeaders(f *testing.F) {
	for _, v := range loadVectors(f) {
		f.Add(v.ID, strconv.FormatInt(v.Timestamp, 10), v.Signature)
	}
	f.Add("msg.1", "01", "v1,")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, id, ts, sig string) {
		h := http.Header{}
		h.Set(webhooks.HeaderID, id)
		h.Set(webhooks.HeaderTimestamp, ts)
		h.Set(webhooks.HeaderSignature, sig)
		gotID, gotTS, gotSig, err := webhooks.ParseHeaders(h)
		if err != nil {
			if !errors.Is(err, webhooks.ErrHeadersMissing) && !errors.Is(err, webhooks.ErrHeadersInvalid) {
				t.Fatalf("error %v wraps neither ErrHeadersMissing nor ErrHeadersInvalid", err)
			}
			return
		}
		if gotID != id || gotSig != sig || strconv.FormatInt(gotTS, 10) != ts {
			t.Fatalf("got (%q, %d, %q), want (%q, %s, %q)", gotID, gotTS, gotSig, id, ts, sig)
		}
		if len(id) == 0 || len(id) > webhooks.MaxIDLen || len(sig) > webhooks.MaxSignatureHeaderLen || gotTS < 0 {
			t.Fatalf("accepted out of limits: id %d bytes, sig %d bytes, ts %d", len(id), len(sig), gotTS)
		}
	})
}

// FuzzVerify checks that Verify never panics on a vector's message with
// fuzzed signature header and body, and accepts no body but the two the
// vectors sign under that id, timestamp and secret.
func FuzzVerify(f *testing.F) {
	vs := loadVectors(f)
	for _, v := range vs {
		f.Add(v.Signature, v.body())
	}
	v := vs[0]
	secrets, _ := v.keys(f)
	_, keys := vs[5].keys(f)
	ver, err := webhooks.NewVerifier(secrets, keys, 5*time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	at := time.Unix(v.Timestamp, 0)
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		h := v.header()
		h.Set(webhooks.HeaderSignature, sig)
		_, err := ver.Verify(h, body, at)
		if err == nil && string(body) != v.Payload && string(body) != string(vs[2].body()) {
			t.Fatalf("accepted body %q under signature %q", body, sig)
		}
	})
}
