// Package problem writes and reads the RFC 9457 problem documents
// (application/problem+json) of spent's HTTP surfaces: the ledger's API
// (package http), the Idempotency-Key middleware, Privacy Pass and e-cash.
// Each surface keeps its own table of codes, titles and statuses and its
// own type prefix; this package owns the wire form they share.
//
// In the common case, answer a request with
//
//	problem.Write(w, status, problem.Append(nil, typePrefix, code, title, status, detail))
//
// and read an answer with
//
//	if p, ok := problem.Read(resp.Header, body); ok { ... p.Code ... }
//
// # Guarantees
//
//   - A document is one JSON object with the members type (the prefix
//     followed by the code), title, status, detail and code, in that order,
//     and a newline.
//   - Strings are escaped by strictjson.AppendString: invalid UTF-8 becomes
//     U+FFFD, U+2028 and U+2029 are escaped; nothing else is.
//   - Write sends Content-Type: application/problem+json, Cache-Control:
//     no-store and Content-Length; headers the caller set before (Allow,
//     Retry-After, WWW-Authenticate) are kept.
//   - Read reads by the rules of package strictjson, skipping the members
//     it does not know (RFC 9457 allows extension members).
package problem

import (
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/spentledger/spent/internal/strictjson"
)

// ContentType is the media type of a problem document.
const ContentType = "application/problem+json"

// Shared header values; net/http only reads them.
var (
	hdrProblem = []string{ContentType}
	hdrNoStore = []string{"no-store"}
)

// Append appends the problem document of code to b: typePrefix+code as its
// type, then title, status, detail and code.
func Append(b []byte, typePrefix, code, title string, status int, detail string) []byte {
	b = append(b, `{"type":`...)
	b = strictjson.AppendString(b, typePrefix+code)
	b = append(b, `,"title":`...)
	b = strictjson.AppendString(b, title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"detail":`...)
	b = strictjson.AppendString(b, detail)
	b = append(b, `,"code":`...)
	b = strictjson.AppendString(b, code)
	return append(b, "}\n"...)
}

// Write answers w with status and doc, a document from Append.
func Write(w http.ResponseWriter, status int, doc []byte) {
	h := w.Header()
	h["Content-Type"] = hdrProblem
	h["Cache-Control"] = hdrNoStore
	h["Content-Length"] = []string{strconv.Itoa(len(doc))}
	w.WriteHeader(status)
	w.Write(doc)
}

// RetryAfter returns d as a Retry-After value: whole seconds, rounded up,
// at least 1.
func RetryAfter(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(int64(max(s, 1)), 10)
}

// Doc is a decoded problem document.
type Doc struct {
	// Type is the type URI: a surface's prefix and the code.
	Type string
	// Title is the code's short summary.
	Title string
	// Status is the HTTP status the document states.
	Status int64
	// Detail explains this occurrence to a person.
	Detail string
	// Code is the stable error code.
	Code string
}

// Decode reads a problem document from d into p, skipping members it does
// not know.
func (p *Doc) Decode(d *strictjson.Decoder) error {
	return d.Object(func(name []byte) error {
		var err error
		switch string(name) {
		case "type":
			p.Type, err = d.String()
		case "title":
			p.Title, err = d.String()
		case "status":
			p.Status, err = d.Int()
		case "detail":
			p.Detail, err = d.String()
		case "code":
			p.Code, err = d.String()
		default:
			return d.Skip(1)
		}
		if err != nil {
			return &strictjson.MemberError{Name: string(name), Err: err}
		}
		return nil
	})
}

// Parse reads the problem document body, which must be all of it.
func Parse(body []byte) (Doc, error) {
	var p Doc
	var d strictjson.Decoder
	d.Reset(body)
	if err := p.Decode(&d); err != nil {
		return Doc{}, err
	}
	if err := d.End(); err != nil {
		return Doc{}, err
	}
	return p, nil
}

// Read returns the problem document of an answer with header h and body,
// and true, when the answer is one: its media type is
// application/problem+json and its body parses with a code.
func Read(h http.Header, body []byte) (Doc, bool) {
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != ContentType {
		return Doc{}, false
	}
	p, err := Parse(body)
	if err != nil || p.Code == "" {
		return Doc{}, false
	}
	return p, true
}
