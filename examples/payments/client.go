package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spentledger/spent/idempotency"
)

// newPayClient is the service's client: at most six tries of one payment, each
// with a 10-second timeout, under one key.
func newPayClient(journal *idempotency.Journal, timeout time.Duration) (*idempotency.Client, error) {
	o := idempotency.DefaultClientOptions()
	o.MaxAttempts = 6
	o.HTTPClient = &http.Client{Timeout: timeout}
	o.Journal = journal
	return idempotency.NewClient(o)
}

// pay sends one payment through c and returns the answer's status and body.
// An empty key lets the client draw a new one.
func pay(ctx context.Context, c *idempotency.Client, server, key string, p payment) (int, []byte, error) {
	body, _ := json.Marshal(p)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(server, "/")+"/payments", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(idempotency.HeaderKey, key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// runPay is "payments pay": one payment with the six-try client. With
// --journal, payments left unfinished by an earlier run are resumed first,
// with their keys.
func runPay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("payments pay", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error is reported below, the usage printed on --help
	server := fs.String("server", "http://127.0.0.1:8080", "URL of the payment service")
	amount := fs.Int64("amount", 0, "amount to send")
	dest := fs.String("destination", "", "destination account")
	jdir := fs.String("journal", "", "directory journaling each payment before its first send; resumes unfinished ones")
	timeout := fs.Duration("timeout", 10*time.Second, "timeout of each try")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, "Usage:\n  payments pay --amount N --destination ACCOUNT [flags]\n\nFlags:\n")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0
	} else if err != nil {
		fmt.Fprintf(stderr, "payments pay: %v (see payments pay --help)\n", err)
		return 2
	}
	if *amount <= 0 || *dest == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "payments pay: --amount (positive) and --destination are required")
		return 2
	}
	var j *idempotency.Journal
	if *jdir != "" {
		var err error
		if j, err = idempotency.OpenJournal(*jdir); err != nil {
			fmt.Fprintln(stderr, "payments pay:", err)
			return 1
		}
	}
	c, err := newPayClient(j, *timeout)
	if err != nil {
		fmt.Fprintln(stderr, "payments pay:", err)
		return 1
	}
	code := 0
	if j != nil {
		pending, err := j.Pending()
		if err != nil {
			fmt.Fprintln(stderr, "payments pay:", err)
			return 1
		}
		for _, e := range pending {
			fmt.Fprintf(stdout, "resuming payment %s: %s\n", e.Key, e.Body)
			resp, err := c.Resume(ctx, e)
			if code2 := report(stdout, stderr, resp, err); code2 != 0 {
				code = code2
			}
		}
	}
	status, body, err := pay(ctx, c, *server, "", payment{Amount: *amount, Destination: *dest})
	if err != nil {
		return report(stdout, stderr, nil, err)
	}
	fmt.Fprintf(stdout, "%d %s", status, body)
	if status != http.StatusCreated && status != http.StatusOK {
		return 1
	}
	return code
}

// report prints the outcome of a resumed payment or a final error.
func report(stdout, stderr io.Writer, resp *http.Response, err error) int {
	if err != nil {
		var e *idempotency.Error
		if errors.As(err, &e) && e.Known {
			fmt.Fprintf(stderr, "payment %s NOT sent (the service was never reached): %v\n", e.Key, err)
		} else if errors.As(err, &e) {
			fmt.Fprintf(stderr, "payment %s: outcome UNKNOWN; retry later with this key, or ask an operator: %v\n", e.Key, err)
		} else {
			fmt.Fprintln(stderr, "payments pay:", err)
		}
		return 1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Fprintf(stdout, "%d %s", resp.StatusCode, b)
	if resp.StatusCode >= 300 {
		return 1
	}
	return 0
}
