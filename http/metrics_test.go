package http_test

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
)

// scrape reads /metrics and returns each sample by its series text, labels
// as the exposition format writes them (sorted by name).
func scrape(tb testing.TB, url string) map[string]float64 {
	tb.Helper()
	a := request(tb, http.MethodGet, url+"/metrics", nil)
	if a.status != http.StatusOK {
		tb.Fatalf("/metrics: got %d", a.status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(a.body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			tb.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func wantSample(tb testing.TB, samples map[string]float64, series string, want float64) {
	tb.Helper()
	got, ok := samples[series]
	if !ok {
		tb.Fatalf("no sample %s", series)
	}
	if got != want {
		tb.Fatalf("%s: got %v, want %v", series, got, want)
	}
}

func TestMetrics(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	before := scrape(t, e.url)
	wantSample(t, before, `spent_claims_total{namespace="echo",outcome="fresh"}`, 0)
	wantSample(t, before, `spent_store_errors_total{endpoint="claim"}`, 0)

	for _, body := range []string{
		`{"namespace":"echo","key":"a","result":""}`,
		`{"namespace":"echo","key":"a","result":""}`,
		`{"namespace":"echo","key":"b"}`,
		`{"namespace":"echo","key":"b"}`,
		`{"namespace":"refuse","key":"t","result":""}`,
		`{"namespace":"refuse","key":"t","result":""}`,
	} {
		wantOK(t, e.post(t, "/v1/claim", "", body))
	}
	wantOK(t, e.post(t, "/v1/claims", "", `{"claims":[{"namespace":"echo","key":"c"},{"namespace":"echo","key":"d"},{"namespace":"echo","key":"a","result":""}]}`))
	e.post(t, "/v1/claim", "", `{"namespace":"nope","key":"k"}`)
	e.store.SetFaults(inmem.Faults{Before: func(string) error { return errors.New("down") }})
	e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"z"}`)
	e.store.SetFaults(inmem.Faults{})

	m := scrape(t, e.url)
	wantSample(t, m, `spent_claims_total{namespace="echo",outcome="fresh"}`, 4)
	wantSample(t, m, `spent_claims_total{namespace="echo",outcome="replayed"}`, 2)
	wantSample(t, m, `spent_claims_total{namespace="echo",outcome="in_progress"}`, 1)
	wantSample(t, m, `spent_claims_total{namespace="refuse",outcome="fresh"}`, 1)
	wantSample(t, m, `spent_claims_total{namespace="refuse",outcome="refused"}`, 1)
	wantSample(t, m, `spent_claims_total{namespace="echo",outcome="mismatch"}`, 0)
	wantSample(t, m, `spent_http_requests_total{code="200",route="/v1/claim"}`, 6)
	wantSample(t, m, `spent_http_requests_total{code="200",route="/v1/claims"}`, 1)
	wantSample(t, m, `spent_http_requests_total{code="400",route="/v1/claim"}`, 1)
	wantSample(t, m, `spent_http_requests_total{code="503",route="/v1/claim"}`, 1)
	wantSample(t, m, `spent_http_requests_total{code="200",route="/metrics"}`, 1)
	wantSample(t, m, `spent_store_errors_total{endpoint="claim"}`, 1)
	wantSample(t, m, `spent_claim_batch_size_count`, 1)
	wantSample(t, m, `spent_claim_batch_size_sum`, 3)
	// Every claim request that reached the ledger is timed, failed ones too.
	wantSample(t, m, `spent_claim_duration_seconds_count{endpoint="claim"}`, 8)
	wantSample(t, m, `spent_claim_duration_seconds_count{endpoint="claims"}`, 1)
	// Every request is timed by route, the failed and the unknown ones too.
	wantSample(t, m, `spent_http_request_duration_seconds_count{route="/v1/claim"}`, 8)
	wantSample(t, m, `spent_http_request_duration_seconds_count{route="/v1/claims"}`, 1)
	wantSample(t, m, `spent_http_request_duration_seconds_count{route="/metrics"}`, 1) // this scrape counts once done
	if _, ok := m[`go_goroutines`]; !ok {
		t.Error("private registry lacks the Go collector")
	}
}

func TestMetricsSharedRegistry(t *testing.T) {
	// Two servers over one registry share their collectors instead of
	// failing to register them twice.
	reg := prometheus.NewRegistry()
	cfg := sphttp.DefaultConfig()
	cfg.Registerer = reg
	e1 := MustServe(t, cfg)
	e2 := MustServe(t, cfg)
	wantOK(t, e1.post(t, "/v1/claim", "", `{"namespace":"echo","key":"a"}`))
	wantOK(t, e2.post(t, "/v1/claim", "", `{"namespace":"echo","key":"a"}`))
	m := scrape(t, e1.url)
	wantSample(t, m, `spent_claims_total{namespace="echo",outcome="fresh"}`, 2)
	if _, ok := m[`go_goroutines`]; ok {
		t.Error("a caller's registry got the Go collector added")
	}
}

func TestMetricsInstrumentOuter(t *testing.T) {
	// The guards' refusals are counted under the route they were meant for,
	// and every request once, whoever answers it: the API, a route beside
	// it, a guard.
	e := MustServe(t, sphttp.DefaultConfig())
	mux := http.NewServeMux()
	mux.Handle("/", e.server)
	mux.HandleFunc("GET /extra/{id}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	h, err := sphttp.LimitBodies(e.server.Instrument(mux), 1<<20, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(e.server.InstrumentOuter(mux, sphttp.LoopbackOnly(h)))
	t.Cleanup(ts.Close)

	json := []string{"Content-Type", "application/json"}
	wantOK(t, request(t, http.MethodPost, ts.URL+"/v1/claim", strings.NewReader(`{"namespace":"echo","key":"a"}`), json...))
	big := `{"namespace":"echo","key":"b","result":"` + strings.Repeat("x", 2000) + `"}`
	if a := request(t, http.MethodPost, ts.URL+"/v1/claim", strings.NewReader(big), json...); a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body past the limit: got %d, want 413", a.status)
	}
	if a := request(t, http.MethodPost, ts.URL+"/v1/claim", strings.NewReader(`{"namespace":"echo","key":"c"}`), append(json, "Host", "rebound.example")...); a.status != http.StatusMisdirectedRequest {
		t.Fatalf("a Host that is not loopback: got %d, want 421", a.status)
	}
	request(t, http.MethodGet, ts.URL+"/extra/1", nil)
	if a := request(t, http.MethodGet, ts.URL+"/extra/2", nil, "Host", "rebound.example"); a.status != http.StatusMisdirectedRequest {
		t.Fatalf("a Host that is not loopback, beside the API: got %d, want 421", a.status)
	}
	request(t, http.MethodGet, ts.URL+"/nowhere", nil)

	m := scrape(t, ts.URL)
	wantSample(t, m, `spent_http_requests_total{code="200",route="/v1/claim"}`, 1)
	wantSample(t, m, `spent_http_requests_total{code="413",route="/v1/claim"}`, 1)
	wantSample(t, m, `spent_http_requests_total{code="421",route="/v1/claim"}`, 1)
	wantSample(t, m, `spent_http_request_duration_seconds_count{route="/v1/claim"}`, 3)
	wantSample(t, m, `spent_http_requests_total{code="200",route="/extra/{id}"}`, 1)
	wantSample(t, m, `spent_http_requests_total{code="421",route="/extra/{id}"}`, 1)
	wantSample(t, m, `spent_http_request_duration_seconds_count{route="/extra/{id}"}`, 2)
	wantSample(t, m, `spent_http_requests_total{code="404",route="other"}`, 1)
	wantSample(t, m, `spent_http_request_duration_seconds_count{route="other"}`, 1)
}

func TestMetricsInstrument(t *testing.T) {
	// Routes mounted beside the API are counted under the path of their
	// pattern, never the request's path; the API's requests are counted
	// once, by the API.
	e := MustServe(t, sphttp.DefaultConfig())
	mux := http.NewServeMux()
	mux.Handle("/", e.server)
	mux.HandleFunc("GET /extra/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("POST example.com/hosted", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	ts := httptest.NewServer(e.server.Instrument(mux))
	t.Cleanup(ts.Close)

	for _, id := range []string{"a", "b", "c", "missing"} {
		request(t, http.MethodGet, ts.URL+"/extra/"+id, nil)
	}
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/hosted", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wantOK(t, request(t, http.MethodPost, ts.URL+"/v1/claim", strings.NewReader(`{"namespace":"echo","key":"a"}`), "Content-Type", "application/json"))
	request(t, http.MethodGet, ts.URL+"/nowhere", nil)

	m := scrape(t, ts.URL)
	wantSample(t, m, `spent_http_requests_total{code="200",route="/extra/{id}"}`, 3)
	wantSample(t, m, `spent_http_requests_total{code="404",route="/extra/{id}"}`, 1)
	wantSample(t, m, `spent_http_request_duration_seconds_count{route="/extra/{id}"}`, 4)
	wantSample(t, m, `spent_http_requests_total{code="418",route="/hosted"}`, 1)
	wantSample(t, m, `spent_http_requests_total{code="200",route="/v1/claim"}`, 1)
	wantSample(t, m, `spent_http_request_duration_seconds_count{route="/v1/claim"}`, 1)
	wantSample(t, m, `spent_http_requests_total{code="404",route="other"}`, 1)
	for series := range m {
		if strings.Contains(series, `"/extra/a"`) || strings.Contains(series, "missing") {
			t.Errorf("a request's path became a label value: %s", series)
		}
	}
}

func TestRoute(t *testing.T) {
	// Route names a request as the metrics label it: the API's own paths,
	// the path of the pattern a request beside the API matched, and
	// "other" for the rest, never the request's own path.
	e := MustServe(t, sphttp.DefaultConfig())
	mux := http.NewServeMux()
	mux.Handle("/", e.server)
	mux.HandleFunc("GET /extra/{id}", func(http.ResponseWriter, *http.Request) {})
	cases := []struct {
		mux          *http.ServeMux
		method, path string
		want         string
	}{
		{mux, http.MethodPost, "/v1/claim", "/v1/claim"},
		{mux, http.MethodGet, "/v1/openapi.json", "/v1/openapi.json"},
		{mux, http.MethodGet, "/extra/42", "/extra/{id}"},
		{mux, http.MethodGet, "/no/such/path", "other"},
		{nil, http.MethodPost, "/v1/claims", "/v1/claims"},
		{nil, http.MethodGet, "/extra/42", "other"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, c.path, nil)
		if got := e.server.Route(c.mux, r); got != c.want {
			t.Errorf("Route(%s %s): got %q, want %q", c.method, c.path, got, c.want)
		}
	}
}
