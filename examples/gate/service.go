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
	"github.com/spentledger/spent/internal/atomicfile"
	"github.com/spentledger/spent/node"
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
	// NewFence accepts a ledger that holds records beside a data directory
	// without a rollback fence (see package node).
	NewFence bool

	node   *node.Node
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

// flags returns the service's flag set, bound to m; the end of the event is
// read into end.
func (m *Main) flags(end *string) *flag.FlagSet {
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run reports the error, and prints the usage on --help
	fs.StringVar(&m.Listen, "listen", m.Listen, "address of the service")
	fs.StringVar(&m.Data, "data", m.Data, "directory of the ledger and the keys")
	fs.StringVar(end, "event-end", "", "end of the event, RFC 3339 (default: 24 hours from start)")
	fs.BoolVar(&m.NewFence, "new-fence", m.NewFence, "first start of a data directory without a fence beside a ledger that holds records")
	return fs
}

// Usage writes the usage of the service and its flags, with their
// defaults, to w.
func (m *Main) Usage(w io.Writer) {
	fmt.Fprint(w, "Usage:\n  gate [flags]    run the ticket gate\n\nGo's flag syntax: -flag and --flag are the same.\n\nFlags:\n")
	var end string
	fs := NewMain().flags(&end)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// ParseFlags reads the command line. On --help it returns an error that
// wraps flag.ErrHelp.
func (m *Main) ParseFlags(args []string) error {
	var end string
	fs := m.flags(&end)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("gate: unexpected arguments %q", fs.Args())
	}
	if end == "" {
		m.EventEnd = m.Now().Add(24 * time.Hour).Truncate(time.Second)
		return nil
	}
	t, err := time.Parse(time.RFC3339, end)
	if err != nil {
		return fmt.Errorf("gate: --event-end: %w", err)
	}
	m.EventEnd = t.Truncate(time.Second)
	return nil
}

// Open opens the ledger (a node on the embedded store: the data directory's
// lock and secret, the rollback fence, the sweeper) and the ticket key, and
// starts listening.
func (m *Main) Open() error {
	m.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if !m.EventEnd.After(m.Now()) {
		return fmt.Errorf("the event ended at %s", m.EventEnd.Format(time.RFC3339))
	}
	ledgerDir := filepath.Join(m.Data, "ledger")
	_, statErr := os.Stat(ledgerDir)
	// The ticket key comes before the node, as a first start that dies
	// between the two must find no ledger beside a missing key.
	var err error
	if m.key, err = loadKey(filepath.Join(m.Data, "ticket-key"), errors.Is(statErr, os.ErrNotExist)); err != nil {
		return err
	}
	opts := idempotency.DefaultOptions()
	opts.Namespace, opts.AppliedNamespace = nsMint, nsMinted
	opts.Scope = idempotency.FixedScope("box-office")
	opts.Now = m.Now
	opts.Logger = m.log
	namespaces := idempotency.Policies(opts, 30*time.Second)
	// Scans: refuse every repeat. Each scan carries its ticket's end of
	// validity as its expiry, so the retention here is only a ceiling.
	namespaces[nsTickets] = spent.Policy{Mode: spent.ModeRefuse, Retention: 366 * 24 * time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold}
	if m.node, err = node.Open(context.Background(), m.nodeConfig(ledgerDir, namespaces)); err != nil {
		return err
	}
	m.ledger = m.node.Ledger()
	if m.mw, err = idempotency.New(m.ledger, opts); err != nil {
		m.Close()
		return err
	}
	if m.ln, err = net.Listen("tcp", m.Listen); err != nil {
		m.Close()
		return err
	}
	m.srv = &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 5 * time.Second}
	return nil
}

// nodeConfig is the configuration of the gate's node: the ledger in
// ledgerDir, the secret and the fence in DATA, on the gate's clock.
func (m *Main) nodeConfig(ledgerDir string, namespaces map[string]spent.Policy) node.Config {
	cfg := node.DefaultConfig()
	cfg.Dir = m.Data
	cfg.EmbeddedDir = ledgerDir
	cfg.Ledger.Namespaces = namespaces
	cfg.Ledger.Now = m.Now
	cfg.Now = m.Now
	cfg.NewFence = m.NewFence
	cfg.InUseHint = "stop it first, or give this gate its own --data"
	cfg.Logger = m.log
	cfg.OpenStore = func(context.Context) (node.Opened, error) {
		popts := pebble.DefaultOptions()
		popts.Logger = m.log
		s, err := pebble.Open(ledgerDir, popts)
		return node.Opened{Store: s, Kind: "pebble", Where: ledgerDir}, err
	}
	return cfg
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
	m.node.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return m.srv.Shutdown(sctx)
}

// Close releases the listener and the node (which writes a last canary and
// closes the store). The node sweeps expired records while it is open.
func (m *Main) Close() error {
	if m.ln != nil {
		m.ln.Close()
	}
	if m.node != nil {
		return m.node.Close()
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

// loadKey reads the 32-byte ticket key from path, creating it (mode 0600,
// written atomically) when create is set, that is when no ledger exists
// yet: a new ticket key would void every ticket sold. (The ledger's secret
// is the node's.)
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
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return b, atomicfile.WriteFile(path, b, 0o600)
}
