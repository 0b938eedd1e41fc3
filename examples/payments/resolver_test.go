package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/idempotency"
)

// waitFor polls cond every 10 ms until it holds, failing the test after
// 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// oneShot sends each request on a new connection: Go's transport resends a
// request with an Idempotency-Key whose reused connection broke, and these
// tests must see the break.
var oneShot = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// postRaw posts a payment and returns the status and body, or the
// transport error (an aborted request).
func postRaw(url, key, body string) (int, []byte, error) {
	r, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	r.Header.Set(idempotency.HeaderKey, key)
	r.Header.Set("Content-Type", "application/json")
	resp, err := oneShot.Do(r)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b json.RawMessage
	err = json.NewDecoder(resp.Body).Decode(&b)
	return resp.StatusCode, b, err
}

// TestResolverFencesALateAttempt: an attempt that outlives its lease (a slow
// bank) becomes an unknown outcome while it is still in flight. The resolver
// finds no transfer at the bank, which voids the attempt in the same step,
// and releases the marker; when the attempt reaches the bank it is refused,
// and the client's retry pays, once.
func TestResolverFencesALateAttempt(t *testing.T) {
	var calls atomic.Int64
	var m *Main
	m, _ = newServiceWith(t, func(mm *Main) {
		mm.beforeSend = func(transfer) error {
			if calls.Add(1) == 1 {
				// The first attempt is held until the resolver has
				// released its marker.
				deadline := time.Now().Add(30 * time.Second)
				for mm.runner.Stats().Released == 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
			}
			return nil
		}
	}, "--lease", "200ms", "--resolve-every", "20ms")
	url := "http://" + m.Addr() + "/payments"
	body := `{"amount":700,"destination":"late"}`

	st, b, err := postRaw(url, `"late"`, body)
	if err == nil {
		t.Fatalf("first attempt: got %d %s, want it aborted (the bank refused it)", st, b)
	}
	if s := m.runner.Stats(); s.Released != 1 || s.Completed != 0 {
		t.Fatalf("resolver: got %+v, want the first attempt released", s)
	}
	id := m.ledger.HashKey(nsApplied, "4:demo:late").String()
	if sent := m.bank.sent(); sent[id] != 0 {
		t.Fatalf("after the late attempt: sent %d times, want 0", sent[id])
	}
	// The retry (once the key's lease ran out) pays with a new attempt.
	for {
		st, b, err = postRaw(url, `"late"`, body)
		if err == nil && st != http.StatusConflict {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var a struct {
		PaymentID string `json:"payment_id"`
	}
	if err := json.Unmarshal(b, &a); err != nil || st != http.StatusCreated || a.PaymentID != id {
		t.Fatalf("retry: got %d %s %v, want 201 for %s", st, b, err, id)
	}
	if sent := m.bank.sent(); sent[id] != 1 {
		t.Fatalf("after the retry: sent %d times, want 1", sent[id])
	}
	// The first attempt stays voided: the bank refuses it whenever it comes.
	m.bank.mu.Lock()
	voided := len(m.bank.voided)
	m.bank.mu.Unlock()
	if voided != 1 || calls.Load() != 2 {
		t.Fatalf("bank: %d voided attempts, %d sends; want 1 and 2", voided, calls.Load())
	}
}

// TestResolverCannotTell: when the bank cannot answer (it failed while the
// money was leaving), the resolver leaves the unknown outcome, tries it
// again with backoff, and an operator finds it listed; retries get
// outcome_unknown meanwhile.
func TestResolverCannotTell(t *testing.T) {
	var m *Main
	m, _ = newServiceWith(t, func(mm *Main) {
		mm.beforeSend = func(transfer) error {
			mm.bank.mu.Lock()
			mm.bank.failed = errBankFailed
			mm.bank.mu.Unlock()
			return errBankFailed
		}
	}, "--lease", "200ms", "--resolve-every", "20ms")
	url := "http://" + m.Addr() + "/payments"
	body := `{"amount":300,"destination":"lost"}`
	if st, b, err := postRaw(url, `"lost"`, body); err == nil {
		t.Fatalf("payment: got %d %s, want it aborted (the bank failed)", st, b)
	}
	// Two attempts at least: the first, and one after its backoff (1 s).
	waitFor(t, "two look-ups", func() bool { return m.runner.Stats().Left >= 2 })
	if s := m.runner.Stats(); s.Completed != 0 || s.Released != 0 || s.Waiting != 1 {
		t.Fatalf("resolver: got %+v, want nothing settled, 1 waiting", s)
	}
	recs, err := m.ledger.Unknown(context.Background(), nsApplied, 0)
	if err != nil || len(recs) != 1 || recs[0].RawKey != "4:demo:lost" {
		t.Fatalf("unknown outcomes: got %+v %v, want the payment listed for an operator", recs, err)
	}
	st, b, err := postRaw(url, `"lost"`, body)
	if err != nil || st != http.StatusConflict || !strings.Contains(string(b), idempotency.CodeOutcomeUnknown) {
		t.Fatalf("retry: got %d %s %v, want 409 %s", st, b, err, idempotency.CodeOutcomeUnknown)
	}
}

// TestBankSettle: the bank's look-up finds a transfer of the attempt, or
// voids the attempt so that its send is refused, also after a restart;
// another attempt of the same payment may still send.
func TestBankSettle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bank.log")
	b, err := openBank(path)
	if err != nil {
		t.Fatal(err)
	}
	sent := transfer{ID: "p1", Seq: "1:1", Amount: 5, Destination: "d", At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := b.send(sent); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := b.settle("p1", "1:1"); err != nil || !ok || got != sent {
		t.Fatalf("settle of a sent attempt: got %+v %v %v, want the transfer", got, ok, err)
	}
	for range 2 { // idempotent
		if _, ok, err := b.settle("p2", "1:2"); err != nil || ok {
			t.Fatalf("settle of an unsent attempt: got %v %v, want not sent", ok, err)
		}
	}
	if err := b.send(transfer{ID: "p2", Seq: "1:2", Amount: 1}); !errors.Is(err, errVoided) {
		t.Fatalf("send of a voided attempt: got %v, want errVoided", err)
	}
	if err := b.send(transfer{ID: "p2", Seq: "1:3", Amount: 1}); err != nil {
		t.Fatalf("send of a later attempt: %v", err)
	}
	if _, _, err := b.settle("p2", "1:2"); err == nil {
		t.Fatal("settle of a voided attempt whose payment another attempt sent: got no error, want cannot tell")
	}
	b.close()

	b, err = openBank(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if err := b.send(transfer{ID: "p2", Seq: "1:2", Amount: 1}); !errors.Is(err, errVoided) {
		t.Fatalf("after a restart, send of a voided attempt: got %v, want errVoided", err)
	}
	if got := b.sent(); len(got) != 2 || got["p1"] != 1 || got["p2"] != 1 {
		t.Fatalf("sent after a restart: got %v, want p1 and p2 once (voids move no money)", got)
	}
	if got, ok, err := b.settle("p1", "1:1"); err != nil || !ok || got != sent {
		t.Fatalf("after a restart, settle of a sent attempt: got %+v %v %v", got, ok, err)
	}
}

// TestPaymentsWithResolverOn drives payments through the retrying client
// with the resolver on from the start, while failures and crashes are
// injected, leases are short (so that slow attempts outlive them while in
// flight) and the service is killed with SIGKILL along the way. Nobody
// resolves anything by hand: in the end no unknown outcome is left, so the
// resolver settled them all, and the bank's books show every payment sent
// exactly once.
func TestPaymentsWithResolverOn(t *testing.T) {
	n, kills, workers := 3000, 3, 32
	if testing.Short() {
		n, kills = 600, 1
	}
	dir := t.TempDir()
	addr, admin := freeAddr(t), freeAddr(t)
	srv := startChild(t, []string{"--listen", addr, "--data", dir, "--admin", admin, "--fail-rate", "0.1", "--crash-rate", "0.02",
		"--lease", "300ms", "--resolve-every", "50ms"})
	ctx := context.Background()
	client, err := newPayClient(nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	payments := make([]payment, n)
	keys := make([]string, n)
	answers := make([][]byte, n)
	for i := range payments {
		payments[i] = payment{Amount: int64(1 + i), Destination: "acct-r"}
		if keys[i], err = idempotency.NewKey(nil); err != nil {
			t.Fatal(err)
		}
	}
	var done, unknownSeen atomic.Int64
	items := make([]int, n)
	for i := range items {
		items[i] = i
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		parallel(workers, items, func(i int) {
			defer done.Add(1)
			deadline := time.Now().Add(2 * time.Minute)
			for {
				st, body, err := pay(ctx, client, srv.base, keys[i], payments[i])
				if err == nil && st == http.StatusCreated {
					answers[i] = body
					return
				}
				var e *idempotency.Error
				if errors.As(err, &e) && e.Code == idempotency.CodeOutcomeUnknown {
					unknownSeen.Add(1) // the resolver will settle it: ask again
				} else if err == nil {
					t.Errorf("payment %d: final answer %d %s", i, st, body)
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("payment %d: not paid after 2 minutes: %v", i, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}()
	for k := 1; k <= kills; k++ {
		for done.Load() < int64(k*n/(kills+1)) {
			time.Sleep(5 * time.Millisecond)
		}
		srv.kill(t)
		srv.start(t)
	}
	<-finished
	if t.Failed() {
		t.FailNow()
	}
	// Every payment has its 201, so its marker holds an answer; a marker
	// left by an aborted attempt whose key was then paid by another
	// attempt cannot exist (the release came first). Nothing may be left.
	ops := sphttp.NewClient("http://"+admin, sphttp.ClientConfig{})
	waitFor(t, "no unknown outcome left", func() bool {
		recs, err := ops.Unknown(ctx, nsApplied, 0)
		return err == nil && len(recs) == 0
	})
	sent := getSent(t, srv.base)
	if len(sent) != n {
		t.Fatalf("%d payments sent, want %d", len(sent), n)
	}
	for i, b := range answers {
		var a struct {
			PaymentID string `json:"payment_id"`
			Amount    int64  `json:"amount"`
		}
		if err := json.Unmarshal(b, &a); err != nil || sent[a.PaymentID] != 1 || a.Amount != payments[i].Amount {
			t.Fatalf("payment %d: answer %s, sent %d times; want once", i, b, sent[a.PaymentID])
		}
	}
	t.Logf("%d payments, %d kills, %d outcome_unknown answers seen by clients; last run's resolver: %+v",
		n, kills, unknownSeen.Load(), getResolver(t, srv.base))
}
