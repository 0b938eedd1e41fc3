package ecash_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/privacypass"
)

func TestSpend(t *testing.T) {
	ctx := context.Background()

	t.Run("ReplayReturnsFirstBytes", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		coin := e.coins(t, 8)[0]
		body, p := e.spendBody(t, coin, 4, 2, 1)
		first, err := e.client.Send(ctx, ecash.SpendPath, body)
		if err != nil {
			t.Fatal(err)
		}
		if first.Replayed {
			t.Fatal("first spend answered replayed")
		}
		signed := e.iss.Stats().Signatures
		again, err := e.client.Send(ctx, ecash.SpendPath, body)
		if err != nil {
			t.Fatal(err)
		}
		if n := e.iss.Stats().Signatures; n != signed {
			t.Fatalf("the replay computed %d signatures, want 0", n-signed)
		}
		if !again.Replayed || !bytes.Equal(first.Response, again.Response) {
			t.Fatalf("replay: replayed=%v, same bytes=%v; want true, true", again.Replayed, bytes.Equal(first.Response, again.Response))
		}
		change, resp, err := p.Finish(again.Response)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Charge != 1 || len(change) != 3 {
			t.Fatalf("charge %d, %d change tokens; want 1, 3", resp.Charge, len(change))
		}
		// The change is spendable.
		b2, _ := e.spendBody(t, change[0], 2, 2)
		if _, err := e.client.Send(ctx, ecash.SpendPath, b2); err != nil {
			t.Fatalf("spending change: %v", err)
		}
		if s := e.iss.Stats(); s.Spends != 2 || s.Charged != 7+1 {
			t.Fatalf("stats %+v: want 2 spends, 8 charged (7 at issuance, 1 at the spend)", s)
		}
	})

	t.Run("OtherBytesAreDoubleSpend", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		coin := e.coins(t, 8)[0]
		b1, _ := e.spendBody(t, coin, 4)
		if _, err := e.client.Send(ctx, ecash.SpendPath, b1); err != nil {
			t.Fatal(err)
		}
		b2, _ := e.spendBody(t, coin, 4)
		_, err := e.client.Send(ctx, ecash.SpendPath, b2)
		if code(err) != ecash.CodeDoubleSpend || err.(*ecash.Error).Status != 409 || !err.(*ecash.Error).Final() {
			t.Fatalf("got %v, want final double_spend 409", err)
		}
	})

	t.Run("ProofInvalidTouchesNothing", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		coin := e.coins(t, 8)[0]
		bad := ecash.Coin{Denomination: 8, Token: append([]byte(nil), coin.Token...)}
		bad.Token[len(bad.Token)-1] ^= 1
		b, _ := e.spendBody(t, bad, 4)
		if _, err := e.client.Send(ctx, ecash.SpendPath, b); code(err) != ecash.CodeProofInvalid {
			t.Fatalf("got %v, want proof_invalid", err)
		}
		b, _ = e.spendBody(t, coin, 4)
		if _, err := e.client.Send(ctx, ecash.SpendPath, b); err != nil {
			t.Fatalf("the token must still be spendable: %v", err)
		}
	})

	t.Run("ChangeOverValueIsBadRequestAndTouchesNothing", func(t *testing.T) {
		e := newEnv(t, nil, func(c *ecash.Config) { c.Price = 1 })
		coin := e.coins(t, 4)[0]
		b, _ := e.spendBody(t, coin, 4)
		if _, err := e.client.Send(ctx, ecash.SpendPath, b); code(err) != ecash.CodeBadRequest {
			t.Fatalf("got %v, want bad_request (change 4 from 4 at price 1)", err)
		}
		b, _ = e.spendBody(t, coin, 2, 1)
		if _, err := e.client.Send(ctx, ecash.SpendPath, b); err != nil {
			t.Fatalf("the token must still be spendable: %v", err)
		}
	})

	t.Run("ExpiredKeyIsProofInvalid", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		coin := e.coins(t, 8)[0]
		e.clock.Advance(30*time.Hour + time.Minute)
		b, _ := e.spendBody(t, coin, 4)
		if _, err := e.client.Send(ctx, ecash.SpendPath, b); code(err) != ecash.CodeProofInvalid {
			t.Fatalf("got %v, want proof_invalid", err)
		}
	})

	t.Run("RacingIdenticalGetSameBytes", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		coin := e.coins(t, 8)[0]
		body, _ := e.spendBody(t, coin, 4, 2)
		const n = 16
		answers := make([]ecash.Answer, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i], errs[i] = e.client.Send(ctx, ecash.SpendPath, body)
			}()
		}
		wg.Wait()
		fresh := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("request %d: %v", i, errs[i])
			}
			if !bytes.Equal(answers[i].Response, answers[0].Response) {
				t.Fatalf("request %d got other bytes", i)
			}
			if !answers[i].Replayed {
				fresh++
			}
		}
		if fresh != 1 {
			t.Fatalf("%d fresh answers, want 1", fresh)
		}
		// Every caller got the bytes the ledger kept.
		req, _ := ecash.ParseSpend(body)
		tok, _ := privacypass.ParseToken(req.Token)
		rec, err := e.ledger.Get(ctx, ecash.DefaultSpendNamespace, ecash.Nullifier(&tok))
		if err != nil || !bytes.Equal(rec.Result, answers[0].Response) {
			t.Fatalf("the answers are not the stored bytes (%v)", err)
		}
	})

	t.Run("RacingDifferentOneWins", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		coin := e.coins(t, 8)[0]
		const n = 12
		bodies := make([][]byte, n)
		for i := range bodies {
			bodies[i], _ = e.spendBody(t, coin, 4)
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = e.client.Send(ctx, ecash.SpendPath, bodies[i])
			}()
		}
		wg.Wait()
		wins := 0
		for i, err := range errs {
			switch code(err) {
			case "":
				wins++
			case ecash.CodeDoubleSpend:
			default:
				t.Fatalf("request %d: %v", i, err)
			}
		}
		if wins != 1 || e.iss.Stats().Spends != 1 {
			t.Fatalf("%d winners, %d spends; want 1, 1", wins, e.iss.Stats().Spends)
		}
	})
}

// failing is a store whose reads and claims fail while broken is set.
type failing struct {
	spent.Store
	broken atomic.Bool
}

func (f *failing) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	if f.broken.Load() {
		return spent.ClaimAnswer{}, errors.New("disk on fire")
	}
	return f.Store.Claim(ctx, op)
}

func (f *failing) Get(ctx context.Context, k spent.Hash, now time.Time) (spent.Record, error) {
	if f.broken.Load() {
		return spent.Record{}, errors.New("disk on fire")
	}
	return f.Store.Get(ctx, k, now)
}

func TestStoreFailureFailsClosed(t *testing.T) {
	ctx := context.Background()
	st := &failing{Store: inmem.New()}
	e := newEnv(t, st, nil)
	coin := e.coins(t, 8)[0]
	body, _ := e.spendBody(t, coin, 4)
	st.broken.Store(true)
	_, err := e.client.Send(ctx, ecash.SpendPath, body)
	var ee *ecash.Error
	if !errors.As(err, &ee) || ee.Code != ecash.CodeUnavailable || ee.Status != 503 || ee.Final() {
		t.Fatalf("got %v, want retryable unavailable 503", err)
	}
	st.broken.Store(false)
	a, err := e.client.Send(ctx, ecash.SpendPath, body)
	if err != nil || a.Replayed {
		t.Fatalf("resend after the outage: %v (replayed %v), want a fresh answer", err, a.Replayed)
	}
}

func TestIssue(t *testing.T) {
	ctx := context.Background()

	t.Run("ReplayAndMismatch", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		body, p := e.issueBody(t, 8, 4)
		first, err := e.client.Send(ctx, ecash.IssuePath, body)
		if err != nil {
			t.Fatal(err)
		}
		again, err := e.client.Send(ctx, ecash.IssuePath, body)
		if err != nil || !again.Replayed || !bytes.Equal(first.Response, again.Response) {
			t.Fatalf("replay: %v, replayed=%v", err, again.Replayed)
		}
		if _, resp, err := p.Finish(again.Response); err != nil || resp.Value != 15 || resp.Charge != 3 {
			t.Fatalf("finish: %v %+v", err, resp)
		}
		req, _ := ecash.ParseIssue(body)
		req.Outputs = req.Outputs[:1]
		other, _ := req.MarshalBinary()
		if _, err := e.client.Send(ctx, ecash.IssuePath, other); code(err) != ecash.CodeChallengeMismatch {
			t.Fatalf("got %v, want challenge_mismatch", err)
		}
		// Past expiry, the identical resend still replays.
		e.clock.Advance(ecash.DefaultChallengeTTL + time.Minute)
		if a, err := e.client.Send(ctx, ecash.IssuePath, body); err != nil || !bytes.Equal(a.Response, first.Response) {
			t.Fatalf("replay after expiry: %v", err)
		}
	})

	t.Run("ExpiredOrForeignIsGone", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		body, _ := e.issueBody(t, 8)
		e.clock.Advance(ecash.DefaultChallengeTTL + time.Second)
		if _, err := e.client.Send(ctx, ecash.IssuePath, body); code(err) != ecash.CodeChallengeGone {
			t.Fatalf("expired: got %v, want challenge_gone", err)
		}
		body, _ = e.issueBody(t, 8)
		body[5] ^= 1 // inside the challenge id: the MAC no longer matches
		if _, err := e.client.Send(ctx, ecash.IssuePath, body); code(err) != ecash.CodeChallengeGone {
			t.Fatalf("foreign: got %v, want challenge_gone", err)
		}
	})

	t.Run("BadWorkIsProofInvalidAndConsumesNothing", func(t *testing.T) {
		e := newEnv(t, nil, func(c *ecash.Config) { c.Difficulty = 12 })
		body, _ := e.issueBody(t, 8)
		req, _ := ecash.ParseIssue(body)
		good := req.Solution
		for s := uint64(0); ; s++ {
			if ecash.Work(req.Challenge, s) < 12 {
				req.Solution = s
				break
			}
		}
		bad, _ := req.MarshalBinary()
		if _, err := e.client.Send(ctx, ecash.IssuePath, bad); code(err) != ecash.CodeProofInvalid {
			t.Fatalf("got %v, want proof_invalid", err)
		}
		req.Solution = good
		ok, _ := req.MarshalBinary()
		if _, err := e.client.Send(ctx, ecash.IssuePath, ok); err != nil {
			t.Fatalf("the challenge must still be usable: %v", err)
		}
	})

	t.Run("RacingIdenticalAndDifferent", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		body, _ := e.issueBody(t, 8, 4)
		req, _ := ecash.ParseIssue(body)
		req.Outputs = req.Outputs[:1]
		other, _ := req.MarshalBinary()
		const n = 16
		answers := make([]ecash.Answer, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b := body
				if i%2 == 1 {
					b = other
				}
				answers[i], errs[i] = e.client.Send(ctx, ecash.IssuePath, b)
			}()
		}
		wg.Wait()
		var won []int
		for i := range n {
			if errs[i] == nil {
				won = append(won, i%2)
			} else if code(errs[i]) != ecash.CodeChallengeMismatch {
				t.Fatalf("request %d: %v", i, errs[i])
			}
		}
		// Every request with the winner's bytes succeeded, every other one
		// got challenge_mismatch, and exactly one issuance was recorded.
		if len(won) != n/2 || e.iss.Stats().Issued != 15 {
			t.Fatalf("%d successes, issued %d; want %d, 15", len(won), e.iss.Stats().Issued, n/2)
		}
		for _, w := range won {
			if w != won[0] {
				t.Fatal("both requests succeeded")
			}
		}
	})

	t.Run("TooMuchIsBadRequest", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		body, _ := e.issueBody(t, 8, 8)
		if _, err := e.client.Send(ctx, ecash.IssuePath, body); code(err) != ecash.CodeBadRequest {
			t.Fatalf("got %v, want bad_request", err)
		}
	})
}

// TestIssuersShareKeys runs two issuers on one ledger and one key directory,
// as two processes would: a token issued by one is spent at the other, and
// a spend recorded by one replays at the other.
func TestIssuersShareKeys(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil, nil)
	dir := t.TempDir()
	open := func() *ecash.Issuer {
		keys, err := ecash.OpenKeys(ecash.KeysConfig{Dir: dir, KEK: make([]byte, 32), IssuerName: "issuer.test",
			Denominations: testDenoms, Epoch: 24 * time.Hour, Grace: 6 * time.Hour, GenerateRSAKey: keyGen(t)})
		if err != nil {
			t.Fatal(err)
		}
		cfg := ecash.DefaultConfig()
		cfg.IssuerName, cfg.Secret, cfg.Denominations, cfg.Difficulty, cfg.IssueValue = "issuer.test", make([]byte, 32), testDenoms, 6, 15
		iss, err := ecash.New(cfg, e.ledger, keys)
		if err != nil {
			t.Fatal(err)
		}
		return iss
	}
	a := open()
	b := open()
	if ka, kb := a.Keys().List(e.clock.Now()), b.Keys().List(e.clock.Now()); len(ka) != len(kb) || ka[0].ID != kb[0].ID {
		t.Fatalf("two processes on one directory see different keys")
	}
	// e's own issuer has other keys: swap its handler for a's by building
	// requests with a's key list.
	mux := http.NewServeMux()
	a.Register(mux)
	srvA := httptest.NewServer(mux)
	defer srvA.Close()
	mux = http.NewServeMux()
	b.Register(mux)
	srvB := httptest.NewServer(mux)
	defer srvB.Close()
	ea := &env{iss: a, ledger: e.ledger, clock: e.clock, client: &ecash.Client{URL: srvA.URL}}
	coin := ea.coins(t, 8)[0]
	body, _ := ea.spendBody(t, coin, 4)
	first, err := (&ecash.Client{URL: srvB.URL}).Send(ctx, ecash.SpendPath, body)
	if err != nil || first.Replayed {
		t.Fatalf("spend at the other issuer: %v", err)
	}
	again, err := ea.client.Send(ctx, ecash.SpendPath, body)
	if err != nil || !again.Replayed || !bytes.Equal(again.Response, first.Response) {
		t.Fatalf("replay at the first issuer: %v", err)
	}
}

// TestWrongMethod sends each endpoint a method it does not serve, through a
// mux with a catch-all as spent serve has, and expects 405 with an Allow
// header and a problem naming the method.
func TestWrongMethod(t *testing.T) {
	e := newEnv(t, nil, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	e.iss.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodPost, ecash.KeysPath, "GET, HEAD"},
		{http.MethodDelete, ecash.KeysPath, "GET, HEAD"},
		{http.MethodGet, ecash.ChallengePath, "POST"},
		{http.MethodGet, ecash.IssuePath, "POST"},
		{http.MethodPut, ecash.SpendPath, "POST"},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: status %d, want 405: %s", tc.method, tc.path, resp.StatusCode, body)
			continue
		}
		if got := resp.Header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s %s: Content-Type %q, want application/problem+json", tc.method, tc.path, ct)
		}
		var p struct {
			Code   string `json:"code"`
			Status int    `json:"status"`
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("%s %s: %v: %s", tc.method, tc.path, err, body)
		}
		if p.Code != ecash.CodeBadRequest || p.Status != 405 || !strings.Contains(p.Detail, tc.method) {
			t.Errorf("%s %s: problem %+v, want code bad_request, status 405, the method named", tc.method, tc.path, p)
		}
	}
	// The endpoints still answer their own methods.
	if _, err := e.client.Keys(context.Background()); err != nil {
		t.Errorf("GET %s: %v", ecash.KeysPath, err)
	}
}
