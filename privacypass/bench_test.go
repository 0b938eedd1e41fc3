package privacypass_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	circl "github.com/cloudflare/circl/blindsign/blindrsa"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/cputime"
	"github.com/spentledger/spent/pebble"
	"github.com/spentledger/spent/privacypass"
	"github.com/spentledger/spent/privacypass/blindsign"
)

// benchEnv is an issuer on a pebble store (default options, as spent
// serve opens it) with the real clock, and two origins: the middleware
// (two-step spends, so that handlers can roll back) and the same in one
// step; POST /v1/redeem spends in one step too.
type benchEnv struct {
	srv                *privacypass.Server
	ledger             *spent.Ledger
	issuer             *httptest.Server
	twoStep, oneStep   *privacypass.Origin
	twoStepURL, oneURL string
	httpc              *http.Client
	requestURL, redeem string
	keyFor             map[privacypass.TokenType][]byte
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	ctx := context.Background()
	store, err := pebble.Open(b.TempDir(), pebble.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	cfg := privacypass.DefaultConfig()
	cfg.IssuerName = "issuer.example"
	cfg.OriginInfo = []string{"origin.example"}
	cfg.AttesterTokens = []string{attester}
	cfg.QuotaPerEpoch = 1 << 62
	cfg.GenerateRSAKey = keyGen()
	lcfg := spent.DefaultConfig()
	lcfg.Secret = bytes.Repeat([]byte("s"), 32)
	lcfg.Namespaces = map[string]spent.Policy{privacypass.DefaultNamespace: privacypass.NamespacePolicy(cfg.Epoch, cfg.Grace, cfg.Skew)}
	e := &benchEnv{keyFor: map[privacypass.TokenType][]byte{}}
	if e.ledger, err = spent.NewLedger(ctx, store, lcfg); err != nil {
		b.Fatal(err)
	}
	if e.srv, err = privacypass.New(ctx, cfg, e.ledger, b.TempDir(), bytes.Repeat([]byte{7}, 32), quietLogger()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.srv.Close() })
	mux := http.NewServeMux()
	e.srv.Register(mux)
	e.issuer = httptest.NewServer(mux)
	b.Cleanup(e.issuer.Close)
	e.requestURL, e.redeem = e.issuer.URL+cfg.RequestPath, e.issuer.URL+privacypass.RedeemPath
	for _, oneStep := range []bool{false, true} {
		o, err := privacypass.NewOrigin(e.ledger, privacypass.OriginConfig{
			IssuerName: cfg.IssuerName, OriginInfo: cfg.OriginInfo, TokenTypes: cfg.TokenTypes,
			Keys: e.srv.Keyring(), OneStep: oneStep, Logger: quietLogger(),
		})
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(o.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		})))
		b.Cleanup(hs.Close)
		if oneStep {
			e.oneStep, e.oneURL = o, hs.URL
		} else {
			e.twoStep, e.twoStepURL = o, hs.URL
		}
	}
	for _, t := range cfg.TokenTypes {
		k, ok := e.srv.Keyring().Current(t, time.Now())
		if !ok {
			b.Fatal("no current key")
		}
		e.keyFor[t] = k.TokenKey
	}
	e.httpc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	b.Cleanup(e.httpc.CloseIdleConnections)
	return e
}

// do sends a request and returns the status, failing the benchmark on
// transport errors.
func (e *benchEnv) do(b *testing.B, req *http.Request) (int, []byte) {
	resp, err := e.httpc.Do(req)
	if err != nil {
		b.Error(err)
		return 0, nil
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, body
}

// mint obtains n tokens of type t for challenges of o, over HTTP from the
// issuer, with one worker per CPU.
func (e *benchEnv) mint(b *testing.B, o *privacypass.Origin, t privacypass.TokenType, n int) [][]byte {
	b.Helper()
	out := make([][]byte, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				var raw []byte
				for _, c := range o.Challenges() {
					if c.TokenChallenge.TokenType == t {
						raw = c.Raw
					}
				}
				p, err := privacypass.NewPendingToken(raw, t, e.keyFor[t], nil)
				if err != nil {
					b.Error(err)
					return
				}
				body, _ := p.Request.MarshalBinary()
				req, _ := http.NewRequest(http.MethodPost, e.requestURL, bytes.NewReader(body))
				req.Header.Set("Content-Type", privacypass.RequestMediaType)
				req.Header.Set("Authorization", "Bearer "+attester)
				status, resp := e.do(b, req)
				if status != http.StatusOK {
					b.Errorf("mint: %d %s", status, resp)
					return
				}
				tok, err := p.Finalize(resp)
				if err != nil {
					b.Error(err)
					return
				}
				out[i], _ = tok.MarshalBinary()
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return out
}

// requestBody returns a token request of type t for a challenge of the
// middleware origin. The issuer signs the same request as often as it is
// sent (the quota is set out of reach).
func (e *benchEnv) requestBody(b *testing.B, t privacypass.TokenType) []byte {
	b.Helper()
	var raw []byte
	for _, ch := range e.twoStep.Challenges() {
		if ch.TokenChallenge.TokenType == t {
			raw = ch.Raw
		}
	}
	p, err := privacypass.NewPendingToken(raw, t, e.keyFor[t], nil)
	if err != nil {
		b.Fatal(err)
	}
	body, err := p.Request.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// issue posts a token request and returns the status and body.
func (e *benchEnv) issue(b *testing.B, body []byte) (int, []byte) {
	req, _ := http.NewRequest(http.MethodPost, e.requestURL, bytes.NewReader(body))
	req.Header.Set("Content-Type", privacypass.RequestMediaType)
	req.Header.Set("Authorization", "Bearer "+attester)
	return e.do(b, req)
}

// claimSeq numbers the keys of LedgerClaim across its runs.
var claimSeq atomic.Int64

var (
	benchOnce sync.Once
	bench     *benchEnv
)

// sharedBenchEnv builds one environment for all benchmarks of a run, so
// that keys are made once.
func sharedBenchEnv(b *testing.B) *benchEnv {
	benchOnce.Do(func() { bench = newBenchEnv(b) })
	return bench
}

const benchParallelism = 32 // goroutines per CPU in parallel benchmarks

// measure runs a parallel benchmark body with 32 goroutines per CPU and
// reports the rate (what/s, wall clock) and the CPU time the whole process
// spent per op (cpu-µs/op: client and server together for HTTP). On a
// machine shared with other work the rate moves with the load; the CPU
// time per op much less, and GOMAXPROCS / (CPU time per op) is the rate
// the process could sustain on its cores alone.
func measure(b *testing.B, what string, op func() error) {
	b.SetParallelism(benchParallelism)
	start := cputime.Used()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	cpu := cputime.Used() - start
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), what+"/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkIssuance compares, in one run and on the same machine, circl's
// BlindSign (the bare RSA private-key operation as circl computes it), this
// package's signer (package blindsign), and type-2 and type-1 issuance end
// to end over HTTP (parse, key lookup, quota count in the pebble ledger,
// sign, answer), each with 32 goroutines per CPU.
func BenchmarkIssuance(b *testing.B) {
	sk, err := keyGen()()
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 256)
	for i := range msg {
		msg[i] = byte(i)
	}
	ref := circl.NewSigner(sk)
	fast, err := blindsign.New(sk)
	if err != nil {
		b.Fatal(err)
	}
	for name, sign := range map[string]func([]byte) ([]byte, error){"circl-BlindSign": ref.BlindSign, "blindsign": fast.BlindSign} {
		b.Run(name, func(b *testing.B) {
			measure(b, "sigs", func() error {
				_, err := sign(msg)
				return err
			})
		})
	}
	e := sharedBenchEnv(b)
	for _, t := range []privacypass.TokenType{privacypass.TypeBlindRSA, privacypass.TypeVOPRF} {
		b.Run(fmt.Sprintf("http-type%d", t), func(b *testing.B) {
			body := e.requestBody(b, t)
			measure(b, "tokens", func() error {
				if status, resp := e.issue(b, body); status != http.StatusOK {
					return fmt.Errorf("%d %s", status, resp)
				}
				return nil
			})
		})
	}
}

// BenchmarkRedemption presents distinct valid tokens over HTTP, with 32
// goroutines per CPU, and counts the accepted ones per second: through
// POST /v1/redeem (one ledger write per token), through the middleware in
// one step, and through the middleware in two steps (claim, then complete
// after the handler: two writes, so that the handler may roll back). The
// tokens are minted before the timer starts (about 1 ms of CPU each for
// type 2); use -benchtime=20000x or so to bound that. For comparison in
// the same run: BareHandler is the same HTTP client and concurrency against
// a handler that does nothing (the ceiling of this harness), LedgerClaim
// the bare ledger claim of keys of the same size on the same store.
func BenchmarkRedemption(b *testing.B) {
	e := sharedBenchEnv(b)
	for _, t := range []privacypass.TokenType{privacypass.TypeBlindRSA, privacypass.TypeVOPRF} {
		cases := []struct {
			name   string
			origin *privacypass.Origin
			url    string
			method string
		}{
			{"v1-redeem", e.srv.Origin(), e.redeem, http.MethodPost},
			{"middleware-one-step", e.oneStep, e.oneURL, http.MethodGet},
			{"middleware-two-step", e.twoStep, e.twoStepURL, http.MethodGet},
		}
		for _, tc := range cases {
			b.Run(fmt.Sprintf("type%d/%s", t, tc.name), func(b *testing.B) {
				tokens := e.mint(b, tc.origin, t, b.N)
				var next atomic.Int64
				measure(b, "tokens", func() error {
					tok := tokens[next.Add(1)-1]
					req, _ := http.NewRequest(tc.method, tc.url, nil)
					req.Header.Set("Authorization", privacypass.AuthorizationValue(tok))
					if status, resp := e.do(b, req); status != http.StatusOK && status != http.StatusNoContent {
						return fmt.Errorf("%d %s", status, resp)
					}
					return nil
				})
			})
		}
	}
	b.Run("BareHandler", func(b *testing.B) {
		// The ceiling of this harness: the same client, concurrency and
		// Authorization header against a handler that answers 204 at once.
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}))
		defer hs.Close()
		auth := privacypass.AuthorizationValue(make([]byte, 354))
		measure(b, "requests", func() error {
			req, _ := http.NewRequest(http.MethodGet, hs.URL, nil)
			req.Header.Set("Authorization", auth)
			if status, resp := e.do(b, req); status != http.StatusNoContent {
				return fmt.Errorf("%d %s", status, resp)
			}
			return nil
		})
	})
	b.Run("LedgerClaim", func(b *testing.B) {
		exp := time.Now().Add(time.Hour)
		measure(b, "claims", func() error {
			key := fmt.Sprintf("%0128x", claimSeq.Add(1))
			res, err := e.ledger.Claim(context.Background(), spent.Claim{Namespace: privacypass.DefaultNamespace, Key: key, Result: []byte{}, ExpiresAt: exp})
			if err == nil && res.Outcome != spent.Fresh {
				err = fmt.Errorf("outcome %s", res.Outcome)
			}
			return err
		})
	})
}
