package http_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/door"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/internal/syncbuf"
)

// serveAdmitted serves cfg's API over a fresh ledger behind cs's admission
// (door.Conns.Serve), as spent serve does.
func serveAdmitted(t *testing.T, cfg sphttp.Config, cs *door.Conns) (*env, *httptest.Server) {
	t.Helper()
	e := newEnv(t, cfg, nil)
	return e, e.serve(t, e.server, cs)
}

// TestUnknownTokenThrottled (issue 31, finding 9, on HTTP): requests with an
// unknown bearer token are counted by the shared sign-in throttle, which
// logs them and delays each answer; the max_auth_failures-th on one
// connection is answered with Connection: close. A valid token still works.
func TestUnknownTokenThrottled(t *testing.T) {
	var log syncbuf.Buffer
	th := door.NewThrottle(slog.New(slog.NewTextHandler(&log, nil)))
	cfg := authConfig()
	cfg.Throttle = th
	cs := door.NewConns(100, 100)
	e, _ := serveAdmitted(t, cfg, cs)
	nc, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	body := `{"namespace":"echo","key":"k"}`
	for i := 1; i <= door.DefaultMaxAuthFailures; i++ {
		fmt.Fprintf(nc, "POST /v1/claim HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong-token-%d-0123456789\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", i, len(body), body)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("request %d with an unknown token: status %d, want 401", i, resp.StatusCode)
		}
		closes := resp.Close || strings.EqualFold(resp.Header.Get("Connection"), "close")
		if last := i == door.DefaultMaxAuthFailures; closes != last {
			t.Fatalf("request %d: Connection: close %v, want %v (only at max_auth_failures)", i, closes, last)
		}
	}
	if th.Total() != int64(door.DefaultMaxAuthFailures) {
		t.Fatalf("throttle counted %d refusals, want %d", th.Total(), door.DefaultMaxAuthFailures)
	}
	if !strings.Contains(log.String(), "http: sign-in refused") {
		t.Fatalf("log: want a sign-in refused line\n%s", log.String())
	}
	a := e.post(t, "/v1/claim", tokClaim, body)
	if a.status != http.StatusOK {
		t.Fatalf("a valid token after the refusals: %d %s", a.status, a.body)
	}
	// A missing token is not a sign-in attempt: not counted.
	e.post(t, "/v1/claim", "", body)
	if th.Total() != int64(door.DefaultMaxAuthFailures) {
		t.Fatalf("a request without a token was counted as a refused sign-in")
	}
}

// TestIdleFloodHTTP (issue 31, finding 6, on HTTP): idle connections that
// never send an authorised request fill at most the unauthenticated share;
// a client with a token still gets in and claims, and its connection,
// signed in, is never closed to make room.
func TestIdleFloodHTTP(t *testing.T) {
	cs := door.NewConns(30, 5)
	e, _ := serveAdmitted(t, authConfig(), cs)
	addr := strings.TrimPrefix(e.url, "http://")
	for range 40 { // idle connections, open until the test ends
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
	}
	// A keep-alive client with a token: its connection signs in.
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for i := range 5 {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/claim", strings.NewReader(fmt.Sprintf(`{"namespace":"echo","key":"k-%d","result_text":"r"}`, i)))
		req.Header.Set("Authorization", "Bearer "+tokClaim)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("claim %d among 40 idle sockets: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("claim %d: status %d", i, resp.StatusCode)
		}
		// More idle sockets arrive; the signed-in connection stays.
		for range 10 {
			if nc, err := net.Dial("tcp", addr); err == nil {
				defer nc.Close()
			}
		}
	}
	if all, un := cs.Len(); un > 5 || all > 30 {
		t.Fatalf("admitted %d, %d unauthenticated: want at most 30 and 5", all, un)
	}
	if cs.Evicted() == 0 {
		t.Fatal("no idle connection was closed to make room")
	}
}

// TestPlaceAndExpiresIn (issue 31, findings 2 and 10, on HTTP): a place
// with a control character is refused and nothing claimed; expires_in
// takes an ISO 8601 duration through the ledger's one expiry rule:
// refused beyond max_expiry (also when too large for any duration),
// refused beside expires_at, kept as asked otherwise.
func TestPlaceAndExpiresIn(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	for _, place := range []string{"gate\n1", "\u001b[2J", "a\u0000b", "x\u202ey"} {
		body := fmt.Sprintf(`{"namespace":"echo","key":"placed","place":%q}`, place)
		body = strings.ReplaceAll(body, `\x00`, `\u0000`)
		a := e.post(t, "/v1/claim", "", body)
		wantProblem(t, a, http.StatusBadRequest, spent.EInvalid)
	}
	if _, err := e.ledger.Get(context.Background(), "echo", "placed"); spent.ErrorCode(err) != spent.ENotFound {
		t.Fatalf("a refused claim was made: %v", err)
	}
	now := e.clock.Now()
	a := e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"in","result_text":"r","expires_in":"PT30M"}`)
	if a.status != http.StatusOK {
		t.Fatalf("expires_in PT30M: %d %s", a.status, a.body)
	}
	exp, err := time.Parse(time.RFC3339Nano, a.json(t)["expires_at"].(string))
	if err != nil || !exp.Equal(now.Add(30*time.Minute)) {
		t.Fatalf("expires_in PT30M: expires_at %v, %v; want %v", exp, err, now.Add(30*time.Minute))
	}
	for _, tc := range []struct{ body, code string }{
		{`{"namespace":"echo","key":"far","expires_in":"P99999999999999999999D"}`, spent.EExpiryTooLong},
		{`{"namespace":"echo","key":"far","expires_in":"P2D"}`, spent.EExpiryTooLong},
		{`{"namespace":"echo","key":"far","expires_in":"P1Y"}`, spent.EInvalid},
		{`{"namespace":"echo","key":"far","expires_in":"PT0S"}`, spent.EInvalid},
		{`{"namespace":"echo","key":"far","expires_in":"PT1M","expires_at":"2030-01-01T00:00:00Z"}`, spent.EInvalid},
	} {
		wantProblem(t, e.post(t, "/v1/claim", "", tc.body), http.StatusBadRequest, tc.code)
	}
	// The Go client sends a lifetime as expires_in, and refuses what only
	// the server's own front ends may ask.
	c := sphttp.NewClient(e.url, sphttp.ClientConfig{})
	ans, err := c.Claim(context.Background(), spent.Claim{Namespace: "echo", Key: "client-in", Result: []byte("r"), Expiry: spent.ExpiresIn(90, time.Second)})
	if err != nil || !ans.Record.ExpiresAt.Equal(now.Add(90*time.Second)) {
		t.Fatalf("client with ExpiresIn(90s): %v, %v; want expires_at %v", ans.Record.ExpiresAt, err, now.Add(90*time.Second))
	}
	_, err = c.Claim(context.Background(), spent.Claim{Namespace: "echo", Key: "client-clamped", Expiry: spent.ExpiresIn(90, time.Second).Clamped()})
	if spent.ErrorCode(err) != spent.EInvalid {
		t.Fatalf("client with a clamped expiry: %v, want invalid", err)
	}
}

// serveLimited serves the API behind admission and a body budget with a
// share for requests without a valid token, as spent serve does.
func serveLimited(t *testing.T, cfg sphttp.Config, cs *door.Conns, budget, share int64) *env {
	t.Helper()
	e := newEnv(t, cfg, nil)
	b, _ := door.NewBudget(budget)
	u, _ := door.NewBudget(share)
	// A public route beside the API reads its body without a token, as the
	// Privacy Pass and e-cash routes and the page's login do.
	mux := http.NewServeMux()
	mux.Handle("/", e.server)
	mux.HandleFunc("/public", func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	h, err := sphttp.LimitBodiesWith(mux, sphttp.BodyLimits{Budget: b, MaxBody: sphttp.DefaultMaxBody, Unauthenticated: u, Authorized: e.server.Authorized})
	if err != nil {
		t.Fatal(err)
	}
	e.serve(t, h, cs)
	return e
}

// holdBody sends a request to path with a Content-Length of n and a token
// (none when empty), and none of its body, on a connection of its own.
func holdBody(t *testing.T, url, path, token string, n int) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	fmt.Fprintf(nc, "POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", path, auth, n)
	return nc
}

// TestUnauthenticatedBodiesShare (found by an attacker): a request without
// a valid token (the page's login, a wrong token) reserved its
// Content-Length from the whole budget of bodies in flight before its
// token was checked, so four unsent 32 MiB bodies answered every client
// with a token 503 for a minute. Now such bodies hold at most their share
// of the budget, and each at most the share.
func TestUnauthenticatedBodiesShare(t *testing.T) {
	cs := door.NewConns(100, 100)
	e := serveLimited(t, authConfig(), cs, 64<<20, 8<<20)
	for _, tok := range []string{"", "wrong-token-0123456789"} {
		nc := holdBody(t, e.url, "/public", tok, 32<<20)
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("token %q, an unsent 32 MiB body: %v, %v; want 413 at once (over the share)", tok, resp, err)
		}
	}
	// Two 4 MiB bodies without a token, read slowly by a public route,
	// fill the share; a third is refused; a client with a token still
	// claims with a body.
	holdBody(t, e.url, "/public", "", 4<<20)
	holdBody(t, e.url, "/public", "wrong-token-0123456789", 4<<20)
	time.Sleep(100 * time.Millisecond)
	nc := holdBody(t, e.url, "/public", "", 4<<20)
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a third 4 MiB body without a token: %v, %v; want 503 (the share is full)", resp, err)
	}
	for i := range 3 {
		a := e.post(t, "/v1/claim", tokClaim, fmt.Sprintf(`{"namespace":"echo","key":"with-token-%d","result_text":"r"}`, i))
		if a.status != http.StatusOK {
			t.Fatalf("a claim with a token while the share is full: %d %s; want 200", a.status, a.body)
		}
	}
}

// TestRefusedSignInsMakeRoom (found by an attacker): requests with a wrong
// token waiting out the throttle's delay counted as busy, filled the
// unauthenticated share, and every newcomer, a client with a token among
// them, was refused. Now a connection waiting out that delay may be closed
// to make room.
func TestRefusedSignInsMakeRoom(t *testing.T) {
	th := door.NewThrottle(nil)
	for range 10 {
		th.Failed("http", "127.0.0.1:1", "warming the throttle up to its longest delay")
	}
	cfg := authConfig()
	cfg.Throttle = th
	cs := door.NewConns(50, 5)
	e := serveLimited(t, cfg, cs, 64<<20, 8<<20)
	body := `{"namespace":"echo","key":"k"}`
	for range 5 {
		nc, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		fmt.Fprintf(nc, "POST /v1/claim HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong-token-0123456789\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	time.Sleep(200 * time.Millisecond) // all five waiting out their 5 s
	a := e.post(t, "/v1/claim", tokClaim, `{"namespace":"echo","key":"newcomer","result_text":"r"}`)
	if a.status != http.StatusOK {
		t.Fatalf("a client with a token while five wrong tokens wait: %d %s; want 200", a.status, a.body)
	}
}

// TestAnswersShareTheBudget (found by an attacker): a batch of 16 repeats
// of a key holding 1 MiB answers about 22 MB, and 30 connections that sent
// four each without reading took 2.2 GB: max_batch_result bounds one
// answer, nothing bounded the sum. Now the stored results in answers not
// yet written hold room of the server's budget: a read or a single replay
// that does not fit is answered 503 (nothing decided), a batch's replays
// come without their results, and fresh claims are never held up.
func TestAnswersShareTheBudget(t *testing.T) {
	budget, _ := door.NewBudget(8 << 20)
	cfg := sphttp.DefaultConfig()
	cfg.Answers = budget
	e := MustServe(t, cfg)
	big := strings.Repeat("v", 1<<20)
	if a := e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"big","result_text":"`+big+`"}`); a.status != http.StatusOK {
		t.Fatalf("claim of the big key: %d %.200s", a.status, a.body)
	}
	// Room for five results in base64 (1,398,104 bytes each; six would
	// pass 8 MiB by 16 bytes): a batch of 16 repeats is answered, the
	// first five replays with their results and the rest without.
	var batch strings.Builder
	batch.WriteString(`{"claims":[`)
	for i := range 16 {
		if i > 0 {
			batch.WriteByte(',')
		}
		batch.WriteString(`{"namespace":"echo","key":"big"}`)
	}
	batch.WriteString(`]}`)
	a := e.post(t, "/v1/claims", "", batch.String())
	if a.status != http.StatusOK || len(a.body) > 8<<20+64<<10 || strings.Count(string(a.body), `"result_omitted":true`) != 11 {
		t.Fatalf("16 repeats of a 1 MiB result under an 8 MiB budget: %d, %d bytes, %d omitted; want 200, eleven replays with result_omitted", a.status, len(a.body), strings.Count(string(a.body), `"result_omitted":true`))
	}
	// The budget taken (answers stalled elsewhere): reads and replays of
	// the big key are refused, fresh claims still answered.
	if !budget.TryAcquire(8 << 20) {
		t.Fatal("the budget was not free")
	}
	defer budget.Release(8 << 20)
	wantProblem(t, e.post(t, "/v1/get", "", `{"namespace":"echo","key":"big"}`), http.StatusServiceUnavailable, spent.EUnavailable)
	wantProblem(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"big"}`), http.StatusServiceUnavailable, spent.EUnavailable)
	if a := e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"small","result_text":"r"}`); a.status != http.StatusOK {
		t.Fatalf("a fresh claim while the answers' budget is full: %d %s; want 200", a.status, a.body)
	}
	if a := e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"small"}`); a.status != http.StatusOK || !strings.Contains(string(a.body), `"replayed"`) {
		t.Fatalf("a replay of a small result while the budget is full: %d %s; want 200 replayed", a.status, a.body)
	}
}
