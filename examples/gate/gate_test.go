package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent/idempotency"
)

// service runs the gate in this process.
type service struct {
	m    *Main
	base string
	stop func()
}

func startService(t *testing.T, dir string, args ...string) *service {
	t.Helper()
	m := NewMain()
	if err := m.ParseFlags(append([]string{"--listen", "127.0.0.1:0", "--data", dir}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	s := &service{m: m, base: "http://" + m.Addr()}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			m.Close()
		})
	}
	t.Cleanup(s.stop)
	return s
}

func postJSON(t *testing.T, url, key, body string) (int, http.Header, []byte) {
	t.Helper()
	r, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if key != "" {
		r.Header.Set(idempotency.HeaderKey, key)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

type minted struct {
	TicketID   string    `json:"ticket_id"`
	QR         string    `json:"qr"`
	ValidUntil time.Time `json:"valid_until"`
}

func (s *service) mint(t *testing.T, key string) minted {
	t.Helper()
	st, _, b := postJSON(t, s.base+"/tickets", key, `{"holder":"Ada"}`)
	if st != 201 {
		t.Fatalf("mint: got %d %s", st, b)
	}
	var m minted
	if err := json.Unmarshal(b, &m); err != nil || m.QR == "" {
		t.Fatalf("mint: %q: %v", b, err)
	}
	return m
}

type scanAnswer struct {
	Admitted  bool      `json:"admitted"`
	Reason    string    `json:"reason"`
	Gate      string    `json:"gate"`
	At        time.Time `json:"at"`
	FirstSeen time.Time `json:"first_seen"`
	FirstGate string    `json:"first_gate"`
}

func (s *service) scan(t *testing.T, qr, gate string) (int, scanAnswer) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"qr": qr, "gate": gate})
	st, _, b := postJSON(t, s.base+"/scan", "", string(body))
	var a scanAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("scan: %q: %v", b, err)
	}
	return st, a
}

// TestTwoGates200msApart: two gates scan one ticket 200 ms apart; the first
// admits, the second refuses citing the first gate and time. After a restart
// the ledger still refuses.
func TestTwoGates200msApart(t *testing.T) {
	dir := t.TempDir()
	s := startService(t, dir)
	tk := s.mint(t, `"order-1"`)
	st, north := s.scan(t, tk.QR, "north")
	if st != 200 || !north.Admitted || north.Gate != "north" {
		t.Fatalf("north: got %d %+v, want admitted", st, north)
	}
	time.Sleep(200 * time.Millisecond)
	st, south := s.scan(t, tk.QR, "south")
	if st != 409 || south.Admitted || south.Reason != "already_admitted" || south.FirstGate != "north" || !south.FirstSeen.Equal(north.At) {
		t.Fatalf("south, 200 ms later: got %d %+v, want refused citing north at %v", st, south, north.At)
	}
	if d := time.Since(south.FirstSeen); d < 200*time.Millisecond {
		t.Fatalf("first seen %v ago, want at least 200 ms", d)
	}
	s.stop()
	s = startService(t, dir)
	st, again := s.scan(t, tk.QR, "east")
	if st != 409 || again.FirstGate != "north" || !again.FirstSeen.Equal(north.At) {
		t.Fatalf("after a restart: got %d %+v, want refused citing north", st, again)
	}
}

// TestGatesAtOnce: ten gates scan one ticket at the same instant; one
// admits, nine refuse citing it.
func TestGatesAtOnce(t *testing.T) {
	s := startService(t, t.TempDir())
	tk := s.mint(t, `"order-2"`)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	answers := make([]scanAnswer, 10)
	codes := make([]int, 10)
	start := make(chan struct{})
	for i := range 10 {
		wg.Go(func() {
			<-start
			codes[i], answers[i] = s.scan(t, tk.QR, "gate-"+string(rune('a'+i)))
			if answers[i].Admitted {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if admitted.Load() != 1 {
		t.Fatalf("%d gates admitted, want 1", admitted.Load())
	}
	var first string
	for i, a := range answers {
		if a.Admitted {
			first = a.Gate
		} else if codes[i] != 409 {
			t.Fatalf("gate %d: got %d, want 409", i, codes[i])
		}
	}
	for _, a := range answers {
		if !a.Admitted && a.FirstGate != first {
			t.Fatalf("refusal cites %q, want %q", a.FirstGate, first)
		}
	}
}

func TestTicketValidity(t *testing.T) {
	s := startService(t, t.TempDir())
	other := startService(t, t.TempDir())
	tk := s.mint(t, `"order-3"`)
	forged := other.mint(t, `"order-3"`) // signed with another key
	tampered := []byte(tk.QR)
	i := len(ticketPrefix) + 3
	tampered[i] ^= 1
	for _, qr := range []string{
		"", "not a ticket", forged.QR, string(tampered), tk.QR + "A", tk.QR[:len(tk.QR)-1],
		strings.Replace(tk.QR, "spent-ticket-v1.", "spent-ticket-v2.", 1),
	} {
		if st, a := s.scan(t, qr, "north"); st != 403 || a.Admitted || a.Reason != "invalid_ticket" {
			t.Fatalf("scan of %q: got %d %+v, want 403 invalid_ticket", qr, st, a)
		}
	}
	if st, a := s.scan(t, tk.QR, "north"); st != 200 || !a.Admitted {
		t.Fatalf("the genuine ticket after the forgeries: got %d %+v, want admitted", st, a)
	}
}

// TestTicketExpires: after the event ends a ticket is refused before the
// ledger is consulted, and the ledger forgets its scans.
func TestTicketExpires(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 6, 1, 18, 0, 0, 0, time.UTC).UnixNano())
	m := NewMain()
	m.Now = func() time.Time { return time.Unix(0, now.Load()).UTC() }
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--event-end", "2026-06-01T23:00:00Z"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer m.Close()
	defer cancel()
	go m.Run(ctx)
	s := &service{m: m, base: "http://" + m.Addr()}
	tk := s.mint(t, `"order-4"`)
	if !tk.ValidUntil.Equal(time.Date(2026, 6, 1, 23, 0, 0, 0, time.UTC)) {
		t.Fatalf("valid until %v, want the event's end", tk.ValidUntil)
	}
	if st, a := s.scan(t, tk.QR, "north"); st != 200 || !a.Admitted {
		t.Fatalf("during the event: got %d %+v", st, a)
	}
	now.Store(time.Date(2026, 6, 1, 23, 0, 0, 0, time.UTC).UnixNano())
	if st, a := s.scan(t, tk.QR, "north"); st != 403 || a.Reason != "expired" {
		t.Fatalf("at the event's end: got %d %+v, want 403 expired", st, a)
	}
	if n, err := m.ledger.Sweep(context.Background(), 100); err != nil || n < 1 {
		t.Fatalf("sweep after the event: removed %d, %v; want the scan's record gone", n, err)
	}
}

// TestMintIsIdempotent: a retried purchase gets the same ticket, byte for
// byte; another purchase gets another ticket.
func TestMintIsIdempotent(t *testing.T) {
	s := startService(t, t.TempDir())
	st1, _, b1 := postJSON(t, s.base+"/tickets", `"order-5"`, `{"holder":"Ada"}`)
	st2, h2, b2 := postJSON(t, s.base+"/tickets", `"order-5"`, `{"holder":"Ada"}`)
	if st1 != 201 || st2 != 201 || !bytes.Equal(b1, b2) || h2.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("retried purchase: %d %s then %d %s (replayed %q), want the same ticket replayed", st1, b1, st2, b2, h2.Get(idempotency.HeaderReplayed))
	}
	if st, _, _ := postJSON(t, s.base+"/tickets", `"order-5"`, `{"holder":"Bob"}`); st != 422 {
		t.Fatalf("same key, other purchase: got %d, want 422", st)
	}
	if st, _, _ := postJSON(t, s.base+"/tickets", "", `{"holder":"Ada"}`); st != 400 {
		t.Fatalf("purchase without a key: got %d, want 400", st)
	}
	_, _, b3 := postJSON(t, s.base+"/tickets", `"order-6"`, `{"holder":"Ada"}`)
	if bytes.Equal(b1, b3) {
		t.Fatal("two purchases got the same ticket")
	}
}

func TestRunFlags(t *testing.T) {
	var out, errw bytes.Buffer
	if code := run(context.Background(), []string{"--event-end", "yesterday"}, &out, &errw); code != 2 {
		t.Fatalf("bad --event-end: exit %d, want 2", code)
	}
	if code := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--event-end", "2001-01-01T00:00:00Z"}, &out, &errw); code != 1 {
		t.Fatalf("an event that is over: exit %d, want 1", code)
	}
}

// FuzzParseTicket: a payload is accepted only if it is exactly the encoding
// of the ticket it carries, signed with the key.
func FuzzParseTicket(f *testing.F) {
	key := bytes.Repeat([]byte{7}, 32)
	good := ticket{ID: [16]byte{1, 2, 3}, ValidUntil: time.Unix(1790000000, 0).UTC()}.encode(key)
	f.Add(good)
	f.Add(good[:len(good)-2])
	f.Add(ticketPrefix + "AAAA.BBBB")
	f.Fuzz(func(t *testing.T, qr string) {
		tk, err := parseTicket(qr, key)
		if err != nil {
			return
		}
		if tk.encode(key) != qr {
			t.Fatalf("accepted %q, which is not the encoding of %+v", qr, tk)
		}
	})
}
