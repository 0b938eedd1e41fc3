package webhooks

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a Standard Webhooks message, in canonical form.
const (
	// HeaderID is webhook-id: the message's id, the same on every delivery
	// of one event.
	HeaderID = "Webhook-Id"
	// HeaderTimestamp is webhook-timestamp: when this delivery was signed,
	// in whole seconds since 1970.
	HeaderTimestamp = "Webhook-Timestamp"
	// HeaderSignature is webhook-signature: space-separated signatures,
	// each a version ("v1", "v1a"), a comma and the base64 signature.
	HeaderSignature = "Webhook-Signature"
)

// Prefixes of the serialized keys, from the specification.
const (
	// SecretPrefix marks a symmetric secret, for v1 signatures.
	SecretPrefix = "whsec_"
	// PublicKeyPrefix marks an ed25519 public key, for v1a signatures.
	PublicKeyPrefix = "whpk_"
	// SigningKeyPrefix marks an ed25519 private key: a sender's, never a
	// receiver's. New refuses one in PublicKeys.
	SigningKeyPrefix = "whsk_"
)

// Errors of [Verifier.Verify]. Each is answered with its own problem code
// (see the Code constants).
var (
	// ErrHeadersMissing is returned when webhook-id, webhook-timestamp or
	// webhook-signature is absent or empty.
	ErrHeadersMissing = errors.New("webhooks: webhook-id, webhook-timestamp and webhook-signature are required")
	// ErrHeadersInvalid is returned when a header is repeated, over its
	// limit, or malformed: an id outside visible ASCII or with a full stop,
	// a timestamp that is not a canonical decimal number, more than
	// MaxSignatures signatures.
	ErrHeadersInvalid = errors.New("webhooks: malformed webhook headers")
	// ErrTimestamp is returned when webhook-timestamp is further than the
	// tolerance from the receiver's clock.
	ErrTimestamp = errors.New("webhooks: webhook-timestamp outside the tolerance")
	// ErrSignature is returned when no signature in webhook-signature
	// verifies under any configured secret or public key.
	ErrSignature = errors.New("webhooks: no valid signature")
)

// Message is a verified message's metadata.
type Message struct {
	// ID is the webhook-id: the same for every delivery of one event.
	ID string
	// Timestamp is the webhook-timestamp: when this delivery was signed.
	Timestamp time.Time
	// Source is the receiver's Options.Source.
	Source string
}

// Verifier checks the headers and signatures of Standard Webhooks messages
// against a set of secrets and public keys. It does not remember ids: a
// [Receiver] does that. It is safe for concurrent use.
type Verifier struct {
	secrets   [][]byte
	keys      []ed25519.PublicKey
	tolerance time.Duration
}

// NewVerifier parses secrets ("whsec_" + base64, or the base64 alone) and
// public keys ("whpk_" + base64, or the base64 alone) and returns a
// Verifier that accepts timestamps within tolerance of the clock it is
// given, either way.
func NewVerifier(secrets, publicKeys []string, tolerance time.Duration) (*Verifier, error) {
	v := &Verifier{tolerance: tolerance}
	if tolerance <= 0 {
		return nil, fmt.Errorf("webhooks: tolerance %v: must be positive", tolerance)
	}
	if len(secrets)+len(publicKeys) == 0 {
		return nil, errors.New("webhooks: no secret and no public key")
	}
	for i, s := range secrets {
		if strings.HasPrefix(s, PublicKeyPrefix) || strings.HasPrefix(s, SigningKeyPrefix) {
			return nil, fmt.Errorf("webhooks: secret %d is an ed25519 key (%s...): configure public keys as PublicKeys", i, s[:5])
		}
		b, err := base64.StdEncoding.Strict().DecodeString(strings.TrimPrefix(s, SecretPrefix))
		if err != nil {
			return nil, fmt.Errorf("webhooks: secret %d: not whsec_ and standard base64: %w", i, err)
		}
		if len(b) < MinSecretLen || len(b) > MaxSecretLen {
			return nil, fmt.Errorf("webhooks: secret %d: %d bytes: want %d to %d", i, len(b), MinSecretLen, MaxSecretLen)
		}
		v.secrets = append(v.secrets, b)
	}
	for i, k := range publicKeys {
		switch {
		case strings.HasPrefix(k, SigningKeyPrefix):
			return nil, fmt.Errorf("webhooks: public key %d is a signing key (whsk_): configure the sender's public key (whpk_), never its private key", i)
		case strings.HasPrefix(k, SecretPrefix):
			return nil, fmt.Errorf("webhooks: public key %d is a symmetric secret (whsec_): configure it in Secrets", i)
		}
		b, err := base64.StdEncoding.Strict().DecodeString(strings.TrimPrefix(k, PublicKeyPrefix))
		if err != nil {
			return nil, fmt.Errorf("webhooks: public key %d: not whpk_ and standard base64: %w", i, err)
		}
		if len(b) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("webhooks: public key %d: %d bytes: want %d (ed25519)", i, len(b), ed25519.PublicKeySize)
		}
		v.keys = append(v.keys, ed25519.PublicKey(b))
	}
	return v, nil
}

// header returns the one value of header name: ok is false when it is
// absent or empty, err set when it is repeated or longer than max.
func header(h http.Header, name string, max int) (string, bool, error) {
	vals := h[name]
	switch {
	case len(vals) == 0 || vals[0] == "" && len(vals) == 1:
		return "", false, nil
	case len(vals) > 1:
		return "", true, fmt.Errorf("%w: %s repeated", ErrHeadersInvalid, name)
	case len(vals[0]) > max:
		return "", true, fmt.Errorf("%w: %s over %d bytes", ErrHeadersInvalid, name, max)
	}
	return vals[0], true, nil
}

// ParseHeaders reads and checks the three headers of a message, without
// verifying anything: id is 1 to MaxIDLen bytes of visible ASCII without a
// full stop (which would make the signed content ambiguous), timestamp a
// canonical decimal number of seconds since 1970 (no sign, no leading
// zero), signature at most MaxSignatureHeaderLen bytes listing at most
// MaxSignatures signatures. The errors wrap
// ErrHeadersMissing or ErrHeadersInvalid.
func ParseHeaders(h http.Header) (id string, ts int64, signature string, err error) {
	id, okID, err := header(h, HeaderID, MaxIDLen)
	if err != nil {
		return "", 0, "", err
	}
	tsText, okTS, err := header(h, HeaderTimestamp, MaxTimestampLen)
	if err != nil {
		return "", 0, "", err
	}
	signature, okSig, err := header(h, HeaderSignature, MaxSignatureHeaderLen)
	if err != nil {
		return "", 0, "", err
	}
	if !okID || !okTS || !okSig {
		return "", 0, "", ErrHeadersMissing
	}
	if !visibleASCII(id) || strings.IndexByte(id, '.') >= 0 {
		return "", 0, "", fmt.Errorf("%w: webhook-id must be visible ASCII without a full stop", ErrHeadersInvalid)
	}
	ts, err = parseTimestamp(tsText)
	if err != nil {
		return "", 0, "", err
	}
	if n := len(strings.Fields(signature)); n > MaxSignatures {
		return "", 0, "", fmt.Errorf("%w: %d signatures, at most %d", ErrHeadersInvalid, n, MaxSignatures)
	}
	return id, ts, signature, nil
}

// parseTimestamp reads a canonical decimal number of seconds.
func parseTimestamp(s string) (int64, error) {
	bad := fmt.Errorf("%w: webhook-timestamp must be whole seconds since 1970, in decimal without leading zeros", ErrHeadersInvalid)
	if s == "" || len(s) > MaxTimestampLen || s[0] == '0' && len(s) > 1 {
		return 0, bad
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, bad
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, bad
	}
	return n, nil
}

// Verify checks a message's headers, its timestamp against now and its
// signatures against body, and returns its metadata (Source left empty).
// Signatures of unknown versions and malformed ones are skipped; one valid
// "v1" or "v1a" signature suffices. The errors wrap ErrHeadersMissing,
// ErrHeadersInvalid, ErrTimestamp or ErrSignature.
func (v *Verifier) Verify(h http.Header, body []byte, now time.Time) (Message, error) {
	id, ts, sigs, err := ParseHeaders(h)
	if err != nil {
		return Message{}, err
	}
	t := time.Unix(ts, 0)
	if d := now.Sub(t); d > v.tolerance || d < -v.tolerance {
		return Message{}, fmt.Errorf("%w: %s is %v from now, past %v", ErrTimestamp, h[HeaderTimestamp][0], d.Round(time.Second), v.tolerance)
	}
	if err := v.verifySignatures(id, h[HeaderTimestamp][0], body, sigs); err != nil {
		return Message{}, err
	}
	return Message{ID: id, Timestamp: t}, nil
}

// verifySignatures checks the space-separated signatures sigs over
// id.ts.body.
func (v *Verifier) verifySignatures(id, ts string, body []byte, sigs string) error {
	var macs [][]byte // computed on the first v1 signature
	var signed []byte // id.ts.body, built on the first v1a signature
	for entry := range strings.SplitSeq(sigs, " ") {
		version, b64, ok := strings.Cut(entry, ",")
		if !ok {
			continue
		}
		switch version {
		case "v1":
			if len(v.secrets) == 0 || base64.StdEncoding.DecodedLen(len(b64)) > 33 {
				continue
			}
			sig, err := base64.StdEncoding.Strict().DecodeString(b64)
			if err != nil || len(sig) != sha256.Size {
				continue
			}
			if macs == nil {
				for _, s := range v.secrets {
					macs = append(macs, sign(s, id, ts, body))
				}
			}
			for _, m := range macs {
				if hmac.Equal(m, sig) {
					return nil
				}
			}
		case "v1a":
			if len(v.keys) == 0 || base64.StdEncoding.DecodedLen(len(b64)) > 66 {
				continue
			}
			sig, err := base64.StdEncoding.Strict().DecodeString(b64)
			if err != nil || len(sig) != ed25519.SignatureSize {
				continue
			}
			if signed == nil {
				signed = make([]byte, 0, len(id)+len(ts)+2+len(body))
				signed = append(append(append(append(append(signed, id...), '.'), ts...), '.'), body...)
			}
			for _, k := range v.keys {
				if ed25519.Verify(k, signed, sig) {
					return nil
				}
			}
		}
	}
	return ErrSignature
}

// sign returns HMAC-SHA256(secret, id.ts.body).
func sign(secret []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
