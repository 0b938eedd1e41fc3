package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spentledger/spent"
)

// line is an event as one line of a log file. Times are RFC 3339 with
// nanoseconds, in UTC.
type line struct {
	Kind       spent.AuditKind `json:"kind"`
	Time       time.Time       `json:"time"`
	Node       uint32          `json:"node"`
	Namespace  string          `json:"ns"`
	Hash       spent.Hash      `json:"hash"`
	Seq        spent.Seq       `json:"seq"`
	Place      string          `json:"place,omitempty"`
	State      *spent.State    `json:"state,omitempty"`
	LeaseUntil *time.Time      `json:"lease_until,omitempty"`
	ExpiresAt  *time.Time      `json:"expires_at,omitempty"`
	Retake     bool            `json:"retake,omitempty"`
}

// appendLine appends ev as one line to b.
func appendLine(b []byte, ev *spent.AuditEvent) ([]byte, error) {
	ln := line{Kind: ev.Kind, Time: ev.Time.UTC(), Node: ev.Node, Namespace: ev.Namespace, Hash: ev.Hash, Seq: ev.Seq}
	if ev.Kind == spent.AuditAccepted {
		st, lu, ex := ev.State, ev.LeaseUntil.UTC(), ev.ExpiresAt.UTC()
		ln.Place, ln.State, ln.ExpiresAt, ln.Retake = ev.Place, &st, &ex, ev.Retake
		if !ev.LeaseUntil.IsZero() {
			ln.LeaseUntil = &lu
		}
	}
	j, err := json.Marshal(&ln)
	if err != nil {
		return b, fmt.Errorf("audit: encoding an event: %w", err)
	}
	if len(j)+1 > MaxLine {
		return b, fmt.Errorf("audit: an event of %d bytes: at most %d", len(j)+1, MaxLine)
	}
	return append(append(b, j...), '\n'), nil
}

// parseLine decodes one line (without its newline).
func parseLine(b []byte) (spent.AuditEvent, error) {
	var ln line
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&ln); err != nil {
		return spent.AuditEvent{}, err
	}
	if d.More() {
		return spent.AuditEvent{}, errors.New("text after the event")
	}
	ev := spent.AuditEvent{Kind: ln.Kind, Time: ln.Time, Node: ln.Node, Namespace: ln.Namespace, Hash: ln.Hash, Seq: ln.Seq,
		Place: ln.Place, Retake: ln.Retake}
	switch {
	case ln.Kind != spent.AuditAccepted && ln.Kind != spent.AuditCompleted && ln.Kind != spent.AuditReleased:
		return ev, fmt.Errorf("unknown kind %s", spent.QuoteInput(string(ln.Kind)))
	case ln.Time.IsZero() || ln.Node == 0 || ln.Namespace == "" || ln.Seq.IsZero() || ln.Hash.IsZero():
		return ev, errors.New("time, node, ns, hash or seq missing")
	case len(ln.Place) > spent.MaxPlaceLen:
		return ev, fmt.Errorf("place of %d bytes: at most %d", len(ln.Place), spent.MaxPlaceLen)
	}
	if ln.Kind == spent.AuditAccepted {
		if ln.State == nil || ln.ExpiresAt == nil {
			return ev, errors.New("accepted event without state or expires_at")
		}
		ev.State, ev.ExpiresAt = *ln.State, *ln.ExpiresAt
		if ln.LeaseUntil != nil {
			ev.LeaseUntil = *ln.LeaseUntil
		}
	}
	return ev, nil
}
