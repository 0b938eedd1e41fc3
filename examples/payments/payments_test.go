package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/idempotency"
)

// childArgsEnv, when set, makes the test binary run the service with these
// arguments (separated by \x1f) instead of the tests: the tests start it as
// a child process they can kill.
const childArgsEnv = "PAYMENTS_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgsEnv); args != "" {
		os.Exit(run(context.Background(), strings.Split(args, "\x1f"), io.Discard, os.Stderr))
	}
	os.Exit(m.Run())
}

// child is the service in a child process.
type child struct {
	args []string
	cmd  *exec.Cmd
	base string
}

func startChild(t *testing.T, args []string) *child {
	t.Helper()
	c := &child{args: args}
	for i := range args {
		if args[i] == "--listen" {
			c.base = "http://" + args[i+1]
		}
	}
	c.start(t)
	t.Cleanup(func() { c.kill(t) })
	return c
}

func (c *child) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join(c.args, "\x1f"))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.cmd = cmd
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(c.base + "/payments/sent")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the service did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill stops the child with SIGKILL: no shutdown, no flush.
func (c *child) kill(t *testing.T) {
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
	c.cmd = nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func getSent(t *testing.T, base string) map[string]int {
	t.Helper()
	resp, err := http.Get(base + "/payments/sent")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// outcome is what the client got for one payment.
type outcome struct {
	status int
	body   []byte
	err    error
}

func (o outcome) paymentID(t *testing.T) string {
	t.Helper()
	var a struct {
		PaymentID string `json:"payment_id"`
		State     string `json:"state"`
	}
	if err := json.Unmarshal(o.body, &a); err != nil || a.PaymentID == "" || a.State != "applied" {
		t.Fatalf("answer %d %q: want a payment id, state applied", o.status, o.body)
	}
	return a.PaymentID
}

// TestTenThousandPayments drives 10,000 payments (1,000 with -short) through
// the six-try client against the service with 10% injected failures at each
// of its three points, killing the service with SIGKILL five times along
// the way, and checks from the money ledger that no payment was sent twice
// and that every payment is sent, not sent and retryable, or listed as an
// unknown outcome. It then retries the retryable ones, restarts the service
// with the resolver on (and failure injection still on), waits until the
// resolver has settled every unknown outcome against the bank's books, none
// by hand, and checks that every payment ends sent once.
func TestTenThousandPayments(t *testing.T) {
	n, kills, workers := 10000, 5, 32
	if testing.Short() {
		n, kills = 1000, 2
	}
	const lease = time.Second
	dir := t.TempDir()
	addr, admin := freeAddr(t), freeAddr(t)
	// The resolver is off until the end, so that unknown outcomes stay for
	// the checks below.
	args := []string{"--listen", addr, "--data", dir, "--admin", admin, "--fail-rate", "0.1", "--crash-rate", "0.01", "--lease", lease.String(), "--resolve-every", "0"}
	srv := startChild(t, args)
	ctx := context.Background()
	start := time.Now()

	payments := make([]payment, n)
	keys := make([]string, n)
	for i := range payments {
		payments[i] = payment{Amount: int64(1 + i%1000), Destination: fmt.Sprintf("acct-%05d", i)}
		k, err := idempotency.NewKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	client, err := newPayClient(nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := make([]outcome, n)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				st, body, err := pay(ctx, client, srv.base, keys[i], payments[i])
				outcomes[i] = outcome{st, body, err}
				done.Add(1)
			}
		})
	}
	// Kill the service at evenly spaced points of the run and restart it.
	killed := 0
	for k := 1; k <= kills; k++ {
		for done.Load() < int64(k*n/(kills+1)) {
			time.Sleep(5 * time.Millisecond)
		}
		srv.kill(t)
		srv.start(t)
		killed++
	}
	wg.Wait()
	runTime := time.Since(start)

	// A quiet service for the checks: no injected failures, and every lease
	// left by the kills run out.
	srv.kill(t)
	srv.args = []string{"--listen", addr, "--data", dir, "--admin", admin, "--lease", lease.String(), "--resolve-every", "0"}
	srv.start(t)
	time.Sleep(lease + lease/2)

	sent := getSent(t, srv.base)
	for id, c := range sent {
		if c != 1 {
			t.Fatalf("payment %s: money sent %d times", id, c)
		}
	}
	ops := sphttp.NewClient("http://"+admin, sphttp.ClientConfig{})
	recs, err := ops.Unknown(ctx, nsApplied, 0)
	if err != nil {
		t.Fatal(err)
	}
	unknown := make(map[string]spent.Record, len(recs))
	for _, r := range recs {
		unknown[strings.TrimPrefix(r.RawKey, "4:demo:")] = r
	}
	var okCount, unknownCount, retryable []int
	neverSent := 0
	for i, o := range outcomes {
		switch {
		case o.err == nil && o.status == http.StatusCreated:
			if id := o.paymentID(t); sent[id] != 1 {
				t.Fatalf("payment %d answered 201 (%s) but sent %d times", i, id, sent[id])
			}
			okCount = append(okCount, i)
		case o.err == nil:
			t.Fatalf("payment %d: final answer %d %s", i, o.status, o.body)
		default:
			var e *idempotency.Error
			if !errors.As(o.err, &e) {
				t.Fatalf("payment %d: %v", i, o.err)
			}
			if e.Known {
				neverSent++
			}
			if _, ok := unknown[keys[i]]; ok {
				unknownCount = append(unknownCount, i)
			} else {
				retryable = append(retryable, i)
			}
		}
	}
	if len(unknown) != len(unknownCount) {
		t.Fatalf("%d unknown outcomes listed, %d of them for payments whose client gave up", len(unknown), len(unknownCount))
	}
	t.Logf("%d payments in %v with %d kills: %d answered, %d retryable (%d never reached the service), %d unknown outcomes, %d sent so far",
		n, runTime.Round(time.Millisecond), killed, len(okCount), len(retryable), neverSent, len(unknownCount), len(sent))

	// Retryable: a retry with the same key pays (or replays the payment
	// made), once. Unknown: a retry changes nothing until an operator
	// resolves it.
	parallel(workers, retryable, func(i int) {
		st, body, err := pay(ctx, client, srv.base, keys[i], payments[i])
		if err != nil || st != http.StatusCreated {
			t.Errorf("retry of retryable payment %d: %d %s %v", i, st, body, err)
		}
		outcomes[i] = outcome{st, body, nil}
	})
	parallel(workers, unknownCount, func(i int) {
		_, _, err := pay(ctx, client, srv.base, keys[i], payments[i])
		var e *idempotency.Error
		if !errors.As(err, &e) || e.Code != idempotency.CodeOutcomeUnknown {
			t.Errorf("retry of unknown payment %d: got %v, want outcome_unknown", i, err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	// The resolver settles every unknown outcome against the bank's books,
	// with failure injection on (its look-ups at the bank fail 10% of the
	// time too, and are tried again with backoff). Nobody resolves anything
	// by hand: this test makes no Complete or Release.
	srv.kill(t)
	srv.args = []string{"--listen", addr, "--data", dir, "--admin", admin, "--fail-rate", "0.1", "--lease", lease.String(), "--resolve-every", "100ms"}
	srv.start(t)
	resolveStart := time.Now()
	for {
		recs, err := ops.Unknown(ctx, nsApplied, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		if time.Since(resolveStart) > 2*time.Minute {
			t.Fatalf("%d unknown outcomes left after 2 minutes: %+v", len(recs), getResolver(t, srv.base))
		}
		time.Sleep(20 * time.Millisecond)
	}
	stats := getResolver(t, srv.base)
	sentBefore := getSent(t, srv.base)
	var wantCompleted, wantReleased uint64
	for _, r := range unknown {
		switch sentBefore[r.Hash.String()] {
		case 1:
			wantCompleted++
		case 0:
			wantReleased++
		default:
			t.Fatalf("unknown payment %s sent %d times", r.Hash, sentBefore[r.Hash.String()])
		}
	}
	if wantCompleted == 0 || wantReleased == 0 {
		t.Fatalf("%d unknown outcomes sent and %d not: want some of each (--crash-rate)", wantCompleted, wantReleased)
	}
	if !stats.On || stats.Completed != wantCompleted || stats.Released != wantReleased || stats.Elsewhere != 0 || stats.Waiting != 0 {
		t.Fatalf("resolver: got %+v, want %d completed (sent) and %d released (not sent), none elsewhere or waiting",
			stats, wantCompleted, wantReleased)
	}
	t.Logf("resolver settled %d unknown outcomes in %v: %d completed, %d released; %d look-ups left for later (failure 4)",
		len(unknown), time.Since(resolveStart).Round(time.Millisecond), stats.Completed, stats.Released, stats.Left)

	// Their retries: a completed one replays the resolver's answer, the
	// handler's 201 for the marker's attempt; a released one pays now, with
	// a new attempt. Failures are still injected, so the client may give up
	// and is run again.
	parallel(workers, unknownCount, func(i int) {
		r := unknown[keys[i]]
		var st int
		var body []byte
		var err error
		for range 5 {
			if st, body, err = pay(ctx, client, srv.base, keys[i], payments[i]); err == nil {
				break
			}
		}
		var a struct {
			PaymentID   string `json:"payment_id"`
			Seq         string `json:"seq"`
			Amount      int64  `json:"amount"`
			Destination string `json:"destination"`
		}
		if err != nil || st != http.StatusCreated || json.Unmarshal(body, &a) != nil {
			t.Errorf("retry of resolved payment %d: %d %s %v, want 201", i, st, body, err)
			return
		}
		completed := sentBefore[r.Hash.String()] == 1
		if a.PaymentID != r.Hash.String() || a.Amount != payments[i].Amount || a.Destination != payments[i].Destination ||
			(a.Seq == r.Seq.String()) != completed {
			t.Errorf("retry of resolved payment %d (completed %v, marker %s): got %s", i, completed, r.Seq, body)
		}
		outcomes[i] = outcome{st, body, nil}
	})
	if t.Failed() {
		t.FailNow()
	}

	// In the end every payment is sent exactly once.
	sent = getSent(t, srv.base)
	if len(sent) != n {
		t.Fatalf("%d payments sent, want %d", len(sent), n)
	}
	seen := map[string]bool{}
	for i, o := range outcomes {
		id := o.paymentID(t)
		if sent[id] != 1 || seen[id] {
			t.Fatalf("payment %d (%s): sent %d times, seen before %v", i, id, sent[id], seen[id])
		}
		seen[id] = true
	}
}

// getResolver reads the resolver's counters from GET /payments/resolver.
func getResolver(t *testing.T, base string) resolverStats {
	t.Helper()
	resp, err := http.Get(base + "/payments/resolver")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s resolverStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// parallel calls f for each of items from workers goroutines.
func parallel(workers int, items []int, f func(int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				j := int(next.Add(1) - 1)
				if j >= len(items) {
					return
				}
				f(items[j])
			}
		})
	}
	wg.Wait()
}

// newService runs the service in this process on a temporary directory.
func newService(t *testing.T, args ...string) (*Main, context.CancelFunc) {
	t.Helper()
	return newServiceWith(t, nil, args...)
}

// newServiceWith is newService with setup called on the Main before it
// opens, when not nil.
func newServiceWith(t *testing.T, setup func(*Main), args ...string) (*Main, context.CancelFunc) {
	t.Helper()
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags(append([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir()}, args...)); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(m)
	}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stop := func() {
		cancel()
		<-done
		m.Close()
	}
	t.Cleanup(stop)
	return m, cancel
}

func post(t *testing.T, url, key, body string) (int, http.Header, []byte) {
	t.Helper()
	r, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if key != "" {
		r.Header.Set(idempotency.HeaderKey, key)
	}
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func TestPaymentService(t *testing.T) {
	m, _ := newService(t, "--delay", "300ms")
	url := "http://" + m.Addr() + "/payments"
	body := `{"amount":1000000,"destination":"00000000"}`

	if st, _, b := post(t, url, "", body); st != 400 || !bytes.Contains(b, []byte(idempotency.CodeKeyMissing)) {
		t.Fatalf("no key: got %d %s, want 400 %s", st, b, idempotency.CodeKeyMissing)
	}
	if st, _, _ := post(t, url, `"bad-body"`, `{"amount":-1}`); st != 400 {
		t.Fatalf("bad body: got %d, want 400", st)
	}
	// While the first execution is held by --delay, a retry is in progress.
	var wg sync.WaitGroup
	var st1 int
	var b1 []byte
	wg.Go(func() { st1, _, b1 = post(t, url, `"p-1"`, body) })
	time.Sleep(100 * time.Millisecond)
	st, h, b := post(t, url, `"p-1"`, body)
	if st != 409 || h.Get("Retry-After") == "" {
		t.Fatalf("during the delay: got %d %s, want 409 with Retry-After", st, b)
	}
	wg.Wait()
	if st1 != 201 {
		t.Fatalf("first: got %d %s", st1, b1)
	}
	st, h, b = post(t, url, `"p-1"`, body)
	if st != 201 || h.Get(idempotency.HeaderReplayed) != "true" || !bytes.Equal(b, b1) {
		t.Fatalf("retry: got %d %s (replayed %q), want the first answer %s replayed", st, b, h.Get(idempotency.HeaderReplayed), b1)
	}
	if st, _, _ := post(t, url, `"p-1"`, `{"amount":2,"destination":"00000000"}`); st != 422 {
		t.Fatalf("same key, other payment: got %d, want 422", st)
	}
	var a struct {
		PaymentID string `json:"payment_id"`
	}
	json.Unmarshal(b1, &a)
	if sent := getSent(t, "http://"+m.Addr()); len(sent) != 1 || sent[a.PaymentID] != 1 {
		t.Fatalf("sent: got %v, want %s once", sent, a.PaymentID)
	}

	// The six-try client, journaled.
	var out, errw bytes.Buffer
	jdir := filepath.Join(t.TempDir(), "journal")
	code := run(context.Background(), []string{"pay", "--server", "http://" + m.Addr(), "--amount", "5", "--destination", "acct-9", "--journal", jdir}, &out, &errw)
	if code != 0 || !strings.HasPrefix(out.String(), "201 ") {
		t.Fatalf("pay: exit %d, out %q, err %q", code, out.String(), errw.String())
	}
	if ents, _ := os.ReadDir(jdir); len(ents) != 0 {
		t.Fatalf("journal after a paid payment: %d entries, want 0", len(ents))
	}
}

// TestFailureInjection checks the three failure points one request at a
// time, without the client's retries: failures 1 and 2 leave the payment to
// be made by the retry, failure 3 happens after it was made and stored, so
// the retry replays it.
func TestFailureInjection(t *testing.T) {
	const n = 100
	m, _ := newService(t, "--fail-rate", "0.3")
	base := "http://" + m.Addr()
	seen := map[string]int{}
	for i := range n {
		key := fmt.Sprintf(`"inject-%d"`, i)
		body := fmt.Sprintf(`{"amount":%d,"destination":"d"}`, i+1)
		made := false // a failure 3 was seen: the payment was made
		for {
			st, h, b := post(t, base+"/payments", key, body)
			if st == 500 {
				var e struct{ Error string }
				json.Unmarshal(b, &e)
				seen[e.Error]++
				made = made || e.Error == "simulated failure 3"
				continue
			}
			if st != 201 {
				t.Fatalf("payment %d: %d %s", i, st, b)
			}
			if replayed := h.Get(idempotency.HeaderReplayed) == "true"; replayed != made {
				t.Fatalf("payment %d: replayed %v after failure 3 seen %v", i, replayed, made)
			}
			break
		}
	}
	for _, f := range []string{"simulated failure 1", "simulated failure 2", "simulated failure 3"} {
		if seen[f] == 0 {
			t.Fatalf("failures seen: %v; want each of the three points", seen)
		}
	}
	sent := getSent(t, base)
	if len(sent) != n {
		t.Fatalf("%d payments sent, want %d", len(sent), n)
	}
	for id, c := range sent {
		if c != 1 {
			t.Fatalf("payment %s sent %d times", id, c)
		}
	}
	t.Logf("failures: %v", seen)
}
