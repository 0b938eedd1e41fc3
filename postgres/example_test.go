package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/postgres"
)

// ExampleOpen opens the store named by DATABASE_URL (for instance
// postgres://spent@db.internal/ledger?sslmode=verify-full&schema=spent) and
// claims one ticket at two gates. It has no Output comment, so go test only
// compiles it; TestExampleOpen runs it against a real server and checks what
// it prints:
//
//	north fresh first seen at north
//	south refused first seen at north
func ExampleOpen() {
	ctx := context.Background()
	opts, err := postgres.ParseURL(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	store, err := postgres.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("an example secret of at least 32 bytes")
	cfg.Namespaces = map[string]spent.Policy{"tickets": {
		Mode: spent.ModeRefuse, Retention: 30 * 24 * time.Hour, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold,
	}}
	ledger, err := spent.NewLedger(ctx, store, cfg)
	if err != nil {
		log.Fatal(err)
	}
	for _, gate := range []string{"north", "south"} {
		res, err := ledger.Claim(ctx, spent.Claim{Namespace: "tickets", Key: "ticket-0042", Place: gate, Result: []byte{}})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(gate, res.Outcome, "first seen at", res.Record.Place)
	}
}

// TestExampleOpen runs ExampleOpen against the shared server, in a schema
// of its own, and checks its output.
func TestExampleOpen(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := freshSchema(t, dsn)
	t.Setenv("DATABASE_URL", withParam(t, dsn, "schema", schema))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	func() {
		defer func() { os.Stdout = stdout }()
		ExampleOpen()
	}()
	w.Close()
	got := <-done
	want := "north fresh first seen at north\nsouth refused first seen at north\n"
	if got != want {
		t.Fatalf("ExampleOpen printed:\n%s\nwant:\n%s", got, want)
	}
}
