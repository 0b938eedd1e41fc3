package ecash_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/inmem"
)

var (
	poolOnce sync.Once
	pool     []*rsa.PrivateKey
)

// keyGen hands out pre-generated RSA keys, distinct within one key set:
// generating 2048-bit keys under -race is slow.
func keyGen(tb testing.TB) func() (*rsa.PrivateKey, error) {
	poolOnce.Do(func() {
		var wg sync.WaitGroup
		pool = make([]*rsa.PrivateKey, 12)
		for i := range pool {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k, err := rsa.GenerateKey(rand.Reader, 2048)
				if err != nil {
					panic(err)
				}
				pool[i] = k
			}()
		}
		wg.Wait()
	})
	var n atomic.Int64
	return func() (*rsa.PrivateKey, error) {
		i := n.Add(1) - 1
		if int(i) >= len(pool) {
			tb.Errorf("key pool of %d exhausted", len(pool))
			return rsa.GenerateKey(rand.Reader, 2048)
		}
		return pool[i], nil
	}
}

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// env is an issuer on an in-memory ledger, served over HTTP.
type env struct {
	iss    *ecash.Issuer
	ledger *spent.Ledger
	clock  *clock
	client *ecash.Client
	url    string
}

var testDenoms = []uint64{1, 2, 4, 8}

func newEnv(t testing.TB, store spent.Store, mod func(*ecash.Config)) *env {
	t.Helper()
	if store == nil {
		store = inmem.New()
	}
	c := newClock()
	cfg := ecash.DefaultConfig()
	cfg.IssuerName = "issuer.test"
	cfg.Secret = make([]byte, 32)
	cfg.Denominations = testDenoms
	cfg.Difficulty = 6
	cfg.IssueValue = 15
	if mod != nil {
		mod(&cfg)
	}
	lc := spent.DefaultConfig()
	lc.Secret = make([]byte, 32)
	lc.Namespaces = ecash.NamespacePolicies(cfg)
	lc.Now = c.Now
	ledger, err := spent.NewLedger(context.Background(), store, lc)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ecash.OpenKeys(ecash.KeysConfig{Dir: t.TempDir(), KEK: make([]byte, 32), IssuerName: cfg.IssuerName,
		Denominations: cfg.Denominations, Epoch: cfg.Epoch, Grace: cfg.Grace, GenerateRSAKey: keyGen(t)})
	if err != nil {
		t.Fatal(err)
	}
	iss, err := ecash.New(cfg, ledger, keys)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	iss.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{iss: iss, ledger: ledger, clock: c, client: &ecash.Client{URL: srv.URL}, url: srv.URL}
}

func randSeed(t testing.TB) []byte {
	s := make([]byte, ecash.SeedSize)
	if _, err := rand.Read(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// currentKeys fetches the key list and returns it with the current keys.
func (e *env) currentKeys(t testing.TB) (*ecash.KeyList, map[uint64]*ecash.Key) {
	t.Helper()
	l, err := e.client.Keys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cur, err := l.Current(e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return l, cur
}

// issueBody builds an issuance request for outputs of the given
// denominations against a fresh, solved challenge.
func (e *env) issueBody(t testing.TB, denoms ...uint64) ([]byte, *ecash.Pending) {
	t.Helper()
	ctx := context.Background()
	l, cur := e.currentKeys(t)
	ch, err := e.client.Challenge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sol, err := ecash.Solve(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	var ks []*ecash.Key
	for _, d := range denoms {
		ks = append(ks, cur[d])
	}
	p, err := ecash.NewOutputs(l.TokenChallenge, ks, randSeed(t))
	if err != nil {
		t.Fatal(err)
	}
	req := ecash.Issue{Challenge: ch.Raw, Solution: sol, Outputs: p.Outputs}
	b, err := req.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b, p
}

// coins issues tokens of the given denominations.
func (e *env) coins(t testing.TB, denoms ...uint64) []ecash.Coin {
	t.Helper()
	b, p := e.issueBody(t, denoms...)
	a, err := e.client.Send(context.Background(), ecash.IssuePath, b)
	if err != nil {
		t.Fatal(err)
	}
	cs, _, err := p.Finish(a.Response)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// spendBody builds a spend of coin asking change of the given
// denominations back.
func (e *env) spendBody(t testing.TB, coin ecash.Coin, change ...uint64) ([]byte, *ecash.Pending) {
	t.Helper()
	l, cur := e.currentKeys(t)
	var ks []*ecash.Key
	var ret uint64
	for _, d := range change {
		ks = append(ks, cur[d])
		ret += d
	}
	p, err := ecash.NewOutputs(l.TokenChallenge, ks, randSeed(t))
	if err != nil {
		t.Fatal(err)
	}
	req := ecash.Spend{Token: coin.Token, Return: ret, Outputs: p.Outputs}
	b, err := req.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b, p
}

func code(err error) string {
	if e, ok := err.(*ecash.Error); ok {
		return e.Code
	}
	if err == nil {
		return ""
	}
	return "other: " + err.Error()
}
