package wallet_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/wallet"
)

// issuer is an ecash issuer on an in-memory ledger, served over HTTP, that
// remembers every fresh record so that tests can check that no nullifier
// was accepted twice.
type issuer struct {
	*ecash.Issuer
	ledger *spent.Ledger
	url    string
	cfg    ecash.Config

	mu    sync.Mutex
	fresh map[string]int
}

func newIssuer(t testing.TB) *issuer {
	t.Helper()
	is := &issuer{fresh: map[string]int{}}
	cfg := ecash.DefaultConfig()
	cfg.IssuerName = "issuer.test"
	cfg.Secret = make([]byte, 32)
	cfg.Denominations = []uint64{1, 2, 4, 8}
	cfg.Difficulty = 4
	cfg.IssueValue = 15
	cfg.OnFresh = func(kind, key string, _ *ecash.Response) {
		is.mu.Lock()
		is.fresh[kind+" "+key]++
		is.mu.Unlock()
	}
	is.cfg = cfg
	lc := spent.DefaultConfig()
	lc.Secret = make([]byte, 32)
	lc.Namespaces = ecash.NamespacePolicies(cfg)
	var err error
	is.ledger, err = spent.NewLedger(context.Background(), inmem.New(), lc)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	keys, err := ecash.OpenKeys(ecash.KeysConfig{Dir: t.TempDir(), KEK: make([]byte, 32), IssuerName: cfg.IssuerName,
		Denominations: cfg.Denominations, Epoch: cfg.Epoch, Grace: cfg.Grace,
		GenerateRSAKey: func() (*rsa.PrivateKey, error) { return pooled(int(n.Add(1) - 1)) }})
	if err != nil {
		t.Fatal(err)
	}
	if is.Issuer, err = ecash.New(cfg, is.ledger, keys); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	is.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.url = srv.URL
	return is
}

var (
	poolOnce sync.Once
	pool     []*rsa.PrivateKey
)

// pooled returns the i-th of a few RSA keys generated once per process:
// generating 2048-bit keys under -race is slow.
func pooled(i int) (*rsa.PrivateKey, error) {
	poolOnce.Do(func() {
		pool = make([]*rsa.PrivateKey, 12)
		var wg sync.WaitGroup
		for j := range pool {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pool[j], _ = rsa.GenerateKey(rand.Reader, 2048)
			}()
		}
		wg.Wait()
	})
	if i >= len(pool) || pool[i] == nil {
		return nil, errors.New("test key pool exhausted")
	}
	return pool[i], nil
}

// duplicates returns the ledger keys recorded fresh more than once.
func (is *issuer) duplicates() []string {
	is.mu.Lock()
	defer is.mu.Unlock()
	var d []string
	for k, n := range is.fresh {
		if n > 1 {
			d = append(d, k)
		}
	}
	return d
}

// newWallet creates a wallet for the issuer and opens it with options o.
func newWallet(t testing.TB, url string, o wallet.Options) (*wallet.Wallet, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "wallet.json")
	if err := wallet.Create(path, url); err != nil {
		t.Fatal(err)
	}
	w, err := wallet.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, path
}

// value returns what the wallet holds: spendable plus in flight.
func value(w *wallet.Wallet) uint64 {
	s, f := w.Balance()
	return s + f
}

// fakeNow is a settable clock.
type fakeNow struct{ ns atomic.Int64 }

func (c *fakeNow) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// dropping is a transport that delivers requests but loses the answers
// of spends and issuances while drop is set: the response lost in transit.
// With refuse set, they never reach the issuer.
type dropping struct {
	drop, refuse atomic.Bool
}

func (d *dropping) RoundTrip(r *http.Request) (*http.Response, error) {
	if d.refuse.Load() && (r.URL.Path == ecash.SpendPath || r.URL.Path == ecash.IssuePath) {
		return nil, errors.New("connection refused (test)")
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	lost := r.URL.Path == ecash.SpendPath || r.URL.Path == ecash.IssuePath
	if err == nil && lost && d.drop.Load() {
		resp.Body.Close()
		return nil, errors.New("connection reset (test)")
	}
	return resp, err
}
