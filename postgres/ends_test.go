package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/internal/waittest"
)

// TestWaitAcrossServers runs the waiting-claim tests with the claim on one
// store and the waiter on another over the same schema, as two spent
// servers would: the waiter learns of the end by LISTEN/NOTIFY.
func TestWaitAcrossServers(t *testing.T) {
	dsn := pgtest.DSN(t)
	waittest.Run(t, func(t *testing.T) (a, b spent.Store) {
		schema := freshSchema(t, dsn)
		a = MustOpen(t, testOptions(t, dsn, schema))
		return a, MustOpen(t, testOptions(t, dsn, schema))
	})
}

// TestWaitEndsListenAgain: when the listener's connection is terminated,
// the store listens again and calls lost, and the ends notified afterwards
// reach it.
func TestWaitEndsListenAgain(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := freshSchema(t, dsn)
	a, b := MustOpen(t, testOptions(t, dsn, schema)), MustOpen(t, testOptions(t, dsn, schema))
	ctx := context.Background()
	ended, lost := make(chan spent.Hash, 16), make(chan struct{}, 16)
	stop, err := b.WatchEnds(ctx, func(h spent.Hash) { ended <- h }, func() { lost <- struct{}{} })
	if err != nil {
		t.Fatalf("WatchEnds: %v", err)
	}
	defer stop()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminating the listener: %d, %v; want one backend", n, err)
	}
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("lost not called after the listener's connection was terminated")
	}
	la, _ := waittest.Ledgers(t, a, a)
	first, err := la.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := la.Complete(ctx, spent.Completion{Namespace: waittest.NSRetake, Key: "k", Seq: first.Record.Seq, Result: []byte("r")}); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-ended:
		if h != first.Record.Hash {
			t.Fatalf("ended %v, want %v", h, first.Record.Hash)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no end told after listening again")
	}
}
