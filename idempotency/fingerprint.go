package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/http"
)

// DefaultFingerprint returns the SHA-256 of a canonical encoding of the
// request: a version tag, the method, the escaped path, the raw query, then
// each of headers (its canonical name and every value, in order), then the
// body. Every field is length-prefixed, so no two different requests encode
// alike. A header absent from the request counts as present with no values.
//
// The middleware calls it with Options.FingerprintHeaders unless
// Options.Fingerprint is set.
func DefaultFingerprint(r *http.Request, headers []string, body []byte) [32]byte {
	h := sha256.New()
	field(h, "spent-idempotency-fingerprint-v1")
	field(h, r.Method)
	field(h, r.URL.EscapedPath())
	field(h, r.URL.RawQuery)
	for _, name := range headers {
		name = http.CanonicalHeaderKey(name)
		vs := r.Header[name]
		field(h, name)
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(vs)))
		h.Write(n[:])
		for _, v := range vs {
			field(h, v)
		}
	}
	field(h, body)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

func field[T string | []byte](h hash.Hash, b T) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write([]byte(b))
}
