// Command webhooks is a Standard Webhooks receiver: it verifies each
// message's signature (v1 HMAC-SHA256 or v1a ed25519) and timestamp, and
// hands each message id to its handler once, remembering ids in a spent
// ledger for exactly as long as a replay of the message could still pass
// the timestamp check: it refuses repeats only within the window the
// signature's timestamp allows.
//
// Run it on the embedded pebble store, with the sender's secrets and keys
// in a file (one whsec_... or whpk_... per line):
//
//	go run ./examples/webhooks --listen 127.0.0.1:8082 --data ./webhooks-data --keys ./sender.keys --source billing
//
// or against a spent server whose namespace "webhooks" has the policy the
// receiver needs (refuse, retake, retention at least 2 × (tolerance +
// skew): 12 minutes with the defaults):
//
//	go run ./examples/webhooks --ledger http://127.0.0.1:8080 --keys ./sender.keys --source billing
//
// # Endpoints
//
//   - POST /webhooks: a signed message. 200 {"handled": "<id>"} the first
//     time; 200 with Spent-Duplicate: true and an empty body for every
//     later delivery of the id within its window; the problem documents of
//     package webhooks otherwise (401 for a bad signature or a stale
//     timestamp, 409 while the same id is being handled, 503 when the
//     ledger is down). A message whose JSON "type" is "test.fail" is
//     answered 500 by the handler, which releases its id: the sender's
//     retry runs the handler again.
//   - GET /events: the messages handled since start, in order, as JSON.
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
		fmt.Fprintf(stderr, "%v (see webhooks --help)\n", err)
		return 2
	}
	if err := m.Open(); err != nil {
		fmt.Fprintln(stderr, "webhooks:", err)
		return 1
	}
	fmt.Fprintf(stdout, "webhooks: receiving from %s on http://%s/webhooks; ids remembered %v past their timestamp\n",
		m.Source, m.Addr(), m.Tolerance+m.Skew)
	err := m.Run(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(stderr, "webhooks:", err)
		return 1
	}
	return 0
}
