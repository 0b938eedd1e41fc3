package jwtreplay_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/internal/problem"
	"github.com/spentledger/spent/jwtreplay"
)

// clock is a fake clock shared by the ledger and the caches.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(t time.Time) *clock { return &clock{now: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// start is the fake clock's start in most tests: a whole second, as
// NumericDate values are.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newLedger returns a ledger over a fresh in-memory store with the
// namespaces given and the clock's time.
func newLedger(t testing.TB, c *clock, namespaces map[string]spent.Policy) (*spent.Ledger, *inmem.Store) {
	t.Helper()
	cfg := spent.DefaultConfig()
	cfg.Secret = bytes.Repeat([]byte("j"), spent.MinSecretLen)
	cfg.Namespaces = namespaces
	cfg.Now = c.Now
	st := inmem.New()
	l, err := spent.NewLedger(context.Background(), st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, st
}

// issuer is a token issuer with its own signing key.
type issuer struct {
	name string
	kid  string
	alg  jose.SignatureAlgorithm
	priv any
	pub  jose.JSONWebKey
}

func newIssuer(t testing.TB, name string, alg jose.SignatureAlgorithm) *issuer {
	t.Helper()
	var priv, pub any
	switch alg {
	case jose.ES256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		priv, pub = k, &k.PublicKey
	case jose.EdDSA:
		p, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		priv, pub = k, p
	case jose.RS256, jose.PS256:
		k := rsaKey(t)
		priv, pub = k, &k.PublicKey
	default:
		t.Fatalf("no key for %s", alg)
	}
	kid := name + "-" + string(alg)
	return &issuer{name: name, kid: kid, alg: alg, priv: priv,
		pub: jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: string(alg), Use: "sig"}}
}

var (
	rsaOnce sync.Once
	rsaPriv *rsa.PrivateKey
)

// rsaKey returns one 2048-bit key per test binary: generating is slow.
func rsaKey(t testing.TB) *rsa.PrivateKey {
	rsaOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		rsaPriv = k
	})
	return rsaPriv
}

// claims are a token's claims; zero times are left out.
type claims struct {
	Issuer, Subject, ID string
	Audience            []string
	IssuedAt, NotBefore time.Time
	Expiry              time.Time
	JKT                 string
}

func (i *issuer) sign(t testing.TB, c claims) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: i.alg, Key: i.priv},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", i.kid))
	if err != nil {
		t.Fatal(err)
	}
	cl := jwt.Claims{Issuer: c.Issuer, Subject: c.Subject, ID: c.ID, Audience: c.Audience}
	if cl.Issuer == "" {
		cl.Issuer = i.name
	}
	for _, p := range []struct {
		d **jwt.NumericDate
		t time.Time
	}{{&cl.IssuedAt, c.IssuedAt}, {&cl.NotBefore, c.NotBefore}, {&cl.Expiry, c.Expiry}} {
		if !p.t.IsZero() {
			*p.d = jwt.NewNumericDate(p.t)
		}
	}
	b := jwt.Signed(s).Claims(cl)
	if c.JKT != "" {
		b = b.Claims(map[string]any{"cnf": map[string]string{"jkt": c.JKT}})
	}
	tok, err := b.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// client is a DPoP client with its own key.
type client struct {
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
	pub  jose.JSONWebKey
}

func newClient(t testing.TB, alg jose.SignatureAlgorithm) *client {
	t.Helper()
	i := newIssuer(t, "client", alg)
	return &client{alg: alg, priv: i.priv.(crypto.Signer), pub: jose.JSONWebKey{Key: i.pub.Key}}
}

// thumbprint returns the client key's RFC 7638 thumbprint, base64url.
func (c *client) thumbprint(t testing.TB) string {
	t.Helper()
	tp, err := c.pub.Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(tp)
}

// proof returns a DPoP proof signed by the client with claims cl (iat is a
// Unix time in cl) and the standard header.
func (c *client) proof(t testing.TB, cl map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: c.alg, Key: c.priv},
		(&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(cl).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// proofClaims returns the claims of a proof for method and uri at iat.
func proofClaims(jti, method, uri string, iat time.Time) map[string]any {
	return map[string]any{"jti": jti, "htm": method, "htu": uri, "iat": iat.Unix()}
}

// ath returns the ath of an access token.
func ath(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// compact builds a compact JWS from a header, claims and signature bytes,
// without signing: for proofs no library would produce.
func compact(t testing.TB, header, claims any, sig []byte) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(h) + "." + enc.EncodeToString(c) + "." + enc.EncodeToString(sig)
}

// tamper flips one character in the middle of the token's signature.
func tamper(tok string) string {
	i := strings.LastIndexByte(tok, '.') + (len(tok)-strings.LastIndexByte(tok, '.'))/2
	b := []byte(tok)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// answer is what a middleware answered.
type answer struct {
	status    int
	code      string
	detail    string
	challenge string
	body      string
}

// serve runs r through h and decodes the answer.
func serve(t testing.TB, h http.Handler, r *http.Request) answer {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	res := w.Result()
	body, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, challenge: res.Header.Get("WWW-Authenticate"), body: string(body)}
	if p, ok := problem.Read(res.Header, body); ok {
		a.code, a.detail = p.Code, p.Detail
	}
	return a
}

// ok is the handler behind the middlewares in the tests.
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, "ok")
})

// assertCode fails unless err has code want.
func assertCode(t testing.TB, err error, want string) {
	t.Helper()
	if got := jwtreplay.ErrorCode(err); got != want {
		t.Fatalf("got code %q (%v), want %q", got, err, want)
	}
}
