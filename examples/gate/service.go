package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/idempotency"
	"github.com/spentledger/spent/pebble"
)

// The ledger namespaces of the gate.
const (
	nsTickets = "tickets" // scans: refuse
	nsMint    = "mint"    // purchases: echo, under the middleware
	nsMinted  = "mint-applied"
)

// maxGateLen is the longest gate name, the place of a scan's record.
const maxGateLen = 64

// Main is the gate service: ParseFlags, Open, Run, Close.
type Main struct {
	// Listen is the service's address.
	Listen string
	// Data is the directory of the ledger and the keys.
	Data string
	// EventEnd is when the event ends: tickets minted now are valid until
	// then, and the ledger remembers their scans until then.
	EventEnd time.Time
	// Now is the clock. Tests inject one.
	Now func() time.Time

	store  *pebble.Store
	ledger *spent.Ledger
	mw     *idempotency.Middleware
	key    []byte // signs the QR payloads
	srv    *http.Server
	ln     net.Listener
	log    *slog.Logger
}

// NewMain returns a Main with the default flags.
func NewMain() *Main {
	return &Main{Listen: "127.0.0.1:8081", Data: "gate-data", Now: time.Now}
}

// ParseFlags reads the command line.
func (m *Main) ParseFlags(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&m.Listen, "listen", m.Listen, "address of the service")
	fs.StringVar(&m.Data, "data", m.Data, "directory of the ledger and the keys")
	end := fs.String("event-end", "", "end of the event, RFC 3339 (default: 24 hours from start)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("gate: unexpected arguments %q", fs.Args())
	}
	if *end == "" {
		m.EventEnd = m.Now().Add(24 * time.Hour).Truncate(time.Second)
		return nil
	}
	t, err := time.Parse(time.RFC3339, *end)
	if err != nil {
		return fmt.Errorf("gate: --event-end: %w", err)
	}
	m.EventEnd = t.Truncate(time.Second)
	return nil
}

// Open opens the ledger and the keys and starts listening.
func (m *Main) Open() error {
	m.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if !m.EventEnd.After(m.Now()) {
		return fmt.Errorf("the event ended at %s", m.EventEnd.Format(time.RFC3339))
	}
	if err := os.MkdirAll(m.Data, 0o700); err != nil {
		return err
	}
	ledgerDir := filepath.Join(m.Data, "ledger")
	_, statErr := os.Stat(ledgerDir)
	fresh := errors.Is(statErr, os.ErrNotExist)
	secret, err := loadKey(filepath.Join(m.Data, "secret"), fresh)
	if err != nil {
		return err
	}
	if m.key, err = loadKey(filepath.Join(m.Data, "ticket-key"), fresh); err != nil {
		return err
	}
	popts := pebble.DefaultOptions()
	popts.Logger = m.log
	if m.store, err = pebble.Open(ledgerDir, popts); err != nil {
		return err
	}
	opts := idempotency.DefaultOptions()
	opts.Namespace, opts.AppliedNamespace = nsMint, nsMinted
	opts.Scope = idempotency.FixedScope("box-office")
	opts.Now = m.Now
	opts.Logger = m.log
	cfg := spent.DefaultConfig()
	cfg.Secret = secret
	cfg.Now = m.Now
	cfg.Namespaces = idempotency.Policies(opts, 30*time.Second)
	// Scans: refuse every repeat. Each scan carries its ticket's end of
	// validity as its expiry, so the retention here is only a ceiling.
	cfg.Namespaces[nsTickets] = spent.Policy{Mode: spent.ModeRefuse, Retention: 366 * 24 * time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.Hold}
	if m.ledger, err = spent.NewLedger(context.Background(), m.store, cfg); err != nil {
		m.store.Close()
		return err
	}
	if m.mw, err = idempotency.New(m.ledger, opts); err != nil {
		m.store.Close()
		return err
	}
	if m.ln, err = net.Listen("tcp", m.Listen); err != nil {
		m.store.Close()
		return err
	}
	m.srv = &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 5 * time.Second}
	return nil
}

// Addr is the address the service listens on.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// Run serves until ctx ends, then shuts down gracefully.
func (m *Main) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- m.srv.Serve(m.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return m.srv.Shutdown(sctx)
}

// Close releases the listener and the ledger.
func (m *Main) Close() error {
	if m.ln != nil {
		m.ln.Close()
	}
	if m.store != nil {
		return m.store.Close()
	}
	return nil
}

// Handler is the service's routes.
func (m *Main) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /tickets", m.mw.Handler(http.HandlerFunc(m.mint)))
	mux.HandleFunc("POST /scan", m.scan)
	return mux
}

// mint issues a ticket. It calls no idempotency.Applied: a ticket minted by
// a request that dies before its answer is stored was never handed out, so
// minting another on the retry is harmless; once stored, the answer is
// replayed byte for byte (a signature is never computed twice for one key).
func (m *Main) mint(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Holder string `json:"holder"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || len(req.Holder) > 128 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"holder": "..."} (at most 128 bytes)`})
		return
	}
	var t ticket
	if _, err := rand.Read(t.ID[:]); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "no randomness"})
		return
	}
	t.ValidUntil = m.EventEnd
	writeJSON(w, http.StatusCreated, map[string]any{
		"ticket_id": t.idString(), "qr": t.encode(m.key), "holder": req.Holder, "valid_until": t.ValidUntil,
	})
}

// scan admits a ticket once: a one-step claim of its id in a refuse
// namespace, with the gate as the place and the ticket's validity as the
// expiry.
func (m *Main) scan(w http.ResponseWriter, r *http.Request) {
	var req struct {
		QR   string `json:"qr"`
		Gate string `json:"gate"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Gate == "" || len(req.Gate) > maxGateLen {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"qr": "...", "gate": "..."} with a gate of 1 to 64 bytes`})
		return
	}
	t, err := parseTicket(req.QR, m.key)
	if err != nil {
		writeJSON(w, http.StatusForbidden, map[string]any{"admitted": false, "reason": "invalid_ticket"})
		return
	}
	now := m.Now()
	if !now.Before(t.ValidUntil) {
		// Checked before the ledger: its record is forgotten at ValidUntil.
		writeJSON(w, http.StatusForbidden, map[string]any{"admitted": false, "reason": "expired", "valid_until": t.ValidUntil})
		return
	}
	res, err := m.ledger.Claim(r.Context(), spent.Claim{
		Namespace: nsTickets, Key: t.idString(), Place: req.Gate, Result: []byte{}, ExpiresAt: t.ValidUntil,
	})
	if err != nil {
		m.log.Error("scan: ledger unavailable", "err", err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"admitted": false, "reason": "unavailable"})
		return
	}
	switch res.Outcome {
	case spent.Fresh:
		writeJSON(w, http.StatusOK, map[string]any{
			"admitted": true, "ticket_id": t.idString(), "gate": req.Gate, "at": res.Record.FirstSeen,
		})
	case spent.Refused:
		writeJSON(w, http.StatusConflict, map[string]any{
			"admitted": false, "reason": "already_admitted", "ticket_id": t.idString(),
			"first_seen": res.Record.FirstSeen, "first_gate": res.Record.Place,
		})
	default:
		m.log.Error("scan: unexpected outcome", "outcome", res.Outcome)
		writeJSON(w, http.StatusInternalServerError, map[string]any{"admitted": false, "reason": "internal"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// loadKey reads a 32-byte key from path, creating it (mode 0600, synced)
// when create is set, that is when no ledger exists yet: a new ledger
// secret beside an existing ledger would forget every scan, and a new
// ticket key would void every ticket sold.
func loadKey(path string, create bool) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) != 32 {
			return nil, fmt.Errorf("%s: %d bytes, want 32", path, len(b))
		}
		return b, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if !create {
		return nil, fmt.Errorf("%s is missing beside an existing ledger", path)
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return b, d.Sync()
}
