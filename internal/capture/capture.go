// Package capture holds Response, the http.ResponseWriter that the
// middlewares (idempotency, webhooks) give their handler so that its
// response can be stored, or dropped, before any byte of it is sent.
package capture

import (
	"errors"
	"net/http"
	"strconv"
)

// ErrTooLarge is what Write returns once a response passes its limit.
var ErrTooLarge = errors.New("capture: response over its limit")

// Response holds a handler's response in memory: its header, its first
// final status and up to max bytes of its body. It offers no Flush or
// Hijack: a response under a middleware that stores it is whole, never
// streamed.
type Response struct {
	header   http.Header
	status   int
	body     []byte
	max      int
	overflow bool
}

// New returns an empty Response that holds at most max bytes of body.
func New(max int) *Response { return &Response{header: make(http.Header), max: max} }

// Header returns the header map the handler fills in.
func (r *Response) Header() http.Header { return r.header }

// WriteHeader records the first final status. An informational one (1xx,
// which net/http lets a handler send any number of before the final one)
// is not the response's status, and is ignored.
func (r *Response) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
}

// Write appends p to the body. Past the limit it keeps nothing more, marks
// the response as overflowed and returns ErrTooLarge, so that the handler
// can stop.
func (r *Response) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.overflow || len(r.body)+len(p) > r.max {
		r.overflow = true
		return 0, ErrTooLarge
	}
	r.body = append(r.body, p...)
	return len(p), nil
}

// Status returns the response's status: 200 when the handler set none.
func (r *Response) Status() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// Body returns the bytes written, up to the limit.
func (r *Response) Body() []byte { return r.body }

// Overflow reports whether the handler wrote more than the limit.
func (r *Response) Overflow() bool { return r.overflow }

// Send writes the response to w: its header over w's, a Content-Length
// when the status allows a body and the handler set none, the status and
// the body.
func (r *Response) Send(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	status := r.Status()
	if BodyAllowed(status) && h.Get("Content-Length") == "" {
		h["Content-Length"] = []string{strconv.Itoa(len(r.body))}
	}
	w.WriteHeader(status)
	w.Write(r.body)
}

// BodyAllowed reports whether a response of status may carry a body.
func BodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
