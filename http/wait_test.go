package http_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
)

// pending claims key in ns on e's ledger, two-step, and returns its answer.
func (e *env) pending(tb testing.TB, ns, key string) spent.Answer {
	tb.Helper()
	a, err := e.ledger.Claim(context.Background(), spent.Claim{Namespace: ns, Key: key})
	if err != nil || a.Outcome != spent.Fresh {
		tb.Fatalf("claim %q: got %v, %v; want fresh", key, a.Outcome, err)
	}
	return a
}

// untilWaiting waits until n claims wait on e's ledger.
func (e *env) untilWaiting(tb testing.TB, n int) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.ledger.Waiting() < n; {
		if time.Now().After(deadline) {
			tb.Fatalf("%d claims waiting, want %d", e.ledger.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWaitEndToEnd: a claim posted with "wait" to /v1/claim while the key
// is pending is answered, once the first request completes, as a repeat:
// 200 replayed with the first's result.
func TestWaitEndToEnd(t *testing.T) {
	e := MustServe(t, authConfig())
	first := e.pending(t, "echo", "order-1")
	got := make(chan *answer, 1)
	go func() {
		got <- e.post(t, "/v1/claim", tokClaim, `{"namespace":"echo","key":"order-1","wait":20}`)
	}()
	e.untilWaiting(t, 1)
	if _, err := e.ledger.Complete(context.Background(), spent.Completion{Namespace: "echo", Key: "order-1", Seq: first.Record.Seq, Result: []byte("paid")}); err != nil {
		t.Fatal(err)
	}
	var a *answer
	select {
	case a = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("waiting claim not answered after the completion")
	}
	m := wantOK(t, a)
	if m["outcome"] != "replayed" || m["result"] != "cGFpZA==" || a.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("got %s (Idempotent-Replayed %q); want replayed with result cGFpZA==", a.body, a.header.Get("Idempotent-Replayed"))
	}
}

// TestWaitRunsOutOverHTTP: nothing ends the key; the claim answers
// in_progress with Retry-After once its wait of 0.3 s has run out.
func TestWaitRunsOutOverHTTP(t *testing.T) {
	e := MustServe(t, authConfig())
	e.pending(t, "echo", "k")
	start := time.Now()
	a := e.post(t, "/v1/claim", tokClaim, `{"namespace":"echo","key":"k","wait":0.3}`)
	m := wantOK(t, a)
	if el := time.Since(start); m["outcome"] != "in_progress" || a.header.Get("Retry-After") == "" || el < 300*time.Millisecond {
		t.Fatalf("got %s, Retry-After %q after %v; want in_progress with Retry-After after at least 300ms", a.body, a.header.Get("Retry-After"), el)
	}
}

// TestWaitRefusedOverHTTP: a wait above the server's bound, a malformed
// one, and one in a batch are refused 400 invalid, saying why.
func TestWaitRefusedOverHTTP(t *testing.T) {
	cfg := authConfig()
	cfg.MaxWait = 2 * time.Second
	e := MustServe(t, cfg)
	for _, c := range []struct{ path, body, detail string }{
		{"/v1/claim", `{"namespace":"echo","key":"k","wait":2.5}`, "at most 2 seconds (max_wait)"},
		{"/v1/claim", `{"namespace":"echo","key":"k","wait":-1}`, "from 0 to 600"},
		{"/v1/claim", `{"namespace":"echo","key":"k","wait":1e400}`, "from 0 to 600"},
		{"/v1/claim", `{"namespace":"echo","key":"k","wait":"5s"}`, "wait"},
		{"/v1/claims", `{"claims":[{"namespace":"echo","key":"k","wait":1}]}`, "claims[0].wait: a batch never waits"},
	} {
		p := wantProblem(t, e.post(t, c.path, tokClaim, c.body), http.StatusBadRequest, spent.EInvalid)
		if d, _ := p["detail"].(string); !strings.Contains(d, c.detail) {
			t.Errorf("%s: detail %q, want it to contain %q", c.body, d, c.detail)
		}
	}
	if e.ledger.Waiting() != 0 {
		t.Fatalf("a refused claim waits")
	}
	// At the bound, the wait is accepted.
	a := e.post(t, "/v1/claim", tokClaim, `{"namespace":"echo","key":"free","wait":2}`)
	if m := wantOK(t, a); m["outcome"] != "fresh" {
		t.Fatalf("wait at the bound: got %s, want fresh", a.body)
	}
	if _, err := sphttp.NewServer(e.ledger, sphttp.Config{MaxWait: spent.MaxWait + 1}); err == nil {
		t.Fatal("NewServer accepted a MaxWait above spent.MaxWait")
	}
}

// TestClientClaimWait: the Go client sends Claim.Wait: a waiter released
// by the first request gets the key (fresh) and completes it; a waiter on a
// key nobody ends answers in_progress after its wait, not at once.
func TestClientClaimWait(t *testing.T) {
	e := MustServe(t, authConfig())
	c := sphttp.NewClient(e.url, sphttp.ClientConfig{Token: tokClaim})
	ctx := context.Background()
	first := e.pending(t, "echo", "k")
	got := make(chan spent.Answer, 1)
	go func() {
		a, err := c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "k", Wait: 20 * time.Second})
		if err != nil {
			t.Errorf("client claim: %v", err)
		}
		got <- a
	}()
	e.untilWaiting(t, 1)
	if err := e.ledger.Release(ctx, spent.Release{Namespace: "echo", Key: "k", Seq: first.Record.Seq}); err != nil {
		t.Fatal(err)
	}
	var a spent.Answer
	select {
	case a = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("client's waiting claim not answered after the release")
	}
	if a.Outcome != spent.Fresh || a.Record.Seq == first.Record.Seq {
		t.Fatalf("got %v seq %v; want fresh with a new seq", a.Outcome, a.Record.Seq)
	}
	if _, err := c.Complete(ctx, spent.Completion{Namespace: "echo", Key: "k", Seq: a.Record.Seq, Result: []byte("second")}); err != nil {
		t.Fatalf("complete by the waiter: %v", err)
	}

	e.pending(t, "echo", "k2")
	start := time.Now()
	a, err := c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "k2", Wait: 300 * time.Millisecond})
	if el := time.Since(start); err != nil || a.Outcome != spent.InProgress || el < 300*time.Millisecond {
		t.Fatalf("got %v, %v after %v; want in_progress after at least 300ms", a.Outcome, err, el)
	}
	_, err = c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "k2", Wait: time.Hour})
	if spent.ErrorCode(err) != spent.EInvalid {
		t.Fatalf("wait of an hour: got %v, want invalid", err)
	}
}

// TestWaitStopWaiting: a server shutting down calls StopWaiting, and the
// waiting request is answered in_progress at once.
func TestWaitStopWaiting(t *testing.T) {
	e := MustServe(t, authConfig())
	e.pending(t, "echo", "k")
	got := make(chan *answer, 1)
	go func() {
		got <- e.post(t, "/v1/claim", tokClaim, `{"namespace":"echo","key":"k","wait":30}`)
	}()
	e.untilWaiting(t, 1)
	e.ledger.StopWaiting()
	select {
	case a := <-got:
		if m := wantOK(t, a); m["outcome"] != "in_progress" {
			t.Fatalf("got %s, want in_progress", a.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiting claim not answered after StopWaiting")
	}
}
