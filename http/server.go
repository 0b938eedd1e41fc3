package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/door"
	"github.com/spentledger/spent/internal/grant"
	"github.com/spentledger/spent/internal/problem"
	"github.com/spentledger/spent/internal/strictjson"
)

// DefaultMaxBody is the default limit on a request body: 32 MiB.
const DefaultMaxBody = 32 << 20

// Config configures a Server. Start from DefaultConfig.
type Config struct {
	// Tokens are the accepted bearer tokens. With none, authentication is
	// off and every request may do everything: bind such a server to
	// loopback only.
	Tokens []Token
	// MaxBody is the largest request body accepted, in bytes; larger bodies
	// are answered 413. Zero means DefaultMaxBody.
	MaxBody int64
	// Registerer receives the server's metrics. Nil means a private registry
	// that also holds the Go runtime and process collectors.
	Registerer prometheus.Registerer
	// Gatherer is served at /metrics. Nil means the Registerer when it is
	// also a Gatherer (a *prometheus.Registry), else the private registry.
	Gatherer prometheus.Gatherer
	// Logger receives store failures and internal errors; nil discards them.
	// Nothing is logged per request: a failing store is logged when it
	// starts failing (with the cause), at most once per StoreLogInterval
	// while it goes on failing (with the count of requests refused), and
	// when it answers again (with the duration and the count).
	Logger *slog.Logger
	// StoreLogInterval is how often, at most, a store that goes on failing
	// is logged. Zero means DefaultStoreLogInterval.
	StoreLogInterval time.Duration
	// Ready is the /readyz probe. Nil means: a Get of a fixed key in the
	// first namespace either finds a record or answers not_found.
	Ready func(context.Context) error
	// MaxWait is the longest "wait" a claim may ask for (see
	// spent.Claim.Wait); a longer one is refused 400 invalid, naming the
	// bound. Zero means DefaultMaxWait; at most spent.MaxWait. The
	// http.Server's WriteTimeout must be longer, or a waiting request is
	// cut off.
	MaxWait time.Duration
	// Throttle counts and delays the requests refused for an unknown
	// bearer token, shared with the server's other doors (package door);
	// nil means one of its own, logging to Logger.
	Throttle *door.Throttle
	// MaxAuthFailures is how many requests with an unknown token one
	// connection may send before its answer closes it (its connection must
	// be admitted by door.Conns.Serve); zero means door's default.
	MaxAuthFailures int
	// Answers, when set, is the budget the stored results in answers not
	// yet written hold together, shared with the server's other doors (the
	// bodies', the RESP replies'): a client that does not read keeps its
	// answer in memory until the write times out. A result that does not
	// fit is not sent: a read, or a single claim's replay, is answered 503
	// unavailable (nothing decided that its retry could contradict), and a
	// batch's replays come with result_omitted. Nil: no bound beyond each
	// answer's own.
	Answers *door.Budget
}

// DefaultMaxWait is the default bound on a claim's wait: 30 seconds.
const DefaultMaxWait = 30 * time.Second

// DefaultConfig returns a Config with the default body limit, no tokens
// (authentication off) and private metrics.
func DefaultConfig() Config {
	return Config{MaxBody: DefaultMaxBody}
}

// Validate refuses unusable settings: a negative body limit, or tokens that
// are short, malformed, duplicated or without scopes. NewServer also checks
// that every token's namespaces are configured in the ledger.
func (c Config) Validate() error {
	if c.MaxBody < 0 {
		return fmt.Errorf("http: max body %d: must not be negative", c.MaxBody)
	}
	if c.MaxWait < 0 || c.MaxWait > spent.MaxWait {
		return fmt.Errorf("http: max wait %v: want 0 (the default, %v) to %v", c.MaxWait, DefaultMaxWait, spent.MaxWait)
	}
	if c.StoreLogInterval < 0 {
		return fmt.Errorf("http: store log interval %v: must not be negative", c.StoreLogInterval)
	}
	_, err := grant.New("http", c.Tokens, nil)
	return err
}

// Server answers the HTTP API over a Ledger. It is an http.Handler; wrap it
// in an http.Server with timeouts of your choosing.
type Server struct {
	ledger  *spent.Ledger
	maxBody int64
	grants  grant.Set
	m       *metrics
	scrape  http.Handler
	log     *slog.Logger
	ready   func(context.Context) error
	maxWait time.Duration
	names   map[string]string // namespace names, for interning
	pool    sync.Pool         // *exchange

	throttle        *door.Throttle
	answers         *door.Budget
	maxAuthFailures int
	sleep           func(context.Context, time.Duration, <-chan struct{})

	health    *stateLog // the store, as requests find it
	readiness *stateLog // the readiness probe
}

// exchange holds the buffers of one request, reused across requests.
type exchange struct {
	in     []byte
	out    []byte
	d      strictjson.Decoder
	claims []spent.Claim
	held   int64 // reserved of the answers' budget until the answer is written
}

// freeAnswer is the most result bytes an answer carries without reserving
// room for them (see room).
const freeAnswer = 16 << 10

// room reserves, of the answers' budget, room for the stored results of
// x's answer (n bytes, as they are encoded) until it is written, and
// reports whether there was room. Results of at most freeAnswer bytes need
// none, and so does a server without the budget.
func (s *Server) room(x *exchange, n int) bool {
	if n <= freeAnswer {
		return true
	}
	return s.reserve(x, n)
}

// reserve is room without the free allowance: it reserves n bytes of the
// answers' budget for x's answer, when the server has the budget.
func (s *Server) reserve(x *exchange, n int) bool {
	if s.answers == nil {
		return true
	}
	if !s.answers.TryAcquire(int64(n)) {
		return false
	}
	x.held += int64(n)
	return true
}

// errNoRoom is the answer to a read or a replay whose result the answers'
// budget cannot hold.
func (s *Server) errNoRoom() error {
	return spent.Errorf(spent.EUnavailable, "server busy: the answers in flight fill the budget of %d bytes (max_bodies); the stored result was not sent, and nothing was decided that a retry could contradict; retry", s.answers.Total())
}

// encodedResult is the size of a result in an answer, base64.
func encodedResult(n int) int { return (n + 2) / 3 * 4 }

// maxPooled is the largest buffer kept for reuse; bigger ones are dropped so
// that one huge batch does not pin its memory forever.
const maxPooled = 1 << 20

// NewServer returns a Server over l.
func NewServer(l *spent.Ledger, cfg Config) (*Server, error) {
	if l == nil {
		return nil, errors.New("http: nil ledger")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	grants, err := grant.New("http", cfg.Tokens, l)
	if err != nil {
		return nil, err
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	reg, gat := cfg.Registerer, cfg.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg = r
		if gat == nil {
			gat = r
		}
	}
	if gat == nil {
		if g, ok := reg.(prometheus.Gatherer); ok {
			gat = g
		} else {
			gat = prometheus.NewRegistry()
		}
	}
	m, err := newMetrics(reg, l.Namespaces())
	if err != nil {
		return nil, fmt.Errorf("http: metrics: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		ledger:  l,
		maxBody: cfg.MaxBody,
		grants:  grants,
		m:       m,
		scrape:  promhttp.HandlerFor(gat, promhttp.HandlerOpts{ErrorLog: slogPrinter{log}}),
		log:     log,
		ready:   cfg.Ready,
		maxWait: cfg.MaxWait,
	}
	if s.maxWait == 0 {
		s.maxWait = DefaultMaxWait
	}
	s.answers = cfg.Answers
	s.throttle = cfg.Throttle
	if s.throttle == nil {
		s.throttle = door.NewThrottle(log)
	}
	s.maxAuthFailures = cfg.MaxAuthFailures
	if s.maxAuthFailures <= 0 {
		s.maxAuthFailures = door.DefaultMaxAuthFailures
	}
	s.sleep = sleepCtx
	if s.ready == nil {
		ns := l.Namespaces()[0]
		s.ready = func(ctx context.Context) error {
			_, err := l.Get(ctx, ns, "spent/readyz")
			if spent.ErrorCode(err) == spent.ENotFound {
				return nil
			}
			return err
		}
	}
	s.names = make(map[string]string)
	for _, ns := range l.Namespaces() {
		s.names[ns] = ns
	}
	s.pool.New = func() any { return &exchange{d: strictjson.Decoder{Intern: s.names}} }
	every := cfg.StoreLogInterval
	if every == 0 {
		every = DefaultStoreLogInterval
	}
	s.health = &stateLog{log: log, every: every, now: time.Now,
		down:  "http: store unavailable: refusing requests until it answers again",
		still: "http: store still unavailable",
		up:    "http: store available again"}
	s.readiness = &stateLog{log: log, every: every, now: time.Now,
		down: "http: not ready", still: "http: still not ready", up: "http: ready again"}
	return s, nil
}

// answered records what a ledger call's error says of the store: no error,
// or one that only a store that answered gives, means the store works.
func (s *Server) answered(err error) {
	switch spent.ErrorCode(err) {
	case "", spent.ENotFound, spent.ENotPending, spent.ESeqMismatch, spent.ELeaseExpired:
		s.health.ok()
	}
}

type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Error("metrics: " + fmt.Sprint(v...)) }

func routeOf(path string) route {
	switch path {
	case "/v1/claim":
		return routeClaim
	case "/v1/claims":
		return routeClaims
	case "/v1/complete":
		return routeComplete
	case "/v1/release":
		return routeRelease
	case "/v1/get":
		return routeGet
	case "/v1/unknown":
		return routeUnknown
	case "/v1/seq":
		return routeSeq
	case "/healthz":
		return routeHealthz
	case "/readyz":
		return routeReadyz
	case "/metrics":
		return routeMetrics
	case OpenAPIPath:
		return routeOpenAPI
	}
	return routeOther
}

// Shared header values; net/http only reads them.
var (
	hdrJSON    = []string{"application/json"}
	hdrTrue    = []string{"true"}
	hdrPost    = []string{"POST"}
	hdrGet     = []string{"GET, HEAD"}
	hdrNoStore = []string{"no-store"}
	hdrBearer  = []string{`Bearer realm="spent"`}
	hdrBadTok  = []string{`Bearer realm="spent", error="invalid_token"`}
)

// ServeHTTP answers one request of the API described in docs/http-api.md.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rt := routeOf(r.URL.Path)
	x := s.pool.Get().(*exchange)
	status := 0
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("http: panic", "route", routes[rt], "panic", p)
			status = s.fail(w, x, rt, spent.Errorf(spent.EInternal, "internal error"))
		}
		s.m.request(rt, status, time.Since(start))
		markCounted(r)
		s.release(x)
	}()
	switch rt {
	case routeHealthz, routeReadyz, routeMetrics:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header()["Allow"] = hdrGet
			status = s.problem(w, x, spent.EInvalid, http.StatusMethodNotAllowed, "method "+spent.QuoteInput(r.Method)+" not allowed; use GET")
			return
		}
	case routeOpenAPI:
		status = s.openAPI(w, x, r)
		return
	case routeOther:
		status = s.problem(w, x, spent.EInvalid, http.StatusNotFound, "no such endpoint: "+spent.QuoteInput(r.URL.Path))
		return
	default:
		if r.Method != http.MethodPost {
			w.Header()["Allow"] = hdrPost
			status = s.problem(w, x, spent.EInvalid, http.StatusMethodNotAllowed, "method "+spent.QuoteInput(r.Method)+" not allowed; use POST")
			return
		}
	}
	switch rt {
	case routeHealthz:
		status = s.reply(w, append(x.out[:0], "{\"status\":\"ok\"}\n"...))
	case routeReadyz:
		status = s.readyz(w, r, x)
	case routeMetrics:
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		s.scrape.ServeHTTP(sw, r)
		status = sw.status
	default:
		status = s.api(w, r, x, rt)
	}
}

func (s *Server) release(x *exchange) {
	if x.held > 0 {
		s.answers.Release(x.held)
		x.held = 0
	}
	if cap(x.in) > maxPooled || cap(x.out) > maxPooled || cap(x.claims) > maxPooled/64 {
		return
	}
	clear(x.claims)
	x.claims = x.claims[:0]
	x.d.Reset(nil)
	s.pool.Put(x)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) readyz(w http.ResponseWriter, r *http.Request, x *exchange) int {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		s.m.storeError(routeReadyz)
		s.readiness.fail(routeReadyz, err)
		return s.problem(w, x, spent.EUnavailable, http.StatusServiceUnavailable, "store not ready")
	}
	s.readiness.ok()
	return s.reply(w, append(x.out[:0], "{\"status\":\"ready\"}\n"...))
}

// api runs the steps every /v1 endpoint shares: authenticate, check the
// content type, read the body; then the endpoint's own work.
func (s *Server) api(w http.ResponseWriter, r *http.Request, x *exchange, rt route) int {
	g, err := s.authenticate(r)
	if err != nil {
		if err == errBadToken {
			s.refused(w, r)
		}
		return s.fail(w, x, rt, err)
	}
	if err := checkContentType(r); err != nil {
		return s.fail(w, x, rt, err)
	}
	if err := s.readBody(r, x); err != nil {
		return s.fail(w, x, rt, err)
	}
	x.d.Reset(x.in)
	switch rt {
	case routeClaim:
		return s.claim(w, r, x, g)
	case routeClaims:
		return s.claims(w, r, x, g)
	case routeComplete, routeRelease:
		return s.end(w, r, x, g, rt)
	case routeGet:
		return s.get(w, r, x, g)
	case routeSeq:
		return s.seq(w, r, x, g)
	default:
		return s.unknown(w, r, x, g)
	}
}

func checkContentType(r *http.Request) error {
	v := r.Header["Content-Type"]
	if len(v) == 1 {
		if v[0] == "application/json" {
			return nil
		}
		mt, _, _ := strings.Cut(v[0], ";")
		if strings.EqualFold(strings.TrimSpace(mt), "application/json") {
			return nil
		}
	}
	// Insisting on JSON makes a browser ask before sending, so that a web
	// page cannot claim keys on a loopback server without authentication.
	return spent.Errorf(spent.EInvalid, "Content-Type must be application/json")
}

// readBody reads the whole body into x.in, up to s.maxBody bytes.
func (s *Server) readBody(r *http.Request, x *exchange) error {
	if r.ContentLength > s.maxBody {
		return tooLarge(s.maxBody)
	}
	want := r.ContentLength + 1 // room to see EOF without growing
	if want <= 0 {
		want = 4096
	}
	buf := x.in[:0]
	if int64(cap(buf)) < want {
		buf = make([]byte, 0, want)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > s.maxBody {
			x.in = buf[:0]
			return tooLarge(s.maxBody)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			x.in = buf[:0]
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				// A budget (see LimitBodies) stopped the body first.
				return tooLarge(s.maxBody)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// The server's read_timeout: say so, without the
				// socket's addresses.
				return spent.Errorf(spent.EInvalid, "reading body: it did not arrive within the server's read_timeout (%d of %d bytes read)", len(buf), r.ContentLength)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return spent.Errorf(spent.EInvalid, "reading body: the connection ended %d bytes into it", len(buf))
			}
			return spent.Errorf(spent.EInvalid, "reading body: %s", err.Error())
		}
	}
	x.in = buf
	return nil
}

func tooLarge(max int64) error {
	return spent.Errorf(spent.ETooLarge, "body over %d bytes", max)
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request, x *exchange, g *grant.Grant) int {
	var c spent.Claim
	if err := decodeClaim(&x.d, -1, &c); err != nil {
		return s.fail(w, x, routeClaim, err)
	}
	if err := x.d.End(); err != nil {
		return s.fail(w, x, routeClaim, malformed(-1, err))
	}
	if !g.Allows(c.Namespace, false) {
		return s.fail(w, x, routeClaim, forbidden(c.Namespace, false))
	}
	if c.Wait > s.maxWait {
		return s.fail(w, x, routeClaim, spent.Errorf(spent.EInvalid, "wait: %s seconds: this server waits at most %s seconds (max_wait)",
			strictjson.AppendSeconds(nil, c.Wait), strictjson.AppendSeconds(nil, s.maxWait)))
	}
	start := time.Now()
	res, err := s.ledger.Claim(r.Context(), c)
	s.m.duration[0].Observe(time.Since(start).Seconds())
	s.answered(err)
	if err != nil {
		return s.fail(w, x, routeClaim, err)
	}
	if res.Outcome == spent.Replayed && !s.room(x, encodedResult(len(res.Record.Result))) {
		// A replay: its retry is a replay too.
		return s.busy(w, x)
	}
	s.m.outcome(&res)
	switch res.Outcome {
	case spent.Replayed:
		w.Header()["Idempotent-Replayed"] = hdrTrue
	case spent.InProgress:
		if !res.Unknown {
			w.Header()["Retry-After"] = []string{problem.RetryAfter(res.RetryAfter)}
		}
	}
	x.out = appendAnswer(x.out[:0], &res)
	return s.reply(w, append(x.out, '\n'))
}

func (s *Server) claims(w http.ResponseWriter, r *http.Request, x *exchange, g *grant.Grant) int {
	var err error
	x.claims, err = decodeClaims(&x.d, spent.MaxBatch, x.claims[:0])
	if err != nil {
		return s.fail(w, x, routeClaims, err)
	}
	if err := x.d.End(); err != nil {
		return s.fail(w, x, routeClaims, malformed(-1, err))
	}
	last := ""
	for i := range x.claims {
		if ns := x.claims[i].Namespace; i == 0 || ns != last {
			if !g.Allows(ns, false) {
				return s.fail(w, x, routeClaims, forbidden(ns, false))
			}
			last = ns
		}
	}
	start := time.Now()
	res, err := s.ledger.ClaimBatch(r.Context(), x.claims)
	s.m.duration[1].Observe(time.Since(start).Seconds())
	s.answered(err)
	if err != nil {
		return s.fail(w, x, routeClaims, err)
	}
	s.m.batchSize.Observe(float64(len(x.claims)))
	s.m.outcomes(res)
	total := 0
	for i := range res {
		if res[i].Outcome == spent.Replayed {
			total += encodedResult(len(res[i].Record.Result))
		}
	}
	if !s.room(x, total) {
		// The claims are decided: their answers go, the replays whose
		// results the budget cannot hold without them, for the client to
		// read with /v1/get. Results are taken in order while they fit.
		for i := range res {
			if res[i].Outcome == spent.Replayed && res[i].Record.Result != nil && !s.reserve(x, encodedResult(len(res[i].Record.Result))) {
				res[i].Record.Result, res[i].ResultOmitted = nil, true
			}
		}
	}
	b := append(x.out[:0], `{"results":[`...)
	for i := range res {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendAnswer(b, &res[i])
	}
	x.out = append(b, "]}\n"...)
	return s.reply(w, x.out)
}

// end answers complete and release.
func (s *Server) end(w http.ResponseWriter, r *http.Request, x *exchange, g *grant.Grant, rt route) int {
	var t target
	names := releaseNames
	if rt == routeComplete {
		names = completeNames
	}
	if err := decodeTarget(&x.d, names, rt == routeComplete, &t); err != nil {
		return s.fail(w, x, rt, err)
	}
	if err := x.d.End(); err != nil {
		return s.fail(w, x, rt, malformed(-1, err))
	}
	if !g.Allows(t.namespace, t.force) {
		return s.fail(w, x, rt, forbidden(t.namespace, t.force))
	}
	if rt == routeRelease {
		err := s.ledger.Release(r.Context(), spent.Release{
			Namespace: t.namespace, Key: t.key, Hash: t.hash, Seq: t.seq, Force: t.force,
		})
		s.answered(err)
		if err != nil {
			return s.fail(w, x, rt, err)
		}
		return s.reply(w, append(x.out[:0], "{}\n"...))
	}
	rec, err := s.ledger.Complete(r.Context(), spent.Completion{
		Namespace: t.namespace, Key: t.key, Hash: t.hash, Seq: t.seq, Result: t.result, Force: t.force,
	})
	s.answered(err)
	if err != nil {
		return s.fail(w, x, rt, err)
	}
	x.out = appendRecord(x.out[:0], &rec)
	return s.reply(w, append(x.out, '\n'))
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, x *exchange, g *grant.Grant) int {
	var ns, key string
	if err := decodeGet(&x.d, &ns, &key); err != nil {
		return s.fail(w, x, routeGet, err)
	}
	if err := x.d.End(); err != nil {
		return s.fail(w, x, routeGet, malformed(-1, err))
	}
	if !g.Allows(ns, false) {
		return s.fail(w, x, routeGet, forbidden(ns, false))
	}
	rec, err := s.ledger.Get(r.Context(), ns, key)
	s.answered(err)
	if err != nil {
		return s.fail(w, x, routeGet, err)
	}
	if !s.room(x, encodedResult(len(rec.Result))) {
		return s.busy(w, x)
	}
	x.out = appendRecord(x.out[:0], &rec)
	return s.reply(w, append(x.out, '\n'))
}

func (s *Server) unknown(w http.ResponseWriter, r *http.Request, x *exchange, g *grant.Grant) int {
	var ns string
	var limit int
	if err := decodeUnknown(&x.d, &ns, &limit); err != nil {
		return s.fail(w, x, routeUnknown, err)
	}
	if err := x.d.End(); err != nil {
		return s.fail(w, x, routeUnknown, malformed(-1, err))
	}
	if !g.Allows(ns, true) {
		return s.fail(w, x, routeUnknown, forbidden(ns, true))
	}
	recs, err := s.ledger.Unknown(r.Context(), ns, limit)
	s.answered(err)
	if err != nil {
		return s.fail(w, x, routeUnknown, err)
	}
	b := append(x.out[:0], `{"records":[`...)
	for i := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRecord(b, &recs[i])
	}
	x.out = append(b, "]}\n"...)
	return s.reply(w, x.out)
}

// reply writes a 200 JSON answer.
func (s *Server) reply(w http.ResponseWriter, body []byte) int {
	return s.write(w, http.StatusOK, hdrJSON, body)
}

func (s *Server) write(w http.ResponseWriter, status int, ctype []string, body []byte) int {
	h := w.Header()
	h["Content-Type"] = ctype
	h["Cache-Control"] = hdrNoStore
	if len(body) > 2048 {
		// Smaller bodies get their Content-Length from net/http for free.
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.WriteHeader(status)
	w.Write(body)
	return status
}

// fail answers err as a problem document, with the status its code maps to.
func (s *Server) fail(w http.ResponseWriter, x *exchange, rt route, err error) int {
	code := spent.ErrorCode(err)
	detail := "internal error"
	var e *spent.Error
	if errors.As(err, &e) && code != spent.EInternal {
		detail = e.Message
	}
	switch code {
	case spent.EUnavailable:
		s.m.storeError(rt)
		s.health.fail(rt, err)
		// Retryable: the embedded store mends itself within seconds
		// (a reopen is tried at least every 5 s).
		w.Header()["Retry-After"] = hdrOne
	case spent.EInternal:
		s.log.Error("http: internal error", "route", routes[rt], "err", err)
	case spent.EUnauthorized:
		if err == errBadToken {
			w.Header()["Www-Authenticate"] = hdrBadTok
		} else {
			w.Header()["Www-Authenticate"] = hdrBearer
		}
	}
	return s.problem(w, x, code, StatusOf(code), detail)
}

// busy answers 503 for a result the answers' budget cannot hold, without
// counting it as a store failure.
func (s *Server) busy(w http.ResponseWriter, x *exchange) int {
	w.Header()["Retry-After"] = hdrOne
	var e *spent.Error
	errors.As(s.errNoRoom(), &e)
	return s.problem(w, x, spent.EUnavailable, http.StatusServiceUnavailable, e.Message)
}

func (s *Server) problem(w http.ResponseWriter, x *exchange, code string, status int, detail string) int {
	x.out = problem.Append(x.out[:0], ProblemType, code, titleOf(code), status, detail)
	problem.Write(w, status, x.out)
	return status
}
