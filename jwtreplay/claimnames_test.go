package jwtreplay_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/spentledger/spent/jwtreplay"
)

// signPayload returns a token of issuer i whose claims set is payload,
// byte for byte, so that a test can name a claim in any case, or twice.
func (i *issuer) signPayload(t testing.TB, payload string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: i.alg, Key: i.priv},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", i.kid))
	if err != nil {
		t.Fatal(err)
	}
	return serialize(t, s, payload)
}

// proofPayload returns a DPoP proof of the client whose claims set is
// payload, byte for byte, with the standard header, or with the header
// parameters of opts when given (it then embeds the jwk but sets no typ).
func (c *client) proofPayload(t testing.TB, payload string, opts *jose.SignerOptions) string {
	t.Helper()
	if opts == nil {
		opts = (&jose.SignerOptions{}).WithType("dpop+jwt")
	}
	opts.EmbedJWK = true
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: c.alg, Key: c.priv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return serialize(t, s, payload)
}

func serialize(t testing.TB, s jose.Signer, payload string) string {
	t.Helper()
	sig, err := s.Sign([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := sig.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestJTIClaimNamesAreCaseSensitive: claim names are case-sensitive (RFC
// 7519 section 4). A claim named in another case ("JTI", "EXP", ...) is an
// unknown claim, ignored: a token whose id is only under "JTI" is refused as
// one without a jti is, with the same code and detail, and a case variant
// beside the claim never replaces it. A claim named twice is refused.
func TestJTIClaimNamesAreCaseSensitive(t *testing.T) {
	e := newJTIEnv(t, nil)
	now := e.clock.Now()
	exp, iat := now.Add(time.Hour).Unix(), now.Unix()
	later := now.Add(10 * time.Minute).Unix()
	// payload is a claims set of issuer a with the audience, in the order
	// given: members are raw JSON members.
	payload := func(members ...string) string {
		return "{" + strings.Join(append([]string{fmt.Sprintf(`"iss":%q`, e.a.name), fmt.Sprintf(`"aud":%q`, audience)}, members...), ",") + "}"
	}
	refusals := []struct {
		name     string
		tok      string
		sameAs   string // a token without the claim, refused alike
		wantCode string
	}{
		{"JTI", e.a.signPayload(t, payload(`"JTI":"only-upper"`, fmt.Sprintf(`"exp":%d`, exp))),
			e.a.signPayload(t, payload(fmt.Sprintf(`"exp":%d`, exp))), jwtreplay.CodeClaimMissing},
		{"Jti", e.a.signPayload(t, payload(`"Jti":"only-mixed"`, fmt.Sprintf(`"exp":%d`, exp))),
			e.a.signPayload(t, payload(fmt.Sprintf(`"exp":%d`, exp))), jwtreplay.CodeClaimMissing},
		{"EXP", e.a.signPayload(t, payload(`"jti":"e"`, fmt.Sprintf(`"EXP":%d`, exp))),
			e.a.signPayload(t, payload(`"jti":"e"`)), jwtreplay.CodeClaimMissing},
		{"ISS", e.a.signPayload(t, fmt.Sprintf(`{"ISS":%q,"aud":%q,"jti":"i","exp":%d}`, e.a.name, audience, exp)),
			e.a.signPayload(t, fmt.Sprintf(`{"aud":%q,"jti":"i","exp":%d}`, audience, exp)), jwtreplay.CodeClaimMissing},
		{"AUD", e.a.signPayload(t, fmt.Sprintf(`{"iss":%q,"AUD":%q,"jti":"a","exp":%d}`, e.a.name, audience, exp)),
			e.a.signPayload(t, fmt.Sprintf(`{"iss":%q,"jti":"a","exp":%d}`, e.a.name, exp)), jwtreplay.CodeClaimInvalid},
	}
	for _, c := range refusals {
		t.Run(c.name+"IsIgnored", func(t *testing.T) {
			got := serve(t, e.jti.Handler(ok), bearer(c.tok))
			want := serve(t, e.jti.Handler(ok), bearer(c.sameAs))
			if got.status != http.StatusUnauthorized || got.code != c.wantCode {
				t.Fatalf("got %d %q (%s), want 401 %q", got.status, got.code, got.detail, c.wantCode)
			}
			if got.code != want.code || got.detail != want.detail {
				t.Fatalf("got %q (%s), want the answer to a token without the claim: %q (%s)", got.code, got.detail, want.code, want.detail)
			}
		})
	}

	// Case variants of claims that would refuse the token (a not-before or
	// an issue time in the future) are ignored: the token is accepted, and
	// a variant of the jti beside it does not replace it.
	for _, c := range []struct{ name, tok, wantID string }{
		{"NBFIsIgnored", e.a.signPayload(t, payload(`"jti":"n"`, fmt.Sprintf(`"exp":%d`, exp), fmt.Sprintf(`"NBF":%d`, later))), "n"},
		{"IATIsIgnored", e.a.signPayload(t, payload(`"jti":"t"`, fmt.Sprintf(`"exp":%d`, exp), fmt.Sprintf(`"IAT":%d`, later))), "t"},
		{"JTIBesideJtiIsIgnored", e.a.signPayload(t, payload(`"jti":"real"`, `"JTI":"other"`, fmt.Sprintf(`"iat":%d`, iat), fmt.Sprintf(`"exp":%d`, exp))), "real"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok, err := e.jti.Verify(t.Context(), c.tok)
			if err != nil {
				t.Fatalf("got %v, want the token accepted", err)
			}
			if tok.Claims.ID != c.wantID {
				t.Fatalf("got jti %q, want %q", tok.Claims.ID, c.wantID)
			}
		})
	}

	t.Run("CnfJKTIsIgnored", func(t *testing.T) {
		for i, p := range []string{`"CNF":{"jkt":"x"}`, `"cnf":{"JKT":"x"}`} {
			tok, err := e.jti.Verify(t.Context(), e.a.signPayload(t, payload(fmt.Sprintf(`"jti":"cnf-%d"`, i), fmt.Sprintf(`"exp":%d`, exp), p)))
			if err != nil {
				t.Fatalf("%s: got %v, want the token accepted", p, err)
			}
			if tok.ConfirmationJKT != "" {
				t.Fatalf("%s: got cnf.jkt %q, want none", p, tok.ConfirmationJKT)
			}
		}
	})

	t.Run("ClaimNamedTwiceIsRefused", func(t *testing.T) {
		_, err := e.jti.Verify(t.Context(), e.a.signPayload(t, payload(`"jti":"first"`, `"jti":"second"`, fmt.Sprintf(`"exp":%d`, exp))))
		assertCode(t, err, jwtreplay.CodeTokenMalformed)
	})

	if n := e.store.Len(); n != 5 {
		t.Fatalf("got %d records, want 5 (the accepted tokens')", n)
	}
}

// TestDPoPClaimNamesAreCaseSensitive: a DPoP proof's claim names, and its
// header's parameter names, are case-sensitive too. A proof whose jti, htm,
// htu, iat or ath is named in another case is refused as one without it
// is; a typ header named "TYP" is no typ; a claim named twice is refused.
func TestDPoPClaimNamesAreCaseSensitive(t *testing.T) {
	e := newDPoPEnv(t, start, nil)
	c := newClient(t, jose.ES256)
	const token = "token-1"
	members := map[string]string{
		"jti": `"p-%s"`,
		"htm": `"POST"`,
		"htu": fmt.Sprintf("%q", resource),
		"iat": fmt.Sprint(start.Unix()),
		"ath": fmt.Sprintf("%q", ath(token)),
	}
	// payload is a proof's claims set with every member, the one named
	// renamed to as (dropped when as is empty); the jti is unique to name.
	payload := func(name, renamed, as string) string {
		var ms []string
		for _, k := range []string{"jti", "htm", "htu", "iat", "ath"} {
			v := members[k]
			if k == "jti" {
				v = fmt.Sprintf(v, name)
			}
			if k == renamed {
				if as == "" {
					continue
				}
				k = as
			}
			ms = append(ms, fmt.Sprintf("%q:%s", k, v))
		}
		return "{" + strings.Join(ms, ",") + "}"
	}
	for _, claim := range []string{"jti", "htm", "htu", "iat", "ath"} {
		for _, as := range []string{strings.ToUpper(claim), strings.ToUpper(claim[:1]) + claim[1:]} {
			t.Run(as+"IsIgnored", func(t *testing.T) {
				got := serve(t, e.dpop.Handler(ok), request("POST", resource, c.proofPayload(t, payload(as, claim, as), nil), token))
				want := serve(t, e.dpop.Handler(ok), request("POST", resource, c.proofPayload(t, payload(as+"-without", claim, ""), nil), token))
				if got.status != http.StatusUnauthorized || got.code != jwtreplay.CodeClaimMissing {
					t.Fatalf("got %d %q (%s), want 401 %q", got.status, got.code, got.detail, jwtreplay.CodeClaimMissing)
				}
				if got.code != want.code || got.detail != want.detail {
					t.Fatalf("got %q (%s), want the answer to a proof without %s: %q (%s)", got.code, got.detail, claim, want.code, want.detail)
				}
			})
		}
	}
	t.Run("TYPHeaderIsIgnored", func(t *testing.T) {
		proof := c.proofPayload(t, payload("typ", "", ""), (&jose.SignerOptions{}).WithHeader("TYP", "dpop+jwt"))
		a := serve(t, e.dpop.Handler(ok), request("POST", resource, proof, token))
		if a.status != http.StatusUnauthorized || a.code != jwtreplay.CodeProofType {
			t.Fatalf("got %d %q (%s), want 401 %q", a.status, a.code, a.detail, jwtreplay.CodeProofType)
		}
	})
	t.Run("JTIBesideJtiIsIgnored", func(t *testing.T) {
		p := strings.Replace(payload("real", "", ""), `"jti":"p-real"`, `"jti":"p-real","JTI":"p-other"`, 1)
		proof, err := e.dpop.Verify(t.Context(), jwtreplay.ProofRequest{Proof: c.proofPayload(t, p, nil), Method: "POST", URI: resource, AccessToken: token})
		if err != nil {
			t.Fatalf("got %v, want the proof accepted", err)
		}
		if proof.ID != "p-real" {
			t.Fatalf("got jti %q, want %q", proof.ID, "p-real")
		}
	})
	t.Run("ClaimNamedTwiceIsRefused", func(t *testing.T) {
		p := strings.Replace(payload("twice", "", ""), `"jti":"p-twice"`, `"jti":"p-twice","jti":"p-again"`, 1)
		_, err := e.dpop.Verify(t.Context(), jwtreplay.ProofRequest{Proof: c.proofPayload(t, p, nil), Method: "POST", URI: resource, AccessToken: token})
		assertCode(t, err, jwtreplay.CodeClaimInvalid)
	})
	if n := e.store.Len(); n != 1 {
		t.Fatalf("got %d records, want 1 (the accepted proof's)", n)
	}
}
