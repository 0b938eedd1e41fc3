package http

import (
	"encoding/hex"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spentledger/spent"
)

// This file holds the wire forms of requests and answers, in both
// directions: the server decodes requests and encodes answers, the client
// encodes requests and decodes answers. docs/http-api.md describes the same
// forms for other languages.

// fieldSet tracks which members of an object were seen, to refuse duplicates.
type fieldSet uint32

func (s *fieldSet) add(bit fieldSet) bool {
	if *s&bit != 0 {
		return false
	}
	*s |= bit
	return true
}

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

// malformed wraps a syntax error from the decoder.
func malformed(err error) error {
	var se *syntaxError
	var e *spent.Error
	switch {
	case errors.As(err, &e):
		return err
	case errors.As(err, &se):
		return spent.Errorf(spent.EInvalid, "malformed JSON: %s", se.Error())
	}
	return spent.Errorf(spent.EInvalid, "malformed JSON: %s", err.Error())
}

// member decodes the value of the named member of a request object.
type member func(d *decoder, name string) error

// fields decodes a request object whose members are listed in names, in the
// order of their bits, refusing unknown and duplicate members. It returns the
// set of members present.
func fields(d *decoder, idx int, names []string, m member) (fieldSet, error) {
	var seen, present fieldSet
	err := d.object(func(name []byte) error {
		i := 0
		for i < len(names) && names[i] != string(name) {
			i++
		}
		if i == len(names) {
			return spent.Errorf(spent.EInvalid, "%sunknown field %s", at(idx), spent.QuoteInput(string(name)))
		}
		nm, bit := names[i], fieldSet(1)<<i
		if !seen.add(bit) {
			return invalid(idx, nm, "given twice")
		}
		if d.null() {
			// null reads as absent, for languages whose encoders write it.
			return nil
		}
		present |= bit
		if err := m(d, nm); err != nil {
			var e *spent.Error
			if errors.As(err, &e) {
				return err
			}
			return invalid(idx, nm, err.Error())
		}
		return nil
	})
	if err != nil {
		return 0, malformed(err)
	}
	return present, nil
}

// Member names of the request objects, in bit order.
var (
	claimNames    = []string{"namespace", "key", "fingerprint", "place", "result", "expires_at"}
	claimsNames   = []string{"claims"}
	completeNames = []string{"namespace", "key", "hash", "seq", "result", "force"}
	releaseNames  = []string{"namespace", "key", "hash", "seq", "force"}
	getNames      = []string{"namespace", "key"}
	unknownNames  = []string{"namespace", "limit"}
)

const (
	fNamespace fieldSet = 1 << iota
	fKey
)

// decodeClaim decodes a claim; idx is its place in a batch, or -1.
func decodeClaim(d *decoder, idx int, c *spent.Claim) error {
	seen, err := fields(d, idx, claimNames, func(d *decoder, name string) error {
		var err error
		switch name {
		case "namespace":
			c.Namespace, err = d.namespace()
		case "key":
			c.Key, err = d.str()
		case "fingerprint":
			c.Fingerprint, err = d.hexBytes(spent.FingerprintLen)
		case "place":
			c.Place, err = d.str()
		case "result":
			c.Result, err = d.base64Bytes()
		case "expires_at":
			c.ExpiresAt, err = d.timestamp()
		}
		return err
	})
	if err != nil {
		return err
	}
	return require(idx, seen, fNamespace|fKey, claimNames)
}

// require reports the first missing member of want.
func require(idx int, seen, want fieldSet, names []string) error {
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
func decodeClaims(d *decoder, max int, cs []spent.Claim) ([]spent.Claim, error) {
	seen, err := fields(d, -1, claimsNames, func(d *decoder, _ string) error {
		return d.array(func(i int) error {
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

func decodeTarget(d *decoder, names []string, needResult bool, t *target) error {
	seen, err := fields(d, -1, names, func(d *decoder, name string) error {
		var err error
		var s string
		switch name {
		case "namespace":
			t.namespace, err = d.str()
		case "key":
			t.key, err = d.str()
		case "hash":
			if s, err = d.str(); err == nil {
				if t.hash, err = spent.ParseHash(s); err != nil {
					err = errors.New("want " + strconv.Itoa(2*spent.HashSize) + " hex digits")
				}
			}
		case "seq":
			if s, err = d.str(); err == nil {
				if t.seq, err = spent.ParseSeq(s); err != nil || t.seq.IsZero() {
					err = errors.New(`want "node:counter"`)
				}
			}
		case "force":
			t.force, err = d.boolean()
		case "result":
			t.result, err = d.base64Bytes()
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := require(-1, seen, fNamespace, names); err != nil {
		return err
	}
	if needResult && t.result == nil {
		return invalid(-1, "result", "required")
	}
	if t.key == "" && t.hash.IsZero() {
		return invalid(-1, "key", "key or hash required")
	}
	return nil
}

func decodeGet(d *decoder, ns, key *string) error {
	seen, err := fields(d, -1, getNames, func(d *decoder, name string) error {
		var err error
		if name == "namespace" {
			*ns, err = d.str()
		} else {
			*key, err = d.str()
		}
		return err
	})
	if err != nil {
		return err
	}
	return require(-1, seen, fNamespace|fKey, getNames)
}

func decodeUnknown(d *decoder, ns *string, limit *int) error {
	_, err := fields(d, -1, unknownNames, func(d *decoder, name string) error {
		if name == "namespace" {
			var err error
			*ns, err = d.str()
			return err
		}
		n, err := d.integer()
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
	b = appendString(b, r.Namespace)
	b = append(b, `,"hash":"`...)
	b = hex.AppendEncode(b, r.Key[:])
	b = append(b, '"')
	if r.RawKey != "" {
		b = append(b, `,"key":`...)
		b = appendString(b, r.RawKey)
	}
	b = append(b, `,"state":"`...)
	b = append(b, r.State.String()...)
	b = append(b, `","first_seen":`...)
	b = appendTime(b, r.FirstSeen)
	b = append(b, `,"place":`...)
	b = appendString(b, r.Place)
	if len(r.Fingerprint) > 0 {
		b = append(b, `,"fingerprint":"`...)
		b = hex.AppendEncode(b, r.Fingerprint)
		b = append(b, '"')
	}
	b = append(b, `,"expires_at":`...)
	b = appendTime(b, r.ExpiresAt)
	if !r.LeaseUntil.IsZero() {
		b = append(b, `,"lease_until":`...)
		b = appendTime(b, r.LeaseUntil)
	}
	b = append(b, `,"seq":"`...)
	b = strconv.AppendUint(b, uint64(r.Seq.Node), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, r.Seq.Counter, 10)
	b = append(b, '"')
	if withResult && r.Result != nil {
		b = append(b, `,"result":"`...)
		b = b64.AppendEncode(b, r.Result)
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

// appendClaimResult appends the answer to one claim. The result bytes travel
// only on replayed: on a fresh one-step claim the caller sent them, and
// refused, mismatch and in_progress carry none. A replay of a batch whose
// result did not fit in the batch's budget says "result_omitted":true
// instead.
func appendClaimResult(b []byte, res *spent.Result) []byte {
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
			b = appendSeconds(b, res.RetryAfter)
		}
	}
	return append(b, '}')
}

// retryAfterHeader rounds d up to whole seconds, at least 1, for the
// Retry-After header.
func retryAfterHeader(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(int64(s), 10)
}

// Client side: encoding requests.

// checkText refuses strings that JSON cannot carry byte for byte.
func checkText(field, s string) error {
	if !utf8.ValidString(s) {
		return spent.Errorf(spent.EInvalid, "%s is not valid UTF-8; the HTTP API carries text keys only", field)
	}
	return nil
}

func appendClaim(b []byte, c *spent.Claim) ([]byte, error) {
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
	b = appendString(b, c.Namespace)
	b = append(b, `,"key":`...)
	b = appendString(b, c.Key)
	if len(c.Fingerprint) > 0 {
		b = append(b, `,"fingerprint":"`...)
		b = hex.AppendEncode(b, c.Fingerprint)
		b = append(b, '"')
	}
	if c.Place != "" {
		b = append(b, `,"place":`...)
		b = appendString(b, c.Place)
	}
	if c.Result != nil {
		b = append(b, `,"result":"`...)
		b = b64.AppendEncode(b, c.Result)
		b = append(b, '"')
	}
	if !c.ExpiresAt.IsZero() {
		b = append(b, `,"expires_at":`...)
		b = appendTime(b, c.ExpiresAt)
	}
	return append(b, '}'), nil
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
	b = appendString(b, ns)
	if key != "" {
		b = append(b, `,"key":`...)
		b = appendString(b, key)
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
func recordMember(d *decoder, name []byte, r *spent.Record, hint *spent.Claim) (ok bool, err error) {
	var s []byte
	switch string(name) {
	case "namespace":
		r.Namespace, err = d.strLike(hint.Namespace)
	case "hash":
		if s, err = d.rawString(&d.val); err == nil {
			if len(s) != 2*spent.HashSize {
				return true, errors.New("hash: bad length")
			}
			_, err = hex.Decode(r.Key[:], s)
		}
	case "key":
		r.RawKey, err = d.str()
	case "state":
		if s, err = d.rawString(&d.val); err == nil {
			err = r.State.UnmarshalText(s)
		}
	case "first_seen":
		r.FirstSeen, err = d.timestamp()
	case "place":
		r.Place, err = d.strLike(hint.Place)
	case "fingerprint":
		r.Fingerprint, err = d.hexBytes(0)
	case "expires_at":
		r.ExpiresAt, err = d.timestamp()
	case "lease_until":
		r.LeaseUntil, err = d.timestamp()
	case "seq":
		if s, err = d.rawString(&d.val); err == nil {
			r.Seq, err = parseSeq(s)
		}
	case "result":
		r.Result, err = d.base64Bytes()
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

func decodeRecord(d *decoder, r *spent.Record) error {
	return d.object(func(name []byte) error {
		ok, err := recordMember(d, name, r, &noHint)
		if !ok {
			return d.skip(1)
		}
		return err
	})
}

var noHint spent.Claim

func decodeClaimResult(d *decoder, res *spent.Result, hint *spent.Claim) error {
	return d.object(func(name []byte) error {
		switch string(name) {
		case "outcome":
			s, err := d.rawString(&d.val)
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
			res.Unknown, err = d.boolean()
			return err
		case "result_omitted":
			var err error
			res.ResultOmitted, err = d.boolean()
			return err
		case "retry_after":
			n, err := d.number()
			if err != nil {
				return err
			}
			res.RetryAfter, err = time.ParseDuration(string(n) + "s")
			return err
		}
		ok, err := recordMember(d, name, &res.Record, hint)
		if !ok {
			return d.skip(1)
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
