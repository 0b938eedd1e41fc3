package jwtreplay_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/jwtreplay"
)

// rfcVectors are the proofs of RFC 9449 in testdata/rfc9449.json.
type rfcVectors struct {
	JKT    string `json:"jkt"`
	Proofs []struct {
		Name        string `json:"name"`
		Proof       string `json:"proof"`
		JTI         string `json:"jti"`
		HTM         string `json:"htm"`
		HTU         string `json:"htu"`
		IAT         int64  `json:"iat"`
		AccessToken string `json:"access_token"`
	} `json:"proofs"`
}

func readVectors(t testing.TB) rfcVectors {
	t.Helper()
	b, err := os.ReadFile("testdata/rfc9449.json")
	if err != nil {
		t.Fatal(err)
	}
	var v rfcVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Proofs) == 0 {
		t.Fatal("no vectors")
	}
	return v
}

// dpopEnv is a DPoP over a real in-memory ledger with a fake clock.
type dpopEnv struct {
	clock  *clock
	ledger *spent.Ledger
	store  *inmem.Store
	dpop   *jwtreplay.DPoP
	opts   jwtreplay.DPoPOptions
}

func newDPoPEnv(t testing.TB, now time.Time, set func(*jwtreplay.DPoPOptions)) *dpopEnv {
	t.Helper()
	e := &dpopEnv{clock: newClock(now)}
	o := jwtreplay.DefaultDPoPOptions()
	if set != nil {
		set(&o)
	}
	e.opts = o
	e.ledger, e.store = newLedger(t, e.clock, map[string]spent.Policy{o.Namespace: o.Policy()})
	var err error
	e.dpop, err = jwtreplay.NewDPoP(e.ledger, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

const resource = "https://api.example.com/things"

// request returns a request to uri with the proof (when not empty) and the
// access token (when not empty) under the DPoP scheme.
func request(method, uri, proof, token string) *http.Request {
	r := httptest.NewRequest(method, uri, nil)
	if proof != "" {
		r.Header.Set("DPoP", proof)
	}
	if token != "" {
		r.Header.Set("Authorization", "DPoP "+token)
	}
	return r
}

func TestDPoPRFC9449Vectors(t *testing.T) {
	v := readVectors(t)
	for _, p := range v.Proofs {
		t.Run(p.Name, func(t *testing.T) {
			iat := time.Unix(p.IAT, 0)
			e := newDPoPEnv(t, iat.Add(time.Second), nil)
			req := jwtreplay.ProofRequest{Proof: p.Proof, Method: p.HTM, URI: p.HTU, AccessToken: p.AccessToken}
			got, err := e.dpop.Verify(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got.Thumbprint != v.JKT || got.ID != p.JTI || !got.IssuedAt.Equal(iat) || got.Algorithm != jose.ES256 {
				t.Fatalf("got jkt %s jti %s iat %v alg %s, want %s %s %v ES256", got.Thumbprint, got.ID, got.IssuedAt, got.Algorithm, v.JKT, p.JTI, iat)
			}
			if want := iat.Add(e.opts.ProofAge + e.opts.Skew); !got.AcceptedUntil.Equal(want) {
				t.Fatalf("got accepted until %v, want %v", got.AcceptedUntil, want)
			}
			rec, err := e.ledger.Get(context.Background(), e.opts.Namespace, v.JKT+":"+p.JTI)
			if err != nil || !rec.ExpiresAt.Equal(got.AcceptedUntil) {
				t.Fatalf("got record %+v, %v; want one expiring at %v", rec, err, got.AcceptedUntil)
			}
			_, err = e.dpop.Verify(context.Background(), req)
			assertCode(t, err, jwtreplay.CodeReplayed)
		})
	}
	t.Run("AtTodaysTimeTheProofIsTooOld", func(t *testing.T) {
		p := v.Proofs[0]
		e := newDPoPEnv(t, start, nil)
		_, err := e.dpop.Verify(context.Background(), jwtreplay.ProofRequest{Proof: p.Proof, Method: p.HTM, URI: p.HTU})
		assertCode(t, err, jwtreplay.CodeProofTime)
	})
	t.Run("TamperedVectorIsRefused", func(t *testing.T) {
		p := v.Proofs[0]
		e := newDPoPEnv(t, time.Unix(p.IAT, 0), nil)
		_, err := e.dpop.Verify(context.Background(), jwtreplay.ProofRequest{Proof: tamper(p.Proof), Method: p.HTM, URI: p.HTU})
		assertCode(t, err, jwtreplay.CodeSignatureInvalid)
	})
	t.Run("OtherAccessTokenIsRefused", func(t *testing.T) {
		p := v.Proofs[1]
		e := newDPoPEnv(t, time.Unix(p.IAT, 0), nil)
		_, err := e.dpop.Verify(context.Background(), jwtreplay.ProofRequest{Proof: p.Proof, Method: p.HTM, URI: p.HTU, AccessToken: p.AccessToken + "x"})
		assertCode(t, err, jwtreplay.CodeAccessTokenHash)
	})
}

func TestDPoP(t *testing.T) {
	t.Run("ReplayWithinTheWindowIsRefused", func(t *testing.T) {
		e := newDPoPEnv(t, start, nil)
		c := newClient(t, jose.ES256)
		proof := c.proof(t, proofClaims("p-1", "POST", resource, start))
		h := e.dpop.Handler(ok)
		if a := serve(t, h, request("POST", resource, proof, "")); a.status != http.StatusOK {
			t.Fatalf("first: got %d %s (%s)", a.status, a.code, a.detail)
		}
		e.clock.Advance(e.opts.ProofAge + e.opts.Skew - time.Second)
		a := serve(t, h, request("POST", resource, proof, ""))
		if a.status != http.StatusUnauthorized || a.code != jwtreplay.CodeReplayed {
			t.Fatalf("replay: got %d %q, want 401 replayed", a.status, a.code)
		}
		if !strings.HasPrefix(a.challenge, `DPoP algs="RS256 `) || !strings.Contains(a.challenge, `error="invalid_dpop_proof"`) {
			t.Fatalf("got WWW-Authenticate %q, want a DPoP invalid_dpop_proof challenge with algs", a.challenge)
		}
		// Once the window is over the ledger may forget: the iat check
		// refuses the proof by itself.
		e.clock.Advance(time.Second)
		if a := serve(t, h, request("POST", resource, proof, "")); a.code != jwtreplay.CodeProofTime {
			t.Fatalf("after the window: got %d %q, want iat_out_of_window", a.status, a.code)
		}
		if _, err := e.ledger.Get(context.Background(), e.opts.Namespace, c.thumbprint(t)+":p-1"); spent.ErrorCode(err) != spent.ENotFound {
			t.Fatalf("got %v, want the record forgotten", err)
		}
	})

	t.Run("TwoKeysSameJTIDoNotCollide", func(t *testing.T) {
		e := newDPoPEnv(t, start, nil)
		// (One RSA key per test binary: PS256 stands for RSA.)
		for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA, jose.PS256} {
			c := newClient(t, alg)
			p, err := e.dpop.Verify(context.Background(), jwtreplay.ProofRequest{
				Proof: c.proof(t, proofClaims("same", "GET", resource, start)), Method: "GET", URI: resource,
			})
			if err != nil {
				t.Fatalf("%s: %v", alg, err)
			}
			if p.Thumbprint != c.thumbprint(t) {
				t.Fatalf("%s: got thumbprint %s, want %s", alg, p.Thumbprint, c.thumbprint(t))
			}
		}
	})

	t.Run("URIComparison", func(t *testing.T) {
		e := newDPoPEnv(t, start, nil)
		c := newClient(t, jose.ES256)
		for i, tc := range []struct {
			htu, request string
			match        bool
		}{
			{"https://api.example.com/things", "https://api.example.com/things?page=2", true},
			{"https://api.example.com/things?x=1#f", "https://api.example.com/things", true},
			{"HTTPS://API.Example.COM:443/a/./b/../things", "https://api.example.com/a/things", true},
			{"https://api.example.com/%7Euser/a%2fb", "https://api.example.com/~user/a%2Fb", true},
			{"http://api.example.com", "http://api.example.com:80/", true},
			{"https://api.example.com/things", "http://api.example.com/things", false},
			{"https://api.example.com/things", "https://api.example.com:8443/things", false},
			{"https://api.example.com/Things", "https://api.example.com/things", false},
			{"https://api.example.com/things/", "https://api.example.com/things", false},
			{"https://user@api.example.com/things", "https://api.example.com/things", false},
			{"/things", "https://api.example.com/things", false},
		} {
			jti := "u" + string(rune('a'+i))
			_, err := e.dpop.Verify(context.Background(), jwtreplay.ProofRequest{
				Proof: c.proof(t, proofClaims(jti, "GET", tc.htu, start)), Method: "GET", URI: tc.request,
			})
			if tc.match && err != nil {
				t.Errorf("htu %q, request %q: %v", tc.htu, tc.request, err)
			}
			if !tc.match && jwtreplay.ErrorCode(err) != jwtreplay.CodeURIMismatch {
				t.Errorf("htu %q, request %q: got %v, want htu_mismatch", tc.htu, tc.request, err)
			}
		}
	})

	t.Run("Refusals", func(t *testing.T) {
		e := newDPoPEnv(t, start, nil)
		c := newClient(t, jose.ES256)
		good := proofClaims("r", "POST", resource, start)
		with := func(k string, v any) map[string]any {
			m := map[string]any{}
			for k, v := range good {
				m[k] = v
			}
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
			return m
		}
		pubJWK, err := c.pub.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		priv := jose.JSONWebKey{Key: c.priv}
		privJWK, err := priv.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		// A proof with the private key in its jwk, validly signed: the
		// signer embeds what it is given.
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: c.priv},
			(&jose.SignerOptions{}).WithType("dpop+jwt").WithHeader("jwk", json.RawMessage(privJWK)))
		if err != nil {
			t.Fatal(err)
		}
		sig, err := s.Sign(mustJSON(t, good))
		if err != nil {
			t.Fatal(err)
		}
		withPrivate, err := sig.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}
		hs := jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef")}
		hsJWK, _ := hs.MarshalJSON()
		other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		otherSigner, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: other},
			(&jose.SignerOptions{}).WithType("dpop+jwt").WithHeader("jwk", json.RawMessage(pubJWK)))
		otherSig, _ := otherSigner.Sign(mustJSON(t, good))
		wrongKey, _ := otherSig.CompactSerialize()
		plain, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: c.priv}, (&jose.SignerOptions{}).WithType("dpop+jwt"))
		noJWKSig, _ := plain.Sign(mustJSON(t, good))
		noJWK, _ := noJWKSig.CompactSerialize()
		jwtTyp, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: c.priv}, (&jose.SignerOptions{EmbedJWK: true}).WithType("JWT"))
		jwtTypSig, _ := jwtTyp.Sign(mustJSON(t, good))
		wrongTyp, _ := jwtTypSig.CompactSerialize()

		for _, tc := range []struct {
			name, proof, token, code string
		}{
			{"NoneAlg", compact(t, map[string]any{"typ": "dpop+jwt", "alg": "none", "jwk": json.RawMessage(pubJWK)}, good, nil), "", jwtreplay.CodeAlgorithmNotAllowed},
			{"HMACAlg", compact(t, map[string]any{"typ": "dpop+jwt", "alg": "HS256", "jwk": json.RawMessage(hsJWK)}, good, make([]byte, 32)), "", jwtreplay.CodeAlgorithmNotAllowed},
			{"PrivateKeyInJWK", withPrivate, "", jwtreplay.CodeProofKey},
			{"NoJWK", noJWK, "", jwtreplay.CodeProofKey},
			{"WrongTyp", wrongTyp, "", jwtreplay.CodeProofType},
			{"NoTyp", compact(t, map[string]any{"alg": "ES256", "jwk": json.RawMessage(pubJWK)}, good, make([]byte, 64)), "", jwtreplay.CodeProofType},
			{"TamperedSignature", tamper(c.proof(t, good)), "", jwtreplay.CodeSignatureInvalid},
			{"SignedByAnotherKey", wrongKey, "", jwtreplay.CodeSignatureInvalid},
			{"WrongHTM", c.proof(t, with("htm", "GET")), "", jwtreplay.CodeMethodMismatch},
			{"LowerCaseHTM", c.proof(t, with("htm", "post")), "", jwtreplay.CodeMethodMismatch},
			{"WrongHTU", c.proof(t, with("htu", "https://api.example.com/other")), "", jwtreplay.CodeURIMismatch},
			{"NoJTI", c.proof(t, with("jti", nil)), "", jwtreplay.CodeClaimMissing},
			{"NoHTM", c.proof(t, with("htm", nil)), "", jwtreplay.CodeClaimMissing},
			{"NoHTU", c.proof(t, with("htu", nil)), "", jwtreplay.CodeClaimMissing},
			{"NoIAT", c.proof(t, with("iat", nil)), "", jwtreplay.CodeClaimMissing},
			{"IATAsString", c.proof(t, with("iat", "now")), "", jwtreplay.CodeClaimInvalid},
			{"IATInTheFuture", c.proof(t, with("iat", start.Add(e.opts.Skew+time.Second).Unix())), "", jwtreplay.CodeProofTime},
			{"IATTooOld", c.proof(t, with("iat", start.Add(-e.opts.ProofAge-e.opts.Skew).Unix())), "", jwtreplay.CodeProofTime},
			{"NoATHWithAccessToken", c.proof(t, good), "token-1", jwtreplay.CodeClaimMissing},
			{"ATHOfAnotherToken", c.proof(t, with("ath", ath("token-2"))), "token-1", jwtreplay.CodeAccessTokenHash},
			{"JTITooLong", c.proof(t, with("jti", strings.Repeat("j", spent.MaxKeyLen))), "", jwtreplay.CodeClaimInvalid},
			{"NotAJWS", "not-a-jws", "", jwtreplay.CodeProofMalformed},
			{"TooLong", strings.Repeat("a", e.opts.MaxProofLen+1), "", jwtreplay.CodeProofMalformed},
			{"Missing", "", "", jwtreplay.CodeProofMissing},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := serve(t, e.dpop.Handler(ok), request("POST", resource, tc.proof, tc.token))
				if a.status != http.StatusUnauthorized || a.code != tc.code {
					t.Fatalf("got %d %q (%s), want 401 %q", a.status, a.code, a.detail, tc.code)
				}
				wantErr := tc.code != jwtreplay.CodeProofMissing
				if !strings.HasPrefix(a.challenge, "DPoP algs=") || strings.Contains(a.challenge, `error="invalid_dpop_proof"`) != wantErr {
					t.Fatalf("got WWW-Authenticate %q, want DPoP algs (with invalid_dpop_proof: %v)", a.challenge, wantErr)
				}
			})
		}
		if n := e.store.Len(); n != 0 {
			t.Fatalf("refused proofs left %d records, want 0", n)
		}
	})

	t.Run("AccessTokenHash", func(t *testing.T) {
		e := newDPoPEnv(t, start, nil)
		c := newClient(t, jose.ES256)
		cl := proofClaims("a", "GET", resource, start)
		cl["ath"] = ath("token-1")
		if a := serve(t, e.dpop.Handler(ok), request("GET", resource, c.proof(t, cl), "token-1")); a.status != http.StatusOK {
			t.Fatalf("got %d %q (%s), want 200", a.status, a.code, a.detail)
		}
	})

	t.Run("TwoDPoPHeadersAreRefused", func(t *testing.T) {
		e := newDPoPEnv(t, start, nil)
		c := newClient(t, jose.ES256)
		r := request("POST", resource, c.proof(t, proofClaims("x", "POST", resource, start)), "")
		r.Header.Add("DPoP", c.proof(t, proofClaims("y", "POST", resource, start)))
		if a := serve(t, e.dpop.Handler(ok), r); a.code != jwtreplay.CodeProofMalformed {
			t.Fatalf("got %d %q, want dpop_malformed", a.status, a.code)
		}
	})

	t.Run("ThumbprintInContextAndBinding", func(t *testing.T) {
		e := newDPoPEnv(t, start, nil)
		c := newClient(t, jose.EdDSA)
		var jkt string
		var bound, other, unbound error
		h := e.dpop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			jkt, _ = jwtreplay.ThumbprintFrom(r.Context())
			bound = jwtreplay.CheckBinding(r.Context(), c.thumbprint(t))
			other = jwtreplay.CheckBinding(r.Context(), newClient(t, jose.EdDSA).thumbprint(t))
			unbound = jwtreplay.CheckBinding(r.Context(), "")
		}))
		serve(t, h, request("POST", resource, c.proof(t, proofClaims("b", "POST", resource, start)), ""))
		if jkt != c.thumbprint(t) || bound != nil || !errors.Is(other, jwtreplay.ErrBindingMismatch) || !errors.Is(unbound, jwtreplay.ErrNotBound) {
			t.Fatalf("got jkt %q, bound %v, other %v, unbound %v", jkt, bound, other, unbound)
		}
		if err := jwtreplay.CheckBinding(context.Background(), jkt); !errors.Is(err, jwtreplay.ErrNoProof) {
			t.Fatalf("outside the middleware: got %v, want ErrNoProof", err)
		}
	})

	t.Run("StoreFailureFailsClosed", func(t *testing.T) {
		e := newDPoPEnv(t, start, nil)
		e.store.SetFaults(inmem.Faults{Before: func(string) error { return errors.New("disk on fire") }})
		c := newClient(t, jose.ES256)
		var ran atomic.Bool
		h := e.dpop.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Store(true) }))
		a := serve(t, h, request("POST", resource, c.proof(t, proofClaims("f", "POST", resource, start)), ""))
		if a.status != http.StatusServiceUnavailable || a.code != jwtreplay.CodeUnavailable || ran.Load() {
			t.Fatalf("got %d %q, handler ran %v: want 503 unavailable, handler not run", a.status, a.code, ran.Load())
		}
	})

	t.Run("ConcurrentReplaysAcceptOne", func(t *testing.T) {
		e := newDPoPEnv(t, start, nil)
		c := newClient(t, jose.ES256)
		proof := c.proof(t, proofClaims("race", "POST", resource, start))
		h := e.dpop.Handler(ok)
		var wg sync.WaitGroup
		var accepted, replayed atomic.Int32
		for range 50 {
			wg.Go(func() {
				a := serve(t, h, request("POST", resource, proof, ""))
				switch {
				case a.status == http.StatusOK:
					accepted.Add(1)
				case a.code == jwtreplay.CodeReplayed:
					replayed.Add(1)
				default:
					t.Errorf("got %d %q", a.status, a.code)
				}
			})
		}
		wg.Wait()
		if accepted.Load() != 1 || replayed.Load() != 49 {
			t.Fatalf("got %d accepted, %d replayed; want 1 and 49", accepted.Load(), replayed.Load())
		}
	})

	t.Run("BehindAProxy", func(t *testing.T) {
		e := newDPoPEnv(t, start, func(o *jwtreplay.DPoPOptions) {
			o.URI = func(r *http.Request) string { return "https://public.example" + r.URL.EscapedPath() }
		})
		c := newClient(t, jose.ES256)
		r := request("GET", "http://10.0.0.7:8080/things", c.proof(t, proofClaims("p", "GET", "https://public.example/things", start)), "")
		if a := serve(t, e.dpop.Handler(ok), r); a.status != http.StatusOK {
			t.Fatalf("got %d %q (%s), want 200", a.status, a.code, a.detail)
		}
	})
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewDPoP(t *testing.T) {
	c := newClock(start)
	base := jwtreplay.DefaultDPoPOptions()
	short := base.Policy()
	short.Retention = base.ProofAge + base.Skew // one skew short
	for _, tc := range []struct {
		name   string
		ns     map[string]spent.Policy
		set    func(*jwtreplay.DPoPOptions)
		reason string
	}{
		{"RetentionShorterThanWindow", map[string]spent.Policy{"dpop-jti": short}, nil, "at least 1m10s"},
		{"HMAC", nil, func(o *jwtreplay.DPoPOptions) { o.Algorithms = []jose.SignatureAlgorithm{jose.ES256, jose.HS256} }, "asymmetric"},
		{"None", nil, func(o *jwtreplay.DPoPOptions) { o.Algorithms = []jose.SignatureAlgorithm{"none"} }, "none"},
		{"NoProofAge", nil, func(o *jwtreplay.DPoPOptions) { o.ProofAge = 0 }, "ProofAge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == nil {
				ns = map[string]spent.Policy{"dpop-jti": base.Policy()}
			}
			l, _ := newLedger(t, c, ns)
			o := base
			if tc.set != nil {
				tc.set(&o)
			}
			_, err := jwtreplay.NewDPoP(l, o)
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("got %v, want an error naming %q", err, tc.reason)
			}
		})
	}
}

// FuzzDPoPVerify feeds proofs seeded from the RFC 9449 vectors to Verify:
// it must never panic nor fail internally, and since the fuzzer holds no
// private key, a proof it accepts can only be signed by the RFC's key.
func FuzzDPoPVerify(f *testing.F) {
	v := readVectors(f)
	for _, p := range v.Proofs {
		f.Add(p.Proof)
	}
	p := v.Proofs[0]
	f.Fuzz(func(t *testing.T, proof string) {
		e := newDPoPEnv(t, time.Unix(p.IAT, 0), nil)
		got, err := e.dpop.Verify(context.Background(), jwtreplay.ProofRequest{Proof: proof, Method: p.HTM, URI: p.HTU})
		if err == nil && got.Thumbprint != v.JKT {
			t.Fatalf("accepted %q, signed by key %s", proof, got.Thumbprint)
		}
		if err != nil && jwtreplay.ErrorCode(err) == jwtreplay.CodeInternal {
			t.Fatalf("internal error on input %q: %v", proof, err)
		}
	})
}
