package privacypass_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/privacypass"
)

func testChallenge(t *testing.T, typ privacypass.TokenType) privacypass.Challenge {
	t.Helper()
	c := privacypass.Challenge{
		TokenChallenge: privacypass.TokenChallenge{TokenType: typ, IssuerName: "issuer.example",
			RedemptionContext: bytes.Repeat([]byte{9}, 32), OriginInfo: "a.example,b.example"},
		TokenKey: []byte("not really a key, but bytes"),
		MaxAge:   600,
	}
	raw, err := c.TokenChallenge.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	c.Raw = raw
	return c
}

func TestChallengeHeaderRoundTrip(t *testing.T) {
	a, b := testChallenge(t, 2), testChallenge(t, 1)
	b.MaxAge = -1
	h := http.Header{}
	h.Add("WWW-Authenticate", `Basic realm="x", Bearer error="invalid_token"`)
	h.Add("WWW-Authenticate", a.String()+", "+b.String())
	h.Add("WWW-Authenticate", `Negotiate abc==`)
	chs, err := privacypass.ParseChallenges(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(chs) != 2 {
		t.Fatalf("%d challenges, want 2", len(chs))
	}
	for i, want := range []privacypass.Challenge{a, b} {
		got := chs[i]
		if !bytes.Equal(got.Raw, want.Raw) || !bytes.Equal(got.TokenKey, want.TokenKey) || got.MaxAge != want.MaxAge ||
			got.TokenChallenge.OriginInfo != want.TokenChallenge.OriginInfo {
			t.Fatalf("challenge %d: got %+v, want %+v", i, got, want)
		}
		if got.String() != want.String() {
			t.Fatalf("challenge %d: String %q, want %q", i, got.String(), want.String())
		}
	}
}

func TestChallengeHeaderForms(t *testing.T) {
	c := testChallenge(t, 2)
	padded := base64.URLEncoding.EncodeToString(c.Raw)
	raw := base64.RawURLEncoding.EncodeToString(c.Raw)
	key := base64.URLEncoding.EncodeToString(c.TokenKey)
	ok := []string{
		`PrivateToken challenge="` + padded + `", token-key="` + key + `"`,
		`PrivateToken challenge=` + raw + `,token-key=` + base64.RawURLEncoding.EncodeToString(c.TokenKey),
		`privatetoken  Challenge = "` + padded + `" , token-key="` + key + `", max-age=10`,
	}
	for _, v := range ok {
		chs, err := privacypass.ParseChallenges(http.Header{"Www-Authenticate": {v}})
		if err != nil || len(chs) != 1 || !bytes.Equal(chs[0].Raw, c.Raw) {
			t.Errorf("%s: got %d challenges, %v", v, len(chs), err)
		}
	}
	bad := []string{
		`PrivateToken token-key="` + key + `"`,                                             // no challenge
		`PrivateToken challenge="` + padded + `=", token-key="` + key + `"`,                // bad padding
		`PrivateToken challenge="` + padded[:len(padded)-4] + `", token-key="` + key + `"`, // truncated challenge
		`PrivateToken challenge="` + padded + `", challenge="` + padded + `"`,              // twice
		`PrivateToken challenge="` + padded + `", max-age=-1`,                              // bad max-age
		`PrivateToken challenge="` + padded,                                                // unterminated
	}
	for _, v := range bad {
		if chs, err := privacypass.ParseChallenges(http.Header{"Www-Authenticate": {v}}); err == nil {
			t.Errorf("%s: accepted (%d challenges)", v, len(chs))
		}
	}
}

func TestAuthorizationHeader(t *testing.T) {
	tok := bytes.Repeat([]byte{0xfb}, 100)
	h := http.Header{"Authorization": {privacypass.AuthorizationValue(tok)}}
	got, ok, err := privacypass.ParseAuthorization(h)
	if err != nil || !ok || !bytes.Equal(got, tok) {
		t.Fatalf("got %x %v %v", got, ok, err)
	}
	if _, ok, err := privacypass.ParseAuthorization(http.Header{"Authorization": {"Bearer abc.def"}}); ok || err != nil {
		t.Fatalf("bearer credentials: ok %v, err %v; want neither", ok, err)
	}
	for _, v := range []string{`PrivateToken`, `PrivateToken token=`, `PrivateToken token="***"`, `PrivateToken token="AA", token="AA"`} {
		if _, _, err := privacypass.ParseAuthorization(http.Header{"Authorization": {v}}); err == nil {
			t.Errorf("%s: accepted", v)
		}
	}
}

func TestWireRefusals(t *testing.T) {
	c := testChallenge(t, 2)
	cases := map[string][]byte{
		"Trailing":        append(bytes.Clone(c.Raw), 0),
		"Truncated":       c.Raw[:len(c.Raw)-1],
		"ContextOf5":      {0, 2, 0, 1, 'i', 5, 1, 2, 3, 4, 5, 0, 0},
		"EmptyIssuer":     {0, 2, 0, 0, 0, 0, 0},
		"EmptyOrigin":     {0, 2, 0, 1, 'i', 0, 0, 1, ','},
		"ControlInIssuer": {0, 2, 0, 1, '\n', 0, 0, 0},
	}
	for name, b := range cases {
		if _, err := privacypass.ParseTokenChallenge(b); err == nil {
			t.Errorf("challenge %s: accepted", name)
		}
	}
	if _, err := privacypass.ParseToken(make([]byte, 2+96+255)); err == nil {
		t.Error("token one byte short: accepted")
	}
	if _, err := privacypass.ParseTokenRequest([]byte{0, 1, 5}); err == nil {
		t.Error("type 1 request without a blinded element: accepted")
	}
	if _, err := privacypass.ParseTokenResponse(1, make([]byte, 145+1)); err == nil {
		t.Error("type 1 response one byte long: accepted")
	}
}

func TestChallengeSetBounds(t *testing.T) {
	e := newEnv(t, nil)
	set := privacypass.NewChallengeSet(3, time.Minute)
	origin := e.newOrigin(t, e.ledger, set, privacypass.TypeBlindRSA)
	first := e.issue(t, origin.URL, privacypass.TypeBlindRSA) // challenge 1
	for range 3 {
		challenge(t, origin.URL, privacypass.TypeBlindRSA) // challenges 2-4: the 1st is evicted
	}
	if n := set.Len(); n != 3 {
		t.Fatalf("set holds %d challenges, want 3", n)
	}
	wantRefused(t, send(t, http.MethodGet, origin.URL, first), privacypass.CodeChallengeMismatch)
	second := e.issue(t, origin.URL, privacypass.TypeBlindRSA)
	if a := send(t, http.MethodGet, origin.URL, second); a.status != http.StatusOK {
		t.Fatalf("got %d %q, want 200", a.status, a.problem.Code)
	}
}

func TestStaticChallenge(t *testing.T) {
	e := newEnv(t, nil)
	mk := func() string {
		o, err := privacypass.NewOrigin(e.ledger, privacypass.OriginConfig{
			IssuerName: e.cfg.IssuerName, OriginInfo: []string{"origin.example"},
			TokenTypes: []privacypass.TokenType{privacypass.TypeBlindRSA}, Keys: e.srv.Keyring(),
			StaticChallenge: true, Logger: quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		hs := newServer(t, o.Middleware(okHandler))
		return hs
	}
	a, b := mk(), mk()
	ca, cb := challenge(t, a, privacypass.TypeBlindRSA), challenge(t, b, privacypass.TypeBlindRSA)
	if !bytes.Equal(ca.Raw, cb.Raw) || len(ca.TokenChallenge.RedemptionContext) != 0 || ca.MaxAge != -1 {
		t.Fatalf("static challenges differ or carry a context: %x, %x", ca.Raw, cb.Raw)
	}
	tok := e.issue(t, a, privacypass.TypeBlindRSA)
	if r := send(t, http.MethodGet, b, tok); r.status != http.StatusOK {
		t.Fatalf("token of origin a at origin b: got %d %q, want 200", r.status, r.problem.Code)
	}
	wantRefused(t, send(t, http.MethodGet, a, tok), privacypass.CodeDoubleSpend)
}

// TestHeaderErrorsQuoteAPrefix parses headers whose scheme or parameter
// names are 64 KiB long: the errors quote a short prefix, not the name.
func TestHeaderErrorsQuoteAPrefix(t *testing.T) {
	long := strings.Repeat("x", 64<<10)
	for _, v := range []string{
		long + `"`,                        // a scheme followed by junk
		`PrivateToken a=b, ` + long + `=`, // a parameter without a value
		`PrivateToken ` + long + `=@`,     // a bad value
		`PrivateToken ` + long + `=a b=c`, // junk after a parameter
	} {
		_, err := privacypass.ParseChallenges(http.Header{"Www-Authenticate": {v}})
		if err == nil {
			t.Fatalf("ParseChallenges of %.40s...: got no error, want one", v)
		}
		if n := len(err.Error()); n > 300 || !strings.Contains(err.Error(), "xxxx") || !strings.Contains(err.Error(), "bytes)") {
			t.Fatalf("ParseChallenges of %.40s...: error of %d bytes (%.100s), want a short quote", v, n, err)
		}
	}
}
