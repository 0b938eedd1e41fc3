package webhooks_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/internal/problem"
	"github.com/spentledger/spent/webhooks"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// clock is a fake clock shared by the ledger and the receiver.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// testSecret is the sender's v1 secret in the tests (24 random-looking
// bytes), and testSeed the seed of its ed25519 key.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var testSeed = bytes.Repeat([]byte{7}, ed25519.SeedSize)

func testPublicKey() string {
	pub := ed25519.NewKeyFromSeed(testSeed).Public().(ed25519.PublicKey)
	return webhooks.PublicKeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// testOptions are the receiver's options in the tests: source "billing",
// the v1 secret and the v1a public key.
func testOptions() webhooks.Options {
	o := webhooks.DefaultOptions()
	o.Source = "billing"
	o.Secrets = []string{testSecret}
	o.PublicKeys = []string{testPublicKey()}
	o.MaxBody = 4096
	return o
}

// counting is an inmem store whose operations are counted by name.
type counting struct {
	*inmem.Store
	mu  sync.Mutex
	ops map[string]int
}

func newCounting() *counting {
	c := &counting{Store: inmem.New(), ops: map[string]int{}}
	c.SetFaults(inmem.Faults{Before: func(op string) error {
		c.mu.Lock()
		c.ops[op]++
		c.mu.Unlock()
		return nil
	}})
	return c
}

// count returns how many times op ran.
func (c *counting) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops[op]
}

// env is a ledger on a counting inmem store, a receiver over it on a fake
// clock, and a handler that counts its calls.
type env struct {
	t      *testing.T
	clock  *clock
	store  *counting
	ledger *spent.Ledger
	rc     *webhooks.Receiver
	h      http.Handler
	calls  atomic.Int64
	// answer is the handler's status; 0 means 200.
	answer atomic.Int64
}

func newEnv(t *testing.T, o webhooks.Options) *env {
	t.Helper()
	e := &env{t: t, clock: newClock(), store: newCounting()}
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("a test secret of at least thirty-two bytes")
	cfg.Namespaces = map[string]spent.Policy{o.Namespace: o.Policy(30 * time.Second)}
	cfg.Now = e.clock.Now
	l, err := spent.NewLedger(context.Background(), e.store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.ledger = l
	if e.rc, err = webhooks.New(l, o); err != nil {
		t.Fatal(err)
	}
	e.h = e.rc.Handler(http.HandlerFunc(e.handle))
	return e
}

func (e *env) handle(w http.ResponseWriter, r *http.Request) {
	e.calls.Add(1)
	m, ok := webhooks.MessageOf(r)
	if !ok {
		e.t.Error("handler: no message in the request")
	}
	body, _ := io.ReadAll(r.Body)
	if st := int(e.answer.Load()); st != 0 {
		w.WriteHeader(st)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "handled %s (%d bytes)", m.ID, len(body))
}

// msg is a message as a sender delivers it.
type msg struct {
	id   string
	ts   time.Time
	body []byte
	sig  string
}

// signV1 signs a message with the reference library of the Standard
// Webhooks specification, an implementation independent of the package's.
func signV1(t testing.TB, secret, id string, ts time.Time, body []byte) string {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// signV1a signs a message with crypto/ed25519 under seed.
func signV1a(seed []byte, id string, ts time.Time, body []byte) string {
	content := id + "." + strconv.FormatInt(ts.Unix(), 10) + "." + string(body)
	return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(ed25519.NewKeyFromSeed(seed), []byte(content)))
}

// newMsg returns a message signed (v1) now on e's clock.
func (e *env) newMsg(id, body string) msg {
	ts := e.clock.Now().Truncate(time.Second)
	return msg{id: id, ts: ts, body: []byte(body), sig: signV1(e.t, testSecret, id, ts, []byte(body))}
}

func (m msg) request() *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(m.body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(webhooks.HeaderID, m.id)
	r.Header.Set(webhooks.HeaderTimestamp, strconv.FormatInt(m.ts.Unix(), 10))
	r.Header.Set(webhooks.HeaderSignature, m.sig)
	return r
}

// deliver sends r to the receiver and returns the response.
func (e *env) deliver(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

// wantProblem fails unless w is a problem document with status and code.
func wantProblem(t *testing.T, w *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status: got %d, want %d; body %s", w.Code, status, w.Body.String())
	}
	p, ok := problem.Read(w.Header(), w.Body.Bytes())
	if !ok {
		t.Fatalf("body: got %q (%s), want a problem document", w.Body.String(), w.Header().Get("Content-Type"))
	}
	if p.Code != code || p.Type != webhooks.ProblemType+code || p.Status != int64(status) {
		t.Fatalf("problem: got code %q type %q status %d, want %q, %q, %d", p.Code, p.Type, p.Status, code, webhooks.ProblemType+code, status)
	}
}
