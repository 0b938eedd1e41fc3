package main

import (
	"bufio"
	"context"
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
	"strings"
	"sync"
	"time"

	"github.com/spentledger/spent"
	spenthttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/node"
	"github.com/spentledger/spent/pebble"
	"github.com/spentledger/spent/webhooks"
)

// Main is the receiver: ParseFlags, Open, Run, Close.
type Main struct {
	// Listen is the receiver's address.
	Listen string
	// Data is the directory of the embedded ledger (unused with Ledger).
	Data string
	// Ledger, when set, is the URL of a spent server to claim ids in,
	// instead of the embedded store.
	Ledger string
	// TokenFile holds the bearer token for Ledger, if it needs one.
	TokenFile string
	// Keys is the file of the sender's secrets (whsec_) and public keys
	// (whpk_), one per line.
	Keys string
	// Source names the sender: ids are claimed under it.
	Source string
	// Tolerance, Skew: see webhooks.Options.
	Tolerance, Skew time.Duration
	// Lease is how long a delivery being handled holds its id (the embedded
	// namespace's lease).
	Lease time.Duration
	// NewFence accepts a ledger that holds records beside a data directory
	// without a rollback fence (see package node).
	NewFence bool
	// Now is the clock. Tests inject one.
	Now func() time.Time

	node   *node.Node
	rc     *webhooks.Receiver
	srv    *http.Server
	ln     net.Listener
	log    *slog.Logger
	mu     sync.Mutex
	events []event
}

// event is a handled message, as GET /events lists it.
type event struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
}

// NewMain returns a Main with the default flags.
func NewMain() *Main {
	o := webhooks.DefaultOptions()
	return &Main{Listen: "127.0.0.1:8082", Data: "webhooks-data", Keys: "sender.keys", Source: "sender",
		Tolerance: o.Tolerance, Skew: o.Skew, Lease: 30 * time.Second, Now: time.Now}
}

func (m *Main) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("webhooks", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run reports the error, and prints the usage on --help
	fs.StringVar(&m.Listen, "listen", m.Listen, "address of the receiver")
	fs.StringVar(&m.Data, "data", m.Data, "directory of the embedded ledger (not used with --ledger)")
	fs.StringVar(&m.Ledger, "ledger", m.Ledger, "URL of a spent server to use instead of the embedded ledger")
	fs.StringVar(&m.TokenFile, "token-file", m.TokenFile, "file holding the bearer token for --ledger")
	fs.StringVar(&m.Keys, "keys", m.Keys, "file of the sender's whsec_ secrets and whpk_ public keys, one per line")
	fs.StringVar(&m.Source, "source", m.Source, "name of the sender: its ids are claimed under it")
	fs.DurationVar(&m.Tolerance, "tolerance", m.Tolerance, "how far webhook-timestamp may be from now, either way")
	fs.DurationVar(&m.Skew, "skew", m.Skew, "how far this clock may be from the ledger's")
	fs.DurationVar(&m.Lease, "lease", m.Lease, "how long a delivery being handled holds its id (embedded ledger)")
	fs.BoolVar(&m.NewFence, "new-fence", m.NewFence, "first start of a data directory without a fence beside a ledger that holds records")
	return fs
}

// Usage writes the usage of the receiver and its flags, with their
// defaults, to w.
func (m *Main) Usage(w io.Writer) {
	fmt.Fprint(w, "Usage:\n  webhooks [flags]    receive Standard Webhooks, each message id once\n\nGo's flag syntax: -flag and --flag are the same.\n\nFlags:\n")
	fs := NewMain().flags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// ParseFlags reads the command line. On --help it returns an error that
// wraps flag.ErrHelp.
func (m *Main) ParseFlags(args []string) error {
	fs := m.flags()
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("webhooks: unexpected arguments %q", fs.Args())
	}
	return nil
}

// options returns the receiver's options, with the keys read from m.Keys.
func (m *Main) options() (webhooks.Options, error) {
	o := webhooks.DefaultOptions()
	o.Source, o.Tolerance, o.Skew = m.Source, m.Tolerance, m.Skew
	o.Logger = m.log
	f, err := os.Open(m.Keys)
	if err != nil {
		return o, fmt.Errorf("--keys: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, webhooks.SecretPrefix):
			o.Secrets = append(o.Secrets, line)
		case strings.HasPrefix(line, webhooks.PublicKeyPrefix):
			o.PublicKeys = append(o.PublicKeys, line)
		default:
			return o, fmt.Errorf("%s:%d: want a whsec_ secret or a whpk_ public key", m.Keys, n)
		}
	}
	return o, sc.Err()
}

// Open opens the ledger (a node on the embedded store, or the client of a
// spent server), builds the receiver and starts listening.
func (m *Main) Open() error {
	m.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o, err := m.options()
	if err != nil {
		return err
	}
	var svc spent.Service
	if m.Ledger != "" {
		var token string
		if m.TokenFile != "" {
			b, err := os.ReadFile(m.TokenFile)
			if err != nil {
				return fmt.Errorf("--token-file: %w", err)
			}
			token = strings.TrimSpace(string(b))
		}
		o.Now = m.Now
		// The server does not publish its namespaces' policies: webhooks.New
		// cannot check the retention there (see Options.Policy).
		svc = spenthttp.NewClient(m.Ledger, spenthttp.ClientConfig{Token: token})
	} else {
		if err := o.Validate(); err != nil {
			return err
		}
		ledgerDir := filepath.Join(m.Data, "ledger")
		cfg := node.DefaultConfig()
		cfg.Dir = m.Data
		cfg.EmbeddedDir = ledgerDir
		cfg.Ledger.Namespaces = map[string]spent.Policy{o.Namespace: o.Policy(m.Lease)}
		cfg.Ledger.Now = m.Now
		cfg.Now = m.Now
		cfg.NewFence = m.NewFence
		cfg.InUseHint = "stop it first, or give this receiver its own --data"
		cfg.Logger = m.log
		cfg.OpenStore = func(context.Context) (node.Opened, error) {
			popts := pebble.DefaultOptions()
			popts.Logger = m.log
			s, err := pebble.Open(ledgerDir, popts)
			return node.Opened{Store: s, Kind: "pebble", Where: ledgerDir}, err
		}
		if m.node, err = node.Open(context.Background(), cfg); err != nil {
			return err
		}
		svc = m.node.Ledger()
	}
	if m.rc, err = webhooks.New(svc, o); err != nil {
		m.Close()
		return err
	}
	if m.ln, err = net.Listen("tcp", m.Listen); err != nil {
		m.Close()
		return err
	}
	m.srv = &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second}
	return nil
}

// Handler is the receiver's routes.
func (m *Main) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/webhooks", m.rc.Handler(http.HandlerFunc(m.handle)))
	mux.HandleFunc("GET /events", m.list)
	return mux
}

// handle is the application's handler: it runs once per message id within
// the id's window. It records the event; a message of type "test.fail"
// fails, so that the sender retries it.
func (m *Main) handle(w http.ResponseWriter, r *http.Request) {
	msg, _ := webhooks.MessageOf(r)
	var payload struct {
		Type string `json:"type"`
	}
	if err := json.NewDecoder(r.Body).Decode(&payload); err != nil {
		// A signed message we cannot read: 400 releases its id, and the
		// sender's dashboard shows the failure.
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body is not a JSON object with a type"})
		return
	}
	if payload.Type == "test.fail" {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "failing as asked by test.fail"})
		return
	}
	m.mu.Lock()
	m.events = append(m.events, event{ID: msg.ID, Type: payload.Type, Timestamp: msg.Timestamp})
	m.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"handled": msg.ID})
}

// list answers the events handled since start.
func (m *Main) list(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	evs := append([]event{}, m.events...)
	m.mu.Unlock()
	writeJSON(w, http.StatusOK, evs)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// Addr is the address the receiver listens on.
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
	if m.node != nil {
		m.node.Drain()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close releases the listener and the node, if any.
func (m *Main) Close() error {
	if m.ln != nil {
		m.ln.Close()
	}
	if m.node != nil {
		return m.node.Close()
	}
	return nil
}
