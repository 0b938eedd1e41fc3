package idempotency

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/spentledger/spent/internal/capture"
)

// stored is a response as the ledger keeps it.
type stored struct {
	status int
	header [][2]string // name, value; in order, one entry per value
	body   []byte
}

// magic starts every stored response the middleware writes. A result
// without it was written by an operator resolving an unknown outcome (see
// decodeStored).
var magic = []byte{0, 'i', 'k', 1}

// encodeStored encodes the status, the chosen headers of h and the body.
func encodeStored(status int, h http.Header, chosen []string, body []byte) []byte {
	n := len(magic) + 16 + len(body)
	for _, name := range chosen {
		for _, v := range h[name] {
			n += len(name) + len(v) + 4
		}
	}
	b := make([]byte, 0, n)
	b = append(b, magic...)
	b = binary.AppendUvarint(b, uint64(status))
	count := 0
	for _, name := range chosen {
		count += len(h[name])
	}
	b = binary.AppendUvarint(b, uint64(count))
	for _, name := range chosen {
		for _, v := range h[name] {
			b = binary.AppendUvarint(b, uint64(len(name)))
			b = append(b, name...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return append(b, body...)
}

var errStored = errors.New("idempotency: malformed stored response")

// decodeStored decodes a stored result. A result that does not start with
// the magic bytes was written by an operator (spent unknown resolve
// --complete --result ...): it is answered as a 200 whose body is those
// bytes, typed application/json when they are valid JSON and text/plain
// otherwise.
func decodeStored(b []byte) (stored, error) {
	if len(b) < len(magic) || string(b[:len(magic)]) != string(magic) {
		ct := "text/plain; charset=utf-8"
		if len(b) > 0 && json.Valid(b) {
			ct = "application/json"
		}
		return stored{status: http.StatusOK, header: [][2]string{{"Content-Type", ct}}, body: b}, nil
	}
	b = b[len(magic):]
	status, n := binary.Uvarint(b)
	if n <= 0 || status < 100 || status > 999 {
		return stored{}, errStored
	}
	b = b[n:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return stored{}, errStored
	}
	b = b[n:]
	s := stored{status: int(status), header: make([][2]string, 0, count)}
	field := func() (string, bool) {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return "", false
		}
		v := string(b[n : n+int(l)])
		b = b[n+int(l):]
		return v, true
	}
	for range count {
		name, ok := field()
		if !ok || name == "" {
			return stored{}, errStored
		}
		v, ok := field()
		if !ok {
			return stored{}, errStored
		}
		s.header = append(s.header, [2]string{name, v})
	}
	s.body = b
	return s, nil
}

// replay sends a stored response, flagged replayed.
func (m *Middleware) replay(w http.ResponseWriter, s stored) {
	h := w.Header()
	for _, kv := range s.header {
		h[kv[0]] = append(h[kv[0]], kv[1])
	}
	h[HeaderReplayed] = hdrTrue
	h[HeaderRetention] = m.retention
	if capture.BodyAllowed(s.status) {
		h["Content-Length"] = []string{strconv.Itoa(len(s.body))}
	}
	w.WriteHeader(s.status)
	w.Write(s.body)
}
