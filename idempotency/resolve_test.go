package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/idempotency"
	"github.com/spentledger/spent/inmem"
)

// unknownEnv is an env whose middleware resolves with resolve, and whose
// request with key k died after Applied: its marker is an unknown outcome.
func unknownEnv(t *testing.T, resolve func(context.Context, idempotency.UnknownOutcome) (idempotency.Resolution, error)) (*env, *spent.ResolveRunner) {
	t.Helper()
	e := newEnv(t, func(o *idempotency.Options) { o.Resolve = resolve })
	if a := e.send(req{key: "k", body: `{"n":1}`, do: "panic-after"}); a.err == nil {
		t.Fatalf("panicking handler: got %d, want a broken connection", a.status)
	}
	e.clock.Advance(testLease)
	want{status: 409, code: idempotency.CodeOutcomeUnknown}.check(t, "before resolving", e.send(req{key: "k", body: `{"n":1}`}))
	rr, err := e.mw.ResolveRunner(spent.ResolveOptions{Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return e, rr
}

func pass(t *testing.T, rr *spent.ResolveRunner) spent.ResolvePass {
	t.Helper()
	p, err := rr.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolve(t *testing.T) {
	ctx := context.Background()

	t.Run("AppliedIsReplayedByteForByte", func(t *testing.T) {
		body := []byte("{\"id\":\"k\",\"state\":\"sent\"}\n")
		var seen []idempotency.UnknownOutcome
		e, rr := unknownEnv(t, func(_ context.Context, u idempotency.UnknownOutcome) (idempotency.Resolution, error) {
			seen = append(seen, u)
			return idempotency.Resolution{Verdict: spent.Applied, Status: http.StatusCreated, Body: body, Header: http.Header{
				"content-type": {"application/json"}, // any case
				"Location":     {"/things/k"},
				"X-Extra":      {"not a ResponseHeader: dropped"},
			}}, nil
		})
		marker, err := e.ledger.Unknown(ctx, "idempotency-applied", 0)
		if err != nil || len(marker) != 1 {
			t.Fatalf("unknown: %v %v", marker, err)
		}
		if p := pass(t, rr); p.Completed != 1 {
			t.Fatalf("pass: got %+v, want 1 completed", p)
		}
		if len(seen) != 1 || seen[0].Scope != "alice" || seen[0].Key != "k" || seen[0].Seq != marker[0].Seq ||
			seen[0].Hash != marker[0].Hash || !bytes.Equal(seen[0].Fingerprint, marker[0].Fingerprint) || len(seen[0].Fingerprint) != 32 {
			t.Fatalf("Resolve saw %+v, want alice's k with the marker's seq, hash and fingerprint", seen)
		}
		for i := range 2 { // from the marker, then from the key's record
			a := e.send(req{key: "k", body: `{"n":1}`})
			if a.status != http.StatusCreated || !bytes.Equal(a.body, body) || !a.replayed() ||
				a.header.Get("Content-Type") != "application/json" || a.header.Get("Location") != "/things/k" || a.header.Get("X-Extra") != "" {
				t.Fatalf("retry %d: got %d %q %v, want the resolver's answer replayed", i+1, a.status, a.body, a.header)
			}
		}
		if got := e.app.effects.Load(); got != 1 {
			t.Fatalf("effects: got %d, want 1", got)
		}
		want{status: 422, code: idempotency.CodeMismatch}.check(t, "other request, same key", e.send(req{key: "k", body: `{"n":2}`}))
	})

	t.Run("NotAppliedRunsTheHandlerAgain", func(t *testing.T) {
		e, rr := unknownEnv(t, func(context.Context, idempotency.UnknownOutcome) (idempotency.Resolution, error) {
			return idempotency.Resolution{Verdict: spent.NotApplied}, nil
		})
		if p := pass(t, rr); p.Released != 1 {
			t.Fatalf("pass: got %+v, want 1 released", p)
		}
		e.clock.Advance(testLease) // the key's own record, left by the crash, is retaken
		a := e.send(req{key: "k", body: `{"n":1}`})
		if a.status != http.StatusCreated || a.replayed() {
			t.Fatalf("retry: got %d %q, want a fresh 201", a.status, a.body)
		}
		if got := e.app.effects.Load(); got != 2 {
			t.Fatalf("effects: got %d, want the handler to have gone past Applied again", got)
		}
	})

	// A handler that runs past its lease after Applied is an unknown
	// outcome to the resolver. If the resolver settles it first, the
	// handler's late answer is dropped with a 409 in_progress (never a
	// 500 claiming the outcome is held), and the retry gets the verdict.
	t.Run("ALateHandlerYieldsToTheVerdict", func(t *testing.T) {
		settled := []byte("{\"settled\":true}\n")
		for name, v := range map[string]spent.Verdict{"Applied": spent.Applied, "NotApplied": spent.NotApplied} {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, func(o *idempotency.Options) {
					o.Resolve = func(context.Context, idempotency.UnknownOutcome) (idempotency.Resolution, error) {
						return idempotency.Resolution{Verdict: v, Status: http.StatusOK, Body: settled}, nil
					}
				})
				late := make(chan answer, 1)
				go func() { late <- send(t, e.srv.URL, req{key: "k", body: `{"n":1}`, do: "block-after"}) }()
				<-e.app.entered
				e.clock.Advance(testLease)
				rr, err := e.mw.ResolveRunner(spent.ResolveOptions{Now: e.clock.Now})
				if err != nil {
					t.Fatal(err)
				}
				p := pass(t, rr)
				if (v == spent.Applied && p.Completed != 1) || (v == spent.NotApplied && p.Released != 1) {
					t.Fatalf("pass: got %+v, want the marker settled %v", p, v)
				}
				close(e.app.block)
				want{status: 409, code: idempotency.CodeInProgress}.check(t, "the late handler's answer", <-late)
				a := e.send(req{key: "k", body: `{"n":1}`})
				switch v {
				case spent.Applied:
					if a.status != http.StatusOK || !bytes.Equal(a.body, settled) || !a.replayed() {
						t.Fatalf("retry: got %d %q, want the resolver's answer replayed", a.status, a.body)
					}
				default:
					if a.status != http.StatusCreated || a.replayed() {
						t.Fatalf("retry: got %d %q, want a fresh 201", a.status, a.body)
					}
				}
			})
		}
	})

	t.Run("CannotTellLeavesItForTheOperator", func(t *testing.T) {
		e, rr := unknownEnv(t, func(context.Context, idempotency.UnknownOutcome) (idempotency.Resolution, error) {
			return idempotency.Resolution{}, nil
		})
		if p := pass(t, rr); p.Left != 1 {
			t.Fatalf("pass: got %+v, want 1 left", p)
		}
		want{status: 409, code: idempotency.CodeOutcomeUnknown}.check(t, "retry", e.send(req{key: "k", body: `{"n":1}`}))
		if recs, err := e.ledger.Unknown(ctx, "", 0); err != nil || len(recs) != 1 || recs[0].RawKey != "5:alice:k" {
			t.Fatalf("unknown: got %v %v, want the marker listed", recs, err)
		}
	})

	t.Run("BadAnswersAreLeft", func(t *testing.T) {
		boom := errors.New("provider down")
		for name, res := range map[string]struct {
			r   idempotency.Resolution
			err error
		}{
			"Error":       {idempotency.Resolution{Verdict: spent.Applied, Status: 201}, boom},
			"NoStatus":    {idempotency.Resolution{Verdict: spent.Applied}, nil},
			"Status1xx":   {idempotency.Resolution{Verdict: spent.Applied, Status: 103}, nil},
			"BodyTooBig":  {idempotency.Resolution{Verdict: spent.Applied, Status: 200, Body: make([]byte, 4097)}, nil},
			"BadVerdict":  {idempotency.Resolution{Verdict: 7}, nil},
			"ZeroVerdict": {idempotency.Resolution{Status: 200}, nil},
		} {
			t.Run(name, func(t *testing.T) {
				var left []spent.ResolveLeft
				e := newEnv(t, func(o *idempotency.Options) {
					o.Resolve = func(context.Context, idempotency.UnknownOutcome) (idempotency.Resolution, error) {
						return res.r, res.err
					}
				})
				e.send(req{key: "k", do: "panic-after"})
				e.clock.Advance(testLease)
				rr, err := e.mw.ResolveRunner(spent.ResolveOptions{Now: e.clock.Now, OnLeft: func(l spent.ResolveLeft) { left = append(left, l) }})
				if err != nil {
					t.Fatal(err)
				}
				if p := pass(t, rr); p.Left != 1 || len(left) != 1 {
					t.Fatalf("pass: got %+v, want 1 left", p)
				}
				if (left[0].Err != nil) == (name == "ZeroVerdict") || (name == "Error" && !errors.Is(left[0].Err, boom)) {
					t.Fatalf("left: got error %v", left[0].Err)
				}
				want{status: 409, code: idempotency.CodeOutcomeUnknown}.check(t, "retry", e.send(req{key: "k"}))
			})
		}
	})

	t.Run("MarkerWithoutRawKey", func(t *testing.T) {
		o := testOptions()
		o.Resolve = func(context.Context, idempotency.UnknownOutcome) (idempotency.Resolution, error) {
			t.Fatal("Resolve called without a request")
			return idempotency.Resolution{}, nil
		}
		r, err := idempotency.NewResolver(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range []string{"", "alice:k", "5:alice", "5:alice:", "05:alice:k", "6:alice:k", "0::k"} {
			res, err := r(ctx, spent.Record{Namespace: o.AppliedNamespace, RawKey: raw, Seq: spent.Seq{Node: 1, Counter: 1}})
			if err == nil || res.Verdict != spent.CannotTell {
				t.Errorf("raw key %q: got %v %v, want an error", raw, res.Verdict, err)
			}
		}
		if _, err := r(ctx, spent.Record{Namespace: "elsewhere", RawKey: "5:alice:k"}); err == nil || !strings.Contains(err.Error(), "namespace") {
			t.Errorf("other namespace: got %v, want a refusal", err)
		}
	})

	t.Run("Options", func(t *testing.T) {
		if _, err := idempotency.NewResolver(testOptions()); !errors.Is(err, idempotency.ErrNoResolve) {
			t.Errorf("no Resolve: got %v, want ErrNoResolve", err)
		}
		e := newEnv(t, func(o *idempotency.Options) {
			o.Resolve = func(context.Context, idempotency.UnknownOutcome) (idempotency.Resolution, error) {
				return idempotency.Resolution{}, nil
			}
		})
		if _, err := e.mw.ResolveRunner(spent.ResolveOptions{Namespace: "idempotency"}); err == nil {
			t.Error("runner over the retake namespace: got one, want a refusal")
		}
	})
}

// ExampleMiddleware_ResolveRunner settles an unknown outcome by asking the
// provider the effect went to: a payment it executed, whose process died
// before the answer was stored, is completed with the answer the handler
// would have sent, and the client's retry gets it.
func ExampleMiddleware_ResolveRunner() {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	// The provider's books: the attempts it executed, by the marker's seq.
	// A real provider looks the attempt up and, when it has not executed
	// it, voids it in the same call, so that it can never land later.
	executed := map[spent.Seq]string{}
	opts := idempotency.DefaultOptions()
	opts.Scope = idempotency.FixedScope("shop")
	opts.Resolve = func(_ context.Context, u idempotency.UnknownOutcome) (idempotency.Resolution, error) {
		if key, ok := executed[u.Seq]; ok {
			return idempotency.Resolution{Verdict: spent.Applied, Status: http.StatusCreated,
				Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("paid " + key + "\n")}, nil
		}
		return idempotency.Resolution{Verdict: spent.NotApplied}, nil
	}
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("an example secret of at least 32 bytes")
	cfg.Namespaces = idempotency.Policies(opts, 30*time.Second)
	cfg.Now = clock
	ledger, err := spent.NewLedger(ctx, inmem.New(), cfg)
	if err != nil {
		panic(err)
	}
	mw, err := idempotency.New(ledger, opts)
	if err != nil {
		panic(err)
	}
	crash := true
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if idempotency.Applied(r) != nil {
			return
		}
		k, _ := idempotency.KeyOf(r)
		executed[k.AppliedSeq] = k.Key // the provider executes the payment
		if crash {
			panic(http.ErrAbortHandler) // and the process dies before answering
		}
		w.Write([]byte("paid " + k.Key + "\n"))
	}))
	send := func() {
		defer func() { recover() }()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{"amount":5}`))
		req.Header.Set(idempotency.HeaderKey, `"order-1"`)
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get(idempotency.HeaderReplayed), strings.TrimSpace(rec.Body.String()))
	}
	send()                     // aborted: nothing stored, nothing printed
	now = now.Add(time.Minute) // the lease ran out: an unknown outcome

	runner, err := mw.ResolveRunner(spent.ResolveOptions{Now: clock})
	if err != nil {
		panic(err)
	}
	p, err := runner.Pass(ctx) // in a service: go runner.Run(ctx)
	fmt.Println("completed:", p.Completed, err)
	send()
	// Output:
	// completed: 1 <nil>
	// 201 true paid order-1
}
