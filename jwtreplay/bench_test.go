package jwtreplay_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/jwtreplay"
)

// BenchmarkJTIVerify measures one first presentation of an ES256 token
// (verify, check, claim in an in-memory ledger); tokens are signed before
// the timer starts.
func BenchmarkJTIVerify(b *testing.B) {
	c := newClock(start)
	i := newIssuer(b, "https://a.example", jose.ES256)
	o := jwtreplay.DefaultJTIOptions()
	o.Issuers = []string{i.name}
	o.Audience = []string{audience}
	o.Keys = jwtreplay.StaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{i.pub}})
	l, _ := newLedger(b, c, map[string]spent.Policy{o.Namespace: o.Policy()})
	j, err := jwtreplay.NewJTI(l, o)
	if err != nil {
		b.Fatal(err)
	}
	toks := make([]string, b.N)
	for n := range toks {
		toks[n] = i.sign(b, claims{ID: strconv.Itoa(n), Audience: []string{audience}, Expiry: start.Add(time.Hour)})
	}
	ctx := context.Background()
	b.ResetTimer()
	for n := range b.N {
		if _, err := j.Verify(ctx, toks[n]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJTIVerifyBare verifies the same kind of tokens with go-jose
// alone (parse, ES256 signature, claims decoded), with no checks and no
// ledger: the baseline of BenchmarkJTIVerify.
func BenchmarkJTIVerifyBare(b *testing.B) {
	i := newIssuer(b, "https://a.example", jose.ES256)
	toks := make([]string, b.N)
	for n := range toks {
		toks[n] = i.sign(b, claims{ID: strconv.Itoa(n), Audience: []string{audience}, Expiry: start.Add(time.Hour)})
	}
	b.ResetTimer()
	for n := range b.N {
		t, err := jwt.ParseSigned(toks[n], []jose.SignatureAlgorithm{jose.ES256})
		if err != nil {
			b.Fatal(err)
		}
		var c jwt.Claims
		if err := t.Claims(i.pub.Key, &c); err != nil {
			b.Fatal(err)
		}
		if c.ID != strconv.Itoa(n) {
			b.Fatalf("jti: got %q, want %d", c.ID, n)
		}
	}
}

// BenchmarkDPoPVerify measures one first presentation of an ES256 proof
// (header checks, verify, claims, thumbprint, claim in an in-memory
// ledger); proofs are signed before the timer starts.
func BenchmarkDPoPVerify(b *testing.B) {
	e := newDPoPEnv(b, start, nil)
	cl := newClient(b, jose.ES256)
	proofs := make([]string, b.N)
	for n := range proofs {
		proofs[n] = cl.proof(b, proofClaims(strconv.Itoa(n), "POST", resource, start))
	}
	ctx := context.Background()
	b.ResetTimer()
	for n := range b.N {
		if _, err := e.dpop.Verify(ctx, jwtreplay.ProofRequest{Proof: proofs[n], Method: "POST", URI: resource}); err != nil {
			b.Fatal(err)
		}
	}
}
