package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
)

// TestDetailQuotesAPrefix sends inputs of 1 MiB wherever a problem's detail
// names an input: the detail quotes a short prefix and the length, never
// the whole input.
func TestDetailQuotesAPrefix(t *testing.T) {
	huge := strings.Repeat("n", 1<<20)
	cases := []struct {
		name, path, token, body string
		status                  int
		code                    string
	}{
		{"UnknownNamespace", "/v1/claim", "", `{"namespace":"` + huge + `","key":"k"}`, 400, spent.EUnknownNamespace},
		{"UnknownNamespaceInBatch", "/v1/claims", "", `{"claims":[{"namespace":"` + huge + `","key":"k"}]}`, 400, spent.EUnknownNamespace},
		{"UnknownNamespaceOfGet", "/v1/get", "", `{"namespace":"` + huge + `","key":"k"}`, 400, spent.EUnknownNamespace},
		{"ForbiddenNamespace", "/v1/claim", tokEchoOnly, `{"namespace":"` + huge + `","key":"k"}`, 403, spent.EForbidden},
		{"UnknownField", "/v1/claim", "", `{"` + huge + `":1}`, 400, spent.EInvalid},
		{"UnknownFieldInBatch", "/v1/claims", "", `{"claims":[{"` + huge + `":1}]}`, 400, spent.EInvalid},
		{"NoSuchEndpoint", "/" + huge[:64<<10], "", `{}`, 404, spent.EInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sphttp.DefaultConfig()
			if tc.token != "" {
				cfg = authConfig()
			}
			e := MustServe(t, cfg)
			p := wantProblem(t, e.post(t, tc.path, tc.token, tc.body), tc.status, tc.code)
			detail := p["detail"].(string)
			if len(detail) > 256 {
				t.Fatalf("detail: got %d bytes (%.100s...), want at most 256", len(detail), detail)
			}
			if !strings.Contains(detail, "nnnn") {
				t.Fatalf("detail %q: want it to quote the start of the input", detail)
			}
		})
	}
	t.Run("Method", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		method := strings.Repeat("M", 64<<10)
		p := wantProblem(t, request(t, method, e.url+"/v1/claim", nil), 405, spent.EInvalid)
		if d := p["detail"].(string); len(d) > 256 {
			t.Fatalf("detail: got %d bytes, want at most 256", len(d))
		}
	})
}

// logRecords is a slog handler that keeps every record, for tests that
// count log lines.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}

func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// lines returns the records logged at level, as text.
func (h *logRecords) lines(level slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if r.Level != level {
			continue
		}
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.Key + "=" + a.Value.String())
			return true
		})
		out = append(out, b.String())
	}
	return out
}

// TestStoreUnavailableLogsStateChanges fails a real inmem store for a
// while: the server logs one WARN when the store starts failing, not one
// per request, and one INFO with the count when it serves again.
func TestStoreUnavailableLogsStateChanges(t *testing.T) {
	logs := &logRecords{}
	cfg := sphttp.DefaultConfig()
	cfg.Logger = slog.New(logs)
	e := MustServe(t, cfg)
	errDisk := errors.New("disk on fire")
	var failing sync.Mutex
	broken := true
	e.store.SetFaults(inmem.Faults{Before: func(string) error {
		failing.Lock()
		defer failing.Unlock()
		if broken {
			return errDisk
		}
		return nil
	}})
	const refused = 300
	for i := range refused {
		body := `{"namespace":"echo","key":"k` + strconv.Itoa(i) + `"}`
		a := e.post(t, "/v1/claim", "", body)
		wantProblem(t, a, http.StatusServiceUnavailable, spent.EUnavailable)
		if ra := a.header.Get("Retry-After"); ra != "1" {
			t.Fatalf("Retry-After of a 503 for a failing store: got %q, want 1", ra)
		}
	}
	warns := logs.lines(slog.LevelWarn)
	if len(warns) != 1 {
		t.Fatalf("WARN lines after %d refused requests: got %d, want 1 (first: %q)", refused, len(warns), first(warns))
	}
	if !strings.Contains(warns[0], "disk on fire") {
		t.Fatalf("WARN line %q: want it to name the cause", warns[0])
	}

	failing.Lock()
	broken = false
	failing.Unlock()
	for i := range 5 {
		body := `{"namespace":"echo","key":"ok` + strconv.Itoa(i) + `"}`
		if m := wantOK(t, e.post(t, "/v1/claim", "", body)); m["outcome"] != "fresh" {
			t.Fatalf("claim after the store came back: got %v, want fresh", m["outcome"])
		}
	}
	infos := logs.lines(slog.LevelInfo)
	if len(infos) != 1 {
		t.Fatalf("INFO lines after the store came back: got %d (%q), want 1", len(infos), infos)
	}
	if !strings.Contains(infos[0], "refused="+strconv.Itoa(refused)) {
		t.Fatalf("INFO line %q: want refused=%d", infos[0], refused)
	}
	if n := len(logs.lines(slog.LevelWarn)); n != 1 {
		t.Fatalf("WARN lines after recovery: got %d, want still 1", n)
	}
}

// TestStoreUnavailableSummaries fails the store over a fake minute: while
// it fails, one summary line per interval counts the requests refused.
func TestStoreUnavailableSummaries(t *testing.T) {
	logs := &logRecords{}
	cfg := sphttp.DefaultConfig()
	cfg.Logger = slog.New(logs)
	e := MustServe(t, cfg)
	clk := newClock()
	sphttp.SetClock(e.server, clk.Now)
	e.store.SetFaults(inmem.Faults{Before: func(string) error { return errors.New("disk on fire") }})
	fail := func(n int) {
		t.Helper()
		for range n {
			wantProblem(t, e.post(t, "/v1/get", "", `{"namespace":"echo","key":"k"}`), http.StatusServiceUnavailable, spent.EUnavailable)
		}
	}
	fail(5) // the first logs the change; 4 more wait
	clk.Advance(sphttp.DefaultStoreLogInterval)
	fail(3) // the first logs a summary of 4 + itself; 2 more wait
	clk.Advance(sphttp.DefaultStoreLogInterval / 2)
	fail(2) // within the interval: no line
	clk.Advance(sphttp.DefaultStoreLogInterval / 2)
	fail(1) // a summary of the 2 + 2 + 1 since the last line
	warns := logs.lines(slog.LevelWarn)
	want := []string{"store unavailable", "refused=5", "refused=5"}
	if len(warns) != 3 {
		t.Fatalf("WARN lines: got %d %q, want 3", len(warns), warns)
	}
	for i := range want {
		if !strings.Contains(warns[i], want[i]) {
			t.Fatalf("WARN line %d: got %q, want it to contain %q", i, warns[i], want[i])
		}
	}
	e.store.SetFaults(inmem.Faults{})
	clk.Advance(time.Minute)
	wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`))
	infos := logs.lines(slog.LevelInfo)
	if len(infos) != 1 || !strings.Contains(infos[0], "refused=11") || !strings.Contains(infos[0], "after=1m20s") {
		t.Fatalf("INFO lines: got %q, want one with refused=11 after=1m20s", infos)
	}
}

// TestReadyzLogsStateChanges probes a failing store many times: one WARN,
// then one INFO when it is ready again.
func TestReadyzLogsStateChanges(t *testing.T) {
	logs := &logRecords{}
	cfg := sphttp.DefaultConfig()
	cfg.Logger = slog.New(logs)
	e := MustServe(t, cfg)
	e.store.SetFaults(inmem.Faults{Before: func(string) error { return errors.New("disk on fire") }})
	for range 50 {
		wantProblem(t, request(t, http.MethodGet, e.url+"/readyz", nil), http.StatusServiceUnavailable, spent.EUnavailable)
	}
	if warns := logs.lines(slog.LevelWarn); len(warns) != 1 {
		t.Fatalf("WARN lines after 50 failed probes: got %d, want 1", len(warns))
	}
	e.store.SetFaults(inmem.Faults{})
	for range 3 {
		if a := request(t, http.MethodGet, e.url+"/readyz", nil); a.status != http.StatusOK {
			t.Fatalf("/readyz: got %d, want 200", a.status)
		}
	}
	if infos := logs.lines(slog.LevelInfo); len(infos) != 1 || !strings.Contains(infos[0], "refused=50") {
		t.Fatalf("INFO lines: got %q, want one with refused=50", infos)
	}
}

// slowBody is a request body that sends part of itself, then waits for
// release before sending the rest.
type slowBody struct {
	first, rest []byte
	release     chan struct{}
	sent        chan struct{}
	once        sync.Once
}

func newSlowBody(n, first int) *slowBody {
	b := bytes.Repeat([]byte(" "), n)
	return &slowBody{first: b[:first], rest: b[first:], release: make(chan struct{}), sent: make(chan struct{})}
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	b.once.Do(func() { close(b.sent) })
	<-b.release
	if len(b.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// budgetServer serves a handler that reads the whole body and answers 200
// with its length, behind LimitBodies.
func budgetServer(t *testing.T, maxBodies, maxBody int64) string {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		w.Write([]byte(strconv.Itoa(len(b))))
	})
	lim, err := sphttp.LimitBodies(h, maxBodies, maxBody)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(lim)
	t.Cleanup(ts.Close)
	return ts.URL
}

// sendBody posts body (of length n, or chunked when n < 0) in the
// background and returns the status it gets.
func sendBody(url string, body io.Reader, n int64) <-chan int {
	out := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url, body)
		req.ContentLength = n
		if n < 0 {
			req.TransferEncoding = []string{"chunked"}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out <- resp.StatusCode
	}()
	return out
}

// TestLimitBodies holds bodies in flight until the budget is full: further
// requests get 503 with Retry-After at once, bodiless ones still pass, and
// the budget is free again once the bodies are done.
func TestLimitBodies(t *testing.T) {
	const maxBody = 64 << 10
	t.Run("FullBudgetRefuses", func(t *testing.T) {
		url := budgetServer(t, 2*maxBody, maxBody)
		a, b := newSlowBody(maxBody, 1024), newSlowBody(maxBody, 1024)
		ra, rb := sendBody(url, a, maxBody), sendBody(url, b, maxBody)
		<-a.sent
		<-b.sent
		p := wantProblem(t, request(t, http.MethodPost, url, strings.NewReader("x")), http.StatusServiceUnavailable, spent.EUnavailable)
		if d := p["detail"].(string); !strings.Contains(d, "budget") {
			t.Fatalf("detail %q: want it to name the budget", d)
		}
		if ra := request(t, http.MethodPost, url, strings.NewReader("x")); ra.header.Get("Retry-After") == "" {
			t.Fatalf("503 without Retry-After")
		}
		if got := request(t, http.MethodGet, url, nil); got.status != http.StatusOK {
			t.Fatalf("bodiless request with the budget full: got %d, want 200", got.status)
		}
		close(a.release)
		close(b.release)
		if sa, sb := <-ra, <-rb; sa != 200 || sb != 200 {
			t.Fatalf("held bodies: got %d and %d, want 200", sa, sb)
		}
		if got := request(t, http.MethodPost, url, bytes.NewReader(make([]byte, maxBody))); got.status != 200 || string(got.body) != strconv.Itoa(maxBody) {
			t.Fatalf("after the held bodies: got %d %s, want 200 %d", got.status, got.body, maxBody)
		}
	})
	t.Run("ChunkedReservesTheLargestBody", func(t *testing.T) {
		url := budgetServer(t, maxBody, maxBody)
		a := newSlowBody(10, 5)
		ra := sendBody(url, a, -1)
		<-a.sent
		wantProblem(t, request(t, http.MethodPost, url, strings.NewReader("x")), http.StatusServiceUnavailable, spent.EUnavailable)
		close(a.release)
		if s := <-ra; s != 200 {
			t.Fatalf("chunked body: got %d, want 200", s)
		}
	})
	t.Run("ChunkedOverTheLimitStops", func(t *testing.T) {
		url := budgetServer(t, 4*maxBody, maxBody)
		if s := <-sendBody(url, bytes.NewReader(make([]byte, maxBody+1)), -1); s != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked body over the limit: got %d, want 413", s)
		}
	})
	t.Run("ContentLengthOverTheLimit", func(t *testing.T) {
		url := budgetServer(t, 4*maxBody, maxBody)
		wantProblem(t, request(t, http.MethodPost, url, bytes.NewReader(make([]byte, maxBody+1))), http.StatusRequestEntityTooLarge, spent.ETooLarge)
	})
	t.Run("BudgetBelowTheLargestBody", func(t *testing.T) {
		if _, err := sphttp.LimitBodies(http.NotFoundHandler(), maxBody-1, maxBody); err == nil {
			t.Fatal("LimitBodies with a budget under the largest body: got no error, want one")
		}
	})
	t.Run("APIChunkedOverTheLimit", func(t *testing.T) {
		// The API reports a body the budget cut short as too large.
		e := MustServe(t, sphttp.Config{MaxBody: 1024})
		lim, err := sphttp.LimitBodies(e.server, 4096, 1024)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(lim)
		t.Cleanup(ts.Close)
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/claim", strings.NewReader(`{"namespace":"echo","key":"`+strings.Repeat("k", 2000)+`"}`))
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantProblem(t, &answer{status: resp.StatusCode, header: resp.Header, body: b}, http.StatusRequestEntityTooLarge, spent.ETooLarge)
	})
}

func TestIsLoopbackHost(t *testing.T) {
	yes := []string{"localhost", "localhost:7070", "LOCALHOST", "localhost.", "a.localhost", "spent.dev.localhost:80",
		"127.0.0.1", "127.0.0.1:7070", "127.1.2.3:1", "[::1]", "[::1]:7070", "::1", "[::ffff:127.0.0.1]:7070"}
	no := []string{"", "evil.example", "evil.example:7070", "localhost.evil.example", "127.0.0.1.evil.example",
		"evillocalhost", "a..localhost", "a_b.localhost", "10.0.0.1", "0.0.0.0:7070", "[::]:7070", "[::2]", "[fe80::1%lo]:7070",
		"localhost:0", "localhost:99999", "localhost:x", "[::1]:", "127.0.0.1:+80"}
	for _, h := range yes {
		if !sphttp.IsLoopbackHost(h) {
			t.Errorf("IsLoopbackHost(%q): got false, want true", h)
		}
	}
	for _, h := range no {
		if sphttp.IsLoopbackHost(h) {
			t.Errorf("IsLoopbackHost(%q): got true, want false", h)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	ts := httptest.NewServer(sphttp.LoopbackOnly(e.server))
	t.Cleanup(ts.Close)
	send := func(host string) *answer {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/claim", strings.NewReader(`{"namespace":"echo","key":"k"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return &answer{status: resp.StatusCode, header: resp.Header, body: b}
	}
	p := wantProblem(t, send("rebound.example:80"), http.StatusMisdirectedRequest, spent.EHostNotAllowed)
	if d := p["detail"].(string); !strings.Contains(d, "rebound.example") {
		t.Fatalf("detail %q: want it to name the host", d)
	}
	p = wantProblem(t, send(strings.Repeat("h", 10000)+".example"), http.StatusMisdirectedRequest, spent.EHostNotAllowed)
	if d := p["detail"].(string); len(d) > 300 {
		t.Fatalf("detail of %d bytes: want the host quoted short", len(d))
	}
	wantOK(t, send("localhost"))

	// The Go client reads the code back, here from a client that reaches
	// the server under a foreign name.
	addr := strings.TrimPrefix(ts.URL, "http://")
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c := sphttp.NewClient("http://rebound.example", sphttp.ClientConfig{HTTPClient: &http.Client{Transport: tr}})
	_, err := c.Claim(context.Background(), spent.Claim{Namespace: "echo", Key: "k"})
	if code := spent.ErrorCode(err); code != spent.EHostNotAllowed {
		t.Fatalf("client through a foreign Host: got code %q (%v), want %q", code, err, spent.EHostNotAllowed)
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// TestClaimsWireResultOmitted replays a key holding a 1 MiB result 20 times
// in one batch: the answer carries the result while the 16 MiB budget
// lasts, then says "result_omitted":true without a result; /v1/get reads it.
func TestClaimsWireResultOmitted(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	big := bytes.Repeat([]byte("b"), spent.DefaultMaxResult)
	body, _ := json.Marshal(map[string]any{"namespace": "echo", "key": "big", "result": big})
	wantOK(t, e.post(t, "/v1/claim", "", string(body)))
	claims := strings.Repeat(`{"namespace":"echo","key":"big"},`, 20)
	a := e.post(t, "/v1/claims", "", `{"claims":[`+strings.TrimSuffix(claims, ",")+`]}`)
	if a.status != http.StatusOK {
		t.Fatalf("status: got %d, want 200", a.status)
	}
	var got struct {
		Results []map[string]json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(a.body, &got); err != nil {
		t.Fatal(err)
	}
	fit := spent.DefaultMaxBatchResult / spent.DefaultMaxResult
	for i, r := range got.Results {
		_, hasResult := r["result"]
		omitted := string(r["result_omitted"])
		if i < fit && (!hasResult || omitted != "") {
			t.Fatalf("results[%d]: result %v, result_omitted %q; want the result", i, hasResult, omitted)
		}
		if i >= fit && (hasResult || omitted != "true") {
			t.Fatalf("results[%d]: result %v, result_omitted %q; want result_omitted true and no result", i, hasResult, omitted)
		}
	}
	if m := wantOK(t, e.post(t, "/v1/get", "", `{"namespace":"echo","key":"big"}`)); m["result"] == nil {
		t.Fatalf("/v1/get: got no result, want the stored one")
	}
}
