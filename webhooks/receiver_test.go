package webhooks_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
	spenthttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/pebble"
	"github.com/spentledger/spent/webhooks"
)

// TestDeliveredTwiceHandledOnce: a message delivered twice within the
// tolerance reaches the handler once; the second delivery, and a retry the
// sender re-signed with a later timestamp, are answered 200 with
// Spent-Duplicate.
func TestDeliveredTwiceHandledOnce(t *testing.T) {
	e := newEnv(t, testOptions())
	m := e.newMsg("msg_1", `{"type":"invoice.paid"}`)
	w := e.deliver(m.request())
	if w.Code != 200 || w.Body.String() != "handled msg_1 (23 bytes)" || w.Header().Get(webhooks.HeaderDuplicate) != "" {
		t.Fatalf("first delivery: got %d %q dup=%q, want the handler's 200", w.Code, w.Body.String(), w.Header().Get(webhooks.HeaderDuplicate))
	}
	e.clock.Advance(4 * time.Minute)
	w = e.deliver(m.request())
	if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get(webhooks.HeaderDuplicate) != "true" {
		t.Fatalf("second delivery: got %d %q dup=%q, want 200, empty, Spent-Duplicate: true", w.Code, w.Body.String(), w.Header().Get(webhooks.HeaderDuplicate))
	}
	retry := e.newMsg("msg_1", `{"type":"invoice.paid"}`) // re-signed now
	if w = e.deliver(retry.request()); w.Code != 200 || w.Header().Get(webhooks.HeaderDuplicate) != "true" {
		t.Fatalf("re-signed retry: got %d dup=%q, want a duplicate", w.Code, w.Header().Get(webhooks.HeaderDuplicate))
	}
	if got := e.calls.Load(); got != 1 {
		t.Fatalf("handler calls: got %d, want 1", got)
	}
}

// TestClaimExpiresWithTheWindow: the id's record expires at the message's
// timestamp + tolerance + skew, and is under the source's scope.
func TestClaimExpiresWithTheWindow(t *testing.T) {
	o := testOptions()
	e := newEnv(t, o)
	e.clock.Advance(500 * time.Millisecond)
	m := e.newMsg("msg_exp", `{}`)
	if w := e.deliver(m.request()); w.Code != 200 {
		t.Fatalf("got %d", w.Code)
	}
	rec, err := e.ledger.Get(context.Background(), o.Namespace, webhooks.LedgerKey(o.Source, "msg_exp"))
	if err != nil {
		t.Fatal(err)
	}
	if want := m.ts.Add(o.Tolerance + o.Skew); !rec.ExpiresAt.Equal(want) {
		t.Errorf("expires_at: got %v, want %v", rec.ExpiresAt, want)
	}
	if rec.State != spent.StateComplete {
		t.Errorf("state: got %v, want complete", rec.State)
	}
}

// TestStaleMessageNoLedgerWrite: the same message after the tolerance, and
// messages stamped too far in the past or the future, are refused by the
// timestamp check without consulting the ledger.
func TestStaleMessageNoLedgerWrite(t *testing.T) {
	o := testOptions()
	e := newEnv(t, o)
	m := e.newMsg("msg_stale", `{"n":1}`)
	if w := e.deliver(m.request()); w.Code != 200 {
		t.Fatalf("first delivery: got %d", w.Code)
	}
	claims, completes, records := e.store.count("claim"), e.store.count("complete"), e.store.Len()

	e.clock.Advance(o.Tolerance + time.Second)
	w := e.deliver(m.request())
	wantProblem(t, w, http.StatusUnauthorized, webhooks.CodeTimestamp)

	// Never seen before, 10 minutes old; and 6 minutes ahead.
	old := msg{id: "msg_old", ts: e.clock.Now().Add(-10 * time.Minute).Truncate(time.Second), body: []byte(`{}`)}
	old.sig = signV1(t, testSecret, old.id, old.ts, old.body)
	wantProblem(t, e.deliver(old.request()), http.StatusUnauthorized, webhooks.CodeTimestamp)
	future := msg{id: "msg_future", ts: e.clock.Now().Add(6 * time.Minute).Truncate(time.Second), body: []byte(`{}`)}
	future.sig = signV1(t, testSecret, future.id, future.ts, future.body)
	wantProblem(t, e.deliver(future.request()), http.StatusUnauthorized, webhooks.CodeTimestamp)

	if got := e.store.count("claim"); got != claims {
		t.Errorf("store claims: got %d, want %d (no ledger write for stale messages)", got, claims)
	}
	if got := e.store.count("complete") + e.store.count("release"); got != completes {
		t.Errorf("store completes and releases: got %d, want %d", got, completes)
	}
	if got := e.store.Len(); got != records {
		t.Errorf("records: got %d, want %d", got, records)
	}
	if got := e.calls.Load(); got != 1 {
		t.Errorf("handler calls: got %d, want 1", got)
	}
}

// TestToleranceBoundary: a message exactly Tolerance old or ahead is
// accepted, and its id is still remembered at that instant.
func TestToleranceBoundary(t *testing.T) {
	o := testOptions()
	e := newEnv(t, o)
	m := e.newMsg("msg_edge", `{}`)
	if w := e.deliver(m.request()); w.Code != 200 || e.calls.Load() != 1 {
		t.Fatalf("first delivery: got %d", w.Code)
	}
	e.clock.Advance(o.Tolerance) // now = ts + tolerance exactly
	if w := e.deliver(m.request()); w.Code != 200 || w.Header().Get(webhooks.HeaderDuplicate) != "true" {
		t.Fatalf("at ts+tolerance: got %d dup=%q, want a duplicate", w.Code, w.Header().Get(webhooks.HeaderDuplicate))
	}
	ahead := msg{id: "msg_ahead", ts: e.clock.Now().Add(o.Tolerance), body: []byte(`{}`)}
	ahead.sig = signV1(t, testSecret, ahead.id, ahead.ts, ahead.body)
	if w := e.deliver(ahead.request()); w.Code != 200 {
		t.Fatalf("tolerance ahead: got %d %s", w.Code, w.Body.String())
	}
	if got := e.calls.Load(); got != 2 {
		t.Errorf("handler calls: got %d, want 2", got)
	}
}

// TestNewRefusesShortRetention: New refuses a namespace that keeps records
// for less than 2 × (tolerance + skew), naming both figures, and one of the
// wrong mode or lease policy.
func TestNewRefusesShortRetention(t *testing.T) {
	o := testOptions() // 5 min tolerance, 1 min skew: 12 min
	if got := o.MinRetention(); got != 12*time.Minute {
		t.Fatalf("MinRetention: got %v, want 12m0s", got)
	}
	cases := []struct {
		name   string
		policy spent.Policy
		want   []string
	}{
		{"ShortRetention", spent.Policy{Mode: spent.ModeRefuse, Retention: 11 * time.Minute, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryRetake},
			[]string{"11m0s", "12m0s", "retention"}},
		{"TwiceToleranceOnly", spent.Policy{Mode: spent.ModeRefuse, Retention: 10 * time.Minute, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryRetake},
			[]string{"10m0s", "12m0s"}},
		{"EchoMode", spent.Policy{Mode: spent.ModeEcho, Retention: time.Hour, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryRetake},
			[]string{"has mode echo: want refuse"}},
		{"Hold", spent.Policy{Mode: spent.ModeRefuse, Retention: time.Hour, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold},
			[]string{"has on_lease_expiry hold: want retake"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLedger(t, inmem.New(), map[string]spent.Policy{o.Namespace: c.policy}, time.Now)
			_, err := webhooks.New(l, o)
			if err == nil {
				t.Fatal("New: got nil error, want a refusal")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q: want it to contain %q", err, w)
				}
			}
		})
	}
	t.Run("NotConfigured", func(t *testing.T) {
		l := newLedger(t, inmem.New(), map[string]spent.Policy{"other": spent.DefaultPolicy()}, time.Now)
		if _, err := webhooks.New(l, o); err == nil || !strings.Contains(err.Error(), "not configured") {
			t.Fatalf("New: got %v, want not configured", err)
		}
	})
	t.Run("ExactMinimum", func(t *testing.T) {
		l := newLedger(t, inmem.New(), map[string]spent.Policy{o.Namespace: o.Policy(time.Minute)}, time.Now)
		if _, err := webhooks.New(l, o); err != nil {
			t.Fatalf("New: %v", err)
		}
	})
}

func newLedger(t testing.TB, store spent.Store, ns map[string]spent.Policy, now func() time.Time) *spent.Ledger {
	t.Helper()
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("a test secret of at least thirty-two bytes")
	cfg.Namespaces = ns
	cfg.Now = now
	l, err := spent.NewLedger(context.Background(), store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestNewRefusesBadOptions: options and keys New cannot use.
func TestNewRefusesBadOptions(t *testing.T) {
	pub := testPublicKey()
	seedKey := "whsk_" + base64.StdEncoding.EncodeToString(testSeed)
	short := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 16))
	cases := []struct {
		name string
		edit func(*webhooks.Options)
		want string
	}{
		{"NoSource", func(o *webhooks.Options) { o.Source = "" }, "no Source"},
		{"SourceWithSpace", func(o *webhooks.Options) { o.Source = "a b" }, "visible ASCII"},
		{"NoKeys", func(o *webhooks.Options) { o.Secrets, o.PublicKeys = nil, nil }, "no Secrets"},
		{"ShortSecret", func(o *webhooks.Options) { o.Secrets = []string{short} }, "16 bytes"},
		{"SecretNotBase64", func(o *webhooks.Options) { o.Secrets = []string{"whsec_!!!"} }, "base64"},
		{"PublicKeyAsSecret", func(o *webhooks.Options) { o.Secrets = []string{pub} }, "PublicKeys"},
		{"SigningKeyAsPublicKey", func(o *webhooks.Options) { o.PublicKeys = []string{seedKey} }, "never its private key"},
		{"SecretAsPublicKey", func(o *webhooks.Options) { o.PublicKeys = []string{testSecret} }, "in Secrets"},
		{"ShortPublicKey", func(o *webhooks.Options) { o.PublicKeys = []string{"whpk_AAAA"} }, "want 32"},
		{"NoSkew", func(o *webhooks.Options) { o.Skew = 0 }, "Skew"},
		{"NoTolerance", func(o *webhooks.Options) { o.Tolerance = 0 }, "Tolerance"},
	}
	l := newLedger(t, inmem.New(), map[string]spent.Policy{"webhooks": {Mode: spent.ModeRefuse, Retention: time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryRetake}}, time.Now)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions()
			c.edit(&o)
			_, err := webhooks.New(l, o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestBothSignatureForms: v1 (signed by the reference library) and v1a
// (signed with crypto/ed25519) are each accepted, alone or together, and
// rotation accepts an old and a new secret at once.
func TestBothSignatureForms(t *testing.T) {
	newSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a second secret, 32 bytes long!!"))
	o := testOptions()
	o.Secrets = append(o.Secrets, newSecret)
	e := newEnv(t, o)
	ts := e.clock.Now().Truncate(time.Second)
	body := []byte(`{"type":"user.created"}`)
	otherSeed := make([]byte, ed25519.SeedSize)
	cases := []struct {
		name string
		sig  func(id string) string
	}{
		{"V1", func(id string) string { return signV1(t, testSecret, id, ts, body) }},
		{"V1RotatedSecret", func(id string) string { return signV1(t, newSecret, id, ts, body) }},
		{"V1a", func(id string) string { return signV1a(testSeed, id, ts, body) }},
		{"Both", func(id string) string {
			return signV1(t, testSecret, id, ts, body) + " " + signV1a(testSeed, id, ts, body)
		}},
		{"V1aAfterUnknownKey", func(id string) string {
			return signV1a(otherSeed, id, ts, body) + " " + signV1a(testSeed, id, ts, body)
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "msg_form_" + strconv.Itoa(i)
			m := msg{id: id, ts: ts, body: body, sig: c.sig(id)}
			if w := e.deliver(m.request()); w.Code != 200 || w.Header().Get(webhooks.HeaderDuplicate) != "" {
				t.Fatalf("got %d %s", w.Code, w.Body.String())
			}
		})
	}
	if got := e.calls.Load(); got != int64(len(cases)) {
		t.Errorf("handler calls: got %d, want %d", got, len(cases))
	}
}

// TestRefusals: messages that fail a check get their code, never reach the
// handler, and never reach the ledger.
func TestRefusals(t *testing.T) {
	e := newEnv(t, testOptions())
	ts := e.clock.Now().Truncate(time.Second)
	good := func() msg {
		body := []byte(`{"type":"invoice.paid"}`)
		return msg{id: "msg_r", ts: ts, body: body, sig: signV1(t, testSecret, "msg_r", ts, body)}
	}
	wrongSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("not the sender's secret, 32 b..."))
	otherSeed := make([]byte, ed25519.SeedSize)
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		code   string
	}{
		{"TamperedBody", func() *http.Request {
			m := good()
			m.body = []byte(`{"type":"invoice.PAID"}`)
			return m.request()
		}, 401, webhooks.CodeSignature},
		{"WrongSecret", func() *http.Request {
			m := good()
			m.sig = signV1(t, wrongSecret, m.id, m.ts, m.body)
			return m.request()
		}, 401, webhooks.CodeSignature},
		{"UnknownEd25519Key", func() *http.Request {
			m := good()
			m.sig = signV1a(otherSeed, m.id, m.ts, m.body)
			return m.request()
		}, 401, webhooks.CodeSignature},
		{"OtherID", func() *http.Request {
			m := good()
			r := m.request()
			r.Header.Set(webhooks.HeaderID, "msg_other")
			return r
		}, 401, webhooks.CodeSignature},
		{"OtherTimestamp", func() *http.Request {
			r := good().request()
			r.Header.Set(webhooks.HeaderTimestamp, strconv.FormatInt(ts.Unix()-1, 10))
			return r
		}, 401, webhooks.CodeSignature},
		{"UnknownVersionOnly", func() *http.Request {
			m := good()
			m.sig = "v2" + strings.TrimPrefix(m.sig, "v1")
			return m.request()
		}, 401, webhooks.CodeSignature},
		{"MissingID", func() *http.Request {
			r := good().request()
			r.Header.Del(webhooks.HeaderID)
			return r
		}, 401, webhooks.CodeHeadersMissing},
		{"MissingTimestamp", func() *http.Request {
			r := good().request()
			r.Header.Del(webhooks.HeaderTimestamp)
			return r
		}, 401, webhooks.CodeHeadersMissing},
		{"MissingSignature", func() *http.Request {
			r := good().request()
			r.Header.Del(webhooks.HeaderSignature)
			return r
		}, 401, webhooks.CodeHeadersMissing},
		{"RepeatedSignature", func() *http.Request {
			m := good()
			r := m.request()
			r.Header.Add(webhooks.HeaderSignature, m.sig)
			return r
		}, 400, webhooks.CodeHeadersInvalid},
		{"IDWithFullStop", func() *http.Request {
			m := good()
			m.id = "msg.1"
			m.sig = signV1(t, testSecret, m.id, m.ts, m.body)
			return m.request()
		}, 400, webhooks.CodeHeadersInvalid},
		{"IDTooLong", func() *http.Request {
			m := good()
			m.id = strings.Repeat("a", webhooks.MaxIDLen+1)
			m.sig = signV1(t, testSecret, m.id, m.ts, m.body)
			return m.request()
		}, 400, webhooks.CodeHeadersInvalid},
		{"TimestampLeadingZero", func() *http.Request {
			r := good().request()
			r.Header.Set(webhooks.HeaderTimestamp, "0"+strconv.FormatInt(ts.Unix(), 10))
			return r
		}, 400, webhooks.CodeHeadersInvalid},
		{"TimestampNegative", func() *http.Request {
			r := good().request()
			r.Header.Set(webhooks.HeaderTimestamp, "-1")
			return r
		}, 400, webhooks.CodeHeadersInvalid},
		{"TooManySignatures", func() *http.Request {
			m := good()
			m.sig = strings.Repeat("v2,AAAA ", webhooks.MaxSignatures) + m.sig
			return m.request()
		}, 400, webhooks.CodeHeadersInvalid},
		{"SignatureHeaderTooLong", func() *http.Request {
			m := good()
			m.sig = strings.Repeat("x", webhooks.MaxSignatureHeaderLen) + " " + m.sig
			return m.request()
		}, 400, webhooks.CodeHeadersInvalid},
		{"BodyTooLarge", func() *http.Request {
			m := good()
			m.body = make([]byte, 4097)
			m.sig = signV1(t, testSecret, m.id, m.ts, m.body)
			return m.request()
		}, 413, webhooks.CodeTooLarge},
		{"Get", func() *http.Request {
			r := good().request()
			r.Method = http.MethodGet
			return r
		}, 405, webhooks.CodeMethod},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, e.deliver(c.req()), c.status, c.code)
		})
	}
	if got := e.calls.Load(); got != 0 {
		t.Errorf("handler calls: got %d, want 0", got)
	}
	if got := e.store.count("claim"); got != 0 {
		t.Errorf("store claims: got %d, want 0", got)
	}
	// The good message itself still goes through.
	if w := e.deliver(good().request()); w.Code != 200 || e.calls.Load() != 1 {
		t.Fatalf("good message: got %d, calls %d", w.Code, e.calls.Load())
	}
}

// TestHandlerFailureThenRetry: a handler that fails releases the id, so
// the sender's retry runs it again; once it succeeds, later deliveries are
// duplicates. A panic releases the id too.
func TestHandlerFailureThenRetry(t *testing.T) {
	e := newEnv(t, testOptions())
	m := e.newMsg("msg_fail", `{}`)
	e.answer.Store(http.StatusInternalServerError)
	if w := e.deliver(m.request()); w.Code != 500 {
		t.Fatalf("failing handler: got %d, want its 500", w.Code)
	}
	e.answer.Store(http.StatusNotFound)
	e.clock.Advance(5 * time.Second)
	if w := e.deliver(e.newMsg("msg_fail", `{}`).request()); w.Code != 404 {
		t.Fatalf("failing handler: got %d, want its 404", w.Code)
	}
	e.answer.Store(http.StatusAccepted)
	e.clock.Advance(5 * time.Second)
	if w := e.deliver(e.newMsg("msg_fail", `{}`).request()); w.Code != 202 {
		t.Fatalf("retry: got %d, want the handler's 202", w.Code)
	}
	if w := e.deliver(m.request()); w.Code != 200 || w.Header().Get(webhooks.HeaderDuplicate) != "true" {
		t.Fatalf("after success: got %d, want a duplicate", w.Code)
	}
	if got := e.calls.Load(); got != 3 {
		t.Fatalf("handler calls: got %d, want 3", got)
	}

	e.answer.Store(0)
	panicking := e.rc.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	p := e.newMsg("msg_panic", `{}`)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic not passed on")
			}
		}()
		panicking.ServeHTTP(httptest.NewRecorder(), p.request())
	}()
	if w := e.deliver(p.request()); w.Code != 200 || w.Header().Get(webhooks.HeaderDuplicate) != "" || e.calls.Load() != 4 {
		t.Fatalf("after a panic: got %d dup=%q calls %d, want the handler to run", w.Code, w.Header().Get(webhooks.HeaderDuplicate), e.calls.Load())
	}
}

// TestInFlightGets409: a delivery that arrives while another of the same
// message is being handled gets 409 in_progress with Retry-After.
func TestInFlightGets409(t *testing.T) {
	e := newEnv(t, testOptions())
	m := e.newMsg("msg_slow", `{}`)
	entered, leave := make(chan struct{}), make(chan struct{})
	h := e.rc.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-leave
	}))
	done := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, m.request())
		done <- w.Code
	}()
	<-entered
	w := e.deliver(m.request())
	wantProblem(t, w, http.StatusConflict, webhooks.CodeInProgress)
	if w.Header().Get("Retry-After") != "1" {
		t.Errorf("Retry-After: got %q, want 1", w.Header().Get("Retry-After"))
	}
	close(leave)
	if code := <-done; code != 200 {
		t.Fatalf("first delivery: got %d", code)
	}
}

// TestConcurrentDeliveries: the same message from 50 goroutines reaches the
// handler exactly once; every other delivery is a 409 or a duplicate 200.
func TestConcurrentDeliveries(t *testing.T) {
	for _, store := range []struct {
		name string
		open func(t *testing.T) spent.Store
	}{
		{"Inmem", func(*testing.T) spent.Store { return inmem.New() }},
		{"Pebble", func(t *testing.T) spent.Store {
			s, err := pebble.Open(t.TempDir(), pebble.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	} {
		t.Run(store.name, func(t *testing.T) {
			o := testOptions()
			l := newLedger(t, store.open(t), map[string]spent.Policy{o.Namespace: o.Policy(30 * time.Second)}, time.Now)
			rc, err := webhooks.New(l, o)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			calls := 0
			h := rc.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls++
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}))
			ts := time.Now().Truncate(time.Second)
			body := []byte(`{"type":"payment.settled"}`)
			m := msg{id: "msg_race", ts: ts, body: body, sig: signV1(t, testSecret, "msg_race", ts, body)}
			const n = 50
			codes := make([]int, n)
			dups := make([]bool, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					w := httptest.NewRecorder()
					h.ServeHTTP(w, m.request())
					codes[i], dups[i] = w.Code, w.Header().Get(webhooks.HeaderDuplicate) == "true"
				}()
			}
			close(start)
			wg.Wait()
			if calls != 1 {
				t.Fatalf("handler calls: got %d, want 1", calls)
			}
			handled := 0
			for i, c := range codes {
				switch {
				case c == 200 && !dups[i]:
					handled++
				case c == 200 && dups[i], c == http.StatusConflict:
				default:
					t.Errorf("delivery %d: got %d", i, c)
				}
			}
			if handled != 1 {
				t.Errorf("deliveries answered by the handler: got %d, want 1", handled)
			}
		})
	}
}

// TestLedgerFailureFailsClosed: when the store fails, the answer is 503
// with Retry-After and the handler does not run.
func TestLedgerFailureFailsClosed(t *testing.T) {
	e := newEnv(t, testOptions())
	down := errors.New("disk on fire")
	e.store.SetFaults(inmem.Faults{Before: func(string) error { return down }})
	w := e.deliver(e.newMsg("msg_down", `{}`).request())
	wantProblem(t, w, http.StatusServiceUnavailable, webhooks.CodeUnavailable)
	if w.Header().Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	if got := e.calls.Load(); got != 0 {
		t.Fatalf("handler calls: got %d, want 0", got)
	}
	e.store.SetFaults(inmem.Faults{})
	if w := e.deliver(e.newMsg("msg_down", `{}`).request()); w.Code != 200 || e.calls.Load() != 1 {
		t.Fatalf("after recovery: got %d, calls %d", w.Code, e.calls.Load())
	}
}

// TestSourcesDoNotCollide: two senders using the same id each reach their
// own handler.
func TestSourcesDoNotCollide(t *testing.T) {
	e := newEnv(t, testOptions())
	o2 := testOptions()
	o2.Source = "shipping"
	rc2, err := webhooks.New(e.ledger, o2)
	if err != nil {
		t.Fatal(err)
	}
	h2calls := 0
	h2 := rc2.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { h2calls++ }))
	m := e.newMsg("msg_same", `{}`)
	if w := e.deliver(m.request()); w.Code != 200 || e.calls.Load() != 1 {
		t.Fatalf("billing: got %d", w.Code)
	}
	w := httptest.NewRecorder()
	h2.ServeHTTP(w, m.request())
	if w.Code != 200 || w.Header().Get(webhooks.HeaderDuplicate) != "" || h2calls != 1 {
		t.Fatalf("shipping: got %d dup=%q calls %d, want its handler to run", w.Code, w.Header().Get(webhooks.HeaderDuplicate), h2calls)
	}
}

// TestOversizedResponseReleases: a response over MaxResponse is answered
// 500 and releases the id, so a retry runs the handler again.
func TestOversizedResponseReleases(t *testing.T) {
	o := testOptions()
	o.MaxResponse = 8
	e := newEnv(t, o)
	m := e.newMsg("msg_big", `{}`)
	wantProblem(t, e.deliver(m.request()), http.StatusInternalServerError, webhooks.CodeInternal)
	wantProblem(t, e.deliver(m.request()), http.StatusInternalServerError, webhooks.CodeInternal)
	if got := e.calls.Load(); got != 2 {
		t.Fatalf("handler calls: got %d, want 2", got)
	}
}

// TestOverHTTPClient: the receiver works over the Go client of a spent
// server (package http), the same as over an in-process ledger.
func TestOverHTTPClient(t *testing.T) {
	o := testOptions()
	e := newEnv(t, o) // its ledger serves the spent API below
	srv, err := spenthttp.NewServer(e.ledger, spenthttp.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	o.Now = e.clock.Now // the client has no clock of its own
	rc, err := webhooks.New(spenthttp.NewClient(ts.URL, spenthttp.ClientConfig{}), o)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	h := rc.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls++ }))
	m := e.newMsg("msg_remote", `{}`)
	for i, want := range []string{"", "true"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, m.request())
		if w.Code != 200 || w.Header().Get(webhooks.HeaderDuplicate) != want {
			t.Fatalf("delivery %d: got %d dup=%q, want 200 dup=%q", i, w.Code, w.Header().Get(webhooks.HeaderDuplicate), want)
		}
	}
	if calls != 1 {
		t.Fatalf("handler calls: got %d, want 1", calls)
	}
	claims := e.store.count("claim")
	e.clock.Advance(o.Tolerance + time.Second)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, m.request())
	wantProblem(t, w, http.StatusUnauthorized, webhooks.CodeTimestamp)
	if got := e.store.count("claim"); got != claims {
		t.Errorf("store claims after a stale delivery: got %d, want %d", got, claims)
	}
}

// TestInformationalStatusIsNotTheAnswer: a handler that sends 103 Early
// Hints before its 200 succeeded. The receiver took the first status it
// was given, 103, for the answer, saw no 2xx and released the id, so the
// sender's retry ran the handler again; the idempotency middleware's
// capture ignored 1xx, and the two now share one.
func TestInformationalStatusIsNotTheAnswer(t *testing.T) {
	e := newEnv(t, testOptions())
	calls := 0
	h := e.rc.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls++
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Write([]byte("done"))
	}))
	m := e.newMsg("msg_hints", `{}`)
	for i, dup := range []string{"", "true"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, m.request())
		if w.Code != http.StatusOK || w.Header().Get(webhooks.HeaderDuplicate) != dup {
			t.Fatalf("delivery %d: got %d dup=%q, want 200 dup=%q", i, w.Code, w.Header().Get(webhooks.HeaderDuplicate), dup)
		}
	}
	if calls != 1 {
		t.Fatalf("handler calls: got %d, want 1: the first delivery succeeded", calls)
	}
}
