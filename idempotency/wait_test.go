package idempotency_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/idempotency"
	"github.com/spentledger/spent/inmem"
)

// untilWaiting waits until n claims wait on l.
func untilWaiting(t *testing.T, l *spent.Ledger, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); l.Waiting() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d claims waiting, want %d", l.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWaitForFirst: with Options.Wait, a second request under the key of
// one in progress waits and gets the first's response, replayed (not 409),
// and the handler runs once.
func TestWaitForFirst(t *testing.T) {
	e := newEnv(t, func(o *idempotency.Options) { o.Wait = 20 * time.Second })
	first := make(chan answer)
	go func() { first <- e.send(req{key: "k", do: "block"}) }()
	<-e.app.entered
	second := make(chan answer)
	go func() { second <- e.send(req{key: "k"}) }()
	untilWaiting(t, e.ledger, 1)
	close(e.app.block)
	a := <-first
	want{status: 201}.check(t, "first", a)
	var b answer
	select {
	case b = <-second:
	case <-time.After(15 * time.Second):
		t.Fatal("second request not answered after the first")
	}
	want{status: 201, replayed: true}.check(t, "second, waited", b)
	if !bytes.Equal(a.body, b.body) {
		t.Fatalf("second: got %q, want the first's %q", b.body, a.body)
	}
	if n := e.app.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want once", n)
	}
}

// TestWaitFirstReleased: the first request fails before Applied (500), so
// the key is released; the waiting second request then runs the handler
// itself and gets its own answer.
func TestWaitFirstReleased(t *testing.T) {
	o := testOptions()
	o.Wait = 20 * time.Second
	l, err := spent.NewLedger(context.Background(), inmem.New(), ledgerConfig(o, testLease, time.Now))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idempotency.New(l, o)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	entered, unblock := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(entered)
			<-unblock
			http.Error(w, "failed before any effect", http.StatusInternalServerError)
			return
		}
		if err := idempotency.Applied(r); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte("second run"))
	})
	srv := httptest.NewServer(mw.Handler(h))
	defer srv.Close()
	first := make(chan answer)
	go func() { first <- send(t, srv.URL, req{key: "k"}) }()
	<-entered
	second := make(chan answer)
	go func() { second <- send(t, srv.URL, req{key: "k"}) }()
	untilWaiting(t, l, 1)
	close(unblock)
	want{status: 500}.check(t, "first", <-first)
	var b answer
	select {
	case b = <-second:
	case <-time.After(15 * time.Second):
		t.Fatal("second request not answered after the first was released")
	}
	want{status: 201}.check(t, "second, after the release", b)
	if string(b.body) != "second run" || b.replayed() {
		t.Fatalf("second: got %q (replayed %v), want its own run's answer", b.body, b.replayed())
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want twice", n)
	}
}

// TestWaitRunsOut409: a wait that runs out is answered 409 as without it.
func TestWaitRunsOut409(t *testing.T) {
	e := newEnv(t, func(o *idempotency.Options) { o.Wait = 300 * time.Millisecond })
	first := make(chan answer)
	go func() { first <- e.send(req{key: "k", do: "block"}) }()
	<-e.app.entered
	start := time.Now()
	a := e.send(req{key: "k"})
	el := time.Since(start)
	close(e.app.block)
	want{status: 201}.check(t, "first", <-first)
	want{status: 409, code: idempotency.CodeInProgress}.check(t, "second", a)
	if el < 300*time.Millisecond {
		t.Fatalf("409 after %v: want it after the wait of 300ms", el)
	}
}

func TestWaitOptionChecked(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, spent.MaxWait + 1} {
		o := testOptions()
		o.Wait = d
		if err := o.Validate(); err == nil {
			t.Errorf("Validate accepted Wait %v", d)
		}
	}
}
