package privacypass_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/privacypass"
)

// tokenRequest builds a valid token request for the env's current key of
// type typ, answering an arbitrary challenge.
func (e *env) tokenRequest(t *testing.T, typ privacypass.TokenType) []byte {
	t.Helper()
	key, ok := e.srv.Keyring().Current(typ, e.clock.Now())
	if !ok {
		t.Fatal("no current key")
	}
	c := privacypass.TokenChallenge{TokenType: typ, IssuerName: e.cfg.IssuerName}
	raw, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	p, err := privacypass.NewPendingToken(raw, typ, key.TokenKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Request.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func post(t *testing.T, url, ctype, bearer string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, body: string(b), header: resp.Header}
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		if err := json.Unmarshal(b, &a.problem); err != nil {
			t.Fatalf("problem %q: %v", b, err)
		}
	}
	return a
}

func TestIssuerAnswers(t *testing.T) {
	e := newEnv(t, func(c *privacypass.Config) { c.QuotaPerEpoch = 3 })
	url := e.issuer.URL + e.cfg.RequestPath
	good := e.tokenRequest(t, privacypass.TypeBlindRSA)
	unknown := bytes.Clone(good)
	keys := e.srv.Keyring().Directory("/", t0).TokenKeys
	for slices.ContainsFunc(keys, func(k privacypass.DirectoryKey) bool { return privacypass.TruncatedKeyID(k.ID()) == unknown[2] }) {
		unknown[2]++
	}
	huge := bytes.Clone(good)
	for i := 3; i < len(huge); i++ {
		huge[i] = 0xff
	}
	cases := []struct {
		name, ctype, bearer string
		body                []byte
		status              int
		code                string
	}{
		{"NoAttester", privacypass.RequestMediaType, "", good, 401, privacypass.CodeUnauthorized},
		{"UnknownAttester", privacypass.RequestMediaType, "not-a-configured-token", good, 401, privacypass.CodeUnauthorized},
		{"ContentType", "application/octet-stream", attester, good, 415, privacypass.CodeBadRequest},
		{"WrongType", privacypass.RequestMediaType, attester, append([]byte{0, 3}, good[2:]...), 422, privacypass.CodeTokenType},
		{"WrongSize", privacypass.RequestMediaType, attester, good[:100], 422, privacypass.CodeWrongSize},
		{"TooLong", privacypass.RequestMediaType, attester, append(bytes.Clone(good), 0), 422, privacypass.CodeWrongSize},
		{"UnknownKeyID", privacypass.RequestMediaType, attester, unknown, 422, privacypass.CodeUnknownKey},
		{"OutOfRange", privacypass.RequestMediaType, attester, huge, 422, privacypass.CodeWrongSize},
		{"BadPoint", privacypass.RequestMediaType, attester, append(e.tokenRequest(t, privacypass.TypeVOPRF)[:3], make([]byte, 49)...), 422, privacypass.CodeWrongSize},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, url, tc.ctype, tc.bearer, tc.body)
			if a.status != tc.status || a.problem.Code != tc.code {
				t.Fatalf("got %d %q (%s), want %d %q", a.status, a.problem.Code, a.problem.Detail, tc.status, tc.code)
			}
			if want := privacypass.ProblemType + tc.code; a.problem.Type != want {
				t.Fatalf("problem type %q, want %q", a.problem.Type, want)
			}
		})
	}
	t.Run("Quota", func(t *testing.T) {
		// None of the refused requests above counted against the quota.
		for i := range 3 {
			a := post(t, url, privacypass.RequestMediaType, attester, e.tokenRequest(t, privacypass.TypeBlindRSA))
			if a.status != http.StatusOK || a.header.Get("Content-Type") != privacypass.ResponseMediaType || len(a.body) != 256 {
				t.Fatalf("request %d: got %d %q (%d bytes)", i, a.status, a.problem.Code, len(a.body))
			}
		}
		a := post(t, url, privacypass.RequestMediaType, attester, e.tokenRequest(t, privacypass.TypeVOPRF))
		if a.status != http.StatusTooManyRequests || a.problem.Code != privacypass.CodeQuota {
			t.Fatalf("4th request: got %d %q, want 429 %q", a.status, a.problem.Code, privacypass.CodeQuota)
		}
		// 14 hours to the next epoch.
		if ra, _ := strconv.Atoi(a.header.Get("Retry-After")); ra != 14*3600 {
			t.Fatalf("Retry-After %q, want %d", a.header.Get("Retry-After"), 14*3600)
		}
		// Another client has its own quota.
		if a := post(t, url, privacypass.RequestMediaType, "attester-token-0002", e.tokenRequest(t, privacypass.TypeVOPRF)); a.status != http.StatusOK {
			t.Fatalf("other client: got %d %q", a.status, a.problem.Code)
		}
		// The next epoch starts a new quota (with the next epoch's key).
		e.clock.Set(time.Date(2030, 1, 2, 0, 0, 1, 0, time.UTC))
		if err := e.srv.Keyring().Rotate(context.Background()); err != nil {
			t.Fatal(err)
		}
		if a := post(t, url, privacypass.RequestMediaType, attester, e.tokenRequest(t, privacypass.TypeBlindRSA)); a.status != http.StatusOK {
			t.Fatalf("next epoch: got %d %q", a.status, a.problem.Code)
		}
	})
	if a := send(t, http.MethodGet, url, nil); a.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET: got %d, want 405", a.status)
	}
}

func TestDirectoryEndpoint(t *testing.T) {
	e := newEnv(t, func(c *privacypass.Config) { c.IssuerURL = "https://issuer.example" })
	a := send(t, http.MethodGet, e.issuer.URL+privacypass.DirectoryPath, nil)
	if a.status != http.StatusOK || a.header.Get("Content-Type") != privacypass.DirectoryMediaType {
		t.Fatalf("got %d %q", a.status, a.header.Get("Content-Type"))
	}
	d, err := privacypass.ParseDirectory([]byte(a.body))
	if err != nil {
		t.Fatal(err)
	}
	if d.IssuerRequestURI != "https://issuer.example/token-request" {
		t.Fatalf("issuer-request-uri %q", d.IssuerRequestURI)
	}
	again, _ := d.MarshalJSON()
	if string(again) != a.body {
		t.Fatalf("directory round trip:\ngot  %s\nwant %s", again, a.body)
	}
	if err := d.Check(24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.body, `"not-before":1893456000`) || !strings.Contains(a.body, `"not-before":1893542400`) {
		t.Fatalf("want keys for 2030-01-01 and 2030-01-02: %s", a.body)
	}
	etag := a.header.Get("ETag")
	if b := send(t, http.MethodGet, e.issuer.URL+privacypass.DirectoryPath, nil, "If-None-Match", etag); b.status != http.StatusNotModified {
		t.Fatalf("If-None-Match: got %d, want 304", b.status)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := privacypass.DefaultConfig()
	ok.IssuerName = "issuer.example"
	ok.AttesterTokens = []string{"s3cret-1"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	cases := map[string]func(*privacypass.Config){
		"NoIssuer":         func(c *privacypass.Config) { c.IssuerName = "" },
		"SpaceInIssuer":    func(c *privacypass.Config) { c.IssuerName = "a b" },
		"CommaInOrigin":    func(c *privacypass.Config) { c.OriginInfo = []string{"a,b"} },
		"NoTypes":          func(c *privacypass.Config) { c.TokenTypes = nil },
		"Type3":            func(c *privacypass.Config) { c.TokenTypes = []privacypass.TokenType{3} },
		"TypeTwice":        func(c *privacypass.Config) { c.TokenTypes = []privacypass.TokenType{2, 2} },
		"ShortEpoch":       func(c *privacypass.Config) { c.Epoch = time.Second },
		"NegativeGrace":    func(c *privacypass.Config) { c.Grace = -time.Second },
		"HugeSkew":         func(c *privacypass.Config) { c.Skew = 13 * time.Hour },
		"NoQuota":          func(c *privacypass.Config) { c.QuotaPerEpoch = 0 },
		"NoAttesterTokens": func(c *privacypass.Config) { c.AttesterTokens = nil },
		"ShortToken":       func(c *privacypass.Config) { c.AttesterTokens = []string{"abc"} },
		"MTLSWithTokens":   func(c *privacypass.Config) { c.Attester = privacypass.AttesterMTLS },
		"UnknownAttester":  func(c *privacypass.Config) { c.Attester = "ip" },
		"RequestPath":      func(c *privacypass.Config) { c.RequestPath = privacypass.RedeemPath },
		"IssuerURL":        func(c *privacypass.Config) { c.IssuerURL = "issuer.example" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := ok
			mutate(&c)
			if err := c.Validate(); err == nil {
				t.Fatal("Validate accepted it")
			}
		})
	}
}

// TestConfigTOML decodes the example section.
func TestConfigTOML(t *testing.T) {
	var f struct {
		Privacypass privacypass.Config `toml:"privacypass"`
	}
	_, err := toml.Decode(`
[privacypass]
issuer_name = "issuer.example"    # TokenChallenge issuer_name
origin_info = ["origin.example"]  # origins that /v1/redeem challenges name
token_types = [2, 1]
epoch = "24h"
grace = "6h"
quota_per_epoch = 100             # tokens per client per epoch
attester_tokens = ["s3cret-1"]    # bearer tokens that identify clients to the issuer
`, &f)
	if err != nil {
		t.Fatal(err)
	}
	c := f.Privacypass
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.IssuerName != "issuer.example" || len(c.OriginInfo) != 1 || c.Epoch != 24*time.Hour || c.Grace != 6*time.Hour ||
		c.QuotaPerEpoch != 100 || c.TokenTypes[0] != 2 || c.TokenTypes[1] != 1 || c.Namespace != "privacypass" {
		t.Fatalf("decoded %+v", c)
	}
	for _, bad := range []string{`epoch = 24`, `grace = "6 hours"`, `colour = "red"`, `token_types = [70000]`} {
		if _, err := toml.Decode("[privacypass]\n"+bad+"\n", &f); err == nil {
			t.Errorf("%s: decoded without error", bad)
		}
	}
}

// TestNewRefusesUnsafeNamespaces checks that the server refuses ledger
// policies under which a spent token could be accepted again.
func TestNewRefusesUnsafeNamespaces(t *testing.T) {
	c := &clock{t: t0}
	cfg := privacypass.DefaultConfig()
	cfg.IssuerName = "issuer.example"
	cfg.AttesterTokens = []string{attester}
	cfg.GenerateRSAKey = keyGen()
	good := privacypass.NamespacePolicy(cfg.Epoch, cfg.Grace, cfg.Skew)
	cases := map[string]func(*spent.Policy){
		"Echo":           func(p *spent.Policy) { p.Mode = spent.ModeEcho },
		"Retake":         func(p *spent.Policy) { p.OnLeaseExpiry = spent.LeaseExpiryRetake },
		"ShortRetention": func(p *spent.Policy) { p.Retention = 24 * time.Hour },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			p := good
			mutate(&p)
			lc := ledgerConfig(c, 1, cfg.Epoch, cfg.Grace)
			lc.Namespaces[privacypass.DefaultNamespace] = p
			l, err := spent.NewLedger(context.Background(), newMem(), lc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := privacypass.New(context.Background(), cfg, l, t.TempDir(), bytes.Repeat([]byte{1}, 32), quietLogger()); err == nil {
				t.Fatal("New accepted the policy")
			}
		})
	}
}
