package http

import (
	"encoding/hex"
	"errors"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/strictjson"
)

// This file holds the wire forms of requests and answers, in both
// directions: the server decodes requests and encodes answers, the client
// encodes requests and decodes answers. docs/http-api.md describes the same
// forms for other languages.

// at names where in a request a member is: "" for the top level, "claims[3]."
// for a claim of a batch (idx 3); idx < 0 is the top level.
func at(idx int) string {
	if idx < 0 {
		return ""
	}
	return "claims[" + strconv.Itoa(idx) + "]."
}

func invalid(idx int, field, msg string) error {
	return spent.Errorf(spent.EInvalid, "%s%s: %s", at(idx), field, msg)
}

// malformed turns an error of the decoder into a *spent.Error that names
// the member at fault, if any; idx is as for at.
func malformed(idx int, err error) error {
	var e *spent.Error
	var me *strictjson.MemberError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &me) && errors.Is(me.Err, strictjson.ErrUnknown):
		return spent.Errorf(spent.EInvalid, "%sunknown field %s", at(idx), spent.QuoteInput(me.Name))
	case errors.As(err, &me):
		return invalid(idx, me.Name, me.Err.Error())
	}
	return spent.Errorf(spent.EInvalid, "malformed JSON: %s", err.Error())
}

// member decodes the value of the named member of a request object.
type member func(d *strictjson.Decoder, name string) error

// fields decodes a request object whose members are listed in names, in the
// order of their bits, by the rules of d.Members: unknown and duplicate
// members are refused, null reads as absent. It returns the set of members
// present.
func fields(d *strictjson.Decoder, idx int, names []string, m member) (uint64, error) {
	present, err := d.Members(names, func(i int) error { return m(d, names[i]) })
	if err != nil {
		return 0, malformed(idx, err)
	}
	return present, nil
}

// Member names of the request objects, in bit order.
var (
	claimNames    = []string{"namespace", "key", "fingerprint", "place", "result", "expires_at", "result_text", "wait", "expires_in"}
	claimsNames   = []string{"claims"}
	completeNames = []string{"namespace", "key", "hash", "seq", "result", "force", "result_text"}
	releaseNames  = []string{"namespace", "key", "hash", "seq", "force"}
	getNames      = []string{"namespace", "key"}
	unknownNames  = []string{"namespace", "limit"}
)

const (
	fNamespace uint64 = 1 << iota
	fKey
)

// resultText reads the value of a result_text member: a JSON string whose
// UTF-8 bytes are the result, stored as they are (the decoder has refused
// invalid UTF-8 and lone surrogates already). An empty string is an empty
// result, never nil, as for result.
func resultText(d *strictjson.Decoder) ([]byte, error) {
	b, err := d.Bytes()
	if err != nil {
		return nil, err
	}
	return append(make([]byte, 0, len(b)), b...), nil
}

// oneResult refuses a request that carries both result and result_text,
// given the set of members present and the names' list.
func oneResult(idx int, seen uint64, names []string) error {
	var both uint64
	for i, n := range names {
		if n == "result" || n == "result_text" {
			both |= 1 << i
		}
	}
	if bits.OnesCount64(both) == 2 && seen&both == both {
		return spent.Errorf(spent.EInvalid, "%sresult and %sresult_text: give one, not both (result_text for UTF-8 text, result for base64 bytes)", at(idx), at(idx))
	}
	return nil
}

// decodeClaim decodes a claim; idx is its place in a batch, or -1.
func decodeClaim(d *strictjson.Decoder, idx int, c *spent.Claim) error {
	seen, err := fields(d, idx, claimNames, func(d *strictjson.Decoder, name string) error {
		var err error
		switch name {
		case "namespace":
			c.Namespace, err = d.Interned()
		case "key":
			c.Key, err = d.String()
		case "fingerprint":
			c.Fingerprint, err = d.Hex(spent.FingerprintLen)
		case "place":
			c.Place, err = d.String()
		case "result":
			c.Result, err = d.Base64()
		case "result_text":
			c.Result, err = resultText(d)
		case "expires_at":
			if c.ExpiresAt, err = d.Time(); err == nil && c.ExpiresAt.IsZero() {
				// To the ledger the zero time is no expires_at at all;
				// the instant it also is, 0001-01-01T00:00:00Z, is
				// refused here as the ledger refuses every past one.
				err = spent.Errorf(spent.EInvalid, "%sexpires_at %s is not in the future", at(idx), c.ExpiresAt.Format(time.RFC3339Nano))
			}
		case "expires_in":
			var v string
			if v, err = d.String(); err == nil {
				if c.Expiry, err = spent.ParseExpiresIn(v); err != nil {
					var e *spent.Error
					errors.As(err, &e)
					err = spent.Errorf(spent.EInvalid, "%s%s", at(idx), e.Message)
				}
			}
		case "wait":
			if idx >= 0 {
				return spent.Errorf(spent.EInvalid, "%swait: a batch never waits; send a waiting claim to /v1/claim", at(idx))
			}
			c.Wait, err = decodeWait(d)
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := oneResult(idx, seen, claimNames); err != nil {
		return err
	}
	return require(idx, seen, fNamespace|fKey, claimNames)
}

// decodeWait reads a claim's wait: a JSON number of seconds (as
// retry_after is written), 0 to spent.MaxWait; the server's own bound may
// be lower.
func decodeWait(d *strictjson.Decoder) (time.Duration, error) {
	n, err := d.Number()
	if err != nil {
		return 0, err
	}
	w, err := time.ParseDuration(string(n) + "s")
	if err != nil || w < 0 || w > spent.MaxWait {
		return 0, spent.Errorf(spent.EInvalid, "wait: %s: want a number of seconds from 0 to %s", spent.QuoteInput(string(n)), strictjson.AppendSeconds(nil, spent.MaxWait))
	}
	return w, nil
}

// require reports the first missing member of want.
func require(idx int, seen, want uint64, names []string) error {
	if missing := want &^ seen; missing != 0 {
		for i, n := range names {
			if missing&(1<<i) != 0 {
				return invalid(idx, n, "required")
			}
		}
	}
	return nil
}

// decodeClaims decodes a batch; it stops with ETooLarge past max claims.
func decodeClaims(d *strictjson.Decoder, max int, cs []spent.Claim) ([]spent.Claim, error) {
	seen, err := fields(d, -1, claimsNames, func(d *strictjson.Decoder, _ string) error {
		return d.Array(func(i int) error {
			if i >= max {
				return spent.Errorf(spent.ETooLarge, "more than %d claims in one batch", max)
			}
			cs = append(cs, spent.Claim{})
			return decodeClaim(d, i, &cs[i])
		})
	})
	if err != nil {
		return nil, err
	}
	return cs, require(-1, seen, 1, claimsNames)
}

// target is the part of a complete or release request that addresses a record.
type target struct {
	namespace, key string
	hash           spent.Hash
	seq            spent.Seq
	force          bool
	result         []byte
}

func decodeTarget(d *strictjson.Decoder, names []string, needResult bool, t *target) error {
	seen, err := fields(d, -1, names, func(d *strictjson.Decoder, name string) error {
		var err error
		var s string
		switch name {
		case "namespace":
			t.namespace, err = d.String()
		case "key":
			t.key, err = d.String()
		case "hash":
			if s, err = d.String(); err == nil {
				if t.hash, err = spent.ParseHash(s); err != nil {
					err = errors.New("want " + strconv.Itoa(2*spent.HashSize) + " hex digits")
				}
			}
		case "seq":
			if s, err = d.String(); err == nil {
				if t.seq, err = spent.ParseSeq(s); err != nil || t.seq.IsZero() {
					err = errors.New(`want "node:counter"`)
				}
			}
		case "force":
			t.force, err = d.Bool()
		case "result":
			t.result, err = d.Base64()
		case "result_text":
			t.result, err = resultText(d)
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := oneResult(-1, seen, names); err != nil {
		return err
	}
	if err := require(-1, seen, fNamespace, names); err != nil {
		return err
	}
	if needResult && t.result == nil {
		return invalid(-1, "result", "required (or result_text)")
	}
	if t.key == "" && t.hash.IsZero() {
		return invalid(-1, "key", "key or hash required")
	}
	return nil
}

func decodeGet(d *strictjson.Decoder, ns, key *string) error {
	seen, err := fields(d, -1, getNames, func(d *strictjson.Decoder, name string) error {
		var err error
		if name == "namespace" {
			*ns, err = d.String()
		} else {
			*key, err = d.String()
		}
		return err
	})
	if err != nil {
		return err
	}
	return require(-1, seen, fNamespace|fKey, getNames)
}

func decodeUnknown(d *strictjson.Decoder, ns *string, limit *int) error {
	_, err := fields(d, -1, unknownNames, func(d *strictjson.Decoder, name string) error {
		if name == "namespace" {
			var err error
			*ns, err = d.String()
			return err
		}
		n, err := d.Int()
		if err == nil && (n < 0 || n > spent.MaxBatch) {
			err = errors.New("want 0 to " + strconv.Itoa(spent.MaxBatch))
		}
		*limit = int(n)
		return err
	})
	return err
}

// appendRecordMembers appends the members of a record, without braces. The
// result is included only when withResult is set and the record has one.
func appendRecordMembers(b []byte, r *spent.Record, withResult bool) []byte {
	b = append(b, `"namespace":`...)
	b = strictjson.AppendString(b, r.Namespace)
	b = append(b, `,"hash":"`...)
	b = hex.AppendEncode(b, r.Hash[:])
	b = append(b, '"')
	if r.RawKey != "" {
		b = append(b, `,"key":`...)
		b = strictjson.AppendString(b, r.RawKey)
	}
	b = append(b, `,"state":"`...)
	b = append(b, r.State.String()...)
	b = append(b, `","first_seen":`...)
	b = strictjson.AppendTime(b, r.FirstSeen)
	b = append(b, `,"place":`...)
	b = strictjson.AppendString(b, r.Place)
	if len(r.Fingerprint) > 0 {
		b = append(b, `,"fingerprint":"`...)
		b = hex.AppendEncode(b, r.Fingerprint)
		b = append(b, '"')
	}
	b = append(b, `,"expires_at":`...)
	b = strictjson.AppendTime(b, r.ExpiresAt)
	if !r.LeaseUntil.IsZero() {
		b = append(b, `,"lease_until":`...)
		b = strictjson.AppendTime(b, r.LeaseUntil)
	}
	b = append(b, `,"seq":"`...)
	b = strconv.AppendUint(b, uint64(r.Seq.Node), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, r.Seq.Counter, 10)
	b = append(b, '"')
	if withResult && r.Result != nil {
		b = append(b, `,"result":"`...)
		b = strictjson.B64.AppendEncode(b, r.Result)
		b = append(b, '"')
	}
	return b
}

// appendRecord appends a record as an object, with its result.
func appendRecord(b []byte, r *spent.Record) []byte {
	b = append(b, '{')
	b = appendRecordMembers(b, r, true)
	return append(b, '}')
}

// appendAnswer appends the answer to one claim. The result bytes travel
// only on replayed: on a fresh one-step claim the caller sent them, and
// refused, mismatch and in_progress carry none. A replay of a batch whose
// result did not fit in the batch's budget says "result_omitted":true
// instead.
func appendAnswer(b []byte, res *spent.Answer) []byte {
	b = append(b, `{"outcome":"`...)
	b = append(b, res.Outcome...)
	b = append(b, `",`...)
	b = appendRecordMembers(b, &res.Record, res.Outcome == spent.Replayed)
	if res.ResultOmitted {
		b = append(b, `,"result_omitted":true`...)
	}
	if res.Outcome == spent.InProgress {
		if res.Unknown {
			b = append(b, `,"unknown":true`...)
		} else {
			b = append(b, `,"retry_after":`...)
			b = strictjson.AppendSeconds(b, res.RetryAfter)
		}
	}
	return append(b, '}')
}

// Client side: encoding requests.

// checkText refuses strings that JSON cannot carry byte for byte.
func checkText(field, s string) error {
	if !utf8.ValidString(s) {
		return spent.Errorf(spent.EInvalid, "%s is not valid UTF-8; the HTTP API carries text keys only", field)
	}
	return nil
}

// appendClaim appends a claim; withWait sends its Wait (a single claim's,
// never a batch's).
func appendClaim(b []byte, c *spent.Claim, withWait bool) ([]byte, error) {
	if err := checkText("namespace", c.Namespace); err != nil {
		return b, err
	}
	if err := checkText("key", c.Key); err != nil {
		return b, err
	}
	if err := checkText("place", c.Place); err != nil {
		return b, err
	}
	b = append(b, `{"namespace":`...)
	b = strictjson.AppendString(b, c.Namespace)
	b = append(b, `,"key":`...)
	b = strictjson.AppendString(b, c.Key)
	if len(c.Fingerprint) > 0 {
		b = append(b, `,"fingerprint":"`...)
		b = hex.AppendEncode(b, c.Fingerprint)
		b = append(b, '"')
	}
	if c.Place != "" {
		b = append(b, `,"place":`...)
		b = strictjson.AppendString(b, c.Place)
	}
	if c.Result != nil {
		b = append(b, `,"result":"`...)
		b = strictjson.B64.AppendEncode(b, c.Result)
		b = append(b, '"')
	}
	if !c.ExpiresAt.IsZero() {
		b = append(b, `,"expires_at":`...)
		b = strictjson.AppendTime(b, c.ExpiresAt)
	}
	if !c.Expiry.IsZero() {
		if b, err := appendExpiry(b, c); err != nil {
			return b, err
		}
		b = appendExpiryMember(b, c.Expiry)
	}
	if withWait && c.Wait != 0 {
		b = append(b, `,"wait":`...)
		b = strictjson.AppendSeconds(b, c.Wait)
	}
	return append(b, '}'), nil
}

// appendExpiry checks that a claim's Expiry can be sent: not beside
// ExpiresAt, not one only the server's own front ends may ask (clamped, or
// with a floor), and an instant time.Time holds.
func appendExpiry(b []byte, c *spent.Claim) ([]byte, error) {
	e := c.Expiry
	_, in := e.Lifetime()
	_, at := e.Instant()
	switch {
	case !c.ExpiresAt.IsZero():
		return b, spent.Errorf(spent.EInvalid, "both ExpiresAt and Expiry set: give one")
	case e.Local():
		return b, spent.Errorf(spent.EInvalid, "expiry %s is clamped or has a floor: only a front end in the server's process may ask that", e)
	case !in && !at:
		return b, spent.Errorf(spent.EInvalid, "expiry %s is not an instant the API can carry", e)
	}
	return b, nil
}

// appendExpiryMember appends a checked Expiry: a lifetime as expires_in
// (ISO 8601 seconds), an instant as expires_at.
func appendExpiryMember(b []byte, e spent.Expiry) []byte {
	if d, ok := e.Lifetime(); ok {
		b = append(b, `,"expires_in":"PT`...)
		b = strictjson.AppendSeconds(b, d)
		return append(b, `S"`...)
	}
	t, _ := e.Instant()
	b = append(b, `,"expires_at":`...)
	return strictjson.AppendTime(b, t)
}

// appendTarget appends a complete or release request without its closing
// brace, so that a completion can add its result.
func appendTarget(b []byte, ns, key string, h spent.Hash, seq spent.Seq, force bool) ([]byte, error) {
	if err := checkText("namespace", ns); err != nil {
		return b, err
	}
	if err := checkText("key", key); err != nil {
		return b, err
	}
	b = append(b, `{"namespace":`...)
	b = strictjson.AppendString(b, ns)
	if key != "" {
		b = append(b, `,"key":`...)
		b = strictjson.AppendString(b, key)
	}
	if !h.IsZero() {
		b = append(b, `,"hash":"`...)
		b = hex.AppendEncode(b, h[:])
		b = append(b, '"')
	}
	if !seq.IsZero() {
		b = append(b, `,"seq":"`...)
		b = append(b, seq.String()...)
		b = append(b, '"')
	}
	if force {
		b = append(b, `,"force":true`...)
	}
	return b, nil
}

// Client side: decoding answers. Unknown members are skipped, so that the
// server can add members without breaking old clients.

// recordMember decodes one member of a record; ok is false for a name that
// is not a record member.
// hint is the claim an answer belongs to, if any: its strings are reused.
func recordMember(d *strictjson.Decoder, name []byte, r *spent.Record, hint *spent.Claim) (ok bool, err error) {
	var s []byte
	switch string(name) {
	case "namespace":
		r.Namespace, err = d.StringLike(hint.Namespace)
	case "hash":
		if s, err = d.Bytes(); err == nil {
			if len(s) != 2*spent.HashSize {
				return true, errors.New("hash: bad length")
			}
			_, err = hex.Decode(r.Hash[:], s)
		}
	case "key":
		r.RawKey, err = d.String()
	case "state":
		if s, err = d.Bytes(); err == nil {
			err = r.State.UnmarshalText(s)
		}
	case "first_seen":
		r.FirstSeen, err = d.Time()
	case "place":
		r.Place, err = d.StringLike(hint.Place)
	case "fingerprint":
		r.Fingerprint, err = d.Hex(0)
	case "expires_at":
		r.ExpiresAt, err = d.Time()
	case "lease_until":
		r.LeaseUntil, err = d.Time()
	case "seq":
		if s, err = d.Bytes(); err == nil {
			r.Seq, err = parseSeq(s)
		}
	case "result":
		r.Result, err = d.Base64()
	default:
		return false, nil
	}
	return true, err
}

// parseSeq parses "node:counter" without allocating.
func parseSeq(b []byte) (spent.Seq, error) {
	for i, c := range b {
		if c == ':' {
			n, ok1 := parseUint(b[:i], 32)
			c, ok2 := parseUint(b[i+1:], 64)
			if ok1 && ok2 {
				return spent.Seq{Node: uint32(n), Counter: c}, nil
			}
			break
		}
	}
	return spent.Seq{}, errors.New("seq: want node:counter")
}

func parseUint(b []byte, bits uint) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, bits == 64 || n < 1<<bits
}

func decodeRecord(d *strictjson.Decoder, r *spent.Record) error {
	return d.Object(func(name []byte) error {
		ok, err := recordMember(d, name, r, &noHint)
		if !ok {
			return d.Skip(1)
		}
		return err
	})
}

var noHint spent.Claim

func decodeAnswer(d *strictjson.Decoder, res *spent.Answer, hint *spent.Claim) error {
	return d.Object(func(name []byte) error {
		switch string(name) {
		case "outcome":
			s, err := d.Bytes()
			if err != nil {
				return err
			}
			res.Outcome = outcomeOf(s)
			if res.Outcome == "" {
				return errors.New("unknown outcome " + spent.QuoteInput(string(s)))
			}
			return nil
		case "unknown":
			var err error
			res.Unknown, err = d.Bool()
			return err
		case "result_omitted":
			var err error
			res.ResultOmitted, err = d.Bool()
			return err
		case "retry_after":
			n, err := d.Number()
			if err != nil {
				return err
			}
			res.RetryAfter, err = time.ParseDuration(string(n) + "s")
			return err
		}
		ok, err := recordMember(d, name, &res.Record, hint)
		if !ok {
			return d.Skip(1)
		}
		return err
	})
}

func outcomeOf(b []byte) spent.Outcome {
	switch string(b) {
	case "fresh":
		return spent.Fresh
	case "replayed":
		return spent.Replayed
	case "in_progress":
		return spent.InProgress
	case "refused":
		return spent.Refused
	case "mismatch":
		return spent.Mismatch
	}
	return ""
}
