package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
	spenthttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/internal/problem"
	"github.com/spentledger/spent/webhooks"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var testSeed = bytes.Repeat([]byte{9}, ed25519.SeedSize)

// clock is a fake clock for the receiver and its ledger.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

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

// writeKeys writes the sender's keys file in dir: the v1 secret and the
// v1a public key.
func writeKeys(t *testing.T, dir string) string {
	t.Helper()
	pub := ed25519.NewKeyFromSeed(testSeed).Public().(ed25519.PublicKey)
	path := filepath.Join(dir, "sender.keys")
	keys := "# the sender's keys\n" + testSecret + "\n" + webhooks.PublicKeyPrefix + base64.StdEncoding.EncodeToString(pub) + "\n"
	if err := os.WriteFile(path, []byte(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// receiver runs the program's Main in this process until the test ends
// (or stop is called).
type receiver struct {
	m    *Main
	base string
	stop func()
}

func startReceiver(t *testing.T, c *clock, args ...string) *receiver {
	t.Helper()
	m := NewMain()
	m.Now = c.Now
	if err := m.ParseFlags(append([]string{"--listen", "127.0.0.1:0"}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	r := &receiver{m: m, base: "http://" + m.Addr()}
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			if err := m.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

// message is a signed message as the sender delivers it.
type message struct {
	id, ts, sig string
	body        []byte
}

// signedV1 signs with the Standard Webhooks reference library.
func signedV1(t *testing.T, id string, at time.Time, body string) message {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	ts := at.Truncate(time.Second)
	sig, err := wh.Sign(id, ts, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return message{id: id, ts: strconv.FormatInt(ts.Unix(), 10), sig: sig, body: []byte(body)}
}

// signedV1a signs with crypto/ed25519.
func signedV1a(id string, at time.Time, body string) message {
	ts := strconv.FormatInt(at.Unix(), 10)
	sig := ed25519.Sign(ed25519.NewKeyFromSeed(testSeed), []byte(id+"."+ts+"."+body))
	return message{id: id, ts: ts, sig: "v1a," + base64.StdEncoding.EncodeToString(sig), body: []byte(body)}
}

// deliver posts m and returns the status, the Spent-Duplicate header and
// the body.
func (r *receiver) deliver(t *testing.T, m message) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.base+"/webhooks", bytes.NewReader(m.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", m.id)
	req.Header.Set("webhook-timestamp", m.ts)
	req.Header.Set("webhook-signature", m.sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(webhooks.HeaderDuplicate), b
}

// events returns the events the receiver handled.
func (r *receiver) events(t *testing.T) []event {
	t.Helper()
	resp, err := http.Get(r.base + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []event
	if err := json.NewDecoder(resp.Body).Decode(&evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

func wantCode(t *testing.T, body []byte, code string) {
	t.Helper()
	p, err := problem.Parse(body)
	if err != nil || p.Code != code {
		t.Fatalf("body %q: want a problem with code %q", body, code)
	}
}

// TestDeliveredTwice: on the embedded store, each signed message (v1 and
// v1a) delivered twice is handled once; a tampered one and a stale one are
// refused; a message the handler fails is handled again on retry.
func TestDeliveredTwice(t *testing.T) {
	dir := t.TempDir()
	c := &clock{now: time.Now()}
	r := startReceiver(t, c, "--data", filepath.Join(dir, "data"), "--keys", writeKeys(t, dir), "--source", "billing")

	v1 := signedV1(t, "msg_1", c.Now(), `{"type":"invoice.paid"}`)
	v1a := signedV1a("msg_2", c.Now(), `{"type":"invoice.voided"}`)
	for _, m := range []message{v1, v1a} {
		st, dup, body := r.deliver(t, m)
		if st != 200 || dup != "" || string(body) != `{"handled":"`+m.id+`"}`+"\n" {
			t.Fatalf("%s first: got %d dup=%q %s", m.id, st, dup, body)
		}
		c.Advance(30 * time.Second)
		st, dup, body = r.deliver(t, m)
		if st != 200 || dup != "true" || len(body) != 0 {
			t.Fatalf("%s second: got %d dup=%q %q, want 200, Spent-Duplicate, no body", m.id, st, dup, body)
		}
	}
	if evs := r.events(t); len(evs) != 2 || evs[0].ID != "msg_1" || evs[0].Type != "invoice.paid" || evs[1].ID != "msg_2" {
		t.Fatalf("events: got %+v, want msg_1 and msg_2 once each", evs)
	}

	tampered := signedV1(t, "msg_3", c.Now(), `{"type":"invoice.paid"}`)
	tampered.body = []byte(`{"type":"invoice.refunded"}`)
	st, _, body := r.deliver(t, tampered)
	if st != 401 {
		t.Fatalf("tampered: got %d %s", st, body)
	}
	wantCode(t, body, webhooks.CodeSignature)

	fail := signedV1(t, "msg_4", c.Now(), `{"type":"test.fail"}`)
	for i := range 2 {
		if st, dup, body := r.deliver(t, fail); st != 500 || dup != "" {
			t.Fatalf("failing message, delivery %d: got %d dup=%q %s, want the handler's 500 each time", i, st, dup, body)
		}
	}

	c.Advance(5 * time.Minute) // v1 is now 6 minutes old
	st, _, body = r.deliver(t, v1)
	if st != 401 {
		t.Fatalf("stale: got %d %s", st, body)
	}
	wantCode(t, body, webhooks.CodeTimestamp)
	if evs := r.events(t); len(evs) != 2 {
		t.Fatalf("events: got %d, want 2", len(evs))
	}
}

// TestRestartRemembers: a message handled before a restart is a duplicate
// after it: the ids are in the embedded store, not in memory.
func TestRestartRemembers(t *testing.T) {
	dir := t.TempDir()
	c := &clock{now: time.Now()}
	args := []string{"--data", filepath.Join(dir, "data"), "--keys", writeKeys(t, dir)}
	r := startReceiver(t, c, args...)
	m := signedV1(t, "msg_restart", c.Now(), `{"type":"user.created"}`)
	if st, dup, _ := r.deliver(t, m); st != 200 || dup != "" {
		t.Fatalf("first: got %d dup=%q", st, dup)
	}
	r.stop()
	r = startReceiver(t, c, args...)
	if st, dup, _ := r.deliver(t, m); st != 200 || dup != "true" {
		t.Fatalf("after restart: got %d dup=%q, want a duplicate", st, dup)
	}
	if evs := r.events(t); len(evs) != 0 {
		t.Fatalf("events after restart: got %+v, want none", evs)
	}
}

// TestRemoteLedger: with --ledger, ids are claimed in a spent server (here
// one in this process, over a store whose claims are counted).
func TestRemoteLedger(t *testing.T) {
	dir := t.TempDir()
	c := &clock{now: time.Now()}
	o := webhooks.DefaultOptions()
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("a test secret of at least thirty-two bytes")
	cfg.Namespaces = map[string]spent.Policy{o.Namespace: o.Policy(30 * time.Second)}
	cfg.Now = c.Now
	store := inmem.New()
	var mu sync.Mutex
	claims := 0
	store.SetFaults(inmem.Faults{Before: func(op string) error {
		if op == "claim" {
			mu.Lock()
			claims++
			mu.Unlock()
		}
		return nil
	}})
	l, err := spent.NewLedger(context.Background(), store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := spenthttp.NewServer(l, spenthttp.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	r := startReceiver(t, c, "--ledger", ts.URL, "--keys", writeKeys(t, dir))
	m := signedV1(t, "msg_remote", c.Now(), `{"type":"invoice.paid"}`)
	for i, want := range []string{"", "true"} {
		if st, dup, body := r.deliver(t, m); st != 200 || dup != want {
			t.Fatalf("delivery %d: got %d dup=%q %s", i, st, dup, body)
		}
	}
	if evs := r.events(t); len(evs) != 1 {
		t.Fatalf("events: got %d, want 1", len(evs))
	}
	mu.Lock()
	n := claims
	mu.Unlock()
	if n != 2 {
		t.Fatalf("claims at the server: got %d, want 2", n)
	}
}
