package webhooks

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spentledger/spent"
)

// Limits on what a receiver accepts. Messages over them are refused before
// any signature is checked.
const (
	// MaxIDLen is the longest webhook-id, in bytes.
	MaxIDLen = 256
	// MaxTimestampLen is the longest webhook-timestamp, in decimal digits
	// (enough for any time before the year 33658).
	MaxTimestampLen = 12
	// MaxSignatureHeaderLen is the longest webhook-signature header, in
	// bytes: room for about forty signatures of either kind.
	MaxSignatureHeaderLen = 4096
	// MaxSignatures is the most signatures one webhook-signature header may
	// list. It bounds the verifications one request costs.
	MaxSignatures = 16
	// MaxSourceLen is the longest Options.Source, in bytes.
	MaxSourceLen = 64
	// MaxKeys is the most secrets and public keys, together, one receiver
	// takes: a few for rotation.
	MaxKeys = 8
	// MinSecretLen is the shortest whsec_ secret, in decoded bytes (the
	// specification's 192 bits).
	MinSecretLen = 24
	// MaxSecretLen is the longest whsec_ secret, in decoded bytes (the
	// specification's 512 bits).
	MaxSecretLen = 64
)

// Options configures a [Receiver]. Start from [DefaultOptions], then set
// Source and at least one of Secrets and PublicKeys.
type Options struct {
	// Namespace is the ledger namespace of the messages' ids. Its policy must
	// be refuse mode with on_lease_expiry retake and a retention of at least
	// [Options.MinRetention] ([Options.Policy] gives one). Default "webhooks".
	Namespace string
	// Source names the sender (or the endpoint) whose messages this receiver
	// takes. Each webhook-id is claimed under it, so that two senders using
	// the same id never collide. 1 to MaxSourceLen bytes of visible ASCII.
	// Required.
	Source string
	// Secrets are the sender's symmetric secrets ("whsec_" and base64, or the
	// base64 alone), for "v1" (HMAC-SHA256) signatures. Several are accepted
	// at once, for rotation.
	Secrets []string
	// PublicKeys are the sender's ed25519 public keys ("whpk_" and base64, or
	// the base64 alone), for "v1a" signatures. Several are accepted at once,
	// for rotation.
	PublicKeys []string
	// Tolerance is how far webhook-timestamp may be from the receiver's
	// clock, either way. Default 5 minutes, the specification's.
	Tolerance time.Duration
	// Skew bounds how far the receiver's clock (Now) may be from the
	// ledger's, either way. Each id is remembered until webhook-timestamp +
	// Tolerance + Skew: the last instant the timestamp check could still
	// accept the message, on any clock within Skew of the ledger's. At
	// least one second. Default 1 minute.
	Skew time.Duration
	// MaxBody is the largest message body accepted, in bytes; larger ones
	// are answered 413 without being verified. Default 1 MiB.
	MaxBody int64
	// MaxResponse is the largest response body the handler may write, in
	// bytes: the receiver holds the response until the message's claim is
	// settled. Default 64 KiB.
	MaxResponse int
	// RetryAfter is the longest Retry-After hint sent with a 409 while the
	// same message is being handled, or with a 503. Default 1 second.
	RetryAfter time.Duration
	// Place is written into every record as the place that saw the message
	// (a node or service name). Default empty.
	Place string
	// StoreTimeout bounds the ledger writes made after the handler returned
	// (completing or releasing the claim), which do not stop when the sender
	// goes away. Default 10 seconds.
	StoreTimeout time.Duration
	// Now is the receiver's clock, which checks timestamps. Nil means the
	// service's clock when it has a Now method (a *spent.Ledger does), else
	// time.Now.
	Now func() time.Time
	// Logger receives what an operator must know: claims that could not be
	// settled after the handler ran. Nil discards.
	Logger *slog.Logger
}

// DefaultOptions returns the defaults described on each field of Options.
// Source, Secrets and PublicKeys are left empty.
func DefaultOptions() Options {
	return Options{
		Namespace:    "webhooks",
		Tolerance:    5 * time.Minute,
		Skew:         time.Minute,
		MaxBody:      1 << 20,
		MaxResponse:  64 << 10,
		RetryAfter:   time.Second,
		StoreTimeout: 10 * time.Second,
	}
}

// MinRetention returns the shortest retention the namespace may have:
// 2 × (Tolerance + Skew). A message stamped Tolerance in the future is
// accepted now and its id must be remembered until its timestamp +
// Tolerance + Skew; measured on a ledger clock up to Skew behind the
// receiver's, that is 2 × Tolerance + 2 × Skew after the claim. The ledger
// refuses a claim whose expiry lies further ahead than a namespace's
// max_expiry (by default its retention), so a shorter retention would turn
// such a message away.
func (o *Options) MinRetention() time.Duration {
	return 2 * (o.Tolerance + o.Skew)
}

// Policy returns the namespace policy a receiver with these options needs:
// refuse mode, retention [Options.MinRetention], on_lease_expiry retake,
// and lease (see [New] on choosing it; it is capped at the retention).
// Several receivers (one per Source) may share the namespace: give it the
// largest of their policies' retentions.
func (o *Options) Policy(lease time.Duration) spent.Policy {
	r := o.MinRetention()
	return spent.Policy{Mode: spent.ModeRefuse, Retention: r, Lease: min(lease, r), OnLeaseExpiry: spent.LeaseExpiryRetake}
}

// Validate refuses unusable or unsafe options. It does not parse the keys;
// [New] does.
func (o *Options) Validate() error {
	switch {
	case o.Namespace == "":
		return errors.New("webhooks: options: Namespace must be set")
	case o.Source == "":
		return errors.New("webhooks: options: no Source: name the sender, so that its ids cannot collide with another's")
	case len(o.Source) > MaxSourceLen || !visibleASCII(o.Source):
		return fmt.Errorf("webhooks: options: Source must be 1 to %d bytes of visible ASCII", MaxSourceLen)
	case len(o.Secrets)+len(o.PublicKeys) == 0:
		return errors.New("webhooks: options: no Secrets and no PublicKeys: configure the sender's whsec_ secret or whpk_ public key")
	case len(o.Secrets)+len(o.PublicKeys) > MaxKeys:
		return fmt.Errorf("webhooks: options: %d secrets and keys: at most %d", len(o.Secrets)+len(o.PublicKeys), MaxKeys)
	case o.Tolerance <= 0:
		return fmt.Errorf("webhooks: options: Tolerance %v: must be positive", o.Tolerance)
	case o.Skew < time.Second:
		return fmt.Errorf("webhooks: options: Skew %v: at least 1s, so that an id outlives the last instant its timestamp is accepted", o.Skew)
	case o.MaxBody <= 0:
		return fmt.Errorf("webhooks: options: MaxBody %d: must be positive", o.MaxBody)
	case o.MaxResponse <= 0:
		return fmt.Errorf("webhooks: options: MaxResponse %d: must be positive", o.MaxResponse)
	case o.RetryAfter <= 0:
		return fmt.Errorf("webhooks: options: RetryAfter %v: must be positive", o.RetryAfter)
	case o.StoreTimeout <= 0:
		return fmt.Errorf("webhooks: options: StoreTimeout %v: must be positive", o.StoreTimeout)
	case len(o.Place) > spent.MaxPlaceLen:
		return fmt.Errorf("webhooks: options: Place of %d bytes: at most %d", len(o.Place), spent.MaxPlaceLen)
	}
	return nil
}

// visibleASCII reports whether s is made of the bytes 0x21 to 0x7e.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
