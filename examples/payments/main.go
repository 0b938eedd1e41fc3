// Command payments is a payment service on the
// Idempotency-Key middleware (package
// github.com/spentledger/spent/idempotency) and the embedded pebble store:
// a payment is sent at most once per key, whatever the client's retries,
// the injected failures and the crashes.
//
// Run the service:
//
//	go run ./examples/payments --listen 127.0.0.1:8080 --data ./payments-data [--fail-rate 0.1] [--delay 2s] [--admin 127.0.0.1:7070]
//
// and pay with the seed's six-try client (a UUIDv4 key per payment, kept
// across its retries, journaled with --journal):
//
//	go run ./examples/payments pay --server http://127.0.0.1:8080 --amount 1000000 --destination 00000000
//
// or by hand:
//
//	curl -i -X POST http://127.0.0.1:8080/payments -H 'Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"' \
//	     -H 'Content-Type: application/json' -d '{"amount":1000000,"destination":"00000000"}'
//	curl http://127.0.0.1:8080/payments/sent
//
// # Endpoints
//
//   - POST /payments, JSON {"amount": N, "destination": "..."}, header
//     Idempotency-Key required: sends the money once and answers 201
//     {"payment_id", "state": "applied", "amount", "destination", "seq"};
//     a retry gets the same bytes with Idempotent-Replayed: true. The
//     middleware's answers (400, 409, 413, 422, 503) are described in
//     docs/idempotency.md.
//   - GET /payments/sent: the money ledger, {"<payment id>": times sent}.
//     A payment id is the ledger's hash of the payment's key, the hash that
//     "spent unknown list" prints for an unknown outcome.
//   - GET /payments/resolver: the resolver's counters since the start,
//     {"on", "completed", "released", "elsewhere", "left", "waiting",
//     "list_errors"}.
//
// # Failure injection
//
// --fail-rate P fails each request with probability P at each of the three
// points where a payment service fails, answering 500 "simulated failure N":
//
//  1. before the check: before the middleware looks at the ledger;
//  2. before the side effect: in the handler, before Applied (the key is
//     released; the retry runs again);
//  3. after it: the money is sent and the answer stored, then the answer is
//     lost (the retry gets the stored answer);
//
// and, 4, each of the resolver's look-ups at the bank fails with
// probability P (it is tried again later).
//
// --crash-rate P aborts a request with probability P at each of two points
// after Applied, before and after the money leaves, without storing its
// answer, as a process dying there would: an unknown outcome.
//
// --delay D holds each first execution for D after Applied, before the money
// leaves (a slow bank), so that the in-progress window can be watched.
// --lease sets the leases of both idempotency namespaces (how long a crashed
// request blocks its key, and how long before an interrupted payment is
// listed as an unknown outcome).
//
// # The resolver
//
// Every --resolve-every (5 s; 0 turns it off) the service lists the unknown
// outcomes of its applied namespace and settles each against its bank's
// books: a transfer of that attempt (the payment id and the marker's seq)
// completes the marker with the handler's 201; no transfer voids the
// attempt at the bank in the same step (a send of it still in flight is
// refused) and releases the marker, so that the client's retry pays, once;
// a bank that cannot answer leaves it, looked up again with backoff (1 s
// doubling to 5 min).
//
// # Operators
//
// With --admin ADDR (a loopback address) the ledger's HTTP API is served
// there, without tokens, so that the unknown outcomes the resolver could
// not settle can be listed and resolved:
//
//	spent unknown list --addr http://ADDR -n payments-applied
//	spent unknown resolve --addr http://ADDR -n payments-applied HASH --complete --result '{"state":"applied"}'
//	spent unknown resolve --addr http://ADDR -n payments-applied HASH --release
//
// Look the hash up in GET /payments/sent first: sent once means complete,
// absent means release (the client's next retry then pays).
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

// run is the whole program: the service, or with "pay" the client. It
// returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "pay" {
		return runPay(ctx, args[1:], stdout, stderr)
	}
	m := NewMain()
	m.Stderr = stderr
	if err := m.ParseFlags(args); errors.Is(err, flag.ErrHelp) {
		m.Usage(stdout)
		return 0
	} else if err != nil {
		fmt.Fprintf(stderr, "%v (see payments --help)\n", err)
		return 2
	}
	if err := m.Open(); err != nil {
		fmt.Fprintln(stderr, "payments:", err)
		return 1
	}
	fmt.Fprintf(stdout, "payments: listening on http://%s\n", m.Addr())
	if m.AdminAddr() != "" {
		fmt.Fprintf(stdout, "payments: ledger API for operators on http://%s\n", m.AdminAddr())
	}
	err := m.Run(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(stderr, "payments:", err)
		return 1
	}
	return 0
}
