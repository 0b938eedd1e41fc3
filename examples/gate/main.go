// Command gate is a ticket gate: the payment service's table pointed the
// other way. Tickets are minted by the server (random ids in an
// HMAC-signed QR payload); a scan admits a ticket once and refuses every
// later scan, citing when and at which gate it was first seen. The ledger
// remembers each ticket for the life of the event.
//
// Run it on the embedded pebble store:
//
//	go run ./examples/gate --listen 127.0.0.1:8081 --data ./gate-data [--event-end 2026-12-31T23:00:00Z]
//
// then mint a ticket and scan it at two gates:
//
//	curl -s -X POST http://127.0.0.1:8081/tickets -H 'Idempotency-Key: "order-1"' -d '{"holder":"Ada"}'
//	curl -s -X POST http://127.0.0.1:8081/scan -d '{"qr":"spent-ticket-v1....","gate":"north"}'   # admitted
//	curl -s -X POST http://127.0.0.1:8081/scan -d '{"qr":"spent-ticket-v1....","gate":"south"}'   # refused, first seen at north
//
// # Endpoints
//
//   - POST /tickets, JSON {"holder": "..."}, header Idempotency-Key
//     required: 201 {"ticket_id", "qr", "holder", "valid_until"}. The mint is
//     an echo endpoint under the Idempotency-Key middleware: a retried
//     purchase gets the same ticket, byte for byte, never a second one.
//   - POST /scan, JSON {"qr": "...", "gate": "..."}: 200 {"admitted": true,
//     ...} for the first scan of a valid ticket; 409 {"admitted": false,
//     "reason": "already_admitted", "first_seen", "first_gate"} for every
//     later one; 403 {"admitted": false, "reason": "invalid_ticket" or
//     "expired"} for a payload whose signature does not verify or whose
//     event is over (checked before the ledger is consulted).
//
// # One primitive, two second answers
//
// Both endpoints claim a key in the ledger; only the second answer
// differs. The mint's namespace echoes (the retry of one purchase is the
// same intent, made invisible); the scan's namespace refuses (a second scan
// is a second person, made to fail loudly). A scan is a one-step claim
// whose expiry is the ticket's own end of validity: the ledger remembers a
// ticket exactly as long as a replayed scan could still admit someone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	m := NewMain()
	if err := m.ParseFlags(args); errors.Is(err, flag.ErrHelp) {
		m.Usage(stdout)
		return 0
	} else if err != nil {
		fmt.Fprintf(stderr, "%v (see gate --help)\n", err)
		return 2
	}
	if err := m.Open(); err != nil {
		fmt.Fprintln(stderr, "gate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "gate: listening on http://%s; tickets valid until %s\n", m.Addr(), m.EventEnd.Format("2006-01-02T15:04:05Z07:00"))
	err := m.Run(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(stderr, "gate:", err)
		return 1
	}
	return 0
}
