package idempotency

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
)

// NewKey returns a random (version 4) UUID in its 36-character text form,
// one key per logical request. 122 of its bits come from rnd (nil means
// crypto/rand): two keys collide with probability about n²/2¹²³ among n
// keys, 10⁻¹⁹ for a billion, which is not a practical concern.
func NewKey(rnd io.Reader) (string, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var u [16]byte
	if _, err := io.ReadFull(rnd, u[:]); err != nil {
		return "", fmt.Errorf("idempotency: new key: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant 10 (RFC 9562)
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:]), nil
}
