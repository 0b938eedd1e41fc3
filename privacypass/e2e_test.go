package privacypass_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
	"github.com/spentledger/spent/privacypass"
)

// t0 is the fake clock's start: 10:00 UTC, inside the epoch of 1 Jan 2030.
var t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

// clock is a fake clock shared by the ledgers and the issuer.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// rsaPool holds RSA keys generated for this test binary (generation is
// slow under the race detector). keyGen hands each out once.
var rsaPool struct {
	mu   sync.Mutex
	keys []*rsa.PrivateKey
	next int
}

// keyGen returns a key generator for a keyring: every call, from any
// generator, returns a key no other call returned.
func keyGen() func() (*rsa.PrivateKey, error) {
	return func() (*rsa.PrivateKey, error) {
		rsaPool.mu.Lock()
		defer rsaPool.mu.Unlock()
		for len(rsaPool.keys) <= rsaPool.next {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				return nil, err
			}
			rsaPool.keys = append(rsaPool.keys, k)
		}
		k := rsaPool.keys[rsaPool.next]
		rsaPool.next++
		return k, nil
	}
}

// countingStore counts the claims that reach the store.
type countingStore struct {
	spent.Store
	claims atomic.Int64
}

func (s *countingStore) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	s.claims.Add(1)
	return s.Store.Claim(ctx, op)
}

func (s *countingStore) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	s.claims.Add(int64(len(ops)))
	return s.Store.ClaimBatch(ctx, ops)
}

const attester = "attester-token-0001"

// env is an issuer (spent's Server on a pebble store in a temporary
// directory) with a fake clock, and the pieces tests add origins with.
type env struct {
	clock  *clock
	store  *countingStore
	ledger *spent.Ledger
	cfg    privacypass.Config
	srv    *privacypass.Server
	issuer *httptest.Server
	keyDir string
	kek    []byte
	client *privacypass.Client
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func ledgerConfig(c *clock, node uint32, epoch, grace time.Duration) spent.Config {
	cfg := spent.DefaultConfig()
	cfg.Secret = bytes.Repeat([]byte("s"), 32)
	cfg.Node = node
	cfg.Namespaces = map[string]spent.Policy{privacypass.DefaultNamespace: privacypass.NamespacePolicy(epoch, grace, privacypass.DefaultSkew)}
	cfg.Now = c.Now
	return cfg
}

// newEnv starts an issuer; mutate adjusts its config.
func newEnv(t *testing.T, mutate func(*privacypass.Config)) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{clock: &clock{t: t0}, keyDir: t.TempDir(), kek: bytes.Repeat([]byte{7}, 32)}
	ps, err := pebble.Open(t.TempDir(), pebble.Options{MaxBatchRound: 1024, CacheSize: 1 << 20, MemTableSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	e.store = &countingStore{Store: ps}
	e.cfg = privacypass.DefaultConfig()
	e.cfg.IssuerName = "issuer.example"
	e.cfg.OriginInfo = []string{"origin.example"}
	e.cfg.AttesterTokens = []string{attester, "attester-token-0002"}
	e.cfg.GenerateRSAKey = keyGen()
	if mutate != nil {
		mutate(&e.cfg)
	}
	if e.ledger, err = spent.NewLedger(ctx, e.store, ledgerConfig(e.clock, 1, e.cfg.Epoch, e.cfg.Grace)); err != nil {
		t.Fatal(err)
	}
	if e.srv, err = privacypass.New(ctx, e.cfg, e.ledger, e.keyDir, e.kek, quietLogger()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.srv.Close() })
	mux := http.NewServeMux()
	e.srv.Register(mux)
	e.issuer = httptest.NewServer(mux)
	t.Cleanup(e.issuer.Close)
	e.client = &privacypass.Client{AttesterToken: attester, Epoch: e.cfg.Epoch, Now: e.clock.Now}
	return e
}

// ledger returns another ledger (node) over the env's store, as a second
// server sharing the store would have.
func (e *env) otherLedger(t *testing.T, node uint32) *spent.Ledger {
	t.Helper()
	l, err := spent.NewLedger(context.Background(), e.store, ledgerConfig(e.clock, node, e.cfg.Epoch, e.cfg.Grace))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// okHandler answers 200 "welcome" to admitted requests, and rolls the spend
// back and answers 409 when the request carries X-Reject.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	sp, ok := privacypass.SpendFromContext(r.Context())
	if !ok {
		http.Error(w, "no spend in context", http.StatusInternalServerError)
		return
	}
	if r.Header.Get("X-Reject") != "" {
		if err := sp.Release(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		http.Error(w, "rejected for another reason", http.StatusConflict)
		return
	}
	io.WriteString(w, "welcome")
})

// newOrigin starts an origin server wrapping okHandler with the env's keys.
func (e *env) newOrigin(t *testing.T, ledger *spent.Ledger, set *privacypass.ChallengeSet, types ...privacypass.TokenType) *httptest.Server {
	t.Helper()
	if len(types) == 0 {
		types = []privacypass.TokenType{privacypass.TypeBlindRSA, privacypass.TypeVOPRF}
	}
	o, err := privacypass.NewOrigin(ledger, privacypass.OriginConfig{
		IssuerName: e.cfg.IssuerName, OriginInfo: []string{"origin.example"}, TokenTypes: types,
		Keys: e.srv.Keyring(), Challenges: set, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(o.Middleware(okHandler))
	t.Cleanup(s.Close)
	return s
}

// answer is an HTTP answer with its problem document, if any.
type answer struct {
	status  int
	body    string
	header  http.Header
	problem privacypass.Problem
}

func send(t *testing.T, method, url string, token []byte, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != nil {
		req.Header.Set("Authorization", privacypass.AuthorizationValue(token))
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, body: string(b), header: resp.Header}
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		if err := json.Unmarshal(b, &a.problem); err != nil {
			t.Fatalf("problem document %q: %v", b, err)
		}
	}
	return a
}

// wantRefused checks a 401 with the given code and at least one fresh
// PrivateToken challenge, and returns the challenges.
func wantRefused(t *testing.T, a answer, code string) []privacypass.Challenge {
	t.Helper()
	if a.status != http.StatusUnauthorized || a.problem.Code != code {
		t.Fatalf("got %d %q (%s), want 401 %q", a.status, a.problem.Code, a.problem.Detail, code)
	}
	chs, err := privacypass.ParseChallenges(a.header)
	if err != nil {
		t.Fatal(err)
	}
	if len(chs) == 0 {
		t.Fatal("401 without a PrivateToken challenge")
	}
	return chs
}

// challenge fetches a challenge of type typ from an origin.
func challenge(t *testing.T, originURL string, typ privacypass.TokenType) privacypass.Challenge {
	t.Helper()
	for _, c := range wantRefused(t, send(t, http.MethodGet, originURL, nil), privacypass.CodeTokenRequired) {
		if c.TokenChallenge.TokenType == typ {
			return c
		}
	}
	t.Fatalf("no challenge of %v", typ)
	return privacypass.Challenge{}
}

// issue obtains a token of type typ for a challenge of originURL.
func (e *env) issue(t *testing.T, originURL string, typ privacypass.TokenType) []byte {
	t.Helper()
	c := challenge(t, originURL, typ)
	tok, err := e.client.Issue(context.Background(), e.issuer.URL, &c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestIssueRedeemRedeemAgain(t *testing.T) {
	e := newEnv(t, nil)
	origin := e.newOrigin(t, e.ledger, nil)
	for _, typ := range []privacypass.TokenType{privacypass.TypeBlindRSA, privacypass.TypeVOPRF} {
		t.Run(typ.String(), func(t *testing.T) {
			tok := e.issue(t, origin.URL, typ)
			if a := send(t, http.MethodGet, origin.URL, tok); a.status != http.StatusOK || a.body != "welcome" {
				t.Fatalf("first presentation: got %d %q, want 200 welcome", a.status, a.body)
			}
			chs := wantRefused(t, send(t, http.MethodGet, origin.URL, tok), privacypass.CodeDoubleSpend)
			// The fresh challenge works for a new token.
			for i := range chs {
				if chs[i].TokenChallenge.TokenType != typ {
					continue
				}
				tok2, err := e.client.Issue(context.Background(), e.issuer.URL, &chs[i])
				if err != nil {
					t.Fatal(err)
				}
				if a := send(t, http.MethodGet, origin.URL, tok2); a.status != http.StatusOK {
					t.Fatalf("token for the fresh challenge: got %d %q", a.status, a.problem.Code)
				}
			}
		})
	}
}

func TestClientDoAnswersChallenge(t *testing.T) {
	e := newEnv(t, nil)
	origin := e.newOrigin(t, e.ledger, nil)
	req, err := http.NewRequest(http.MethodGet, origin.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.client.Do(req, e.issuer.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != "welcome" {
		t.Fatalf("got %d %q, want 200 welcome", resp.StatusCode, b)
	}
}

// TestOneTokenTwoOriginsManyGoroutines presents one token 100 times at
// once through two origin servers, each with its own ledger over one
// store: exactly one presentation is accepted.
func TestOneTokenTwoOriginsManyGoroutines(t *testing.T) {
	e := newEnv(t, nil)
	set := privacypass.NewChallengeSet(0, 0)
	origins := []*httptest.Server{e.newOrigin(t, e.ledger, set), e.newOrigin(t, e.otherLedger(t, 2), set)}
	for _, typ := range []privacypass.TokenType{privacypass.TypeBlindRSA, privacypass.TypeVOPRF} {
		t.Run(typ.String(), func(t *testing.T) {
			tok := e.issue(t, origins[0].URL, typ)
			var accepted, refused atomic.Int64
			var wg sync.WaitGroup
			for i := range 100 {
				wg.Go(func() {
					a := send(t, http.MethodGet, origins[i%2].URL, tok)
					switch {
					case a.status == http.StatusOK:
						accepted.Add(1)
					case a.status == http.StatusUnauthorized && a.problem.Code == privacypass.CodeDoubleSpend:
						refused.Add(1)
					default:
						t.Errorf("got %d %q (%s)", a.status, a.problem.Code, a.problem.Detail)
					}
				})
			}
			wg.Wait()
			if accepted.Load() != 1 || refused.Load() != 99 {
				t.Fatalf("accepted %d, refused %d; want 1 and 99", accepted.Load(), refused.Load())
			}
		})
	}
}

// TestExpiredKeyRefusedBeforeLedger spends a token one nanosecond before
// its key's last acceptance instant, and presents tokens of the same key
// at that instant: refused as key_expired without a claim reaching the
// store. The spend's ledger entry expires at exactly that instant.
func TestExpiredKeyRefusedBeforeLedger(t *testing.T) {
	e := newEnv(t, nil)
	origin := e.newOrigin(t, e.ledger, privacypass.NewChallengeSet(0, 48*time.Hour), privacypass.TypeBlindRSA)
	a, b := e.issue(t, origin.URL, privacypass.TypeBlindRSA), e.issue(t, origin.URL, privacypass.TypeBlindRSA)
	key, ok := e.srv.Keyring().Current(privacypass.TypeBlindRSA, t0)
	if !ok {
		t.Fatal("no current key")
	}
	last := key.AcceptUntil()
	if want := time.Date(2030, 1, 2, 6, 0, 0, 0, time.UTC); !last.Equal(want) {
		t.Fatalf("last acceptance instant: got %v, want %v (epoch end + 6h grace)", last, want)
	}

	e.clock.Set(last.Add(-time.Nanosecond))
	if r := send(t, http.MethodGet, origin.URL, a); r.status != http.StatusOK {
		t.Fatalf("1ns before the end: got %d %q, want 200", r.status, r.problem.Code)
	}
	tok, _ := privacypass.ParseToken(a)
	rec, err := e.ledger.Get(context.Background(), privacypass.DefaultNamespace, privacypass.LedgerKey(&tok))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.ExpiresAt.Equal(last) {
		t.Fatalf("ledger entry expires at %v, want %v", rec.ExpiresAt, last)
	}
	wantRefused(t, send(t, http.MethodGet, origin.URL, a), privacypass.CodeDoubleSpend)

	e.clock.Set(last)
	before := e.store.claims.Load()
	wantRefused(t, send(t, http.MethodGet, origin.URL, b), privacypass.CodeKeyExpired)
	wantRefused(t, send(t, http.MethodGet, origin.URL, a), privacypass.CodeKeyExpired)
	if n := e.store.claims.Load() - before; n != 0 {
		t.Fatalf("%d claims reached the store for tokens of an expired key, want 0", n)
	}
	if _, err := e.ledger.Get(context.Background(), privacypass.DefaultNamespace, privacypass.LedgerKey(&tok)); spent.ErrorCode(err) != spent.ENotFound {
		t.Fatalf("ledger entry at its expiry: got %v, want not_found", err)
	}
}

func TestReleaseReturnsTokenToSpendable(t *testing.T) {
	e := newEnv(t, nil)
	origin := e.newOrigin(t, e.ledger, nil)
	tok := e.issue(t, origin.URL, privacypass.TypeBlindRSA)
	if a := send(t, http.MethodGet, origin.URL, tok, "X-Reject", "1"); a.status != http.StatusConflict {
		t.Fatalf("rejected request: got %d %q, want 409", a.status, a.body)
	}
	if a := send(t, http.MethodGet, origin.URL, tok); a.status != http.StatusOK {
		t.Fatalf("after release: got %d %q, want 200", a.status, a.problem.Code)
	}
	wantRefused(t, send(t, http.MethodGet, origin.URL, tok), privacypass.CodeDoubleSpend)
	// The spend was completed when the handler returned.
	pt, _ := privacypass.ParseToken(tok)
	rec, err := e.ledger.Get(context.Background(), privacypass.DefaultNamespace, privacypass.LedgerKey(&pt))
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != spent.StateComplete || rec.Place != "origin.example" {
		t.Fatalf("record: state %v, place %q; want complete at origin.example", rec.State, rec.Place)
	}
}

func TestOriginRefusals(t *testing.T) {
	e := newEnv(t, nil)
	origin := e.newOrigin(t, e.ledger, nil)
	tok := e.issue(t, origin.URL, privacypass.TypeBlindRSA)

	t.Run("ChallengeMismatch", func(t *testing.T) {
		other := e.newOrigin(t, e.ledger, nil) // its own challenge set
		wantRefused(t, send(t, http.MethodGet, other.URL, tok), privacypass.CodeChallengeMismatch)
	})
	t.Run("ChallengeGone", func(t *testing.T) {
		short := e.newOrigin(t, e.ledger, privacypass.NewChallengeSet(0, time.Minute))
		tk := e.issue(t, short.URL, privacypass.TypeBlindRSA)
		e.clock.Set(t0.Add(time.Minute))
		defer e.clock.Set(t0)
		wantRefused(t, send(t, http.MethodGet, short.URL, tk), privacypass.CodeChallengeGone)
	})
	t.Run("ProofInvalid", func(t *testing.T) {
		bad := bytes.Clone(tok)
		bad[len(bad)-1] ^= 1
		wantRefused(t, send(t, http.MethodGet, origin.URL, bad), privacypass.CodeProofInvalid)
	})
	t.Run("UnknownKey", func(t *testing.T) {
		bad := bytes.Clone(tok)
		bad[70] ^= 1 // inside token_key_id
		wantRefused(t, send(t, http.MethodGet, origin.URL, bad), privacypass.CodeUnknownKey)
	})
	t.Run("BadRequest", func(t *testing.T) {
		wantRefused(t, send(t, http.MethodGet, origin.URL, tok[:100]), privacypass.CodeBadRequest)
		wantRefused(t, send(t, http.MethodGet, origin.URL, nil, "Authorization", "PrivateToken token=***"), privacypass.CodeBadRequest)
	})
	t.Run("TokenType", func(t *testing.T) {
		only2 := e.newOrigin(t, e.ledger, nil, privacypass.TypeBlindRSA)
		t1 := e.issue(t, origin.URL, privacypass.TypeVOPRF)
		wantRefused(t, send(t, http.MethodGet, only2.URL, t1), privacypass.CodeTokenType)
	})
	// The refused presentations spent nothing: the token is still good.
	if a := send(t, http.MethodGet, origin.URL, tok); a.status != http.StatusOK {
		t.Fatalf("after refusals: got %d %q, want 200", a.status, a.problem.Code)
	}
}

func TestRedeemEndpoint(t *testing.T) {
	e := newEnv(t, nil)
	url := e.issuer.URL + privacypass.RedeemPath
	chs := wantRefused(t, send(t, http.MethodPost, url, nil), privacypass.CodeTokenRequired)
	if len(chs) != 2 || chs[0].TokenChallenge.TokenType != privacypass.TypeBlindRSA || chs[1].TokenChallenge.TokenType != privacypass.TypeVOPRF {
		t.Fatalf("challenges: got %d, want one of type 2 then one of type 1", len(chs))
	}
	for i := range chs {
		if got := chs[i].TokenChallenge.OriginInfo; got != "origin.example" {
			t.Fatalf("origin_info: got %q", got)
		}
		tok, err := e.client.Issue(context.Background(), e.issuer.URL, &chs[i])
		if err != nil {
			t.Fatal(err)
		}
		a := send(t, http.MethodPost, url, tok)
		if a.status != http.StatusOK {
			t.Fatalf("redeem: got %d %q (%s)", a.status, a.problem.Code, a.problem.Detail)
		}
		var ra privacypass.RedeemAnswer
		if err := json.Unmarshal([]byte(a.body), &ra); err != nil {
			t.Fatal(err)
		}
		key, _ := e.srv.Keyring().Current(chs[i].TokenChallenge.TokenType, t0)
		if !ra.ExpiresAt.Equal(key.AcceptUntil()) || ra.TokenType != chs[i].TokenChallenge.TokenType {
			t.Fatalf("answer %+v: want expires_at %v", ra, key.AcceptUntil())
		}
		wantRefused(t, send(t, http.MethodPost, url, tok), privacypass.CodeDoubleSpend)
	}
	if a := send(t, http.MethodGet, url, nil); a.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/redeem: got %d, want 405", a.status)
	}
}

// TestStoreFailureSpendsNothing makes the store fail: the answer is 503
// and the token is still good afterwards.
func TestStoreFailureSpendsNothing(t *testing.T) {
	e := newEnv(t, nil)
	fs := &failingStore{Store: e.store}
	l, err := spent.NewLedger(context.Background(), fs, ledgerConfig(e.clock, 3, e.cfg.Epoch, e.cfg.Grace))
	if err != nil {
		t.Fatal(err)
	}
	set := privacypass.NewChallengeSet(0, 0)
	failing, good := e.newOrigin(t, l, set), e.newOrigin(t, e.ledger, set)
	tok := e.issue(t, failing.URL, privacypass.TypeBlindRSA)
	fs.fail.Store(true)
	if a := send(t, http.MethodGet, failing.URL, tok); a.status != http.StatusServiceUnavailable || a.problem.Code != privacypass.CodeUnavailable {
		t.Fatalf("store down: got %d %q, want 503 unavailable", a.status, a.problem.Code)
	}
	if a := send(t, http.MethodGet, good.URL, tok); a.status != http.StatusOK {
		t.Fatalf("after the failure: got %d %q, want 200", a.status, a.problem.Code)
	}
}

type failingStore struct {
	spent.Store
	fail atomic.Bool
}

var errDown = errors.New("store down")

func (s *failingStore) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	if s.fail.Load() {
		return spent.ClaimAnswer{}, errDown
	}
	return s.Store.Claim(ctx, op)
}

func (s *failingStore) Get(ctx context.Context, h spent.Hash, now time.Time) (spent.Record, error) {
	if s.fail.Load() {
		return spent.Record{}, errDown
	}
	return s.Store.Get(ctx, h, now)
}
