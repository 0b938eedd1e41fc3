package http

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spentledger/spent"
)

// Metric names, exported so that dashboards and tests name them once.
const (
	// MetricClaims counts answered claims by namespace and outcome.
	MetricClaims = "spent_claims_total"
	// MetricClaimDuration is a histogram of the time the ledger takes to
	// answer a claim request (durable write included), by endpoint ("claim"
	// or "claims"); a batch is one observation.
	MetricClaimDuration = "spent_claim_duration_seconds"
	// MetricBatchSize is a histogram of the number of claims per batch.
	MetricBatchSize = "spent_claim_batch_size"
	// MetricStoreErrors counts requests answered "unavailable" because the
	// store failed, by endpoint.
	MetricStoreErrors = "spent_store_errors_total"
	// MetricRequests counts HTTP requests by route and status code: the
	// Server's routes, and those of the handlers beside it that
	// Server.Instrument counts.
	MetricRequests = "spent_http_requests_total"
	// MetricRequestDuration is a histogram of the time HTTP requests took,
	// from the handler's start to its return, by route (the routes of
	// MetricRequests).
	MetricRequestDuration = "spent_http_request_duration_seconds"
)

// Routes, as they appear in the route label.
var routes = [...]string{
	routeClaim:    "/v1/claim",
	routeClaims:   "/v1/claims",
	routeComplete: "/v1/complete",
	routeRelease:  "/v1/release",
	routeGet:      "/v1/get",
	routeUnknown:  "/v1/unknown",
	routeSeq:      "/v1/seq",
	routeHealthz:  "/healthz",
	routeReadyz:   "/readyz",
	routeMetrics:  "/metrics",
	routeOpenAPI:  OpenAPIPath,
	routeOther:    "other",
}

type route int

const (
	routeClaim route = iota
	routeClaims
	routeComplete
	routeRelease
	routeGet
	routeUnknown
	routeSeq
	routeHealthz
	routeReadyz
	routeMetrics
	routeOpenAPI
	routeOther
	numRoutes
)

// endpoint names the route in the endpoint label ("claim", "get", ...).
func (r route) endpoint() string {
	if r <= routeSeq || r == routeOpenAPI {
		return routes[r][len("/v1/"):]
	}
	return routes[r][1:]
}

// statuses the server answers with; their counters are made up front.
var statuses = [...]int{200, 400, 401, 403, 404, 405, 409, 413, 500, 501, 503}

var outcomes = [...]spent.Outcome{spent.Fresh, spent.Replayed, spent.InProgress, spent.Refused, spent.Mismatch}

func outcomeIndex(o spent.Outcome) int {
	switch o {
	case spent.Fresh:
		return 0
	case spent.Replayed:
		return 1
	case spent.InProgress:
		return 2
	case spent.Refused:
		return 3
	}
	return 4
}

// metrics holds the server's collectors, with the hot series resolved once so
// that the request path never hashes label values.
type metrics struct {
	claims      map[string]*[len(outcomes)]prometheus.Counter
	duration    [2]prometheus.Observer // claim, claims
	batchSize   prometheus.Observer
	storeErrors *prometheus.CounterVec
	requests    *prometheus.CounterVec
	reqByStatus [numRoutes][len(statuses)]prometheus.Counter
	reqDuration *prometheus.HistogramVec
	durByRoute  [numRoutes]prometheus.Observer
}

// register registers c, or reuses the collector already registered under
// the same description (two servers over one registry).
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(T); ok {
				return old, nil
			}
		}
		return c, err
	}
	return c, nil
}

func newMetrics(reg prometheus.Registerer, namespaces []string) (*metrics, error) {
	claims, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricClaims,
		Help: "Claims answered, by namespace and outcome.",
	}, []string{"namespace", "outcome"}))
	if err != nil {
		return nil, err
	}
	duration, err := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricClaimDuration,
		Help:    "Time the ledger took to answer a claim request, durable write included, by endpoint.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50 µs to 1.6 s
	}, []string{"endpoint"}))
	if err != nil {
		return nil, err
	}
	batch, err := register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    MetricBatchSize,
		Help:    "Claims per batch request.",
		Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000},
	}))
	if err != nil {
		return nil, err
	}
	storeErrors, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricStoreErrors,
		Help: "Requests answered unavailable because the store failed, by endpoint.",
	}, []string{"endpoint"}))
	if err != nil {
		return nil, err
	}
	requests, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricRequests,
		Help: "HTTP requests by route and status code.",
	}, []string{"route", "code"}))
	if err != nil {
		return nil, err
	}
	reqDuration, err := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricRequestDuration,
		Help:    "Time HTTP requests took, from the handler's start to its return, by route.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50 µs to 1.6 s
	}, []string{"route"}))
	if err != nil {
		return nil, err
	}
	m := &metrics{
		claims:      make(map[string]*[len(outcomes)]prometheus.Counter, len(namespaces)),
		batchSize:   batch,
		storeErrors: storeErrors,
		requests:    requests,
		reqDuration: reqDuration,
	}
	m.duration[0] = duration.WithLabelValues("claim")
	m.duration[1] = duration.WithLabelValues("claims")
	for _, ns := range namespaces {
		var cs [len(outcomes)]prometheus.Counter
		for i, o := range outcomes {
			cs[i] = claims.WithLabelValues(ns, string(o))
		}
		m.claims[ns] = &cs
	}
	for r := range numRoutes {
		m.durByRoute[r] = reqDuration.WithLabelValues(routes[r])
		for i, st := range statuses {
			m.reqByStatus[r][i] = requests.WithLabelValues(routes[r], strconv.Itoa(st))
		}
	}
	for _, r := range []route{routeClaim, routeClaims, routeComplete, routeRelease, routeGet, routeUnknown, routeSeq, routeReadyz} {
		storeErrors.WithLabelValues(r.endpoint())
	}
	return m, nil
}

func (m *metrics) request(r route, status int, took time.Duration) {
	m.durByRoute[r].Observe(took.Seconds())
	for i, st := range statuses {
		if st == status {
			m.reqByStatus[r][i].Inc()
			return
		}
	}
	m.requests.WithLabelValues(routes[r], strconv.Itoa(status)).Inc()
}

func (m *metrics) outcome(res *spent.Answer) {
	if cs := m.claims[res.Record.Namespace]; cs != nil {
		cs[outcomeIndex(res.Outcome)].Inc()
	}
}

// outcomes counts a batch's outcomes, adding once per series.
func (m *metrics) outcomes(rs []spent.Answer) {
	var last string
	var cs *[len(outcomes)]prometheus.Counter
	var n [len(outcomes)]int
	flush := func() {
		if cs != nil {
			for i, k := range n {
				if k > 0 {
					cs[i].Add(float64(k))
				}
			}
		}
		n = [len(outcomes)]int{}
	}
	for i := range rs {
		if ns := rs[i].Record.Namespace; i == 0 || ns != last {
			flush()
			last, cs = ns, m.claims[ns]
		}
		n[outcomeIndex(rs[i].Outcome)]++
	}
	flush()
}

func (m *metrics) storeError(r route) {
	m.storeErrors.WithLabelValues(r.endpoint()).Inc()
}

// Instrument returns a handler that serves mux, on which s is mounted at
// "/", and counts the requests mux gives its other handlers (the Privacy
// Pass and e-cash routes of spent serve, say) as s counts its own: in
// MetricRequests and MetricRequestDuration, labelled with the path of the
// pattern that matched ("/v1/redeem", "/v1/ecash/spend"), never the
// request's path, so the route label takes no more values than mux has
// patterns. Requests mux would give s go to s directly, which counts them
// once.
func (s *Server) Instrument(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if srv, ok := h.(*Server); ok && srv == s {
			s.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		mux.ServeHTTP(sw, r)
		s.m.patternRequest(patternRoute(pattern), sw.status, time.Since(start))
		markCounted(r)
	})
}

// InstrumentOuter returns h, the whole handler of a server (s, or
// [Server.Instrument] over mux, behind the guards [LimitBodies] and
// [LoopbackOnly] and any other handler in front), counting in
// MetricRequests and MetricRequestDuration the requests that s and
// Instrument did not count: those a guard refused (413 or 503 for the body
// budget, 421 for a Host that is not loopback) and those a handler in front
// answered itself. Each is counted under the route [Server.Route] gives it
// (mux may be nil), so that a refusal shows under the route it was meant
// for. A request is counted once, whoever answers it.
func (s *Server) InstrumentOuter(mux *http.ServeMux, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counted := false
		r = r.WithContext(context.WithValue(r.Context(), countedKey{}, &counted))
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		if !counted {
			s.m.patternRequest(s.Route(mux, r), sw.status, time.Since(start))
		}
	})
}

// countedKey is the context key under which InstrumentOuter leaves a flag
// for the handlers that count a request to set.
type countedKey struct{}

// markCounted tells an InstrumentOuter in front, if any, that r has been
// counted.
func markCounted(r *http.Request) {
	if p, ok := r.Context().Value(countedKey{}).(*bool); ok {
		*p = true
	}
}

// Route returns the route of r as the metrics label it (and as traces may
// name it): one of the Server's own paths, else the path of the pattern of
// mux that r matches, else "other", so that it takes no more values than
// there are routes. mux may be nil when the Server serves alone.
func (s *Server) Route(mux *http.ServeMux, r *http.Request) string {
	if mux != nil {
		if h, pattern := mux.Handler(r); h != s {
			return patternRoute(pattern)
		}
	}
	return routes[routeOf(r.URL.Path)]
}

// patternRoute returns the path of a ServeMux pattern, without its method
// and host ("GET example.com/v1/x" gives "/v1/x"), or "other" for none (a
// request no pattern matched).
func patternRoute(pattern string) string {
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = strings.TrimLeft(pattern[i+1:], " \t")
	}
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return routes[routeOther]
}

// patternRequest counts a request of a route outside the Server's own.
func (m *metrics) patternRequest(route string, status int, took time.Duration) {
	m.reqDuration.WithLabelValues(route).Observe(took.Seconds())
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
}
