package jwtreplay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/jwtreplay"
)

const audience = "https://api.example.com"

// jtiEnv is a JTI over a real in-memory ledger with a fake clock, and two
// issuers of its own.
type jtiEnv struct {
	clock  *clock
	ledger *spent.Ledger
	store  *inmem.Store
	jti    *jwtreplay.JTI
	opts   jwtreplay.JTIOptions
	a, b   *issuer
}

func newJTIEnv(t *testing.T, set func(*jwtreplay.JTIOptions)) *jtiEnv {
	t.Helper()
	e := &jtiEnv{clock: newClock(start)}
	e.a = newIssuer(t, "https://a.example", jose.ES256)
	e.b = newIssuer(t, "https://b.example", jose.EdDSA)
	o := jwtreplay.DefaultJTIOptions()
	o.Issuers = []string{e.a.name, e.b.name}
	o.Audience = []string{audience}
	o.Keys = jwtreplay.IssuerKeys(map[string]jose.JSONWebKeySet{
		e.a.name: {Keys: []jose.JSONWebKey{e.a.pub}},
		e.b.name: {Keys: []jose.JSONWebKey{e.b.pub}},
	})
	if set != nil {
		set(&o)
	}
	e.opts = o
	e.ledger, e.store = newLedger(t, e.clock, map[string]spent.Policy{o.Namespace: o.Policy()})
	var err error
	e.jti, err = jwtreplay.NewJTI(e.ledger, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// token returns a token of issuer i with jti id, valid for an hour from now.
func (e *jtiEnv) token(t *testing.T, i *issuer, id string) string {
	now := e.clock.Now()
	return i.sign(t, claims{ID: id, Audience: []string{audience}, IssuedAt: now, Expiry: now.Add(time.Hour)})
}

func bearer(tok string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "https://api.example.com/things", nil)
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return r
}

func TestJTI(t *testing.T) {
	t.Run("ReplayBeforeExpIsRefused", func(t *testing.T) {
		e := newJTIEnv(t, nil)
		h := e.jti.Handler(ok)
		tok := e.token(t, e.a, "id-1")
		if a := serve(t, h, bearer(tok)); a.status != http.StatusOK {
			t.Fatalf("first: got %d %s (%s), want 200", a.status, a.code, a.detail)
		}
		e.clock.Advance(59 * time.Minute)
		a := serve(t, h, bearer(tok))
		if a.status != http.StatusUnauthorized || a.code != jwtreplay.CodeReplayed {
			t.Fatalf("replay: got %d %q, want 401 replayed", a.status, a.code)
		}
		if !strings.HasPrefix(a.challenge, `Bearer error="invalid_token"`) {
			t.Fatalf("got WWW-Authenticate %q, want a Bearer invalid_token challenge", a.challenge)
		}
		if !strings.Contains(a.detail, "2026-03-01T12:00:00Z") {
			t.Fatalf("got detail %q, want the first presentation's time", a.detail)
		}
	})

	t.Run("SameJTIFromAnotherIssuerIsAccepted", func(t *testing.T) {
		e := newJTIEnv(t, nil)
		ctx := context.Background()
		if _, err := e.jti.Verify(ctx, e.token(t, e.a, "shared")); err != nil {
			t.Fatal(err)
		}
		if _, err := e.jti.Verify(ctx, e.token(t, e.b, "shared")); err != nil {
			t.Fatalf("same jti, other issuer: %v", err)
		}
		_, err := e.jti.Verify(ctx, e.token(t, e.b, "shared"))
		assertCode(t, err, jwtreplay.CodeReplayed)
	})

	t.Run("IssuerIsLengthPrefixed", func(t *testing.T) {
		// ("ab", "c") and ("a", "bc") concatenate alike; they must not
		// collide.
		k := newIssuer(t, "x", jose.ES256)
		e := newJTIEnv(t, func(o *jwtreplay.JTIOptions) {
			o.Issuers = []string{"ab", "a"}
			o.Keys = jwtreplay.StaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.pub}})
		})
		now := e.clock.Now()
		for _, c := range []claims{{Issuer: "ab", ID: "c"}, {Issuer: "a", ID: "bc"}} {
			c.Audience, c.Expiry = []string{audience}, now.Add(time.Hour)
			if _, err := e.jti.Verify(context.Background(), k.sign(t, c)); err != nil {
				t.Fatalf("iss %q jti %q: %v", c.Issuer, c.ID, err)
			}
		}
		if jwtreplay.JTIKey("ab", "c") == jwtreplay.JTIKey("a", "bc") {
			t.Fatal("JTIKey collides")
		}
	})

	t.Run("MarkerLivesUntilExpPlusSkew", func(t *testing.T) {
		e := newJTIEnv(t, nil)
		tok, err := e.jti.Verify(context.Background(), e.token(t, e.a, "id-2"))
		if err != nil {
			t.Fatal(err)
		}
		want := start.Add(time.Hour + e.opts.Skew)
		rec, err := e.ledger.Get(context.Background(), e.opts.Namespace, jwtreplay.JTIKey(e.a.name, "id-2"))
		if err != nil {
			t.Fatal(err)
		}
		if !rec.ExpiresAt.Equal(want) || !tok.AcceptedUntil.Equal(want) {
			t.Fatalf("got expires_at %v, accepted until %v, want %v", rec.ExpiresAt, tok.AcceptedUntil, want)
		}
		// Within the skew after exp the token is still accepted, and so
		// still refused as a replay; at exp + skew it is expired.
		e.clock.Set(want.Add(-time.Second))
		_, err = e.jti.Verify(context.Background(), e.token(t, e.a, "id-2"))
		assertCode(t, err, jwtreplay.CodeReplayed)
		_, err = e.jti.Verify(context.Background(), e.a.sign(t, claims{ID: "id-2", Audience: []string{audience}, Expiry: start.Add(time.Hour)}))
		assertCode(t, err, jwtreplay.CodeReplayed)
		e.clock.Set(want)
		_, err = e.jti.Verify(context.Background(), e.a.sign(t, claims{ID: "id-2", Audience: []string{audience}, Expiry: start.Add(time.Hour)}))
		assertCode(t, err, jwtreplay.CodeTokenExpired)
	})

	t.Run("TenYearsAwayIsRefused", func(t *testing.T) {
		e := newJTIEnv(t, nil)
		now := e.clock.Now()
		tok := e.a.sign(t, claims{ID: "long", Audience: []string{audience}, IssuedAt: now, Expiry: now.AddDate(10, 0, 0)})
		a := serve(t, e.jti.Handler(ok), bearer(tok))
		if a.status != http.StatusUnauthorized || a.code != jwtreplay.CodeLifetimeTooLong {
			t.Fatalf("got %d %q, want 401 lifetime_too_long", a.status, a.code)
		}
		if !strings.Contains(a.detail, "MaxLifetime") {
			t.Fatalf("got detail %q, want it to name the limit", a.detail)
		}
		// Refused before any ledger write.
		if _, err := e.ledger.Get(context.Background(), e.opts.Namespace, jwtreplay.JTIKey(e.a.name, "long")); spent.ErrorCode(err) != spent.ENotFound {
			t.Fatalf("got %v, want no record", err)
		}
		if n := e.store.Len(); n != 0 {
			t.Fatalf("store holds %d records, want 0", n)
		}
	})

	t.Run("TenYearsAwayIsCapped", func(t *testing.T) {
		e := newJTIEnv(t, func(o *jwtreplay.JTIOptions) { o.Lifetime = jwtreplay.LifetimeCap })
		h := e.jti.Handler(ok)
		now := e.clock.Now()
		tok := e.a.sign(t, claims{ID: "long", Audience: []string{audience}, IssuedAt: now, Expiry: now.AddDate(10, 0, 0)})
		if a := serve(t, h, bearer(tok)); a.status != http.StatusOK {
			t.Fatalf("first: got %d %s (%s), want 200", a.status, a.code, a.detail)
		}
		limit := now.Add(e.opts.MaxLifetime)
		rec, err := e.ledger.Get(context.Background(), e.opts.Namespace, jwtreplay.JTIKey(e.a.name, "long"))
		if err != nil {
			t.Fatal(err)
		}
		if !rec.ExpiresAt.Equal(limit) {
			t.Fatalf("got expires_at %v, want iat + MaxLifetime %v", rec.ExpiresAt, limit)
		}
		e.clock.Set(limit.Add(-time.Second))
		if a := serve(t, h, bearer(tok)); a.code != jwtreplay.CodeReplayed {
			t.Fatalf("just before the cap: got %d %q, want replayed", a.status, a.code)
		}
		e.clock.Set(limit)
		if a := serve(t, h, bearer(tok)); a.status != http.StatusUnauthorized || a.code != jwtreplay.CodeTokenExpired {
			t.Fatalf("at iat + MaxLifetime: got %d %q, want 401 token_expired", a.status, a.code)
		}
		// The ledger has forgotten the id by then: the verifier's expiry
		// is what refuses it.
		if _, err := e.ledger.Get(context.Background(), e.opts.Namespace, jwtreplay.JTIKey(e.a.name, "long")); spent.ErrorCode(err) != spent.ENotFound {
			t.Fatalf("got %v, want the record forgotten", err)
		}
	})

	t.Run("CapWithoutIatIsRefused", func(t *testing.T) {
		e := newJTIEnv(t, func(o *jwtreplay.JTIOptions) { o.Lifetime = jwtreplay.LifetimeCap })
		tok := e.a.sign(t, claims{ID: "no-iat", Audience: []string{audience}, Expiry: start.AddDate(10, 0, 0)})
		_, err := e.jti.Verify(context.Background(), tok)
		assertCode(t, err, jwtreplay.CodeClaimMissing)
		if !strings.Contains(err.Error(), "iat") {
			t.Fatalf("got %v, want it to name iat", err)
		}
	})

	t.Run("CapNeverOutlivesRetention", func(t *testing.T) {
		// An iat up to Skew in the future still gives an expires_at within
		// MaxLifetime + Skew of now, which the namespace retains.
		e := newJTIEnv(t, func(o *jwtreplay.JTIOptions) { o.Lifetime = jwtreplay.LifetimeCap })
		now := e.clock.Now()
		iat := now.Add(e.opts.Skew)
		tok, err := e.jti.Verify(context.Background(), e.a.sign(t, claims{ID: "ahead", Audience: []string{audience}, IssuedAt: iat, Expiry: now.AddDate(1, 0, 0)}))
		if err != nil {
			t.Fatal(err)
		}
		if got, max := tok.AcceptedUntil.Sub(now), e.opts.Retention(); got > max {
			t.Fatalf("accepted for %v from now, longer than the retention %v", got, max)
		}
	})

	t.Run("Refusals", func(t *testing.T) {
		e := newJTIEnv(t, nil)
		now := e.clock.Now()
		aud := []string{audience}
		hmac := compact(t, map[string]string{"alg": "HS256", "typ": "JWT"}, map[string]any{"iss": e.a.name, "jti": "h", "aud": audience, "exp": now.Add(time.Hour).Unix()}, []byte("0123456789abcdef0123456789abcdef"))
		none := compact(t, map[string]string{"alg": "none", "typ": "JWT"}, map[string]any{"iss": e.a.name, "jti": "n", "aud": audience, "exp": now.Add(time.Hour).Unix()}, nil)
		stranger := newIssuer(t, "https://evil.example", jose.ES256)
		impostor := newIssuer(t, e.a.name, jose.ES256) // claims a's name, other key
		impostor.kid = e.a.kid
		for _, c := range []struct {
			name, tok, code string
		}{
			{"Empty", "", jwtreplay.CodeTokenMissing},
			{"NotAJWS", "a.b", jwtreplay.CodeTokenMalformed},
			{"TooLong", strings.Repeat("a", e.opts.MaxTokenLen+1), jwtreplay.CodeTokenMalformed},
			{"NoneAlg", none, jwtreplay.CodeAlgorithmNotAllowed},
			{"HMACNotAllowed", hmac, jwtreplay.CodeAlgorithmNotAllowed},
			{"TamperedSignature", tamper(e.token(t, e.a, "t")), jwtreplay.CodeSignatureInvalid},
			{"OtherKeySameIssuer", impostor.sign(t, claims{ID: "i", Audience: aud, Expiry: now.Add(time.Hour)}), jwtreplay.CodeSignatureInvalid},
			{"UnknownIssuer", stranger.sign(t, claims{ID: "s", Audience: aud, Expiry: now.Add(time.Hour)}), jwtreplay.CodeClaimInvalid},
			{"UnknownKid", (&issuer{name: e.a.name, kid: "other", alg: e.a.alg, priv: e.a.priv}).sign(t, claims{ID: "k", Audience: aud, Expiry: now.Add(time.Hour)}), jwtreplay.CodeKeyUnknown},
			{"NoJTI", e.a.sign(t, claims{Audience: aud, Expiry: now.Add(time.Hour)}), jwtreplay.CodeClaimMissing},
			{"NoExp", e.a.sign(t, claims{ID: "e", Audience: aud}), jwtreplay.CodeClaimMissing},
			{"OtherAudience", e.a.sign(t, claims{ID: "a", Audience: []string{"https://other.example"}, Expiry: now.Add(time.Hour)}), jwtreplay.CodeClaimInvalid},
			{"NoAudience", e.a.sign(t, claims{ID: "a2", Expiry: now.Add(time.Hour)}), jwtreplay.CodeClaimInvalid},
			{"Expired", e.a.sign(t, claims{ID: "x", Audience: aud, Expiry: now.Add(-2 * time.Minute)}), jwtreplay.CodeTokenExpired},
			{"NotYetValid", e.a.sign(t, claims{ID: "y", Audience: aud, NotBefore: now.Add(2 * time.Minute), Expiry: now.Add(time.Hour)}), jwtreplay.CodeTokenNotYetValid},
			{"IssuedInTheFuture", e.a.sign(t, claims{ID: "z", Audience: aud, IssuedAt: now.Add(2 * time.Minute), Expiry: now.Add(time.Hour)}), jwtreplay.CodeTokenNotYetValid},
			{"JTITooLong", e.a.sign(t, claims{ID: strings.Repeat("j", spent.MaxKeyLen), Audience: aud, Expiry: now.Add(time.Hour)}), jwtreplay.CodeClaimInvalid},
		} {
			t.Run(c.name, func(t *testing.T) {
				a := serve(t, e.jti.Handler(ok), bearer(c.tok))
				if a.status != http.StatusUnauthorized || a.code != c.code {
					t.Fatalf("got %d %q (%s), want 401 %q", a.status, a.code, a.detail, c.code)
				}
				wantChallenge := `Bearer error="invalid_token", error_description="`
				if c.code == jwtreplay.CodeTokenMissing {
					wantChallenge = "Bearer"
				}
				if !strings.HasPrefix(a.challenge, wantChallenge) {
					t.Fatalf("got WWW-Authenticate %q, want %q...", a.challenge, wantChallenge)
				}
			})
		}
		if n := e.store.Len(); n != 0 {
			t.Fatalf("refused tokens left %d records, want 0", n)
		}
	})

	t.Run("KeyTypes", func(t *testing.T) {
		for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA, jose.RS256, jose.PS256} {
			t.Run(string(alg), func(t *testing.T) {
				i := newIssuer(t, "https://k.example", alg)
				e := newJTIEnv(t, func(o *jwtreplay.JTIOptions) {
					o.Issuers = []string{i.name}
					o.Keys = jwtreplay.StaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{i.pub}})
				})
				tok := e.token(t, i, "k")
				if _, err := e.jti.Verify(context.Background(), tok); err != nil {
					t.Fatal(err)
				}
				_, err := e.jti.Verify(context.Background(), tok)
				assertCode(t, err, jwtreplay.CodeReplayed)
			})
		}
	})

	t.Run("HMACWhenAllowed", func(t *testing.T) {
		secret := []byte("an HMAC secret of at least 32 bytes!")
		e := newJTIEnv(t, func(o *jwtreplay.JTIOptions) {
			o.Issuers = []string{"https://h.example"}
			o.Algorithms = []jose.SignatureAlgorithm{jose.HS256}
			o.Keys = func(context.Context, string, jose.Header) (any, error) { return secret, nil }
		})
		i := &issuer{name: "https://h.example", kid: "h", alg: jose.HS256, priv: secret}
		tok := e.token(t, i, "h")
		if _, err := e.jti.Verify(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
		// An ES256 token is refused when only HS256 is configured.
		_, err := e.jti.Verify(context.Background(), e.token(t, e.a, "es"))
		assertCode(t, err, jwtreplay.CodeAlgorithmNotAllowed)
	})

	t.Run("TokenInContext", func(t *testing.T) {
		e := newJTIEnv(t, nil)
		var got *jwtreplay.Token
		h := e.jti.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, _ = jwtreplay.TokenFrom(r.Context())
		}))
		tok := e.a.sign(t, claims{ID: "ctx", Subject: "alice", Audience: []string{audience}, Expiry: start.Add(time.Hour), JKT: "jkt-value"})
		serve(t, h, bearer(tok))
		if got == nil || got.Claims.Subject != "alice" || got.ConfirmationJKT != "jkt-value" || got.Seq.IsZero() {
			t.Fatalf("got %+v, want the token of alice bound to jkt-value with a seq", got)
		}
	})

	t.Run("TwoAuthorizationHeadersAreRefused", func(t *testing.T) {
		e := newJTIEnv(t, nil)
		r := bearer(e.token(t, e.a, "two"))
		r.Header.Add("Authorization", "Bearer "+e.token(t, e.a, "three"))
		if a := serve(t, e.jti.Handler(ok), r); a.code != jwtreplay.CodeTokenMalformed {
			t.Fatalf("got %d %q, want token_malformed", a.status, a.code)
		}
	})

	t.Run("StoreFailureFailsClosed", func(t *testing.T) {
		e := newJTIEnv(t, nil)
		e.store.SetFaults(inmem.Faults{Before: func(string) error { return errors.New("disk on fire") }})
		var ran atomic.Bool
		h := e.jti.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Store(true) }))
		a := serve(t, h, bearer(e.token(t, e.a, "f")))
		if a.status != http.StatusServiceUnavailable || a.code != jwtreplay.CodeUnavailable || ran.Load() {
			t.Fatalf("got %d %q, handler ran %v: want 503 unavailable, handler not run", a.status, a.code, ran.Load())
		}
		// The same token is accepted once the store is back: nothing was
		// recorded.
		e.store.SetFaults(inmem.Faults{})
		if a := serve(t, h, bearer(e.token(t, e.a, "f"))); a.status != http.StatusOK || !ran.Load() {
			t.Fatalf("after recovery: got %d %q, want 200", a.status, a.code)
		}
	})

	t.Run("AmbiguousStoreFailureFailsClosed", func(t *testing.T) {
		// The write happens, then the store fails: the ledger reads the key
		// back and answers fresh (its own seq), so the request passes once.
		e := newJTIEnv(t, nil)
		var once atomic.Bool
		e.store.SetFaults(inmem.Faults{After: func(op string) error {
			if op == "claim" && once.CompareAndSwap(false, true) {
				return errors.New("timeout after commit")
			}
			return nil
		}})
		tok := e.token(t, e.a, "amb")
		_, err1 := e.jti.Verify(context.Background(), tok)
		_, err2 := e.jti.Verify(context.Background(), tok)
		if err1 != nil && err2 == nil {
			t.Fatalf("first failed (%v) and the replay passed", err1)
		}
		assertCode(t, err2, jwtreplay.CodeReplayed)
	})

	t.Run("LedgerExpiryTooLongIsRefused", func(t *testing.T) {
		// A ledger whose namespace keeps keys 30 minutes at most (its
		// max_expiry) refuses the claim of an hour-long token with
		// expiry_too_long, and the token is refused. The ledger is seen
		// only as a spent.Service, as over HTTP, so NewJTI cannot check
		// the policy first.
		e := newJTIEnv(t, nil)
		short := e.opts.Policy()
		short.Retention, short.Lease = 30*time.Minute, time.Minute
		l, _ := newLedger(t, e.clock, map[string]spent.Policy{e.opts.Namespace: short})
		o := e.opts
		o.Now = e.clock.Now
		c, err := jwtreplay.NewJTI(struct{ spent.Service }{l}, o)
		if err != nil {
			t.Fatal(err)
		}
		a := serve(t, c.Handler(ok), bearer(e.token(t, e.a, "m")))
		if a.status != http.StatusUnauthorized || a.code != jwtreplay.CodeLifetimeTooLong {
			t.Fatalf("got %d %q, want 401 lifetime_too_long", a.status, a.code)
		}
		if !strings.Contains(a.detail, "max_expiry") {
			t.Fatalf("detail %q: want it to name max_expiry", a.detail)
		}
	})

	t.Run("ConcurrentReplaysAcceptOne", func(t *testing.T) {
		e := newJTIEnv(t, nil)
		tok := e.token(t, e.a, "race")
		var wg sync.WaitGroup
		var accepted, replayed atomic.Int32
		for range 50 {
			wg.Go(func() {
				_, err := e.jti.Verify(context.Background(), tok)
				switch jwtreplay.ErrorCode(err) {
				case "":
					accepted.Add(1)
				case jwtreplay.CodeReplayed:
					replayed.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if accepted.Load() != 1 || replayed.Load() != 49 {
			t.Fatalf("got %d accepted, %d replayed; want 1 and 49", accepted.Load(), replayed.Load())
		}
	})

	t.Run("OverTheHTTPClient", func(t *testing.T) {
		e := newJTIEnv(t, nil)
		srv, err := sphttp.NewServer(e.ledger, sphttp.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		defer ts.Close()
		o := e.opts
		o.Now = e.clock.Now
		c, err := jwtreplay.NewJTI(sphttp.NewClient(ts.URL, sphttp.ClientConfig{}), o)
		if err != nil {
			t.Fatal(err)
		}
		tok := e.token(t, e.a, "remote")
		if _, err := c.Verify(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
		_, err = c.Verify(context.Background(), tok)
		assertCode(t, err, jwtreplay.CodeReplayed)
		// The in-process cache over the same ledger sees the same record.
		_, err = e.jti.Verify(context.Background(), tok)
		assertCode(t, err, jwtreplay.CodeReplayed)
	})
}

func TestNewJTI(t *testing.T) {
	c := newClock(start)
	base := jwtreplay.DefaultJTIOptions()
	base.Issuers = []string{"https://a.example"}
	base.Audience = []string{audience}
	base.Keys = jwtreplay.StaticKeys(jose.JSONWebKeySet{})
	short := base.Policy()
	short.Retention = base.MaxLifetime // missing the skew
	echo := base.Policy()
	echo.Mode = spent.ModeEcho
	for _, tc := range []struct {
		name   string
		ns     map[string]spent.Policy
		set    func(*jwtreplay.JTIOptions)
		reason string
	}{
		{"RetentionShorterThanWindow", map[string]spent.Policy{"jwt-jti": short}, nil, "at least 24h1m0s"},
		{"EchoNamespace", map[string]spent.Policy{"jwt-jti": echo}, nil, "want refuse"},
		{"UnknownNamespace", map[string]spent.Policy{"other": base.Policy()}, nil, "not configured"},
		{"NoneAlgorithm", nil, func(o *jwtreplay.JTIOptions) { o.Algorithms = []jose.SignatureAlgorithm{"none"} }, "none"},
		{"NoIssuers", nil, func(o *jwtreplay.JTIOptions) { o.Issuers = nil }, "Issuers"},
		{"NoAudience", nil, func(o *jwtreplay.JTIOptions) { o.Audience = nil }, "Audience"},
		{"NoKeys", nil, func(o *jwtreplay.JTIOptions) { o.Keys = nil }, "Keys"},
		{"LifetimeMode", nil, func(o *jwtreplay.JTIOptions) { o.Lifetime = "clamp" }, "refuse or cap"},
		{"MaxLifetimeNotOverSkew", nil, func(o *jwtreplay.JTIOptions) { o.MaxLifetime = o.Skew }, "longer than Skew"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == nil {
				ns = map[string]spent.Policy{"jwt-jti": base.Policy()}
			}
			l, _ := newLedger(t, c, ns)
			o := base
			if tc.set != nil {
				tc.set(&o)
			}
			_, err := jwtreplay.NewJTI(l, o)
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("got %v, want an error naming %q", err, tc.reason)
			}
		})
	}
	t.Run("ExactRetentionIsAccepted", func(t *testing.T) {
		l, _ := newLedger(t, c, map[string]spent.Policy{"jwt-jti": base.Policy()})
		if _, err := jwtreplay.NewJTI(l, base); err != nil {
			t.Fatal(err)
		}
	})
}
