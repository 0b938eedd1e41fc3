package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/idempotency"
	"github.com/spentledger/spent/node"
	"github.com/spentledger/spent/pebble"
)

// The ledger namespaces of the service.
const (
	nsPayments = "payments"
	nsApplied  = "payments-applied"
)

// Main is the payment service: ParseFlags, Open, Run, Close.
type Main struct {
	// Listen is the service's address.
	Listen string
	// Data is the directory of the ledger, its secret and the money ledger.
	Data string
	// Admin, when set, is a loopback address serving the ledger's HTTP API
	// for operators.
	Admin string
	// FailRate is the probability of a failure at each injection point.
	FailRate float64
	// CrashRate is the probability of a simulated crash at each of two
	// points after Applied: before the money leaves, and after it left but
	// before the answer is stored. The request is aborted without its answer
	// stored, as if the process had died there: an unknown outcome.
	CrashRate float64
	// Delay holds each first execution after Applied.
	Delay time.Duration
	// Lease is the lease of both idempotency namespaces.
	Lease time.Duration
	// ResolveEvery is how often the resolver lists the unknown outcomes
	// (each left one is tried again with backoff from 1 s to 5 min); zero
	// turns it off, leaving them to an operator.
	ResolveEvery time.Duration
	// NewFence accepts a ledger that holds records beside a data directory
	// without a rollback fence (see package node).
	NewFence bool
	// Stderr receives the log.
	Stderr io.Writer

	node   *node.Node
	ledger *spent.Ledger
	bank   *bank
	mw     *idempotency.Middleware
	runner *spent.ResolveRunner
	ran    chan struct{} // closed when the runner has stopped
	srv    *http.Server
	ln     net.Listener
	admin  *http.Server
	adln   net.Listener
	log    *slog.Logger

	// beforeSend, when set (by tests only), is called before the bank
	// sends a transfer; an error is treated as the bank's.
	beforeSend func(transfer) error
}

// NewMain returns a Main with the default flags.
func NewMain() *Main {
	return &Main{Listen: "127.0.0.1:8080", Data: "payments-data", Lease: 30 * time.Second, ResolveEvery: 5 * time.Second, Stderr: os.Stderr}
}

// usage is what payments --help prints before the flags.
const usage = `Usage:
  payments [flags]          run the payment service
  payments pay [flags]      pay once with the six-try client (payments pay --help)

Go's flag syntax: -flag and --flag are the same.

Flags:
`

// ParseFlags reads the command line. On --help it returns an error that
// wraps flag.ErrHelp.
func (m *Main) ParseFlags(args []string) error {
	fs := m.flags()
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("payments: %w", err)
	}
	return m.check(fs)
}

// flags returns the service's flag set, bound to m.
func (m *Main) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run reports the error, and prints the usage on --help
	fs.StringVar(&m.Listen, "listen", m.Listen, "address of the service")
	fs.StringVar(&m.Data, "data", m.Data, "directory of the ledger and the money ledger")
	fs.StringVar(&m.Admin, "admin", m.Admin, "loopback address for the ledger's HTTP API (operators: spent unknown list|resolve); empty: off")
	fs.Float64Var(&m.FailRate, "fail-rate", m.FailRate, "probability of a simulated failure at each of the three points")
	fs.Float64Var(&m.CrashRate, "crash-rate", m.CrashRate, "probability of a simulated crash after Applied, before and after the money leaves (an unknown outcome)")
	fs.DurationVar(&m.Delay, "delay", m.Delay, "hold each first execution this long before the money leaves")
	fs.DurationVar(&m.Lease, "lease", m.Lease, "lease of the idempotency namespaces")
	fs.DurationVar(&m.ResolveEvery, "resolve-every", m.ResolveEvery, "how often the resolver settles unknown outcomes against the bank's books; 0: off, left to an operator")
	fs.BoolVar(&m.NewFence, "new-fence", m.NewFence, "first start of a data directory without a fence beside a ledger that holds records")
	return fs
}

// Usage writes the usage of the service and its flags, with their defaults,
// to w.
func (m *Main) Usage(w io.Writer) {
	fs := NewMain().flags()
	fs.SetOutput(w)
	fmt.Fprint(w, usage)
	fs.PrintDefaults()
}

// check checks the flags and arguments fs parsed.
func (m *Main) check(fs *flag.FlagSet) error {
	if fs.NArg() != 0 {
		return fmt.Errorf("payments: unexpected arguments %q", fs.Args())
	}
	if m.FailRate < 0 || m.FailRate > 1 {
		return fmt.Errorf("payments: --fail-rate %v: want 0 to 1", m.FailRate)
	}
	if m.CrashRate < 0 || m.CrashRate > 1 {
		return fmt.Errorf("payments: --crash-rate %v: want 0 to 1", m.CrashRate)
	}
	if m.Delay < 0 || m.Lease <= 0 || m.ResolveEvery < 0 {
		return errors.New("payments: --delay and --resolve-every must not be negative, --lease must be positive")
	}
	if m.Admin != "" {
		host, _, err := net.SplitHostPort(m.Admin)
		if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			return fmt.Errorf("payments: --admin %q: must be a loopback address (the API has no tokens)", m.Admin)
		}
	}
	return nil
}

// Open opens the ledger (a node on the embedded store: the data directory's
// lock and secret, the rollback fence, the sweeper) and the money ledger,
// and starts listening.
func (m *Main) Open() error {
	m.log = slog.New(slog.NewTextHandler(m.Stderr, nil))
	opts := idempotency.DefaultOptions()
	opts.Namespace, opts.AppliedNamespace = nsPayments, nsApplied
	// One client: the demo has no credentials. A real service scopes keys
	// by its clients' credentials (idempotency.HeaderScope).
	opts.Scope = idempotency.FixedScope("demo")
	opts.Place = "payments"
	opts.Logger = m.log
	opts.Resolve = m.resolve
	var err error
	if m.node, err = node.Open(context.Background(), m.nodeConfig(idempotency.Policies(opts, m.Lease))); err != nil {
		return err
	}
	m.ledger = m.node.Ledger()
	m.mw, err = idempotency.New(m.ledger, opts)
	if err != nil {
		m.Close()
		return err
	}
	m.bank, err = openBank(filepath.Join(m.Data, "bank.log"))
	if err != nil {
		m.Close()
		return err
	}
	if m.ResolveEvery > 0 {
		m.runner, err = m.mw.ResolveRunner(spent.ResolveOptions{
			Interval: m.ResolveEvery,
			OnLeft: func(l spent.ResolveLeft) {
				m.log.Warn("resolver: unknown outcome left for now", "payment_id", l.Record.Hash.String(), "seq", l.Record.Seq.String(),
					"attempts", l.Attempts, "next", l.Next, "err", l.Err)
			},
			OnListError: func(err error) { m.log.Warn("resolver: listing unknown outcomes failed", "err", err) },
		})
		if err != nil {
			m.Close()
			return err
		}
	}
	m.ln, err = net.Listen("tcp", m.Listen)
	if err != nil {
		m.Close()
		return err
	}
	m.srv = &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 5 * time.Second}
	if m.Admin != "" {
		api, err := sphttp.NewServer(m.ledger, sphttp.Config{Logger: m.log, Ready: m.node.Ready})
		if err != nil {
			m.Close()
			return err
		}
		m.adln, err = net.Listen("tcp", m.Admin)
		if err != nil {
			m.Close()
			return err
		}
		m.admin = &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	}
	return nil
}

// nodeConfig is the configuration of the service's node: the ledger in
// DATA/ledger, the secret and the fence in DATA.
func (m *Main) nodeConfig(namespaces map[string]spent.Policy) node.Config {
	cfg := node.DefaultConfig()
	cfg.Dir = m.Data
	cfg.EmbeddedDir = filepath.Join(m.Data, "ledger")
	cfg.Ledger.Namespaces = namespaces
	cfg.NewFence = m.NewFence
	cfg.SweepInterval = 10 * time.Minute
	cfg.InUseHint = "stop it first, or give this service its own --data"
	cfg.Logger = m.log
	cfg.OpenStore = func(context.Context) (node.Opened, error) {
		popts := pebble.DefaultOptions()
		popts.Logger = m.log
		s, err := pebble.Open(cfg.EmbeddedDir, popts)
		return node.Opened{Store: s, Kind: "pebble", Where: cfg.EmbeddedDir}, err
	}
	return cfg
}

// Addr is the address the service listens on.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// AdminAddr is the address of the operators' API, or "".
func (m *Main) AdminAddr() string {
	if m.adln == nil {
		return ""
	}
	return m.adln.Addr().String()
}

// Run serves until ctx ends, then shuts down gracefully.
func (m *Main) Run(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- m.srv.Serve(m.ln) }()
	if m.admin != nil {
		go func() { errc <- m.admin.Serve(m.adln) }()
	}
	rctx, stopRunner := context.WithCancel(ctx)
	defer stopRunner()
	if m.runner != nil {
		m.ran = make(chan struct{})
		go func() {
			defer close(m.ran)
			m.runner.Run(rctx)
		}()
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	stopRunner()
	if m.ran != nil {
		<-m.ran
	}
	if err != nil {
		return err
	}
	m.node.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = m.srv.Shutdown(sctx)
	if m.admin != nil {
		m.admin.Shutdown(sctx)
	}
	return err
}

// Close releases the listeners, the money ledger and the node (which
// writes a last canary and closes the store). The node sweeps expired
// records while it is open.
func (m *Main) Close() error {
	var err error
	for _, c := range []io.Closer{m.ln, m.adln} {
		if c != nil {
			c.Close()
		}
	}
	if m.bank != nil {
		err = m.bank.close()
	}
	if m.node != nil {
		if cerr := m.node.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Handler is the service's routes.
func (m *Main) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /payments", m.failBeforeAndAfter(m.mw.Handler(http.HandlerFunc(m.pay))))
	mux.HandleFunc("GET /payments/sent", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.bank.sent())
	})
	mux.HandleFunc("GET /payments/resolver", func(w http.ResponseWriter, r *http.Request) {
		var s spent.ResolveStats
		if m.runner != nil {
			s = m.runner.Stats()
		}
		writeJSON(w, http.StatusOK, resolverStats{
			On: m.runner != nil, Completed: s.Completed, Released: s.Released, Elsewhere: s.Elsewhere,
			Left: s.Left, Waiting: s.Waiting, ListErrors: s.ListErrors,
		})
	})
	return mux
}

// fail draws one injected failure.
func (m *Main) fail() bool { return m.FailRate > 0 && mrand.Float64() < m.FailRate }

// crash draws one simulated crash, which aborts the request at once: its
// answer is never stored.
func (m *Main) crash(id, where string) {
	if m.CrashRate > 0 && mrand.Float64() < m.CrashRate {
		m.log.Warn("simulated crash "+where, "payment_id", id)
		panic(http.ErrAbortHandler)
	}
}

// failBeforeAndAfter injects failures 1 (before the middleware's check) and
// 3 (after the money was sent and the answer stored: the answer is lost).
func (m *Main) failBeforeAndAfter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.fail() {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "simulated failure 1"})
			return
		}
		rec := &recorder{header: make(http.Header)}
		next.ServeHTTP(rec, r)
		if rec.status == http.StatusCreated && rec.header.Get(idempotency.HeaderReplayed) == "" && m.fail() {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "simulated failure 3"})
			return
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		w.Write(rec.body)
	})
}

// payment is the body of POST /payments.
type payment struct {
	// Amount is what to send, in the smallest unit of the currency.
	Amount int64 `json:"amount"`
	// Destination is the account to send it to.
	Destination string `json:"destination"`
}

// pay sends the money: state before side effect.
func (m *Main) pay(w http.ResponseWriter, r *http.Request) {
	var p payment
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || dec.More() {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want a JSON object {\"amount\", \"destination\"}"})
		return
	}
	if p.Amount <= 0 || p.Destination == "" || len(p.Destination) > 64 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "amount must be positive, destination 1 to 64 bytes"})
		return
	}
	if m.fail() {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "simulated failure 2"})
		return
	}
	if err := idempotency.Applied(r); err != nil {
		return // the middleware answers: replayed, in progress, unknown, ...
	}
	k, _ := idempotency.KeyOf(r)
	id := m.ledger.HashKey(nsApplied, k.LedgerKey).String()
	if m.Delay > 0 {
		time.Sleep(m.Delay)
	}
	t := transfer{ID: id, Seq: k.AppliedSeq.String(), Amount: p.Amount, Destination: p.Destination, At: time.Now().UTC()}
	m.crash(id, "before the money left")
	err := error(nil)
	if m.beforeSend != nil {
		err = m.beforeSend(t)
	}
	if err == nil {
		err = m.bank.send(t)
	}
	switch {
	case errors.Is(err, errVoided):
		// This attempt outlived its lease and the resolver voided it (and
		// released its marker): no money moved, and the client's retry
		// pays with a new attempt. Nothing of this one may be stored.
		m.log.Warn("payment attempt voided by the resolver; the retry pays", "payment_id", id, "seq", t.Seq)
		panic(http.ErrAbortHandler)
	case err != nil:
		// Whether the money left is unknown: hold the key for the
		// resolver (or an operator).
		m.log.Error("bank failed; payment outcome unknown", "payment_id", id, "err", err)
		panic(http.ErrAbortHandler)
	}
	m.crash(id, "after the money left")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(paymentAnswer(t))
}

// paymentAnswer is the body of the 201 that answers a payment sent as t:
// the handler's, and the resolver's for a payment whose answer was lost.
func paymentAnswer(t transfer) []byte {
	b, _ := json.Marshal(map[string]any{
		"payment_id": t.ID, "state": "applied", "amount": t.Amount, "destination": t.Destination, "seq": t.Seq,
	})
	return append(b, '\n')
}

// resolve is the service's resolver (idempotency.Options.Resolve): it
// settles an unknown outcome against the bank's books. The bank looks the
// attempt (the payment id and the marker's seq) up and, when it finds no
// transfer, voids the attempt in the same step, so that a send of it still
// in flight is refused: only then is "not applied" safe, since the client's
// retry pays again. A transfer found is answered as the handler would have
// answered it, byte for byte. With --fail-rate, the look-up fails (the bank
// does not answer) with that probability: the runner tries again later.
func (m *Main) resolve(_ context.Context, u idempotency.UnknownOutcome) (idempotency.Resolution, error) {
	if m.fail() {
		return idempotency.Resolution{}, errors.New("simulated failure 4: the bank's look-up did not answer")
	}
	t, sent, err := m.bank.settle(u.Hash.String(), u.Seq.String())
	switch {
	case err != nil:
		return idempotency.Resolution{}, err
	case !sent:
		return idempotency.Resolution{Verdict: spent.NotApplied}, nil
	}
	return idempotency.Resolution{
		Verdict: spent.Applied,
		Status:  http.StatusCreated,
		Header:  http.Header{"Content-Type": {"application/json"}},
		Body:    paymentAnswer(t),
	}, nil
}

// resolverStats is the body of GET /payments/resolver: what the resolver
// did since the service started.
type resolverStats struct {
	On         bool   `json:"on"`
	Completed  uint64 `json:"completed"`
	Released   uint64 `json:"released"`
	Elsewhere  uint64 `json:"elsewhere"`
	Left       uint64 `json:"left"`
	Waiting    int    `json:"waiting"`
	ListErrors uint64 `json:"list_errors"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// recorder buffers a response for failBeforeAndAfter.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

// Header returns the recorded header map.
func (r *recorder) Header() http.Header { return r.header }

// WriteHeader records the first status.
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

// Write buffers p.
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body = append(r.body, p...)
	return len(p), nil
}
