package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spentledger/spent/door"
	"github.com/spentledger/spent/doortest"
)

// The doors of spent serve, each run through the conformance suite of
// package doortest against the binary built without the race detector:
// the HTTP API, the RESP listener, and the operator's page, which only
// signs in.

func TestDoorHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("the door conformance suite starts and attacks spent a dozen times")
	}
	doortest.Run(t, SpentBinary(t), doorHTTP{})
}

func TestDoorRESP(t *testing.T) {
	if testing.Short() {
		t.Skip("the door conformance suite starts and attacks spent a dozen times")
	}
	doortest.Run(t, SpentBinary(t), doorRESP{})
}

func TestDoorConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("the door conformance suite starts spent a few times")
	}
	doortest.Run(t, SpentBinary(t), doorConsole{})
}

var (
	_ doortest.Claimer    = doorHTTP{}
	_ doortest.Wire       = doorHTTP{}
	_ doortest.Claimer    = doorRESP{}
	_ doortest.Rollbacker = doorRESP{}
	_ doortest.Door       = doorConsole{}
)

// dialDoor opens a connection to addr within ctx, and sets its deadline
// to ctx's.
func dialDoor(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	return nc, nil
}

// isClosed reports whether err is what a connection the server closed
// gives.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// isoSeconds is the ISO 8601 duration of n seconds (expires_in,
// EXPIRESIN); a negative n is written as such, which is no ISO duration.
func isoSeconds(n int64) string { return "PT" + strconv.FormatInt(n, 10) + "S" }

// isoDays is the ISO 8601 duration of n days.
func isoDays(n int64) string { return "P" + strconv.FormatInt(n, 10) + "D" }

// ----- HTTP

// doorHTTP is the HTTP API (docs/http-api.md): one request a claim, each
// carrying its bearer token.
type doorHTTP struct{}

func (doorHTTP) Name() string   { return "http" }
func (doorHTTP) Args() []string { return nil }
func (doorHTTP) Config() string { return "" }

func (doorHTTP) Addr(line string) (string, bool) {
	return strings.CutPrefix(line, "spent listening on http://")
}

func (doorHTTP) Docs(lim door.Limits) doortest.Docs {
	wrong := doortest.Want{Code: "unauthorized", Text: "unknown bearer token"}
	last := wrong
	last.Close = true
	return doortest.Docs{
		WrongToken:          wrong,
		LastWrongToken:      last, // max_auth_failures: "the HTTP listener answers the last with Connection: close"
		ClosesAfterFailures: true,
		Frame:               doortest.Want{Code: "too_large", Text: "bytes: at most", Close: true},
		// A body that stops arriving is a request the API cannot read
		// (400 invalid); a header that never comes, and an idle
		// connection, are closed without an answer.
		ReadTimeout:  doortest.Want{Code: "invalid", Text: "it did not arrive within the server's read_timeout", Close: true},
		InvalidPlace: doortest.Want{Code: "invalid"},
	}
}

// ExpiryForms are /v1/claim's expires_at (RFC 3339, here in seconds) and
// expires_in (ISO 8601, here in seconds and in days), both refused past
// max_expiry.
func (doorHTTP) ExpiryForms() []doortest.ExpiryForm {
	invalid, tooLong := doortest.Want{Code: "invalid"}, doortest.Want{Code: "expiry_too_long"}
	return []doortest.ExpiryForm{
		{Name: "expires_at", Unit: time.Second, Instant: true, Invalid: invalid, TooLong: tooLong},
		{Name: "expires_in", Unit: time.Second, Invalid: invalid, TooLong: tooLong},
		{Name: "expires_in (days)", Unit: 24 * time.Hour, Invalid: invalid, TooLong: tooLong},
	}
}

// httpRequest returns a POST of body to path with token.
func httpRequest(path, token string, body []byte) []byte {
	b := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: spent\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, len(body))
	if token != "" {
		b = fmt.Appendf(b, "Authorization: Bearer %s\r\n", token)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// jsonText appends s as a JSON string, its bytes as they are but for the
// quote, the backslash and C0 controls, which are escaped: a byte that is
// not UTF-8 goes out raw, for the server to refuse.
func jsonText(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = fmt.Appendf(b, `\u%04x`, c)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// claimBody returns the JSON of a one-step claim; it returns
// ErrInexpressible for an expires_at outside RFC 3339's years.
func claimBody(c doortest.Claim) ([]byte, error) {
	b := []byte(`{"namespace":`)
	b = jsonText(b, c.Namespace)
	b = append(b, `,"key":`...)
	b = jsonText(b, c.Key)
	b = append(b, `,"result":"`...)
	b = base64.StdEncoding.AppendEncode(b, c.Value)
	b = append(b, '"')
	if c.Place != "" {
		b = append(b, `,"place":`...)
		b = jsonText(b, c.Place)
	}
	if e := c.Expiry; e != nil {
		switch e.Form {
		case "expires_at":
			// Years 1 to 9999: what RFC 3339 writes.
			if e.N < -62135596800 || e.N > 253402300799 {
				return nil, doortest.ErrInexpressible
			}
			b = append(b, `,"expires_at":`...)
			b = jsonText(b, time.Unix(e.N, 0).UTC().Format(time.RFC3339))
		case "expires_in":
			b = append(b, `,"expires_in":`...)
			b = jsonText(b, isoSeconds(e.N))
		case "expires_in (days)":
			b = append(b, `,"expires_in":`...)
			b = jsonText(b, isoDays(e.N))
		default:
			return nil, fmt.Errorf("http: no expiry form %q", e.Form)
		}
	}
	return append(b, '}'), nil
}

func getBody(ns, key string) []byte {
	b := []byte(`{"namespace":`)
	b = jsonText(b, ns)
	b = append(b, `,"key":`...)
	b = jsonText(b, key)
	return append(b, '}')
}

func (doorHTTP) Hello(string) []byte { return nil }

func (doorHTTP) Claim(token string, c doortest.Claim) []byte {
	body, err := claimBody(c)
	if err != nil {
		panic(err)
	}
	return httpRequest("/v1/claim", token, body)
}

func (doorHTTP) Read(token, ns, key string) []byte {
	return httpRequest("/v1/get", token, getBody(ns, key))
}

func (doorHTTP) Frames(n int64) [][]byte {
	return [][]byte{fmt.Appendf(nil, "POST /v1/claim HTTP/1.1\r\nHost: spent\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", n)}
}

// Half is the claim's header and half its body: the header is read under
// auth_timeout, the body under read_timeout. Without a token it is a
// request of a client with none (a Privacy Pass client's, say).
func (d doorHTTP) Half(token string, c doortest.Claim) []byte {
	req := d.Claim(token, c)
	i := bytes.Index(req, []byte("\r\n\r\n")) + 4
	return req[:i+(len(req)-i)/2]
}

// httpAnswer is what an answer of the API says: a record with an outcome,
// or a problem.
type httpAnswer struct {
	Outcome   string `json:"outcome"`
	Result    []byte `json:"result"`
	State     string `json:"state"`
	Place     string `json:"place"`
	ExpiresAt string `json:"expires_at"`
	Code      string `json:"code"`
	Detail    string `json:"detail"`
}

// readHTTP reads one answer off r.
func readHTTP(r *bufio.Reader) (*http.Response, httpAnswer, error) {
	var a httpAnswer
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, a, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, a, err
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &a); err != nil {
			return nil, a, fmt.Errorf("http: answer %d: %w: %.200q", resp.StatusCode, err, body)
		}
	}
	return resp, a, nil
}

func (doorHTTP) ReadReply(r *bufio.Reader) (doortest.Reply, error) {
	resp, a, err := readHTTP(r)
	if err != nil {
		return doortest.Reply{}, err
	}
	return httpReply(resp, a), nil
}

func httpReply(resp *http.Response, a httpAnswer) doortest.Reply {
	rep := doortest.Reply{Close: resp.Close}
	switch {
	case resp.StatusCode != http.StatusOK:
		rep.Code, rep.Text = a.Code, a.Detail
		if rep.Code == "" {
			rep.Code = strconv.Itoa(resp.StatusCode)
		}
	case a.Outcome == "fresh":
		rep.Outcome = "fresh"
	case a.Outcome != "":
		rep.Outcome = "repeat"
	default:
		rep.Value = a.Result
	}
	return rep
}

func (d doorHTTP) SignIn(ctx context.Context, addr string, tokens []string) ([]doortest.Reply, bool, error) {
	return signIn(ctx, addr, tokens, func(nc net.Conn, r *bufio.Reader, tok string) (doortest.Reply, error) {
		if _, err := nc.Write(d.Read(tok, doortest.NSClaims, "sign-in")); err != nil {
			return doortest.Reply{}, err
		}
		resp, a, err := readHTTP(r)
		if err != nil {
			return doortest.Reply{}, err
		}
		rep := httpReply(resp, a)
		if rep.Code == "not_found" {
			rep.Code = "" // signed in: the key has no record
		}
		return rep, nil
	})
}

// signIn tries each token in turn on one connection to addr with try, and
// returns the answers and whether the server closed the connection (the
// answers then stop there).
func signIn(ctx context.Context, addr string, tokens []string, try func(net.Conn, *bufio.Reader, string) (doortest.Reply, error)) ([]doortest.Reply, bool, error) {
	nc, err := dialDoor(ctx, addr)
	if err != nil {
		return nil, false, err
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	var answers []doortest.Reply
	for _, tok := range tokens {
		rep, err := try(nc, r, tok)
		if err != nil {
			if isClosed(err) {
				return answers, true, nil
			}
			return answers, false, err
		}
		answers = append(answers, rep)
	}
	return answers, false, nil
}

// httpDoorClient is one connection to the API, one request at a time.
type httpDoorClient struct {
	nc    net.Conn
	r     *bufio.Reader
	token string
}

func (d doorHTTP) Dial(ctx context.Context, addr, token string) (doortest.Client, error) {
	nc, err := dialDoor(ctx, addr)
	if err != nil {
		return nil, err
	}
	c := &httpDoorClient{nc: nc, r: bufio.NewReader(nc), token: token}
	// One request signs the connection in.
	if _, found, err := c.Get(ctx, doortest.NSClaims, "sign-in"); err != nil || found {
		nc.Close()
		return nil, fmt.Errorf("http: signing in: found %v, %w", found, err)
	}
	return c, nil
}

func (c *httpDoorClient) do(ctx context.Context, req []byte) (*http.Response, httpAnswer, error) {
	dl, _ := ctx.Deadline()
	c.nc.SetDeadline(dl)
	if _, err := c.nc.Write(req); err != nil {
		return nil, httpAnswer{}, err
	}
	return readHTTP(c.r)
}

func (c *httpDoorClient) Claim(ctx context.Context, cl doortest.Claim) (doortest.Reply, error) {
	body, err := claimBody(cl)
	if err != nil {
		return doortest.Reply{}, err
	}
	resp, a, err := c.do(ctx, httpRequest("/v1/claim", c.token, body))
	if err != nil {
		return doortest.Reply{}, err
	}
	return httpReply(resp, a), nil
}

func (c *httpDoorClient) Get(ctx context.Context, ns, key string) (doortest.Record, bool, error) {
	resp, a, err := c.do(ctx, httpRequest("/v1/get", c.token, getBody(ns, key)))
	switch {
	case err != nil:
		return doortest.Record{}, false, err
	case resp.StatusCode == http.StatusNotFound && a.Code == "not_found":
		return doortest.Record{}, false, nil
	case resp.StatusCode != http.StatusOK:
		return doortest.Record{}, false, fmt.Errorf("http: /v1/get: %d %s: %s", resp.StatusCode, a.Code, a.Detail)
	}
	at, err := time.Parse(time.RFC3339Nano, a.ExpiresAt)
	if err != nil {
		return doortest.Record{}, false, fmt.Errorf("http: /v1/get: expires_at %q: %w", a.ExpiresAt, err)
	}
	return doortest.Record{State: a.State, Value: a.Result, Place: a.Place, ExpiresAt: at}, true, nil
}

func (c *httpDoorClient) Close() error { return c.nc.Close() }

// ----- RESP

// doorRESP is the RESP listener (docs/resp.md): Redis clients' SET … NX,
// the ledger's SPENT.* commands, one AUTH per connection.
type doorRESP struct{}

func (doorRESP) Name() string   { return "resp" }
func (doorRESP) Args() []string { return []string{"--resp", "127.0.0.1:0"} }

// Config adds a rollback prefix to the default ones (NAME: for each
// namespace).
func (doorRESP) Config() string {
	return "[resp]\nrollback = [\"" + doortest.NSRollback + ":\"]\n"
}

func (doorRESP) Addr(line string) (string, bool) {
	return strings.CutPrefix(line, "spent RESP listening on redis://")
}

// Docs are the answers of docs/resp.md, sections "Limits", "Authentication
// and TLS" and "Error replies".
func (doorRESP) Docs(lim door.Limits) doortest.Docs {
	return doortest.Docs{
		WrongToken: doortest.Want{Code: "WRONGPASS", Text: "invalid username-password pair or user is disabled: unknown token"},
		LastWrongToken: doortest.Want{Code: "WRONGPASS",
			Text: fmt.Sprintf("closing the connection after %d refused sign-ins (max_auth_failures)", lim.MaxAuthFailures)},
		ClosesAfterFailures: true,
		Frame:               doortest.Want{Code: "ERR", Text: "Protocol error: "},
		ReadTimeout: doortest.Want{Code: "ERR",
			Text: fmt.Sprintf("a command took more than %v to arrive (read_timeout): closing the connection", lim.ReadTimeout)},
		AuthTimeout: doortest.Want{Code: "NOAUTH",
			Text: fmt.Sprintf("Authentication required: no AUTH within %v of connecting (auth_timeout): closing the connection", lim.AuthTimeout)},
		InvalidPlace: doortest.Want{Code: "INVALID", Text: "place"},
		RollbackFull: doortest.Want{Code: "UNAVAILABLE", Text: "(resp max_rollback_bytes); nothing was claimed; retry"},
		Busy:         doortest.Want{Code: "UNAVAILABLE", Text: "(max_bodies); this command was dropped unread; retry"},
	}
}

// ExpiryForms are SET's EX, PX, EXAT and PXAT (capped at max_expiry, as a
// Redis client expects any SET to be taken) and SPENT.CLAIM's EXPIRESAT and
// EXPIRESIN (refused past it).
func (doorRESP) ExpiryForms() []doortest.ExpiryForm {
	set := doortest.Want{Code: "ERR", Text: "invalid expire time in 'set' command"}
	native := doortest.Want{Code: "INVALID"}
	tooLong := doortest.Want{Code: "EXPIRY_TOO_LONG"}
	return []doortest.ExpiryForm{
		{Name: "EX", Unit: time.Second, Clamps: true, Invalid: set},
		{Name: "PX", Unit: time.Millisecond, Clamps: true, Invalid: set},
		{Name: "EXAT", Unit: time.Second, Instant: true, Clamps: true, Invalid: set},
		{Name: "PXAT", Unit: time.Millisecond, Instant: true, Clamps: true, Invalid: set},
		{Name: "EXPIRESAT", Unit: time.Millisecond, Instant: true, Invalid: native, TooLong: tooLong},
		{Name: "EXPIRESIN", Unit: time.Second, Invalid: native, TooLong: tooLong},
		{Name: "EXPIRESIN (days)", Unit: 24 * time.Hour, Invalid: native, TooLong: tooLong},
	}
}

// respArgs encodes a command as a RESP array of bulk strings.
func respArgs(args ...[]byte) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n", len(a))
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// respKey is the Redis key of key in namespace ns, under its default
// prefix.
func respKey(ns, key string) []byte { return []byte(ns + ":" + key) }

// respClaim returns the command of a claim: SET … NX with SET's forms of
// expiry, else SPENT.CLAIM (for a place, or the ledger's own forms).
func respClaim(c doortest.Claim) []byte {
	e := c.Expiry
	native := c.Place != "" || e != nil && strings.HasPrefix(e.Form, "EXPIRES")
	if !native {
		args := [][]byte{[]byte("SET"), respKey(c.Namespace, c.Key), c.Value, []byte("NX")}
		if e != nil {
			args = append(args, []byte(e.Form), []byte(strconv.FormatInt(e.N, 10)))
		}
		return respArgs(args...)
	}
	args := [][]byte{[]byte("SPENT.CLAIM"), []byte(c.Namespace), []byte(c.Key), []byte("RESULT"), c.Value}
	if c.Place != "" {
		args = append(args, []byte("PLACE"), []byte(c.Place))
	}
	if e != nil {
		switch e.Form {
		case "EXPIRESAT":
			args = append(args, []byte("EXPIRESAT"), []byte(strconv.FormatInt(e.N, 10)))
		case "EXPIRESIN":
			args = append(args, []byte("EXPIRESIN"), []byte(isoSeconds(e.N)))
		case "EXPIRESIN (days)":
			args = append(args, []byte("EXPIRESIN"), []byte(isoDays(e.N)))
		}
	}
	return respArgs(args...)
}

func (doorRESP) Hello(token string) []byte {
	return respArgs([]byte("AUTH"), []byte(token))
}

func (doorRESP) Claim(_ string, c doortest.Claim) []byte { return respClaim(c) }

func (doorRESP) Read(_, ns, key string) []byte {
	return respArgs([]byte("GET"), respKey(ns, key))
}

// Frames declare an argument of n bytes to AUTH, and a command of 64
// arguments of n/64 bytes each: both over what a connection may send
// before it signs in.
func (doorRESP) Frames(n int64) [][]byte {
	return [][]byte{
		fmt.Appendf(nil, "*2\r\n$4\r\nAUTH\r\n$%d\r\n", n),
		fmt.Appendf(nil, "*64\r\n$%d\r\n", n/64),
	}
}

func (doorRESP) Half(_ string, c doortest.Claim) []byte {
	b := respClaim(c)
	return b[:len(b)/2]
}

func (doorRESP) Rollback(_, key string, value []byte) []byte {
	return respArgs([]byte("SET"), respKey(doortest.NSRollback, key), value, []byte("NX"))
}

// respValue is one RESP2 reply: a simple string, an error, an integer, a
// bulk string (nil when absent) or an array.
type respValue struct {
	kind  byte // '+', '-', ':', '$', '*'
	str   string
	bulk  []byte
	null  bool
	n     int64
	items []respValue
}

// readRESP reads one reply.
func readRESP(r *bufio.Reader) (respValue, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return respValue{}, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return respValue{}, errors.New("resp: an empty reply line")
	}
	v := respValue{kind: line[0], str: line[1:]}
	switch v.kind {
	case '+', '-':
		return v, nil
	case ':':
		v.n, err = strconv.ParseInt(v.str, 10, 64)
		return v, err
	case '$', '*':
		n, err := strconv.Atoi(v.str)
		if err != nil {
			return v, fmt.Errorf("resp: length %q", line)
		}
		if n < 0 {
			v.null = true
			return v, nil
		}
		if v.kind == '$' {
			v.bulk = make([]byte, n+2)
			_, err = io.ReadFull(r, v.bulk)
			v.bulk = v.bulk[:n]
			return v, err
		}
		for range n {
			item, err := readRESP(r)
			if err != nil {
				return v, err
			}
			v.items = append(v.items, item)
		}
		return v, nil
	}
	return v, fmt.Errorf("resp: a reply the harness does not read: %q", line)
}

// field returns the value of name in a reply that is a record (a flat
// array of field, value, …).
func (v respValue) field(name string) (respValue, bool) {
	for i := 0; i+1 < len(v.items); i += 2 {
		if string(v.items[i].bulk) == name {
			return v.items[i+1], true
		}
	}
	return respValue{}, false
}

// respReply reads a reply as the suite does: an error's code and text,
// OK as a fresh claim (SET … NX), nil as a repeat, a value, or a
// SPENT.CLAIM answer's outcome.
func respReply(v respValue) doortest.Reply {
	switch {
	case v.kind == '-':
		code, text, _ := strings.Cut(v.str, " ")
		return doortest.Reply{Code: code, Text: text}
	case v.kind == '+' && v.str == "OK":
		return doortest.Reply{Outcome: "fresh"}
	case v.null:
		return doortest.Reply{Outcome: "repeat"}
	case v.kind == '$':
		return doortest.Reply{Value: v.bulk}
	case v.kind == '*':
		if o, ok := v.field("outcome"); ok {
			if string(o.bulk) == "fresh" {
				return doortest.Reply{Outcome: "fresh"}
			}
			return doortest.Reply{Outcome: "repeat"}
		}
	}
	return doortest.Reply{}
}

func (doorRESP) ReadReply(r *bufio.Reader) (doortest.Reply, error) {
	v, err := readRESP(r)
	if err != nil {
		return doortest.Reply{}, err
	}
	return respReply(v), nil
}

func (d doorRESP) SignIn(ctx context.Context, addr string, tokens []string) ([]doortest.Reply, bool, error) {
	return signIn(ctx, addr, tokens, func(nc net.Conn, r *bufio.Reader, tok string) (doortest.Reply, error) {
		if _, err := nc.Write(d.Hello(tok)); err != nil {
			return doortest.Reply{}, err
		}
		v, err := readRESP(r)
		if err != nil {
			return doortest.Reply{}, err
		}
		rep := respReply(v)
		if rep.Outcome == "fresh" {
			rep.Outcome = "" // AUTH's OK
		}
		return rep, nil
	})
}

// respDoorClient is one signed-in RESP connection, one command at a time.
type respDoorClient struct {
	nc net.Conn
	r  *bufio.Reader
}

func (d doorRESP) Dial(ctx context.Context, addr, token string) (doortest.Client, error) {
	nc, err := dialDoor(ctx, addr)
	if err != nil {
		return nil, err
	}
	c := &respDoorClient{nc: nc, r: bufio.NewReader(nc)}
	v, err := c.do(ctx, d.Hello(token))
	if err != nil || v.kind != '+' {
		nc.Close()
		return nil, fmt.Errorf("resp: AUTH: %+v, %w", v, err)
	}
	return c, nil
}

func (c *respDoorClient) do(ctx context.Context, cmd []byte) (respValue, error) {
	dl, _ := ctx.Deadline()
	c.nc.SetDeadline(dl)
	if _, err := c.nc.Write(cmd); err != nil {
		return respValue{}, err
	}
	return readRESP(c.r)
}

func (c *respDoorClient) Claim(ctx context.Context, cl doortest.Claim) (doortest.Reply, error) {
	v, err := c.do(ctx, respClaim(cl))
	if err != nil {
		return doortest.Reply{}, err
	}
	return respReply(v), nil
}

// Get reads the record with SPENT.GET, which gives its expiry in Unix
// milliseconds.
func (c *respDoorClient) Get(ctx context.Context, ns, key string) (doortest.Record, bool, error) {
	v, err := c.do(ctx, respArgs([]byte("SPENT.GET"), []byte(ns), []byte(key)))
	switch {
	case err != nil:
		return doortest.Record{}, false, err
	case v.kind == '-':
		return doortest.Record{}, false, fmt.Errorf("resp: SPENT.GET: -%s", v.str)
	case v.null:
		return doortest.Record{}, false, nil
	}
	state, _ := v.field("state")
	place, _ := v.field("place")
	exp, _ := v.field("expires_at")
	result, _ := v.field("result")
	return doortest.Record{State: string(state.bulk), Place: string(place.bulk), Value: result.bulk,
		ExpiresAt: time.UnixMilli(exp.n)}, true, nil
}

func (c *respDoorClient) Close() error { return c.nc.Close() }

// ----- the operator's page

// doorConsole is the operator's page at /ui/ on the HTTP listener: its
// login form takes an admin token. It has no claims of its own.
type doorConsole struct{}

func (doorConsole) Name() string   { return "console" }
func (doorConsole) Args() []string { return nil }
func (doorConsole) Config() string { return "" }

func (doorConsole) Addr(line string) (string, bool) {
	return strings.CutPrefix(line, "spent listening on http://")
}

// Docs are console/doc.go's: every refused token (unknown, without the
// admin scope) gets one answer, 401 with one message; refusals delay, they
// do not lock out (nor close the connection).
func (doorConsole) Docs(door.Limits) doortest.Docs {
	return doortest.Docs{
		AdminOnly:  true,
		WrongToken: doortest.Want{Code: "unauthorized", Text: "login refused: not an admin token of this server"},
	}
}

var (
	csrfField    = regexp.MustCompile(`name="csrf" value="([^"]*)"`)
	errorHeading = regexp.MustCompile(`<h2>(\d+): ([a-z_]+)</h2>`)
	errorMessage = regexp.MustCompile(`<p id="error-message">([^<]*)</p>`)
)

// SignIn loads the login page for a session and its CSRF token, then
// submits the form once per token, on one connection.
func (doorConsole) SignIn(ctx context.Context, addr string, tokens []string) ([]doortest.Reply, bool, error) {
	nc, err := dialDoor(ctx, addr)
	if err != nil {
		return nil, false, err
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	page := func(req string) (*http.Response, string, error) {
		if _, err := io.WriteString(nc, req); err != nil {
			return nil, "", err
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return nil, "", err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b), err
	}
	resp, body, err := page("GET /ui/login HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")
	if err != nil {
		return nil, false, err
	}
	m := csrfField.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil || len(resp.Cookies()) == 0 {
		return nil, false, fmt.Errorf("console: the login page: %d, %d cookies, csrf %v", resp.StatusCode, len(resp.Cookies()), m != nil)
	}
	cookie, csrf := resp.Cookies()[0], m[1]
	var answers []doortest.Reply
	for _, tok := range tokens {
		form := url.Values{"csrf": {csrf}, "token": {tok}}.Encode()
		resp, body, err := page(fmt.Sprintf("POST /ui/login HTTP/1.1\r\nHost: %s\r\nCookie: %s=%s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s",
			addr, cookie.Name, cookie.Value, len(form), form))
		if err != nil {
			if isClosed(err) {
				return answers, true, nil
			}
			return answers, false, err
		}
		rep := doortest.Reply{Close: resp.Close}
		switch h := errorHeading.FindStringSubmatch(body); {
		case resp.StatusCode == http.StatusSeeOther && resp.Header.Get("Location") == "/ui/":
			// Logged in.
		case h != nil:
			rep.Code = h[2]
			if m := errorMessage.FindStringSubmatch(body); m != nil {
				rep.Text = html.UnescapeString(m[1])
			}
		default:
			rep.Code, rep.Text = strconv.Itoa(resp.StatusCode), body
		}
		answers = append(answers, rep)
	}
	return answers, false, nil
}
