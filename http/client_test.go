package http_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
)

// sameRecord compares records field by field, times by instant.
func sameRecord(tb testing.TB, got, want spent.Record) {
	tb.Helper()
	times := [][2]time.Time{{got.FirstSeen, want.FirstSeen}, {got.ExpiresAt, want.ExpiresAt}, {got.LeaseUntil, want.LeaseUntil}}
	for _, p := range times {
		if !p[0].Equal(p[1]) {
			tb.Fatalf("got record %+v, want %+v", got, want)
		}
	}
	got.FirstSeen, got.ExpiresAt, got.LeaseUntil = want.FirstSeen, want.ExpiresAt, want.LeaseUntil
	if !reflect.DeepEqual(got, want) {
		tb.Fatalf("got record %+v, want %+v", got, want)
	}
}

func wantCode(tb testing.TB, err error, code string) {
	tb.Helper()
	var e *spent.Error
	if !errors.As(err, &e) {
		tb.Fatalf("got error %v (%T), want *spent.Error with code %s", err, err, code)
	}
	if e.Code != code {
		tb.Fatalf("got code %s (%v), want %s", e.Code, err, code)
	}
}

func (e *env) client(token string) *sphttp.Client {
	return sphttp.NewClient(e.url, sphttp.ClientConfig{Token: token})
}

func TestClient(t *testing.T) {
	ctx := context.Background()
	e := MustServe(t, sphttp.DefaultConfig())
	c := e.client("")
	sum := sha256.Sum256([]byte("request"))

	t.Run("OneStepFreshThenReplayed", func(t *testing.T) {
		claim := spent.Claim{Namespace: "echo", Key: "one", Fingerprint: sum[:], Place: "p", Result: []byte{0, 0xff, 'x'}}
		res, err := c.Claim(ctx, claim)
		if err != nil {
			t.Fatal(err)
		}
		want, err := e.ledger.Get(ctx, "echo", "one")
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != spent.Fresh {
			t.Fatalf("outcome: got %s, want fresh", res.Outcome)
		}
		sameRecord(t, res.Record, want)
		claim.Result[0] = 9 // the answer must not alias the caller's bytes
		res, err = c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "one", Fingerprint: sum[:], Result: []byte("other")})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != spent.Replayed {
			t.Fatalf("outcome: got %s, want replayed", res.Outcome)
		}
		sameRecord(t, res.Record, want)
	})

	t.Run("EmptyResultStaysNonNil", func(t *testing.T) {
		res, err := c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "empty", Result: []byte{}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Record.Result == nil || res.Record.State != spent.StateComplete {
			t.Fatalf("fresh one-step with empty result: got %+v", res.Record)
		}
		res, err = c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "empty", Result: []byte{}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != spent.Replayed || res.Record.Result == nil || len(res.Record.Result) != 0 {
			t.Fatalf("replay of empty result: got %s %#v", res.Outcome, res.Record.Result)
		}
	})

	t.Run("RetryAfterExact", func(t *testing.T) {
		first, err := c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "two"})
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(1500 * time.Millisecond)
		res, err := c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "two"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != spent.InProgress || res.RetryAfter != 28500*time.Millisecond || res.Unknown {
			t.Fatalf("got %s, retry after %v, unknown %v; want in_progress, 28.5s", res.Outcome, res.RetryAfter, res.Unknown)
		}
		sameRecord(t, res.Record, first.Record)
		e.clock.Advance(time.Minute)
		res, err = c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "two"})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Unknown || res.RetryAfter != 0 {
			t.Fatalf("after the lease: got unknown %v, retry after %v", res.Unknown, res.RetryAfter)
		}
		recs, err := c.Unknown(ctx, "echo", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 {
			t.Fatalf("unknown: got %d records, want 1", len(recs))
		}
		sameRecord(t, recs[0], first.Record)
		_, err = c.Complete(ctx, spent.Completion{Namespace: "echo", Key: "two", Result: []byte("r")})
		wantCode(t, err, spent.ELeaseExpired)
		rec, err := c.Complete(ctx, spent.Completion{Namespace: "echo", Hash: recs[0].Hash, Result: []byte("r"), Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != spent.StateComplete || string(rec.Result) != "r" || !rec.LeaseUntil.IsZero() {
			t.Fatalf("forced completion: got %+v", rec)
		}
	})

	t.Run("Batch", func(t *testing.T) {
		res, err := c.ClaimBatch(ctx, []spent.Claim{
			{Namespace: "refuse", Key: "t1", Place: "g1", Result: []byte("ok")},
			{Namespace: "refuse", Key: "t1", Place: "g2", Result: []byte("ok")},
			{Namespace: "echo", Key: "b1"},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := []spent.Outcome{res[0].Outcome, res[1].Outcome, res[2].Outcome}
		if !reflect.DeepEqual(got, []spent.Outcome{spent.Fresh, spent.Refused, spent.Fresh}) {
			t.Fatalf("outcomes: got %v", got)
		}
		if res[1].Record.Place != "g1" || string(res[0].Record.Result) != "ok" || res[1].Record.Result != nil {
			t.Fatalf("records: got %+v / %+v", res[0].Record, res[1].Record)
		}
		if err := c.Release(ctx, spent.Release{Namespace: "echo", Key: "b1", Seq: res[2].Record.Seq}); err != nil {
			t.Fatal(err)
		}
		empty, err := c.ClaimBatch(ctx, nil)
		if err != nil || len(empty) != 0 {
			t.Fatalf("empty batch: got %v, %v", empty, err)
		}
	})

	t.Run("ErrorCodes", func(t *testing.T) {
		_, err := c.Claim(ctx, spent.Claim{Namespace: "nope", Key: "k"})
		wantCode(t, err, spent.EUnknownNamespace)
		_, err = c.Claim(ctx, spent.Claim{Namespace: "echo", Key: strings.Repeat("k", spent.MaxKeyLen+1)})
		wantCode(t, err, spent.EKeyTooLong)
		_, err = c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "k", Fingerprint: []byte{1, 2}})
		wantCode(t, err, spent.EInvalid)
		_, err = c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "k", Result: make([]byte, spent.DefaultMaxResult+1)})
		wantCode(t, err, spent.ETooLarge)
		_, err = c.Get(ctx, "echo", "never")
		wantCode(t, err, spent.ENotFound)
		err = c.Release(ctx, spent.Release{Namespace: "echo", Key: "one"})
		wantCode(t, err, spent.ENotPending)
		if _, err := c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "sm"}); err != nil {
			t.Fatal(err)
		}
		err = c.Release(ctx, spent.Release{Namespace: "echo", Key: "sm", Seq: spent.Seq{Node: 7, Counter: 1}})
		wantCode(t, err, spent.ESeqMismatch)
		_, err = c.ClaimBatch(ctx, make([]spent.Claim, spent.MaxBatch+1))
		wantCode(t, err, spent.ETooLarge)
	})

	t.Run("Unavailable", func(t *testing.T) {
		e.store.SetFaults(inmem.Faults{Before: func(string) error { return errors.New("down") }})
		defer e.store.SetFaults(inmem.Faults{})
		_, err := c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "down"})
		wantCode(t, err, spent.EUnavailable)
	})
}

func TestClientAuth(t *testing.T) {
	ctx := context.Background()
	e := MustServe(t, authConfig())
	_, err := e.client("").Claim(ctx, spent.Claim{Namespace: "echo", Key: "k"})
	wantCode(t, err, spent.EUnauthorized)
	_, err = e.client(tokEchoOnly).Claim(ctx, spent.Claim{Namespace: "refuse", Key: "k"})
	wantCode(t, err, spent.EForbidden)
	_, err = e.client(tokClaim).Unknown(ctx, "", 0)
	wantCode(t, err, spent.EForbidden)
	if _, err := e.client(tokAdmin).Unknown(ctx, "", 0); err != nil {
		t.Fatal(err)
	}
}

func TestClientTransport(t *testing.T) {
	ctx := context.Background()
	t.Run("ConnectionRefused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, err = sphttp.NewClient("http://"+addr, sphttp.ClientConfig{}).Claim(ctx, spent.Claim{Namespace: "echo", Key: "k"})
		wantCode(t, err, spent.EUnavailable)
	})
	t.Run("Cancelled", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := e.client("").Claim(cctx, spent.Claim{Namespace: "echo", Key: "k"})
		wantCode(t, err, spent.EUnavailable)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want it to wrap context.Canceled", err)
		}
	})
	t.Run("ForeignAnswers", func(t *testing.T) {
		// Statuses from something other than a spent server (a proxy, a
		// wrong URL) carry no code; the client must not read a bare 404 as
		// "no such record".
		for _, tc := range []struct {
			status int
			code   string
		}{
			{404, spent.EInvalid},
			{409, spent.EInvalid},
			{502, spent.EUnavailable},
			{503, spent.EUnavailable},
			{429, spent.EUnavailable},
			{401, spent.EUnauthorized},
			{413, spent.ETooLarge},
		} {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "<html>nope</html>", tc.status)
			}))
			_, err := sphttp.NewClient(ts.URL, sphttp.ClientConfig{}).Get(ctx, "echo", "k")
			ts.Close()
			wantCode(t, err, tc.code)
		}
	})
	t.Run("MalformedAnswer", func(t *testing.T) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"outcome":"fresh"`))
		}))
		defer ts.Close()
		_, err := sphttp.NewClient(ts.URL, sphttp.ClientConfig{}).Claim(ctx, spent.Claim{Namespace: "echo", Key: "k"})
		wantCode(t, err, spent.EInternal)
	})
	t.Run("PathPrefix", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		mux := http.NewServeMux()
		mux.Handle("/spent/", http.StripPrefix("/spent", e.server))
		ts := httptest.NewServer(mux)
		defer ts.Close()
		res, err := sphttp.NewClient(ts.URL+"/spent/", sphttp.ClientConfig{}).Claim(ctx, spent.Claim{Namespace: "echo", Key: "k"})
		if err != nil || res.Outcome != spent.Fresh {
			t.Fatalf("got %v, %v", res.Outcome, err)
		}
	})
}

func TestClientRefusesNonUTF8(t *testing.T) {
	var hits atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer ts.Close()
	c := sphttp.NewClient(ts.URL, sphttp.ClientConfig{})
	ctx := context.Background()
	_, err := c.Claim(ctx, spent.Claim{Namespace: "echo", Key: "\xff\xfe"})
	wantCode(t, err, spent.EInvalid)
	_, err = c.ClaimBatch(ctx, []spent.Claim{{Namespace: "echo", Key: "ok"}, {Namespace: "echo", Key: "bad\x80"}})
	wantCode(t, err, spent.EInvalid)
	if !strings.Contains(err.Error(), "claims[1]") {
		t.Fatalf("error does not name the claim: %v", err)
	}
	_, err = c.Get(ctx, "echo", "\xc0")
	wantCode(t, err, spent.EInvalid)
	err = c.Release(ctx, spent.Release{Namespace: "echo", Key: "\xc0"})
	wantCode(t, err, spent.EInvalid)
	if n := hits.Load(); n != 0 {
		t.Fatalf("server got %d requests, want 0", n)
	}
}

func TestClientUnicodeKeys(t *testing.T) {
	// Keys that need escaping in JSON reach the ledger byte for byte: the
	// client's answer and an in-process Get agree on the hash.
	ctx := context.Background()
	e := MustServe(t, sphttp.DefaultConfig())
	c := e.client("")
	for _, key := range []string{"\"quoted\"", "back\\slash", "tab\tnew\nline", "\x00\x01\x1f", "é😀", "\u2028\u2029", "</script>"} {
		res, err := c.Claim(ctx, spent.Claim{Namespace: "raw", Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.ledger.HashKey("raw", key); res.Record.Hash != got || res.Record.RawKey != key {
			t.Fatalf("key %q: got hash %s raw %q, want %s", key, res.Record.Hash, res.Record.RawKey, got)
		}
	}
}
