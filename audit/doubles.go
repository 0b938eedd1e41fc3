package audit

import (
	"github.com/spentledger/spent"
)

// Double is a key accepted fresh a second time while its first acceptance
// still held it: First's record should have answered Second's claim.
type Double struct {
	Namespace string
	Hash      spent.Hash
	// First and Second are the two accepted events, in time order.
	First, Second spent.AuditEvent
}

// key names a key across namespaces.
type key struct {
	ns string
	h  spent.Hash
}

// ended names the record one completion or release addresses.
type ended struct {
	key
	seq spent.Seq
}

// Doubles returns every double acceptance among evs (the merged logs of
// every node), in the order of the second acceptance. Of two acceptances A
// then B of one key (by time), B is a legitimate re-acceptance, not a double,
// when
//
//   - A had expired: B's time is at or after A's expires_at;
//   - A was released: a released event names A's seq (at any time: a release
//     of a record lost in a failover finds nothing and is not logged);
//   - A was taken over: A was pending in a retake namespace, B's time is at or
//     after A's lease_until, and no completed event names A's seq (a
//     completed record is never taken over).
//
// Any other B is a double. A third acceptance C is judged against B, and so
// on. Times come from the nodes' clocks, so the rule relies on them agreeing
// to well within a lease.
func Doubles(evs []spent.AuditEvent) []Double {
	released := make(map[ended]bool)
	completed := make(map[ended]bool)
	for i := range evs {
		e := &evs[i]
		switch e.Kind {
		case spent.AuditReleased:
			released[ended{key{e.Namespace, e.Hash}, e.Seq}] = true
		case spent.AuditCompleted:
			completed[ended{key{e.Namespace, e.Hash}, e.Seq}] = true
		}
	}
	sorted := append([]spent.AuditEvent(nil), evs...)
	Sort(sorted)
	last := make(map[key]*spent.AuditEvent)
	var out []Double
	for i := range sorted {
		b := &sorted[i]
		if b.Kind != spent.AuditAccepted {
			continue
		}
		k := key{b.Namespace, b.Hash}
		a := last[k]
		last[k] = b
		if a == nil || Legitimate(a, b, released[ended{k, a.Seq}], completed[ended{k, a.Seq}]) {
			continue
		}
		out = append(out, Double{Namespace: b.Namespace, Hash: b.Hash, First: *a, Second: *b})
	}
	return out
}

// Legitimate reports whether b, an acceptance of the key that a accepted
// before it, is a legitimate re-acceptance (see Doubles), given whether a's
// record was released and whether it was completed.
func Legitimate(a, b *spent.AuditEvent, released, completed bool) bool {
	switch {
	case !b.Time.Before(a.ExpiresAt):
		return true
	case released:
		return true
	case a.State == spent.StatePending && a.Retake && !completed && !a.LeaseUntil.IsZero() && !b.Time.Before(a.LeaseUntil):
		return true
	}
	return false
}

// Find returns the events of the key hash, in time order: its acceptances
// (which node and place processed it, under which seq) and their ends. An
// empty namespace matches every namespace.
func Find(evs []spent.AuditEvent, namespace string, hash spent.Hash) []spent.AuditEvent {
	var out []spent.AuditEvent
	for _, e := range evs {
		if e.Hash == hash && (namespace == "" || e.Namespace == namespace) {
			out = append(out, e)
		}
	}
	Sort(out)
	return out
}
