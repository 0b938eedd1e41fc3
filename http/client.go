package http

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/problem"
	"github.com/spentledger/spent/internal/strictjson"
	"github.com/spentledger/spent/internal/tlsfiles"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Token is sent as "Authorization: Bearer <Token>"; empty sends none.
	Token string
	// HTTPClient carries the requests. Nil means a shared client whose
	// transport keeps up to 256 idle connections per host (net/http's
	// default keeps 2, which under concurrency opens and closes a connection
	// per request).
	HTTPClient *http.Client
	// TLS, when set and HTTPClient is nil, configures the connections to an
	// https:// server (see TLSClientConfig): the client then has a transport
	// of its own, with the shared client's settings.
	TLS *tls.Config
}

// Client is the Go client of the HTTP API. It implements spent.Service, so
// code written against a Ledger runs unchanged against a remote server. It
// is safe for concurrent use. A request whose context holds an
// OpenTelemetry span carries it to the server in a W3C traceparent header,
// so that the server's spans join the caller's trace.
//
// Errors are *spent.Error values carrying the server's code, so
// spent.ErrorCode works as it does in process. A request that never got an
// answer (connection refused or reset, timeout, cancelled context) is an
// EUnavailable error wrapping the cause; see the package caveats for what
// that means for a claim.
type Client struct {
	hc   *http.Client
	auth []string
	urls [routeSeq + 1]string
	bufs sync.Pool // *answerBuf, for reading answers
}

var _ spent.Service = (*Client)(nil)

var defaultHTTPClient = &http.Client{Transport: newTransport()}

// traceContext passes the caller's span on to the server in W3C
// traceparent and tracestate headers.
var traceContext = propagation.TraceContext{}

func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return t
}

// NewClient returns a client of the server at baseURL ("http://host:port",
// with or without a path prefix).
func NewClient(baseURL string, cfg ClientConfig) *Client {
	c := &Client{hc: cfg.HTTPClient}
	if c.hc == nil && cfg.TLS != nil {
		t := newTransport()
		t.TLSClientConfig = cfg.TLS
		c.hc = &http.Client{Transport: t}
	}
	if c.hc == nil {
		c.hc = defaultHTTPClient
	}
	if cfg.Token != "" {
		c.auth = []string{"Bearer " + cfg.Token}
	}
	base := strings.TrimRight(baseURL, "/")
	for r := range c.urls {
		c.urls[r] = base + routes[r]
	}
	c.bufs.New = func() any { return &answerBuf{b: make([]byte, 0, 1024)} }
	return c
}

// TLSClientConfig returns the TLS configuration of a client of an https://
// server, for ClientConfig.TLS: it trusts the CA certificates in the PEM
// file caFile (empty: the system's roots) and presents the certificate and
// private key in the PEM files certFile and keyFile (both empty: no client
// certificate), as a server with a client CA wants. TLS 1.2 is the oldest
// version it speaks.
func TLSClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc, err := tlsfiles.ClientConfig(caFile, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	return tc, nil
}

// unavailable wraps a failure to get an answer.
func unavailable(msg string, err error) error {
	return &spent.Error{Code: spent.EUnavailable, Message: msg, Err: err}
}

func badAnswer(rt route, err error) error {
	return &spent.Error{Code: spent.EInternal, Message: "malformed answer from " + routes[rt], Err: err}
}

// do posts body to the route and hands a 200 answer to decode; any other
// status becomes the *spent.Error the problem document describes.
func (c *Client) do(ctx context.Context, rt route, body []byte, decode func(d *strictjson.Decoder) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.urls[rt], bytes.NewReader(body))
	if err != nil {
		return spent.Errorf(spent.EInvalid, "building request: %s", err.Error())
	}
	req.Header["Content-Type"] = hdrJSON
	if c.auth != nil {
		req.Header["Authorization"] = c.auth
	}
	// A span in ctx (OpenTelemetry) becomes the server span's parent;
	// without one this adds nothing.
	traceContext.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := c.hc.Do(req)
	if err != nil {
		return unavailable("request to "+routes[rt]+" failed", err)
	}
	defer resp.Body.Close()
	ab := c.bufs.Get().(*answerBuf)
	defer func() {
		if cap(ab.b) <= maxPooled {
			c.bufs.Put(ab)
		}
	}()
	buf, err := readAll(resp.Body, resp.ContentLength, ab.b[:0])
	ab.b = buf[:0]
	if err != nil {
		return unavailable("reading answer from "+routes[rt], err)
	}
	d := &ab.d
	d.Reset(buf)
	if resp.StatusCode != http.StatusOK {
		return answerError(resp, d)
	}
	if err := decode(d); err != nil {
		return badAnswer(rt, err)
	}
	if err := d.End(); err != nil {
		return badAnswer(rt, err)
	}
	return nil
}

// answerBuf holds the buffer an answer is read into and the decoder that
// reads it, reused across requests so that neither allocates.
type answerBuf struct {
	b []byte
	d strictjson.Decoder
}

func readAll(r io.Reader, n int64, buf []byte) ([]byte, error) {
	if n >= 0 && int64(cap(buf)) < n+1 {
		buf = make([]byte, 0, n+1)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// answerError turns a non-200 answer into a *spent.Error, taking the code
// from the problem document when there is one and from the status otherwise.
func answerError(resp *http.Response, d *strictjson.Decoder) error {
	var p problem.Doc
	if err := p.Decode(d); err == nil && d.End() == nil && p.Code != "" {
		if _, known := codes[p.Code]; known {
			return &spent.Error{Code: p.Code, Message: p.Detail}
		}
	}
	code := codeOfStatus(resp.StatusCode)
	msg := "HTTP " + strconv.Itoa(resp.StatusCode)
	if p.Detail != "" {
		msg += ": " + p.Detail
	}
	return &spent.Error{Code: code, Message: msg}
}

// Claim implements spent.Service. On a fresh one-step claim the record's
// Result is a copy of c.Result, which the server does not send back. A
// claim with Wait set is sent with its "wait", and the server holds the
// request up to that long: an HTTPClient with a Timeout shorter than the
// wait cuts it short (an EUnavailable error, as for any request left
// unanswered).
func (c *Client) Claim(ctx context.Context, cl spent.Claim) (spent.Answer, error) {
	body, err := appendClaim(make([]byte, 0, claimSize(&cl)), &cl, true)
	if err != nil {
		return spent.Answer{}, err
	}
	var res spent.Answer
	err = c.do(ctx, routeClaim, body, func(d *strictjson.Decoder) error {
		return decodeAnswer(d, &res, &cl)
	})
	if err != nil {
		return spent.Answer{}, err
	}
	fillFresh(&res, &cl)
	return res, nil
}

// claimSize is about the size of a claim's JSON, to allocate it once.
func claimSize(c *spent.Claim) int {
	return 128 + len(c.Namespace) + len(c.Key) + len(c.Place) + 2*len(c.Fingerprint) + strictjson.B64.EncodedLen(len(c.Result))
}

// fillFresh puts back the result bytes a fresh one-step claim stored.
func fillFresh(res *spent.Answer, c *spent.Claim) {
	if res.Outcome == spent.Fresh && c.Result != nil && res.Record.Result == nil {
		res.Record.Result = append([]byte{}, c.Result...)
	}
}

// ClaimBatch implements spent.Service: one request, answered in order,
// everything durable before the answer; a claim's Wait is not sent (a batch
// never waits). A replay whose result did not fit in
// the server's budget for one answer (max_batch_result) has ResultOmitted
// set and no result: read it with Get.
func (c *Client) ClaimBatch(ctx context.Context, cs []spent.Claim) ([]spent.Answer, error) {
	size := 16
	for i := range cs {
		size += claimSize(&cs[i])
	}
	body := append(make([]byte, 0, size), `{"claims":[`...)
	for i := range cs {
		if i > 0 {
			body = append(body, ',')
		}
		var err error
		if body, err = appendClaim(body, &cs[i], false); err != nil {
			var e *spent.Error
			if errors.As(err, &e) {
				e.Message = "claims[" + strconv.Itoa(i) + "]: " + e.Message
			}
			return nil, err
		}
	}
	body = append(body, "]}"...)
	out := make([]spent.Answer, 0, len(cs))
	err := c.do(ctx, routeClaims, body, func(d *strictjson.Decoder) error {
		return d.Object(func(name []byte) error {
			if string(name) != "results" {
				return d.Skip(1)
			}
			return d.Array(func(i int) error {
				if i >= len(cs) {
					return errors.New("more results than claims")
				}
				out = append(out, spent.Answer{})
				return decodeAnswer(d, &out[i], &cs[i])
			})
		})
	})
	if err != nil {
		return nil, err
	}
	if len(out) != len(cs) {
		return nil, badAnswer(routeClaims, errors.New("got "+strconv.Itoa(len(out))+" results for "+strconv.Itoa(len(cs))+" claims"))
	}
	for i := range out {
		fillFresh(&out[i], &cs[i])
	}
	return out, nil
}

// Complete implements spent.Service. Force needs a token with the admin
// scope.
func (c *Client) Complete(ctx context.Context, cp spent.Completion) (spent.Record, error) {
	body, err := appendTarget(make([]byte, 0, 160+len(cp.Key)+strictjson.B64.EncodedLen(len(cp.Result))), cp.Namespace, cp.Key, cp.Hash, cp.Seq, cp.Force)
	if err != nil {
		return spent.Record{}, err
	}
	body = append(body, `,"result":"`...)
	body = strictjson.B64.AppendEncode(body, cp.Result)
	body = append(body, `"}`...)
	var rec spent.Record
	err = c.do(ctx, routeComplete, body, func(d *strictjson.Decoder) error { return decodeRecord(d, &rec) })
	if err != nil {
		return spent.Record{}, err
	}
	return rec, nil
}

// Release implements spent.Service. Force needs a token with the admin
// scope.
func (c *Client) Release(ctx context.Context, rl spent.Release) error {
	body, err := appendTarget(make([]byte, 0, 160+len(rl.Key)), rl.Namespace, rl.Key, rl.Hash, rl.Seq, rl.Force)
	if err != nil {
		return err
	}
	body = append(body, '}')
	return c.do(ctx, routeRelease, body, func(d *strictjson.Decoder) error { return d.Skip(0) })
}

// Get implements spent.Service.
func (c *Client) Get(ctx context.Context, namespace, key string) (spent.Record, error) {
	if err := checkText("namespace", namespace); err != nil {
		return spent.Record{}, err
	}
	if err := checkText("key", key); err != nil {
		return spent.Record{}, err
	}
	body := append(make([]byte, 0, 64+len(key)), `{"namespace":`...)
	body = strictjson.AppendString(body, namespace)
	body = append(body, `,"key":`...)
	body = strictjson.AppendString(body, key)
	body = append(body, '}')
	var rec spent.Record
	err := c.do(ctx, routeGet, body, func(d *strictjson.Decoder) error { return decodeRecord(d, &rec) })
	if err != nil {
		return spent.Record{}, err
	}
	return rec, nil
}

// Unknown implements spent.Service. It needs a token with the admin scope
// (over all namespaces when namespace is empty). A limit of 0 or less asks
// for the server's maximum, spent.MaxBatch.
func (c *Client) Unknown(ctx context.Context, namespace string, limit int) ([]spent.Record, error) {
	if err := checkText("namespace", namespace); err != nil {
		return nil, err
	}
	if limit < 0 || limit > spent.MaxBatch {
		limit = 0
	}
	body := append(make([]byte, 0, 64), `{"namespace":`...)
	body = strictjson.AppendString(body, namespace)
	body = append(body, `,"limit":`...)
	body = strconv.AppendInt(body, int64(limit), 10)
	body = append(body, '}')
	var recs []spent.Record
	err := c.do(ctx, routeUnknown, body, func(d *strictjson.Decoder) error {
		return d.Object(func(name []byte) error {
			if string(name) != "records" {
				return d.Skip(1)
			}
			return d.Array(func(int) error {
				recs = append(recs, spent.Record{})
				return decodeRecord(d, &recs[len(recs)-1])
			})
		})
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}
