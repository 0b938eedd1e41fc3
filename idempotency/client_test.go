package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent/idempotency"
)

// scripted is a server that answers from a script, one answer per request
// (the last one repeats), and records what it received.
type scripted struct {
	mu      sync.Mutex
	answers []scriptAnswer
	keys    []string
	bodies  []string
	onReq   func(n int)
}

type scriptAnswer struct {
	status int
	header map[string]string
	body   string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.keys)
	s.keys = append(s.keys, r.Header.Get(idempotency.HeaderKey))
	s.bodies = append(s.bodies, string(b))
	a := s.answers[min(n, len(s.answers)-1)]
	on := s.onReq
	s.mu.Unlock()
	if on != nil {
		on(n)
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

func problem(code string) scriptAnswer {
	return scriptAnswer{status: 409, header: map[string]string{"Content-Type": "application/problem+json"}, body: `{"code":"` + code + `","status":409}`}
}

// badProblem is a 409 problem document answer with the given body.
func badProblem(body string) scriptAnswer {
	return scriptAnswer{status: 409, header: map[string]string{"Content-Type": "application/problem+json"}, body: body}
}

// fakeTime is the client's clock and sleep: sleeping advances the clock.
type fakeTime struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (f *fakeTime) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeTime) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.waits = append(f.waits, d)
	f.now = f.now.Add(d)
	f.mu.Unlock()
	return ctx.Err()
}

// constReader is a Rand that returns one byte value forever.
type constReader byte

func (c constReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func newTestClient(t *testing.T, mod func(*idempotency.ClientOptions)) (*idempotency.Client, *fakeTime) {
	t.Helper()
	ft := &fakeTime{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	o := idempotency.DefaultClientOptions()
	o.BaseDelay = time.Second
	o.MaxDelay = 4 * time.Second
	o.Now, o.Sleep = ft.Now, ft.Sleep
	o.Rand = constReader(0xff) // every jitter draw at the top of its range
	if mod != nil {
		mod(&o)
	}
	c, err := idempotency.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	return c, ft
}

func post(t *testing.T, url, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func near(got, want time.Duration) bool { return got <= want && want-got < time.Millisecond }

func TestClientRetries(t *testing.T) {
	cases := []struct {
		name      string
		script    []scriptAnswer
		status    int             // final status, 0 for an *Error
		attempts  int             // requests the server saw
		waits     []time.Duration // the sleeps between them
		known     bool            // for an *Error
		errCode   string          // for an *Error
		errStatus int             // for an *Error
	}{
		{"SuccessAtOnce", []scriptAnswer{{status: 201}}, 201, 1, nil, false, "", 0},
		{"ServerErrorsThenSuccess", []scriptAnswer{{status: 503}, {status: 500}, {status: 502}, {status: 200}}, 200, 4,
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, false, "", 0},
		{"BackoffCappedByMaxDelay", []scriptAnswer{{status: 500}}, 0, 6,
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}, false, "", 500},
		{"ConflictIsRetried", []scriptAnswer{problem(idempotency.CodeInProgress), {status: 201}}, 201, 2, []time.Duration{time.Second}, false, "", 0},
		{"TooManyRequestsIsRetried", []scriptAnswer{{status: 429}, {status: 201}}, 201, 2, []time.Duration{time.Second}, false, "", 0},
		{"RetryAfterSecondsHonoured", []scriptAnswer{{status: 503, header: map[string]string{"Retry-After": "3"}}, {status: 201}}, 201, 2,
			[]time.Duration{3 * time.Second}, false, "", 0},
		{"RetryAfterDateHonoured", []scriptAnswer{{status: 429, header: map[string]string{"Retry-After": "Sun, 01 Mar 2026 12:00:07 GMT"}}, {status: 201}}, 201, 2,
			[]time.Duration{7 * time.Second}, false, "", 0},
		{"ShortRetryAfterKeepsBackoff", []scriptAnswer{{status: 500}, {status: 500}, {status: 503, header: map[string]string{"Retry-After": "1"}}, {status: 201}}, 201, 4,
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, false, "", 0},
		{"RetryAfterTooLongStops", []scriptAnswer{{status: 503, header: map[string]string{"Retry-After": "3600"}}}, 0, 1, nil, false, "", 503},
		{"BadRequestIsFinal", []scriptAnswer{{status: 400}}, 400, 1, nil, false, "", 0},
		{"UnprocessableIsFinal", []scriptAnswer{{status: 422}}, 422, 1, nil, false, "", 0},
		{"NotFoundIsFinal", []scriptAnswer{{status: 404}}, 404, 1, nil, false, "", 0},
		{"ReplayedServerErrorIsFinal", []scriptAnswer{{status: 500, header: map[string]string{idempotency.HeaderReplayed: "true"}}}, 500, 1, nil, false, "", 0},
		{"OutcomeUnknownStops", []scriptAnswer{{status: 500}, problem(idempotency.CodeOutcomeUnknown)}, 0, 2,
			[]time.Duration{time.Second}, false, idempotency.CodeOutcomeUnknown, 409},
		// A problem document that breaks the strict JSON rules carries no
		// code: the answer is a plain 409, retried.
		{"DuplicateCodeIsNoCode", []scriptAnswer{badProblem(`{"code":"outcome_unknown","code":"in_progress"}`), {status: 201}}, 201, 2,
			[]time.Duration{time.Second}, false, "", 0},
		{"CaseDifferingCodeIsNoCode", []scriptAnswer{badProblem(`{"Code":"outcome_unknown"}`), {status: 201}}, 201, 2,
			[]time.Duration{time.Second}, false, "", 0},
		{"TrailingDataIsNoCode", []scriptAnswer{badProblem(`{"code":"outcome_unknown"} {}`), {status: 201}}, 201, 2,
			[]time.Duration{time.Second}, false, "", 0},
		{"InvalidUTF8IsNoCode", []scriptAnswer{badProblem("{\"code\":\"outcome_unknown\",\"detail\":\"\xff\"}"), {status: 201}}, 201, 2,
			[]time.Duration{time.Second}, false, "", 0},
		{"WellFormedCodeStops", []scriptAnswer{badProblem(`{"code":"outcome_unknown","extension":{"a":1}}`)}, 0, 1,
			nil, false, idempotency.CodeOutcomeUnknown, 409},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &scripted{answers: c.script}
			srv := httptest.NewServer(s)
			defer srv.Close()
			cl, ft := newTestClient(t, nil)
			resp, err := cl.Do(post(t, srv.URL, "pay 10"))
			if c.status != 0 {
				if err != nil {
					t.Fatalf("got error %v, want status %d", err, c.status)
				}
				resp.Body.Close()
				if resp.StatusCode != c.status {
					t.Fatalf("got status %d, want %d", resp.StatusCode, c.status)
				}
			} else {
				var e *idempotency.Error
				if !errors.As(err, &e) {
					t.Fatalf("got %v, %v; want an *idempotency.Error", resp, err)
				}
				if e.Known != c.known || e.Code != c.errCode || e.StatusCode != c.errStatus || e.Attempts != c.attempts {
					t.Fatalf("got %+v, want known %v, code %q, status %d, attempts %d", e, c.known, c.errCode, c.errStatus, c.attempts)
				}
				if !uuidV4.MatchString(e.Key) {
					t.Fatalf("error key %q is not a UUIDv4", e.Key)
				}
			}
			if len(s.keys) != c.attempts {
				t.Fatalf("server saw %d requests, want %d", len(s.keys), c.attempts)
			}
			for i, k := range s.keys {
				if k != s.keys[0] || s.bodies[i] != "pay 10" {
					t.Fatalf("request %d: key %q body %q; want key %q and the same body on every attempt", i, k, s.bodies[i], s.keys[0])
				}
			}
			if key, err := idempotency.ParseKey(s.keys[0]); err != nil || !uuidV4.MatchString(key) || s.keys[0][0] != '"' {
				t.Fatalf("key header %q: want a quoted UUIDv4", s.keys[0])
			}
			if len(ft.waits) != len(c.waits) {
				t.Fatalf("waits: got %v, want %v", ft.waits, c.waits)
			}
			for i := range c.waits {
				if !near(ft.waits[i], c.waits[i]) && ft.waits[i] != c.waits[i] {
					t.Fatalf("waits: got %v, want %v", ft.waits, c.waits)
				}
			}
		})
	}
}

// TestClientFullJitter: each wait is drawn in [0, cap]; with a source of
// zeros every wait is zero, with a source in the middle every wait is about
// half its cap.
func TestClientFullJitter(t *testing.T) {
	for _, c := range []struct {
		rnd   constReader
		waits []time.Duration
	}{
		{0x00, []time.Duration{0, 0, 0}},
		{0x80, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}},
	} {
		s := &scripted{answers: []scriptAnswer{{status: 500}, {status: 500}, {status: 500}, {status: 200}}}
		srv := httptest.NewServer(s)
		cl, ft := newTestClient(t, func(o *idempotency.ClientOptions) { o.Rand = c.rnd })
		resp, err := cl.Do(post(t, srv.URL, ""))
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for i := range c.waits {
			if d := ft.waits[i] - c.waits[i]; d < -time.Millisecond || d > c.waits[i]/100+time.Millisecond {
				t.Fatalf("rand %#x: got waits %v, want %v", byte(c.rnd), ft.waits, c.waits)
			}
		}
	}
}

func TestClientNeverConnected(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	cl, ft := newTestClient(t, func(o *idempotency.ClientOptions) { o.MaxAttempts = 3 })
	_, err := cl.Do(post(t, url, "x"))
	var e *idempotency.Error
	if !errors.As(err, &e) || !e.Known || e.Attempts != 3 || e.Err == nil {
		t.Fatalf("got %v (%+v), want an *Error, known (never sent), 3 attempts", err, e)
	}
	if len(ft.waits) != 2 {
		t.Fatalf("waits: got %v, want 2", ft.waits)
	}
}

func TestClientKeepsCallersKey(t *testing.T) {
	s := &scripted{answers: []scriptAnswer{{status: 500}, {status: 200}}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	cl, _ := newTestClient(t, nil)
	r := post(t, srv.URL, "x")
	r.Header.Set(idempotency.HeaderKey, "order-42")
	resp, err := cl.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s.keys[0] != "order-42" || s.keys[1] != "order-42" {
		t.Fatalf("keys: got %q, want order-42 twice", s.keys)
	}
	r = post(t, srv.URL, "x")
	r.Header.Set(idempotency.HeaderKey, "two words")
	if _, err := cl.Do(r); err == nil {
		t.Fatal("malformed key: got no error")
	}
}

func TestClientContextEndsDuringBackoff(t *testing.T) {
	s := &scripted{answers: []scriptAnswer{{status: 503}}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cl, _ := newTestClient(t, func(o *idempotency.ClientOptions) {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			cancel()
			return ctx.Err()
		}
	})
	r := post(t, srv.URL, "x").WithContext(ctx)
	_, err := cl.Do(r)
	var e *idempotency.Error
	if !errors.As(err, &e) || e.Known || e.Attempts != 1 || e.StatusCode != 503 {
		t.Fatalf("got %v, want an *Error after 1 attempt, outcome unknown", err)
	}
	if len(s.keys) != 1 {
		t.Fatalf("server saw %d requests after the context ended, want 1", len(s.keys))
	}
}

func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		k, err := idempotency.NewKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !uuidV4.MatchString(k) {
			t.Fatalf("key %q: not a UUIDv4", k)
		}
		if seen[k] {
			t.Fatalf("key %q drawn twice", k)
		}
		seen[k] = true
	}
	k, _ := idempotency.NewKey(constReader(0xff))
	if k != "ffffffff-ffff-4fff-bfff-ffffffffffff" {
		t.Fatalf("all-ones source: got %s", k)
	}
	k, _ = idempotency.NewKey(constReader(0x00))
	if k != "00000000-0000-4000-8000-000000000000" {
		t.Fatalf("all-zeros source: got %s", k)
	}
	if _, err := idempotency.NewKey(bytes.NewReader(nil)); err == nil {
		t.Fatal("empty source: got no error")
	}
}

// TestClientJournal: the request is on disk before its first send, stays
// there while its outcome is unknown, is resumed with the same key and
// bytes, and is forgotten once answered.
func TestClientJournal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := idempotency.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &scripted{answers: []scriptAnswer{{status: 503}}}
	var journaled []int
	s.onReq = func(n int) {
		p, err := j.Pending()
		if err != nil {
			t.Error(err)
		}
		journaled = append(journaled, len(p))
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	cl, _ := newTestClient(t, func(o *idempotency.ClientOptions) { o.Journal = j; o.MaxAttempts = 2 })
	r := post(t, srv.URL+"/pay", `{"amount":5}`)
	r.Header.Set("X-Trace", "t1")
	_, err = cl.Do(r)
	var e *idempotency.Error
	if !errors.As(err, &e) || e.Known {
		t.Fatalf("got %v, want an *Error with an unknown outcome", err)
	}
	if len(journaled) != 2 || journaled[0] != 1 {
		t.Fatalf("journal entries seen by the server: %v, want 1 from the first send", journaled)
	}
	// A restarted process: a new journal and client over the same directory.
	if err := os.WriteFile(filepath.Join(dir, ".tmp-123"), []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	j2, err := idempotency.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-123")); !os.IsNotExist(err) {
		t.Fatal("OpenJournal left a temporary file")
	}
	pending, err := j2.Pending()
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending: %v, %v; want one entry", pending, err)
	}
	p := pending[0]
	if p.Key != e.Key || p.Method != "POST" || p.URL != srv.URL+"/pay" || string(p.Body) != `{"amount":5}` || p.Header.Get("X-Trace") != "t1" {
		t.Fatalf("entry %+v: want the request as sent, key %s", p, e.Key)
	}
	ents, _ := os.ReadDir(dir)
	for _, de := range ents {
		if info, _ := de.Info(); info.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, want 0600", de.Name(), info.Mode().Perm())
		}
	}
	s.mu.Lock()
	s.answers = []scriptAnswer{{status: 201}}
	s.onReq = nil
	s.mu.Unlock()
	cl2, _ := newTestClient(t, func(o *idempotency.ClientOptions) { o.Journal = j2 })
	resp, err := cl2.Resume(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("resume: got %d, want 201", resp.StatusCode)
	}
	if last := s.keys[len(s.keys)-1]; last != s.keys[0] || s.bodies[len(s.bodies)-1] != `{"amount":5}` {
		t.Fatalf("resumed with key %q body %q, want key %q and the same body", last, s.bodies[len(s.bodies)-1], s.keys[0])
	}
	if pending, _ := j2.Pending(); len(pending) != 0 {
		t.Fatalf("after a final answer: %d entries pending, want 0", len(pending))
	}
}

// TestClientAgainstMiddleware: the client and the middleware together; a
// failure before Applied is retried, and the effect happens once.
// TestJournalReadsStrictly checks that Pending refuses an entry file that
// breaks a rule of strict JSON rather than guess what it meant, and that
// OpenJournal clears both forms of temporary file.
func TestJournalReadsStrictly(t *testing.T) {
	good := `{"key":"k","method":"POST","url":"http://x/pay","header":{"Idempotency-Key":["k"]},"body":"cGF5","created":"2026-03-01T12:00:00Z"}`
	for name, doc := range map[string]string{
		"CaseDiffers": strings.Replace(good, `"url"`, `"URL"`, 1),
		"Duplicate":   strings.Replace(good, `"method":"POST"`, `"method":"POST","method":"GET"`, 1),
		"Unknown":     strings.Replace(good, `"body"`, `"bodyx"`, 1),
		"InvalidUTF8": strings.Replace(good, `"k"`, "\"\xff\"", 1),
		"Trailing":    good + `{}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			j, err := idempotency.OpenJournal(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "k-0.json"), []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			if p, err := j.Pending(); err == nil || !strings.Contains(err.Error(), "k-0.json") {
				t.Fatalf("got %+v, %v; want an error naming the file", p, err)
			}
		})
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "k-0.json"), []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tmp := range []string{".tmp-77", ".k-0.json.tmp-88"} {
		if err := os.WriteFile(filepath.Join(dir, tmp), []byte("torn"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	j, err := idempotency.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("after OpenJournal: %d files, want only the entry", len(ents))
	}
	p, err := j.Pending()
	if err != nil || len(p) != 1 || p[0].Key != "k" || string(p[0].Body) != "pay" || p[0].Header.Get("Idempotency-Key") != "k" {
		t.Fatalf("got %+v, %v; want the entry", p, err)
	}
}

func TestClientAgainstMiddleware(t *testing.T) {
	e := newEnv(t, nil)
	cl, _ := newTestClient(t, nil)
	r := post(t, e.srv.URL+"/things", `{"amount":1}`)
	r.Header.Set("X-Client", "alice")
	r.Header.Set("X-Do", "fail-first")
	resp, err := cl.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || e.app.runs.Load() != 2 || e.app.effects.Load() != 1 {
		t.Fatalf("got %d after %d runs, %d effects; want 201 after 2 runs, 1 effect", resp.StatusCode, e.app.runs.Load(), e.app.effects.Load())
	}
}
