package main

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spentledger/spent"
)

// printer writes what the client commands print: a text block per key, or
// one JSON object per line with --json. It keeps the first write error.
type printer struct {
	w    io.Writer
	json bool
	now  time.Time
	err  error
}

func (m *Main) printer(asJSON bool) *printer {
	return &printer{w: m.Stdout, json: asJSON, now: time.Now()}
}

// recordJSON is the --json form of a record and of a claim's answer. It
// has the members of the HTTP API's answers (docs/http-api.md) plus "key",
// the key the command was given (or the raw key, where the namespace stores
// it).
type recordJSON struct {
	Outcome     string    `json:"outcome,omitempty"`
	Key         string    `json:"key,omitempty"`
	Namespace   string    `json:"namespace"`
	Hash        string    `json:"hash"`
	State       string    `json:"state"`
	FirstSeen   time.Time `json:"first_seen"`
	Place       string    `json:"place"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	ExpiresAt   time.Time `json:"expires_at"`
	LeaseUntil  time.Time `json:"lease_until,omitzero"`
	Seq         string    `json:"seq"`
	// Result is the result bytes in standard base64; absent when the answer
	// carries none.
	Result *string `json:"result,omitempty"`
	// Unknown and RetryAfter (seconds) come with in_progress.
	Unknown    bool     `json:"unknown,omitempty"`
	RetryAfter *float64 `json:"retry_after,omitempty"`
}

func newRecordJSON(key string, r *spent.Record) recordJSON {
	if key == "" {
		key = r.RawKey
	}
	v := recordJSON{
		Key:        key,
		Namespace:  r.Namespace,
		Hash:       r.Hash.String(),
		State:      r.State.String(),
		FirstSeen:  r.FirstSeen.UTC(),
		Place:      r.Place,
		ExpiresAt:  r.ExpiresAt.UTC(),
		LeaseUntil: r.LeaseUntil.UTC(),
		Seq:        r.Seq.String(),
	}
	if len(r.Fingerprint) > 0 {
		v.Fingerprint = hex.EncodeToString(r.Fingerprint)
	}
	if r.Result != nil {
		s := base64.StdEncoding.EncodeToString(r.Result)
		v.Result = &s
	}
	return v
}

// releasedJSON is the --json form of a release.
type releasedJSON struct {
	Key       string `json:"key,omitempty"`
	Namespace string `json:"namespace"`
	Hash      string `json:"hash,omitempty"`
	Released  bool   `json:"released"`
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) emitJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		if p.err == nil {
			p.err = err
		}
		return
	}
	p.printf("%s\n", b)
}

// claim prints the answer to the claim of key.
func (p *printer) claim(key string, r spent.Answer) {
	if p.json {
		v := newRecordJSON(key, &r.Record)
		v.Outcome = string(r.Outcome)
		if r.Outcome == spent.InProgress {
			if r.Unknown {
				v.Unknown = true
			} else {
				secs := r.RetryAfter.Seconds()
				v.RetryAfter = &secs
			}
		}
		p.emitJSON(v)
		return
	}
	switch r.Outcome {
	case spent.Fresh:
		if r.Record.State == spent.StatePending {
			p.printf("%s: fresh (you hold the lease: complete or release it, with --seq %s)\n", key, r.Record.Seq)
		} else {
			p.printf("%s: fresh (result stored)\n", key)
		}
	case spent.Replayed:
		p.printf("%s: replayed (the stored result of the first claim)\n", key)
	case spent.InProgress:
		if r.Unknown {
			p.printf("%s: in_progress, unknown outcome (the lease ran out; an operator must resolve it: spent unknown list)\n", key)
		} else {
			p.printf("%s: in_progress (retry after %s)\n", key, roundDuration(r.RetryAfter))
		}
	case spent.Refused:
		p.printf("%s: refused (first seen %s%s)\n", key, formatTime(r.Record.FirstSeen), placeSuffix(r.Record.Place))
	case spent.Mismatch:
		p.printf("%s: mismatch (the key was first claimed by another request, with another fingerprint)\n", key)
	default:
		p.printf("%s: %s\n", key, r.Outcome)
	}
	p.fields(r.Record)
}

// record prints a record; verb, when set, says what just happened to it.
func (p *printer) record(key, verb string, rec spent.Record) {
	if p.json {
		p.emitJSON(newRecordJSON(key, &rec))
		return
	}
	name := key
	if name == "" {
		name = rec.Hash.String()
	}
	if verb != "" {
		p.printf("%s: %s\n", name, verb)
	} else {
		p.printf("%s: %s\n", name, rec.State)
	}
	p.fields(rec)
}

// released says that key (or the record with the given hash) was released.
func (p *printer) released(namespace, key, hash string) {
	if p.json {
		p.emitJSON(releasedJSON{Key: key, Namespace: namespace, Hash: hash, Released: true})
		return
	}
	name := key
	if name == "" {
		name = hash
	}
	p.printf("%s: released (the key is forgotten; the next claim is fresh)\n", name)
}

// unknown prints a list of unknown outcomes.
func (p *printer) unknown(recs []spent.Record) {
	if p.json {
		for i := range recs {
			p.emitJSON(newRecordJSON("", &recs[i]))
		}
		return
	}
	if len(recs) == 0 {
		p.printf("no unknown outcomes\n")
		return
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HASH\tNAMESPACE\tSEQ\tFIRST_SEEN\tLEASE_UNTIL\tEXPIRES_AT\tPLACE\tKEY")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Hash, r.Namespace, r.Seq,
			formatTime(r.FirstSeen), formatTime(r.LeaseUntil), formatTime(r.ExpiresAt), dash(plain(r.Place)), dash(plain(r.RawKey)))
	}
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
}

// fields prints a record's fields, indented, one per line.
func (p *printer) fields(r spent.Record) {
	field := func(name, value string) { p.printf("  %-12s %s\n", name, value) }
	field("hash", r.Hash.String())
	if r.RawKey != "" {
		field("key", strconv.Quote(r.RawKey))
	}
	field("namespace", r.Namespace)
	field("seq", r.Seq.String())
	if r.State != 0 {
		field("state", r.State.String())
	}
	field("first_seen", formatTime(r.FirstSeen))
	if r.Place != "" {
		field("place", plain(r.Place))
	}
	if len(r.Fingerprint) > 0 {
		field("fingerprint", hex.EncodeToString(r.Fingerprint))
	}
	if r.State == spent.StatePending && !r.LeaseUntil.IsZero() {
		field("lease_until", formatTime(r.LeaseUntil)+p.relative(r.LeaseUntil))
	}
	if r.Result != nil {
		field("result", formatResult(r.Result))
	}
	field("expires_at", formatTime(r.ExpiresAt)+p.relative(r.ExpiresAt))
}

// relative says how far t is from now, as " (in 29s)" or " (3s ago)".
func (p *printer) relative(t time.Time) string {
	d := t.Sub(p.now)
	if d >= 0 {
		return " (in " + roundDuration(d).String() + ")"
	}
	return " (" + roundDuration(-d).String() + " ago)"
}

func roundDuration(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// formatTime writes t in UTC, to the millisecond, or "-" when zero.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func placeSuffix(place string) string {
	if place == "" {
		return ""
	}
	return " at " + plain(place)
}

// plain returns s as it is when it is printable text without blanks, and
// quoted (Go syntax) otherwise: a client's place or key is printed to an
// operator's terminal, where a newline would forge a row of a list and an
// escape sequence would drive the terminal. The ledger refuses such places
// now; records from before, and raw keys, may still hold them.
func plain(s string) string {
	for _, r := range s {
		if r == ' ' || r == '\t' || r == '"' || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatResult shows printable UTF-8 as a quoted string, anything else as
// base64, with the length.
func formatResult(b []byte) string {
	n := strconv.Itoa(len(b)) + " bytes"
	if utf8.Valid(b) && printable(string(b)) {
		return strconv.Quote(string(b)) + " (" + n + ")"
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b) + " (" + n + ")"
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' {
			return false
		}
	}
	return true
}
