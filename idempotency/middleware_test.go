package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/idempotency"
	"github.com/spentledger/spent/inmem"
)

// check compares an answer with what a case wants.
type want struct {
	status   int
	code     string            // problem code, "" for none
	replayed bool              // Idempotent-Replayed: true
	header   map[string]string // headers that must have these values ("" means absent)
}

func (w want) check(t *testing.T, name string, a answer) {
	t.Helper()
	if a.err != nil {
		t.Fatalf("%s: %v", name, a.err)
	}
	if a.status != w.status {
		t.Fatalf("%s: got status %d (%s), want %d", name, a.status, a.body, w.status)
	}
	if a.code != w.code {
		t.Fatalf("%s: got code %q, want %q", name, a.code, w.code)
	}
	if a.replayed() != w.replayed {
		t.Fatalf("%s: got replayed %v, want %v", name, a.replayed(), w.replayed)
	}
	for k, v := range w.header {
		if got := a.header.Get(k); got != v {
			t.Fatalf("%s: header %s: got %q, want %q", name, k, got, v)
		}
	}
}

// TestStatusesAndHeaders runs each answer of the middleware: a first
// request (or none), then the request under test.
func TestStatusesAndHeaders(t *testing.T) {
	first := req{key: "k1", body: `{"amount":1}`}
	long := strings.Repeat("a", idempotency.MaxKeyLen)
	cases := []struct {
		name  string
		first *req
		req   req
		want  want
		runs  int64 // handler runs in all
	}{
		{"FirstRequestRunsAndSends", nil, first,
			want{status: 201, header: map[string]string{"Location": "/things/k1", "X-Extra": "first-only", "Content-Type": "application/json", "Idempotency-Retention": "86400", "Retry-After": ""}}, 1},
		{"ReplayReturnsStoredStatusAndChosenHeaders", &first, first,
			want{status: 201, replayed: true, header: map[string]string{"Location": "/things/k1", "X-Extra": "", "Content-Type": "application/json", "Idempotency-Retention": "86400"}}, 1},
		{"QuotedAndBareFormsAreOneKey", &req{key: `"k1"`, body: first.body}, first,
			want{status: 201, replayed: true}, 1},
		{"EscapesInQuotedKey", &req{key: `a"b\c`, body: first.body}, req{key: `"a\"b\\c"`, body: first.body},
			want{status: 201, replayed: true}, 1},
		{"OtherBodyIsMismatch", &first, req{key: "k1", body: `{"amount":2}`},
			want{status: 422, code: idempotency.CodeMismatch, header: map[string]string{"Idempotency-Retention": "86400"}}, 1},
		{"OtherPathIsMismatch", &first, req{key: "k1", body: first.body, path: "/other"},
			want{status: 422, code: idempotency.CodeMismatch}, 1},
		{"OtherQueryIsMismatch", &first, req{key: "k1", body: first.body, path: "/things?x=1"},
			want{status: 422, code: idempotency.CodeMismatch}, 1},
		{"OtherMethodIsMismatch", &first, req{key: "k1", body: first.body, method: http.MethodPatch},
			want{status: 422, code: idempotency.CodeMismatch}, 1},
		{"OtherChosenHeaderIsMismatch", &first, req{key: "k1", body: first.body, header: map[string]string{"Content-Type": "text/plain"}},
			want{status: 422, code: idempotency.CodeMismatch}, 1},
		{"OtherHeaderStillReplays", &first, req{key: "k1", body: first.body, header: map[string]string{"X-Trace": "2"}},
			want{status: 201, replayed: true}, 1},
		{"OtherClientSameKeyRunsApart", &first, req{key: "k1", body: first.body, client: "bob"},
			want{status: 201}, 2},
		{"MissingKey", nil, req{body: first.body},
			want{status: 400, code: idempotency.CodeKeyMissing, header: map[string]string{"Idempotency-Retention": "86400", "Content-Type": "application/problem+json"}}, 0},
		{"KeyOf255Characters", nil, req{key: long, body: first.body}, want{status: 201}, 1},
		{"KeyOf256Characters", nil, req{key: long + "a", body: first.body}, want{status: 400, code: idempotency.CodeKeyInvalid}, 0},
		{"EmptyQuotedKey", nil, req{key: `""`}, want{status: 400, code: idempotency.CodeKeyInvalid}, 0},
		{"SpaceInKey", nil, req{key: `"a b"`}, want{status: 400, code: idempotency.CodeKeyInvalid}, 0},
		{"NonASCIIKey", nil, req{key: "cl\u00e9"}, want{status: 400, code: idempotency.CodeKeyInvalid}, 0},
		{"UnterminatedString", nil, req{key: `"abc`}, want{status: 400, code: idempotency.CodeKeyInvalid}, 0},
		{"BadEscape", nil, req{key: `"a\b"`}, want{status: 400, code: idempotency.CodeKeyInvalid}, 0},
		{"Parameters", nil, req{key: `"abc";v=1`}, want{status: 400, code: idempotency.CodeKeyInvalid}, 0},
		{"BodyTooLarge", nil, req{key: "k1", body: strings.Repeat("x", 1025)},
			want{status: 413, code: idempotency.CodeTooLarge, header: map[string]string{"Idempotency-Retention": "86400"}}, 0},
		{"BodyAtLimit", nil, req{key: "k1", body: strings.Repeat("x", 1024)}, want{status: 201}, 1},
		{"NoClientScope", nil, req{key: "k1", client: "-"}, want{status: 401, code: idempotency.CodeUnauthorized}, 0},
		{"GetPassesThroughWithoutKey", nil, req{method: http.MethodGet, do: "noapply"},
			want{status: 200, header: map[string]string{"Idempotency-Retention": ""}}, 1},
		{"FailureBeforeAppliedIsNotStored", &req{key: "k1", body: first.body, do: "fail-before"}, first,
			want{status: 201}, 2},
		{"TooManyRequestsBeforeAppliedIsNotStored", &req{key: "k1", body: first.body, do: "429-before"}, first,
			want{status: 201}, 2},
		{"FailureAfterAppliedIsStored", &req{key: "k1", body: first.body, do: "fail-after"}, first,
			want{status: 500, replayed: true}, 1},
		{"AnswerWithoutAppliedIsStored", &req{key: "k1", body: first.body, do: "noapply"}, first,
			want{status: 200, replayed: true, header: map[string]string{"Content-Type": "text/plain"}}, 1},
		{"NoContentReplays", &req{key: "k1", do: "empty"}, req{key: "k1"},
			want{status: 204, replayed: true}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			var a1 answer
			if c.first != nil {
				a1 = e.send(*c.first)
				if a1.err != nil {
					t.Fatalf("first request: %v", a1.err)
				}
			}
			a := e.send(c.req)
			c.want.check(t, c.name, a)
			if c.want.replayed && !bytes.Equal(a.body, a1.body) {
				t.Fatalf("replayed body: got %q, want the first body %q byte for byte", a.body, a1.body)
			}
			if c.first != nil && !c.want.replayed && c.want.status < 300 && bytes.Equal(a.body, a1.body) {
				t.Fatalf("got the first body %q again, want a new run", a.body)
			}
			if got := e.app.runs.Load(); got != c.runs {
				t.Fatalf("handler runs: got %d, want %d", got, c.runs)
			}
		})
	}
}

func TestRepeatedKeyHeader(t *testing.T) {
	e := newEnv(t, nil)
	r, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/things", nil)
	r.Header.Add(idempotency.HeaderKey, "a")
	r.Header.Add(idempotency.HeaderKey, "b")
	r.Header.Set("X-Client", "alice")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("two Idempotency-Key headers: got %d, want 400", resp.StatusCode)
	}
}

func TestRetentionHeaderFollowsOptions(t *testing.T) {
	e := newEnv(t, func(o *idempotency.Options) { o.Retention = time.Hour; o.AppliedRetention = 2 * time.Hour })
	a := e.send(req{key: "k", do: "noapply"})
	want{status: 200, header: map[string]string{"Idempotency-Retention": "3600"}}.check(t, "first", a)
	a = e.send(req{key: "k"})
	want{status: 200, replayed: true, header: map[string]string{"Idempotency-Retention": "3600"}}.check(t, "replay", a)
	want{status: 201}.check(t, "applied", e.send(req{key: "a"}))
	// After the retention a key is new again, unless its effect was
	// applied: the marker remembers it for AppliedRetention.
	e.clock.Advance(time.Hour)
	want{status: 200}.check(t, "after retention", e.send(req{key: "k", do: "noapply"}))
	want{status: 201, replayed: true}.check(t, "applied, after retention", e.send(req{key: "a"}))
	e.clock.Advance(time.Hour)
	want{status: 201}.check(t, "applied, after applied retention", e.send(req{key: "a"}))
	if e.app.effects.Load() != 2 {
		t.Fatalf("effects: got %d, want 2", e.app.effects.Load())
	}
}

func TestInProgress(t *testing.T) {
	e := newEnv(t, nil)
	done := make(chan answer)
	go func() { done <- e.send(req{key: "k", do: "block"}) }()
	<-e.app.entered
	a := e.send(req{key: "k"})
	want{status: 409, code: idempotency.CodeInProgress, header: map[string]string{"Retry-After": "1", "Idempotency-Retention": "86400"}}.check(t, "while running", a)
	// Another request under the same key is a mismatch even while the first runs.
	a = e.send(req{key: "k", body: "other"})
	want{status: 422, code: idempotency.CodeMismatch}.check(t, "other request while running", a)
	close(e.app.block)
	first := <-done
	want{status: 201}.check(t, "first", first)
	a = e.send(req{key: "k"})
	want{status: 201, replayed: true}.check(t, "after", a)
	if !bytes.Equal(a.body, first.body) {
		t.Fatalf("replay: got %q, want %q", a.body, first.body)
	}
}

func TestPanicBeforeAppliedReleases(t *testing.T) {
	e := newEnv(t, nil)
	if a := e.send(req{key: "k", do: "panic-before"}); a.err == nil {
		t.Fatalf("panicking handler: got %d, want a broken connection", a.status)
	}
	want{status: 201}.check(t, "retry", e.send(req{key: "k"}))
}

// TestUnknownOutcome: a handler that dies after Applied leaves an unknown
// outcome, listed for an operator, never run again; the operator's
// resolution is what retries then get.
func TestUnknownOutcome(t *testing.T) {
	for _, resolve := range []string{"complete", "release"} {
		t.Run(resolve, func(t *testing.T) {
			e := newEnv(t, nil)
			if a := e.send(req{key: "k", do: "panic-after"}); a.err == nil {
				t.Fatalf("panicking handler: got %d, want a broken connection", a.status)
			}
			want{status: 409, code: idempotency.CodeInProgress, header: map[string]string{"Retry-After": "1"}}.check(t, "within the lease", e.send(req{key: "k"}))
			e.clock.Advance(testLease)
			a := e.send(req{key: "k"})
			want{status: 409, code: idempotency.CodeOutcomeUnknown, header: map[string]string{"Retry-After": ""}}.check(t, "after the lease", a)
			if !errors.Is(e.app.err(), idempotency.ErrOutcomeUnknown) {
				t.Fatalf("Applied: got %v, want ErrOutcomeUnknown", e.app.err())
			}
			if got := e.app.effects.Load(); got != 1 {
				t.Fatalf("effects: got %d, want 1", got)
			}
			recs, err := e.ledger.Unknown(context.Background(), "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 || recs[0].Namespace != "idempotency-applied" || recs[0].RawKey != "5:alice:k" {
				t.Fatalf("unknown outcomes: got %+v, want the marker of 5:alice:k", recs)
			}
			switch resolve {
			case "complete":
				_, err = e.ledger.Complete(context.Background(), spent.Completion{Namespace: recs[0].Namespace, Hash: recs[0].Hash, Result: []byte(`{"resolved":"sent"}`), Force: true})
				if err != nil {
					t.Fatal(err)
				}
				a = e.send(req{key: "k"})
				want{status: 200, replayed: true, header: map[string]string{"Content-Type": "application/json"}}.check(t, "after resolution", a)
				if string(a.body) != `{"resolved":"sent"}` {
					t.Fatalf("after resolution: got %q", a.body)
				}
				a = e.send(req{key: "k"})
				want{status: 200, replayed: true}.check(t, "again", a)
				if got := e.app.effects.Load(); got != 1 {
					t.Fatalf("effects: got %d, want 1", got)
				}
			case "release":
				if err := e.ledger.Release(context.Background(), spent.Release{Namespace: recs[0].Namespace, Hash: recs[0].Hash, Force: true}); err != nil {
					t.Fatal(err)
				}
				want{status: 201}.check(t, "after release", e.send(req{key: "k"}))
				if got := e.app.effects.Load(); got != 2 {
					t.Fatalf("effects: got %d, want 2 (the operator said the first did not happen)", got)
				}
			}
		})
	}
}

func TestResponseTooLargeAfterAppliedHolds(t *testing.T) {
	e := newEnv(t, nil)
	want{status: 500, code: idempotency.CodeInternal}.check(t, "big", e.send(req{key: "k", do: "big"}))
	want{status: 409, code: idempotency.CodeInProgress}.check(t, "retry", e.send(req{key: "k"}))
	if got := e.app.effects.Load(); got != 1 {
		t.Fatalf("effects: got %d, want 1", got)
	}
}

// TestAnswerInMarkerOnly: the process stored the answer in the marker and
// not in the key's record; the next retry after the lease finds it through
// Applied and replays it.
func TestAnswerInMarkerOnly(t *testing.T) {
	e := newEnv(t, nil)
	completes := 0
	e.store.SetFaults(inmem.Faults{Before: func(op string) error {
		if op == "complete" {
			completes++
			if completes > 1 { // the marker's completion passes, the record's fails
				return errors.New("injected")
			}
		}
		return nil
	}})
	first := e.send(req{key: "k"})
	want{status: 201}.check(t, "first", first)
	e.store.SetFaults(inmem.Faults{})
	want{status: 409, code: idempotency.CodeInProgress}.check(t, "within the lease", e.send(req{key: "k"}))
	e.clock.Advance(testLease)
	a := e.send(req{key: "k"})
	want{status: 201, replayed: true}.check(t, "after the lease", a)
	if !bytes.Equal(a.body, first.body) {
		t.Fatalf("replay: got %q, want %q", a.body, first.body)
	}
	runs := e.app.runs.Load()
	a = e.send(req{key: "k"})
	want{status: 201, replayed: true}.check(t, "again", a)
	if e.app.runs.Load() != runs || e.app.effects.Load() != 1 {
		t.Fatalf("runs %d -> %d, effects %d: want the record to replay without the handler, one effect", runs, e.app.runs.Load(), e.app.effects.Load())
	}
}

// stallingStore is a store whose Complete, while stalled, hangs until its
// context ends, as a store on a stuck disk or behind a lost connection does.
type stallingStore struct {
	spent.Store
	stalled     atomic.Bool
	hadDeadline atomic.Bool
}

func (s *stallingStore) Complete(ctx context.Context, key spent.Hash, seq spent.Seq, result []byte, now time.Time) (spent.Record, error) {
	if s.stalled.Load() {
		_, ok := ctx.Deadline()
		s.hadDeadline.Store(ok)
		<-ctx.Done()
		return spent.Record{}, ctx.Err()
	}
	return s.Store.Complete(ctx, key, seq, result, now)
}

// TestStoreTimeout stalls the store while the middleware stores an answer:
// the request must end after StoreTimeout with 503 (fail closed, nothing
// sent), and the key stays held until its lease runs out, after which a
// retry runs the handler again.
func TestStoreTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	var st *stallingStore
	e := newEnvWrapped(t, func(o *idempotency.Options) { o.StoreTimeout = timeout }, func(s spent.Store) spent.Store {
		st = &stallingStore{Store: s}
		return st
	})
	st.stalled.Store(true)
	start := time.Now()
	a := e.send(req{key: "k", do: "noapply"})
	took := time.Since(start)
	want{status: 503, code: idempotency.CodeUnavailable, header: map[string]string{"Retry-After": "1"}}.check(t, "stalled store", a)
	if took < timeout {
		t.Fatalf("answered after %v: the store call was given up before StoreTimeout (%v)", took, timeout)
	}
	if !st.hadDeadline.Load() {
		t.Fatal("the store call had no deadline")
	}
	st.stalled.Store(false)
	want{status: 409, code: idempotency.CodeInProgress}.check(t, "retry within the lease", e.send(req{key: "k", do: "noapply"}))
	if runs := e.app.runs.Load(); runs != 1 {
		t.Fatalf("handler runs: got %d, want 1 while the key is held", runs)
	}
	e.clock.Advance(testLease)
	want{status: 200}.check(t, "retry after the lease", e.send(req{key: "k", do: "noapply"}))
	want{status: 200, replayed: true}.check(t, "then", e.send(req{key: "k", do: "noapply"}))
	if runs := e.app.runs.Load(); runs != 2 {
		t.Fatalf("handler runs: got %d, want 2", runs)
	}
}

func TestLedgerFailures(t *testing.T) {
	t.Run("ClaimFailsClosed", func(t *testing.T) {
		e := newEnv(t, nil)
		e.store.SetFaults(inmem.Faults{Before: func(string) error { return errors.New("disk on fire") }})
		want{status: 503, code: idempotency.CodeUnavailable, header: map[string]string{"Retry-After": "1"}}.check(t, "claim", e.send(req{key: "k"}))
		if e.app.runs.Load() != 0 {
			t.Fatal("the handler ran without a durable claim")
		}
	})
	t.Run("AppliedFailsClosed", func(t *testing.T) {
		e := newEnv(t, nil)
		claims, gets := 0, 0
		e.store.SetFaults(inmem.Faults{Before: func(op string) error {
			switch op {
			case "claim":
				if claims++; claims == 2 {
					return errors.New("injected")
				}
			case "get":
				if gets++; gets == 1 {
					return errors.New("injected") // the ledger cannot read it back either
				}
			}
			return nil
		}})
		want{status: 503, code: idempotency.CodeUnavailable}.check(t, "applied", e.send(req{key: "k"}))
		if e.app.effects.Load() != 0 {
			t.Fatal("the effect was made without a durable marker")
		}
		e.store.SetFaults(inmem.Faults{})
		want{status: 201}.check(t, "retry", e.send(req{key: "k"}))
	})
	t.Run("StoringAppliedAnswerFails", func(t *testing.T) {
		e := newEnv(t, nil)
		e.store.SetFaults(inmem.Faults{Before: func(op string) error {
			if op == "complete" {
				return errors.New("injected")
			}
			return nil
		}})
		want{status: 503, code: idempotency.CodeUnavailable}.check(t, "store", e.send(req{key: "k"}))
		e.store.SetFaults(inmem.Faults{})
		want{status: 409, code: idempotency.CodeInProgress}.check(t, "retry", e.send(req{key: "k"}))
		e.clock.Advance(testLease)
		want{status: 409, code: idempotency.CodeOutcomeUnknown}.check(t, "after the lease", e.send(req{key: "k"}))
		if e.app.effects.Load() != 1 {
			t.Fatalf("effects: got %d, want 1", e.app.effects.Load())
		}
	})
	t.Run("AmbiguousCompletionIsRetried", func(t *testing.T) {
		e := newEnv(t, nil)
		fails := 0
		e.store.SetFaults(inmem.Faults{After: func(op string) error {
			if op == "complete" && fails < 2 {
				fails++
				return errors.New("injected after the write")
			}
			return nil
		}})
		first := e.send(req{key: "k"})
		want{status: 201}.check(t, "first", first)
		a := e.send(req{key: "k"})
		want{status: 201, replayed: true}.check(t, "replay", a)
		if !bytes.Equal(a.body, first.body) {
			t.Fatalf("replay: got %q, want %q", a.body, first.body)
		}
	})
}

func TestOptionalKey(t *testing.T) {
	e := newEnv(t, func(o *idempotency.Options) { o.Optional = true })
	want{status: 201, header: map[string]string{"Idempotency-Retention": "86400"}}.check(t, "no key", e.send(req{}))
	want{status: 201}.check(t, "no key again", e.send(req{}))
	if e.app.effects.Load() != 2 {
		t.Fatalf("effects: got %d, want 2", e.app.effects.Load())
	}
	want{status: 201}.check(t, "key", e.send(req{key: "k"}))
	want{status: 201, replayed: true}.check(t, "key again", e.send(req{key: "k"}))
}

func TestAppliedOutsideMiddleware(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	if err := idempotency.Applied(r); !errors.Is(err, idempotency.ErrNotUnderMiddleware) {
		t.Fatalf("got %v, want ErrNotUnderMiddleware", err)
	}
	if _, ok := idempotency.KeyOf(r); ok {
		t.Fatal("KeyOf outside the middleware: got ok")
	}
}

func TestNewChecksNamespaces(t *testing.T) {
	o := testOptions()
	ctx := context.Background()
	open := func(ns map[string]spent.Policy) *spent.Ledger {
		cfg := ledgerConfig(o, testLease, time.Now)
		cfg.Namespaces = ns
		l, err := spent.NewLedger(ctx, inmem.New(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	good := idempotency.Policies(o, testLease)
	if _, err := idempotency.New(open(good), o); err != nil {
		t.Fatalf("policies from Policies: %v", err)
	}
	swapped := map[string]spent.Policy{o.Namespace: good[o.AppliedNamespace], o.AppliedNamespace: good[o.Namespace]}
	if _, err := idempotency.New(open(swapped), o); err == nil {
		t.Fatal("retake and hold swapped: got no error")
	}
	if _, err := idempotency.New(open(map[string]spent.Policy{"default": spent.DefaultPolicy()}), o); err == nil {
		t.Fatal("namespaces missing: got no error")
	}
	bad := o
	bad.Scope = nil
	if _, err := idempotency.New(open(good), bad); err == nil {
		t.Fatal("no scope: got no error")
	}
	bad = o
	bad.AppliedRetention = time.Hour
	if _, err := idempotency.New(open(good), bad); err == nil {
		t.Fatal("applied retention shorter than retention: got no error")
	}
}

func TestHeaderScope(t *testing.T) {
	s := idempotency.HeaderScope("authorization")
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	if _, err := s(r); !errors.Is(err, idempotency.ErrNoScope) {
		t.Fatalf("no header: got %v, want ErrNoScope", err)
	}
	r.Header.Set("Authorization", "Bearer secret-1")
	a, _ := s(r)
	r.Header.Set("Authorization", "Bearer secret-2")
	b, _ := s(r)
	if a == b || strings.Contains(a, "secret") || len(a) != 34 {
		t.Fatalf("scopes %q, %q: want two different hashes without the secret", a, b)
	}
}

// TestResultOverLedgerLimit: a ledger that refuses to store an answer (its
// MaxResult is smaller than the middleware's MaxResponse) gets a 500; before
// Applied the key is released, after it the outcome is held.
func TestResultOverLedgerLimit(t *testing.T) {
	c := newClock()
	o := testOptions()
	cfg := ledgerConfig(o, testLease, c.Now)
	cfg.MaxResult = 20
	l, err := spent.NewLedger(context.Background(), inmem.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idempotency.New(l, o)
	if err != nil {
		t.Fatal(err)
	}
	a := newApp()
	srv := httptest.NewServer(mw.Handler(a))
	defer srv.Close()
	want{status: 500, code: idempotency.CodeInternal}.check(t, "before Applied", send(t, srv.URL, req{key: "k", do: "noapply"}))
	want{status: 500, code: idempotency.CodeInternal}.check(t, "released: runs again", send(t, srv.URL, req{key: "k", do: "noapply"}))
	want{status: 500, code: idempotency.CodeInternal}.check(t, "after Applied", send(t, srv.URL, req{key: "j"}))
	want{status: 409, code: idempotency.CodeInProgress}.check(t, "held", send(t, srv.URL, req{key: "j"}))
	if a.runs.Load() != 3 || a.effects.Load() != 1 {
		t.Fatalf("runs %d, effects %d: want 3, 1", a.runs.Load(), a.effects.Load())
	}
}
