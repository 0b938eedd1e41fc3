package console

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/door"
	"github.com/spentledger/spent/internal/grant"
)

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// Defaults of [Config].
const (
	// DefaultSessionLife is how long a login lasts.
	DefaultSessionLife = time.Hour
	// DefaultMaxSessions is how many sessions the console keeps at once.
	DefaultMaxSessions = 1024
	// DefaultMaxForm is the largest form body accepted, in bytes: room for
	// a result of about 60 KiB typed into the page. Larger results are
	// stored with `spent unknown resolve`.
	DefaultMaxForm = 64 << 10
	// DefaultSampleInterval is how often the sampler reads the claim
	// counters.
	DefaultSampleInterval = 10 * time.Second
	// DefaultWindow is the time the chart covers.
	DefaultWindow = time.Hour
	// MaxUnknown is the most unknown outcomes the page lists, oldest lease
	// first.
	MaxUnknown = 100
	// MaxTokenLen is the longest token the login form accepts, in bytes.
	MaxTokenLen = 4096
	// anonLife is the life of a session that has not logged in: it only
	// carries the CSRF token of the login form.
	anonLife = 15 * time.Minute
)

// Config configures a Console. Build it with [DefaultConfig].
type Config struct {
	// Ledger is the ledger the page shows and resolves in.
	Ledger *spent.Ledger
	// Tokens are the server's bearer tokens (the API's, http.Token). Only
	// a token with the admin scope logs in; it sees the namespaces where it
	// has it. Empty means auth is off: every visitor is an operator, so
	// serve the console on loopback only, as the API.
	Tokens []grant.Token
	// Gatherer reads the server's metrics: the ledger's claim counter
	// spent_ledger_claims_total (node.MetricLedgerClaims) by namespace and
	// outcome, which counts the claims of every front end. Nil shows no
	// counts and an empty chart.
	Gatherer prometheus.Gatherer
	// Secure marks the session cookie Secure: set it when the server
	// serves TLS.
	Secure bool
	// Label says which server this is in the page's header ("node 1,
	// pebble"); optional.
	Label string
	// SessionLife is how long a login lasts; at most a day.
	SessionLife time.Duration
	// MaxSessions bounds the sessions kept at once; when full, the oldest
	// session that has not logged in goes first, then the oldest.
	MaxSessions int
	// MaxForm is the largest form body accepted, in bytes.
	MaxForm int64
	// SampleInterval is how often Run reads the claim counters.
	SampleInterval time.Duration
	// Window is the time the chart covers: Window/SampleInterval samples
	// are kept (at most 100,000).
	Window time.Duration
	// Now is the clock of sessions and samples.
	Now func() time.Time
	// Rand is the source of session ids and CSRF tokens.
	Rand io.Reader
	// Logger logs resolutions, and refused logins when Throttle is nil;
	// nil discards.
	Logger *slog.Logger
	// Throttle counts refused logins by source address, logs them with
	// their reason (which the page never tells), and says how long each
	// waits before it is answered. Share the server's one [door.Throttle],
	// so that refused sign-ins at every door count together. Nil: a
	// throttle of the console's own, logging to Logger, on the clock Now.
	Throttle *door.Throttle
}

// DefaultConfig returns a configuration over ledger with the default limits,
// the system clock and crypto/rand; set Tokens, Gatherer and Secure.
func DefaultConfig(ledger *spent.Ledger) Config {
	return Config{
		Ledger:         ledger,
		SessionLife:    DefaultSessionLife,
		MaxSessions:    DefaultMaxSessions,
		MaxForm:        DefaultMaxForm,
		SampleInterval: DefaultSampleInterval,
		Window:         DefaultWindow,
		Now:            time.Now,
		Rand:           rand.Reader,
	}
}

// Validate refuses unusable settings.
func (c *Config) Validate() error {
	switch {
	case c.Ledger == nil:
		return errors.New("console: no ledger")
	case c.SessionLife <= 0 || c.SessionLife > 24*time.Hour:
		return fmt.Errorf("console: session life %v: want more than 0 and at most 24h", c.SessionLife)
	case c.MaxSessions < 1:
		return fmt.Errorf("console: max sessions %d: want at least 1", c.MaxSessions)
	case c.MaxForm < 1024:
		return fmt.Errorf("console: max form %d bytes: want at least 1024", c.MaxForm)
	case c.SampleInterval <= 0:
		return fmt.Errorf("console: sample interval %v: must be positive", c.SampleInterval)
	case c.Window < c.SampleInterval || c.Window/c.SampleInterval > 100_000:
		return fmt.Errorf("console: window %v: want 1 to 100000 sample intervals of %v", c.Window, c.SampleInterval)
	case c.Now == nil:
		return errors.New("console: no clock")
	case c.Rand == nil:
		return errors.New("console: no randomness")
	}
	return nil
}

// Console is the operator's web page. It is an http.Handler for the paths
// under [Prefix].
type Console struct {
	cfg      Config
	grants   grant.Set
	sessions *sessions
	sampler  *sampler
	pages    map[string]*template.Template
	static   http.Handler
	handler  http.Handler
	log      *slog.Logger
	throttle *door.Throttle
	started  time.Time // the counters' start, near enough
	// sleep waits before a refused login is answered: sleepCtx, or a
	// recorder in tests (SetSleep).
	sleep func(ctx context.Context, d time.Duration)
}

//go:embed templates static
var assets embed.FS

// New checks cfg and returns its Console.
func New(cfg Config) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gs, err := grant.New("console", cfg.Tokens, cfg.Ledger)
	if err != nil {
		return nil, err
	}
	c := &Console{
		cfg:      cfg,
		grants:   gs,
		sessions: newSessions(cfg.MaxSessions, cfg.Rand),
		sampler:  newSampler(cfg.Gatherer, int(cfg.Window/cfg.SampleInterval)+1),
		pages:    map[string]*template.Template{},
		log:      cfg.Logger,
		started:  cfg.Now(),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.throttle, c.sleep = cfg.Throttle, sleepCtx
	if c.throttle == nil {
		c.throttle = door.NewThrottle(c.log)
		c.throttle.SetClock(cfg.Now)
	}
	for _, p := range []string{"index", "login", "error"} {
		t, err := template.New(p).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", p, err)
		}
		c.pages[p] = t
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, fmt.Errorf("console: assets: %w", err)
	}
	c.static = http.StripPrefix(Prefix+"static/", http.FileServerFS(static))

	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"{$}", c.index)
	mux.HandleFunc("GET "+Prefix+"login", c.loginPage)
	mux.HandleFunc("POST "+Prefix+"login", c.login)
	mux.HandleFunc("POST "+Prefix+"logout", c.logout)
	mux.HandleFunc("POST "+Prefix+"resolve", c.resolve)
	mux.HandleFunc("POST "+Prefix+"lookup", c.lookup)
	mux.HandleFunc("GET "+Prefix+"chart.svg", c.chart)
	mux.Handle("GET "+Prefix+"static/", c.static)
	// The other methods of each page get a page that says which it takes.
	for path, allow := range map[string]string{
		"{$}": "GET, HEAD", "login": "GET, HEAD, POST", "logout": "POST", "resolve": "POST", "lookup": "POST", "chart.svg": "GET, HEAD",
	} {
		mux.HandleFunc(Prefix+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			c.fail(w, r, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" "+spent.QuoteInput(r.URL.Path)+": this page takes "+allow,
				"Use the console's links and buttons.")
		})
	}
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, spent.ENotFound, "no page "+spent.QuoteInput(r.URL.Path)+" here", "Go to the console's main page.")
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusForbidden, codeCrossOrigin, "cross-origin request refused: the form was not sent from this server's own page",
			"Open the console at its own address and submit the form there.")
	}))
	c.handler = cop.Handler(mux)
	return c, nil
}

// Codes of the console's own refusals, shown on its error page beside the
// spent error codes.
const (
	codeCSRF        = "csrf_failed"
	codeCrossOrigin = "cross_origin"
	codeSession     = "no_session"
)

// contentSecurityPolicy allows the page only its own script, style and
// images, and no framing, form target or base elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// strictTransportSecurity tells a browser that reached the console over
// TLS to use nothing but TLS for this host for a year. It has no
// includeSubDomains: the server does not own its domain's other hosts,
// which may serve plain HTTP.
const strictTransportSecurity = "max-age=31536000"

// ServeHTTP serves the console's pages, its chart and its assets. Every
// answer carries the headers of the page's security policy, and, when the
// request came over TLS, Strict-Transport-Security.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", strictTransportSecurity)
	}
	c.handler.ServeHTTP(w, r)
}

// sleepCtx waits for d, or until ctx ends (the client went away).
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Run samples the claim counters every SampleInterval until ctx ends,
// keeping the last Window of samples for the chart.
func (c *Console) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.SampleInterval)
	defer t.Stop()
	c.sampler.sample(c.cfg.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.sampler.sample(c.cfg.Now())
		}
	}
}

// authOff reports whether no tokens are configured.
func (c *Console) authOff() bool { return len(c.grants) == 0 }
