package privacypass_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/spentledger/spent/internal/tlstest"
	"github.com/spentledger/spent/privacypass"
)

// TestMTLSAttester identifies clients by their verified certificate's
// subject: no certificate is 401, each subject has its own quota.
func TestMTLSAttester(t *testing.T) {
	e := newEnv(t, func(c *privacypass.Config) {
		c.Attester = privacypass.AttesterMTLS
		c.AttesterTokens = nil
		c.QuotaPerEpoch = 1
	})
	ca := tlstest.NewCA(t, "attester CA")
	mux := http.NewServeMux()
	e.srv.Register(mux)
	hs := httptest.NewUnstartedServer(mux)
	hs.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool()}
	hs.StartTLS()
	defer hs.Close()
	roots := x509.NewCertPool()
	roots.AddCert(hs.Certificate())
	clientFor := func(certs ...tls.Certificate) *privacypass.Client {
		return &privacypass.Client{Now: e.clock.Now, HTTPClient: &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}}
	}
	c := privacypass.Challenge{TokenChallenge: privacypass.TokenChallenge{TokenType: privacypass.TypeBlindRSA, IssuerName: "issuer.example"}}
	ctx := context.Background()
	var p *privacypass.Problem
	if _, err := clientFor().Issue(ctx, hs.URL, &c); !asProblem(err, &p) || p.Status != 401 || p.Code != privacypass.CodeUnauthorized {
		t.Fatalf("no certificate: got %v, want 401 unauthorized", err)
	}
	alice, bob := clientFor(ca.Client(t, "alice").TLS), clientFor(ca.Client(t, "bob").TLS)
	for _, cl := range []*privacypass.Client{alice, bob} {
		if _, err := cl.Issue(ctx, hs.URL, &c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alice.Issue(ctx, hs.URL, &c); !asProblem(err, &p) || p.Status != 429 {
		t.Fatalf("alice's second token: got %v, want 429", err)
	}
}

func asProblem(err error, p **privacypass.Problem) bool {
	pp, ok := err.(*privacypass.Problem)
	*p = pp
	return ok
}

// TestReadOnlyKeyringVerifiesType1 runs an origin in "another process": a
// read-only keyring on the issuer's key directory, which lets it verify
// privately verifiable (type 0x0001) tokens.
func TestReadOnlyKeyringVerifiesType1(t *testing.T) {
	e := newEnv(t, nil)
	cfg := keyringConfig(e.keyDir, e.clock, nil)
	cfg.ReadOnly = true
	ro := openKeyring(t, cfg)
	o, err := privacypass.NewOrigin(e.otherLedger(t, 2), privacypass.OriginConfig{
		IssuerName: e.cfg.IssuerName, TokenTypes: []privacypass.TokenType{privacypass.TypeVOPRF}, Keys: ro, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	url := newServer(t, o.Middleware(okHandler))
	tok := e.issue(t, url, privacypass.TypeVOPRF)
	if a := send(t, http.MethodGet, url, tok); a.status != http.StatusOK {
		t.Fatalf("got %d %q, want 200", a.status, a.problem.Code)
	}
	wantRefused(t, send(t, http.MethodGet, url, tok), privacypass.CodeDoubleSpend)
	// A read-only keyring never writes, even when the issuer's keys are
	// out of date: a day later it only reloads.
	e.clock.Set(t0.Add(24 * time.Hour))
	if err := ro.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(e.keyDir, "*.key")); len(files) != 4 {
		t.Fatalf("%d key files after a read-only rotation, want the issuer's 4", len(files))
	}
}
