package jwtreplay_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/internal/problem"
	"github.com/spentledger/spent/jwtreplay"
)

func ExampleJTI_Handler() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	// The issuer's key; the API knows its public half.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	public := jose.JSONWebKey{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256"}

	opts := jwtreplay.DefaultJTIOptions()
	opts.Issuers = []string{"https://issuer.example"}
	opts.Audience = []string{"https://api.example"}
	opts.Keys = jwtreplay.StaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{public}})

	cfg := spent.DefaultConfig()
	cfg.Secret = bytes.Repeat([]byte{7}, spent.MinSecretLen)
	cfg.Namespaces = map[string]spent.Policy{opts.Namespace: opts.Policy()}
	cfg.Now = func() time.Time { return now }
	ledger, err := spent.NewLedger(ctx, inmem.New(), cfg)
	if err != nil {
		panic(err)
	}
	cache, err := jwtreplay.NewJTI(ledger, opts)
	if err != nil {
		panic(err)
	}
	h := cache.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, _ := jwtreplay.TokenFrom(r.Context())
		fmt.Fprintf(w, "hello %s", t.Claims.Subject)
	}))

	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	sign := func(id string, exp time.Time) string {
		tok, _ := jwt.Signed(signer).Claims(jwt.Claims{
			Issuer: "https://issuer.example", Subject: "alice", ID: id,
			Audience: jwt.Audience{"https://api.example"},
			IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(exp),
		}).Serialize()
		return tok
	}
	call := func(tok string) {
		r := httptest.NewRequest("GET", "https://api.example/me", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if p, ok := problem.Read(w.Header(), w.Body.Bytes()); ok {
			fmt.Println(w.Code, p.Code)
			return
		}
		fmt.Println(w.Code, w.Body.String())
	}

	tok := sign("t-1", now.Add(time.Hour))
	call(tok)                                // first presentation
	call(tok)                                // a replay before exp
	call(sign("t-2", now.AddDate(10, 0, 0))) // exp ten years away: refused
	// Output:
	// 200 hello alice
	// 401 replayed
	// 401 lifetime_too_long
}

func ExampleDPoP_Verify() {
	ctx := context.Background()
	// The proof of RFC 9449 figure 2, checked one second after its iat.
	const proof = "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIiwieCI6Imw4dEZyaHgtMzR0VjNoUklDUkRZOXpDa0RscEJoRjQyVVFVZldWQVdCRnMiLCJ5IjoiOVZFNGpmX09rX282NHpiVFRsY3VOSmFqSG10NnY5VERWclUwQ2R2R1JEQSIsImNydiI6IlAtMjU2In19.eyJqdGkiOiItQndDM0VTYzZhY2MybFRjIiwiaHRtIjoiUE9TVCIsImh0dSI6Imh0dHBzOi8vc2VydmVyLmV4YW1wbGUuY29tL3Rva2VuIiwiaWF0IjoxNTYyMjYyNjE2fQ.2-GxA6T8lP4vfrg8v-FdWP0A0zdrj8igiMLvqRMUvwnQg4PtFLbdLXiOSsX0x7NVY-FNyJK70nfbV37xRZT3Lg"
	now := time.Unix(1562262617, 0)

	opts := jwtreplay.DefaultDPoPOptions()
	cfg := spent.DefaultConfig()
	cfg.Secret = bytes.Repeat([]byte{7}, spent.MinSecretLen)
	cfg.Namespaces = map[string]spent.Policy{opts.Namespace: opts.Policy()}
	cfg.Now = func() time.Time { return now }
	ledger, err := spent.NewLedger(ctx, inmem.New(), cfg)
	if err != nil {
		panic(err)
	}
	d, err := jwtreplay.NewDPoP(ledger, opts)
	if err != nil {
		panic(err)
	}
	req := jwtreplay.ProofRequest{Proof: proof, Method: "POST", URI: "https://server.example.com/token?x=1"}
	p, err := d.Verify(ctx, req)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Thumbprint, p.ID, p.AcceptedUntil.UTC().Format(time.RFC3339))
	_, err = d.Verify(ctx, req)
	fmt.Println(jwtreplay.ErrorCode(err))
	// Output:
	// 0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I -BwC3ESc6acc2lTc 2019-07-04T17:51:21Z
	// replayed
}
