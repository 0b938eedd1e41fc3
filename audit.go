package spent

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"time"
)

// AuditKind names what an [AuditEvent] records.
type AuditKind string

// The kinds of audit events.
const (
	// AuditAccepted records a fresh answer: the key was accepted.
	AuditAccepted AuditKind = "accepted"
	// AuditCompleted records the completion of a two-step claim: its record
	// can no longer be taken over on lease expiry.
	AuditCompleted AuditKind = "completed"
	// AuditReleased records the release of a claim: its key may be
	// accepted again at once.
	AuditReleased AuditKind = "released"
)

// AuditEvent is one entry of the acceptance audit: a fresh answer, or the
// end (completion or release) of the record one wrote. It holds what a
// reader needs to tell a key accepted twice by mistake from a legitimate
// re-acceptance (see the audit package).
type AuditEvent struct {
	// Kind says what happened.
	Kind AuditKind
	// Time is the ledger's time of the operation.
	Time time.Time
	// Node is the node of the ledger that answered ([Config].Node).
	Node uint32
	// Namespace and Hash name the key.
	Namespace string
	Hash      Hash
	// Seq is the seq of the record accepted, completed or released.
	Seq Seq
	// Place, State, LeaseUntil and ExpiresAt are the accepted record's
	// (accepted events only).
	Place      string
	State      State
	LeaseUntil time.Time
	ExpiresAt  time.Time
	// Retake is set on an accepted event when the namespace lets the next
	// claim take a pending key over once its lease ran out.
	Retake bool
}

// Auditor keeps the acceptance audit: a log, apart from the store, of every
// fresh answer and of every end of the records they wrote ([Config].Audit).
type Auditor interface {
	// Audit appends events and returns once they are durable. A ledger
	// calls it after the store wrote the records and before it answers: an
	// error turns the fresh answers it covers into an EUnavailable error
	// (the records stay stored, and a retry answers from them as a repeat).
	Audit(ctx context.Context, events []AuditEvent) error
}

// KeyHash returns the stored form of key in namespace under secret, as
// [Ledger.HashKey] does, for tools that hold the secret but no ledger (an
// audit lookup by key, say).
func KeyHash(secret []byte, namespace, key string) Hash {
	m := hmac.New(sha256.New, secret)
	b := make([]byte, 0, 2+len(namespace)+len(key))
	b = append(b, byte(len(namespace)>>8), byte(len(namespace)))
	b = append(b, namespace...)
	b = append(b, key...)
	m.Write(b)
	var h Hash
	copy(h[:], m.Sum(nil))
	return h
}

// errAudit is the error of a claim whose fresh answer could not be audited.
func errAudit(err error) error {
	return &Error{Code: EUnavailable, Message: "the claim was stored but the audit log could not record it, so it is not answered fresh; " +
		"a retry answers from the stored record (see docs/operations.md, \"After a failover: run the audit\")", Err: err}
}

// accepted returns the audit event of a fresh answer a.
func (l *Ledger) accepted(a *Answer, now time.Time) AuditEvent {
	r := &a.Record
	return AuditEvent{
		Kind: AuditAccepted, Time: now, Node: l.cfg.Node, Namespace: r.Namespace, Hash: r.Hash, Seq: r.Seq,
		Place: r.Place, State: r.State, LeaseUntil: r.LeaseUntil, ExpiresAt: r.ExpiresAt,
		Retake: l.cfg.Namespaces[r.Namespace].OnLeaseExpiry == LeaseExpiryRetake,
	}
}

// audited returns a once the auditor, if any, has recorded it when fresh,
// and an error instead of a fresh answer it could not record.
func (l *Ledger) audited(ctx context.Context, a Answer, now time.Time) (Answer, error) {
	if l.cfg.Audit == nil || a.Outcome != Fresh {
		return a, nil
	}
	if err := l.cfg.Audit.Audit(ctx, []AuditEvent{l.accepted(&a, now)}); err != nil {
		return Answer{}, errAudit(err)
	}
	return a, nil
}

// auditBatch records the fresh answers of a batch in one append.
func (l *Ledger) auditBatch(ctx context.Context, out []Answer, now time.Time) error {
	if l.cfg.Audit == nil {
		return nil
	}
	var evs []AuditEvent
	for i := range out {
		if out[i].Outcome == Fresh {
			evs = append(evs, l.accepted(&out[i], now))
		}
	}
	if len(evs) == 0 {
		return nil
	}
	if err := l.cfg.Audit.Audit(ctx, evs); err != nil {
		return errAudit(err)
	}
	return nil
}

// auditEnd records the completion or release of the record (ns, h, seq),
// once the store has done it. An error is EUnavailable: the end happened,
// but the audit does not know it (a later acceptance of the key may then be
// reported as a double; the report shows both seqs to check).
func (l *Ledger) auditEnd(ctx context.Context, kind AuditKind, ns string, h Hash, seq Seq, now time.Time) error {
	if l.cfg.Audit == nil {
		return nil
	}
	err := l.cfg.Audit.Audit(ctx, []AuditEvent{{Kind: kind, Time: now, Node: l.cfg.Node, Namespace: ns, Hash: h, Seq: seq}})
	if err != nil {
		return &Error{Code: EUnavailable, Message: "the record was " + string(kind) + " but the audit log could not record it", Err: err}
	}
	return nil
}
