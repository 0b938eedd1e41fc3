package spent_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
)

// exampleLedger returns a ledger over an in-memory store whose clock stands
// still at 09:00 on 1 January 2030, with a "payments" namespace (echo, the
// default policy) and a "tickets" namespace (refuse).
func exampleLedger() *spent.Ledger {
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("an example secret of at least 32 bytes")
	cfg.Namespaces = map[string]spent.Policy{
		"payments": spent.DefaultPolicy(),
		"tickets":  {Mode: spent.ModeRefuse, Retention: 72 * time.Hour, Lease: 10 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold},
	}
	cfg.Now = func() time.Time { return time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC) }
	l, err := spent.NewLedger(context.Background(), inmem.New(), cfg)
	if err != nil {
		panic(err)
	}
	return l
}

func ExampleNewLedger() {
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("an example secret of at least 32 bytes")
	cfg.Namespaces["tickets"] = spent.Policy{
		Mode:          spent.ModeRefuse,
		Retention:     72 * time.Hour,
		Lease:         10 * time.Second,
		OnLeaseExpiry: spent.LeaseExpiryHold,
	}
	// In production, open the embedded pebble store instead.
	l, err := spent.NewLedger(context.Background(), inmem.New(), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(l.Namespaces())
	p, _ := l.Policy("default")
	fmt.Println(p.Mode, p.Retention, p.Lease, p.OnLeaseExpiry)

	cfg.Secret = []byte("too short")
	_, err = spent.NewLedger(context.Background(), inmem.New(), cfg)
	fmt.Println(err)
	// Output:
	// [default tickets]
	// echo 24h0m0s 30s hold
	// spent: secret of 9 bytes: need at least 32
}

func ExampleLedger_Claim() {
	l := exampleLedger()
	ctx := context.Background()

	// A one-step claim stores its result in the same write.
	body := sha256.Sum256([]byte(`{"amount":100}`))
	pay := spent.Claim{Namespace: "payments", Key: "order-17", Fingerprint: body[:], Result: []byte("receipt #1")}
	r, _ := l.Claim(ctx, pay)
	fmt.Println(r.Outcome, r.Record.Seq)

	// A retry gets the stored result back; it never stores a new one.
	pay.Result = []byte("receipt #2")
	r, _ = l.Claim(ctx, pay)
	fmt.Println(r.Outcome, string(r.Record.Result))

	// The same key with another request is a mismatch.
	other := sha256.Sum256([]byte(`{"amount":999}`))
	pay.Fingerprint = other[:]
	r, _ = l.Claim(ctx, pay)
	fmt.Println(r.Outcome)

	// A refuse namespace says when and where the key was first seen.
	ticket := spent.Claim{Namespace: "tickets", Key: "T-1", Place: "gate 3", Result: []byte{}}
	r, _ = l.Claim(ctx, ticket)
	fmt.Println(r.Outcome)
	ticket.Place = "gate 5"
	r, _ = l.Claim(ctx, ticket)
	fmt.Println(r.Outcome, r.Record.Place, r.Record.FirstSeen.Format(time.RFC3339))
	// Output:
	// fresh 1:1
	// replayed receipt #1
	// mismatch
	// fresh
	// refused gate 3 2030-01-01T09:00:00Z
}

func ExampleLedger_Complete() {
	l := exampleLedger()
	ctx := context.Background()

	// A two-step claim takes a lease: state before side effect.
	claim := spent.Claim{Namespace: "payments", Key: "order-18"}
	r, _ := l.Claim(ctx, claim)
	fmt.Println(r.Outcome, r.Record.State)

	again, _ := l.Claim(ctx, claim)
	fmt.Println(again.Outcome, again.RetryAfter)

	// Charge the card, then store the result under the claim's seq.
	rec, err := l.Complete(ctx, spent.Completion{Namespace: "payments", Key: "order-18", Seq: r.Record.Seq, Result: []byte("charged")})
	fmt.Println(rec.State, string(rec.Result), err)

	again, _ = l.Claim(ctx, claim)
	fmt.Println(again.Outcome, string(again.Record.Result))
	// Output:
	// fresh pending
	// in_progress 30s
	// complete charged <nil>
	// replayed charged
}

func ExampleLedger_Release() {
	l := exampleLedger()
	ctx := context.Background()

	claim := spent.Claim{Namespace: "payments", Key: "order-19"}
	first, _ := l.Claim(ctx, claim)

	// The request failed validation for an unrelated reason: give the key back
	// so that the corrected request is not refused.
	err := l.Release(ctx, spent.Release{Namespace: "payments", Key: "order-19", Seq: first.Record.Seq})
	fmt.Println(err)

	second, _ := l.Claim(ctx, claim)
	fmt.Println(second.Outcome, second.Record.Seq == first.Record.Seq)

	// The first claim no longer holds the key.
	err = l.Release(ctx, spent.Release{Namespace: "payments", Key: "order-19", Seq: first.Record.Seq})
	fmt.Println(spent.ErrorCode(err))
	// Output:
	// <nil>
	// fresh false
	// seq_mismatch
}

func ExampleLedger_Purge() {
	l := exampleLedger()
	ctx := context.Background()

	for _, ticket := range []string{"t-1", "t-2", "t-3"} {
		l.Claim(ctx, spent.Claim{Namespace: "tickets", Key: ticket, Result: []byte{}})
	}
	l.Claim(ctx, spent.Claim{Namespace: "payments", Key: "order-20", Result: []byte("charged")})

	// An epoch retirement: the tickets' signing keys were retired, so no
	// ticket of theirs can be presented again and their records can go.
	n, err := l.Purge(ctx, "tickets")
	fmt.Println(n, err)

	again, _ := l.Claim(ctx, spent.Claim{Namespace: "tickets", Key: "t-1", Result: []byte{}})
	fmt.Println(again.Outcome)
	kept, _ := l.Get(ctx, "payments", "order-20")
	fmt.Println(string(kept.Result))
	// Output:
	// 3 <nil>
	// fresh
	// charged
}

// A second request for a key in progress waits for the first to end
// rather than answering in_progress: here the first completes, and the
// waiter is answered with its result.
func ExampleClaim_wait() {
	ctx := context.Background()
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("example secret of at least 32 bytes!")
	l, err := spent.NewLedger(ctx, inmem.New(), cfg)
	if err != nil {
		panic(err)
	}
	first, _ := l.Claim(ctx, spent.Claim{Namespace: "default", Key: "order-42"})
	second := make(chan spent.Answer)
	go func() {
		a, _ := l.Claim(ctx, spent.Claim{Namespace: "default", Key: "order-42", Wait: 5 * time.Second})
		second <- a
	}()
	for l.Waiting() == 0 {
		time.Sleep(time.Millisecond)
	}
	l.Complete(ctx, spent.Completion{Namespace: "default", Key: "order-42", Seq: first.Record.Seq, Result: []byte("shipped")})
	a := <-second
	fmt.Println(first.Outcome, a.Outcome, string(a.Record.Result))
	// Output: fresh replayed shipped
}
