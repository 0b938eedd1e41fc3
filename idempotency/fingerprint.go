package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/http"
	"sync"
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
	fp := fingerprints.Get().(*fingerprinter)
	b := field(fp.buf[:0], "spent-idempotency-fingerprint-v1")
	b = field(b, r.Method)
	b = field(b, r.URL.EscapedPath())
	b = field(b, r.URL.RawQuery)
	for _, name := range headers {
		name = http.CanonicalHeaderKey(name)
		vs := r.Header[name]
		b = field(b, name)
		b = binary.BigEndian.AppendUint32(b, uint32(len(vs)))
		for _, v := range vs {
			b = field(b, v)
		}
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(body)))
	fp.h.Reset()
	fp.h.Write(b)
	fp.h.Write(body)
	var sum [32]byte
	fp.sum = fp.h.Sum(fp.sum[:0])
	copy(sum[:], fp.sum)
	if cap(b) <= 16<<10 {
		fp.buf = b
		fingerprints.Put(fp)
	}
	return sum
}

// fingerprinter is a pooled SHA-256 with its scratch buffers: the request's
// fields are encoded into buf and hashed with one Write, then the body.
type fingerprinter struct {
	h   hash.Hash
	buf []byte
	sum []byte
}

var fingerprints = sync.Pool{New: func() any { return &fingerprinter{h: sha256.New()} }}

// field appends b, length-prefixed.
func field(dst []byte, b string) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(len(b)))
	return append(dst, b...)
}
