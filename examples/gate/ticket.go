package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// ticketPrefix starts every QR payload; it names the format's version.
const ticketPrefix = "spent-ticket-v1."

// ticket is what a QR payload carries: a random id minted by the server and
// the end of the ticket's validity (the event's end).
type ticket struct {
	// ID is 16 random bytes.
	ID [16]byte
	// ValidUntil is the end of the event, in whole seconds.
	ValidUntil time.Time
}

// idString is the ticket id in hex, the key the gate claims.
func (t ticket) idString() string { return hex.EncodeToString(t.ID[:]) }

var b64 = base64.RawURLEncoding

// encode returns the QR payload: the prefix, the base64url body (id, then
// valid-until in Unix seconds, big-endian), a dot, and the base64url
// HMAC-SHA256 over everything before that dot.
func (t ticket) encode(key []byte) string {
	var body [24]byte
	copy(body[:16], t.ID[:])
	binary.BigEndian.PutUint64(body[16:], uint64(t.ValidUntil.Unix()))
	signed := ticketPrefix + b64.EncodeToString(body[:])
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return signed + "." + b64.EncodeToString(m.Sum(nil))
}

var errInvalidTicket = errors.New("invalid ticket")

// parseTicket verifies a QR payload strictly: the exact format, a valid
// signature (compared in constant time), and the canonical encoding, so that
// one ticket has one payload.
func parseTicket(qr string, key []byte) (ticket, error) {
	if len(qr) > 128 || !strings.HasPrefix(qr, ticketPrefix) {
		return ticket{}, errInvalidTicket
	}
	dot := strings.LastIndexByte(qr, '.')
	if dot < len(ticketPrefix) {
		return ticket{}, errInvalidTicket
	}
	signed, mac := qr[:dot], qr[dot+1:]
	body, err := b64.Strict().DecodeString(signed[len(ticketPrefix):])
	if err != nil || len(body) != 24 {
		return ticket{}, errInvalidTicket
	}
	sum, err := b64.Strict().DecodeString(mac)
	if err != nil || len(sum) != sha256.Size {
		return ticket{}, errInvalidTicket
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	if !hmac.Equal(sum, m.Sum(nil)) {
		return ticket{}, errInvalidTicket
	}
	var t ticket
	copy(t.ID[:], body[:16])
	secs := binary.BigEndian.Uint64(body[16:])
	if secs > 1<<40 {
		return ticket{}, errInvalidTicket
	}
	t.ValidUntil = time.Unix(int64(secs), 0).UTC()
	if t.encode(key) != qr {
		return ticket{}, errInvalidTicket
	}
	return t, nil
}
