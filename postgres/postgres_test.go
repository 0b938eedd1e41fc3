package postgres_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/postgres"
	"github.com/spentledger/spent/storetest"
)

// TestMain shares one throwaway cluster among the tests of the package.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestConformance runs the storetest suite against the shared server, one
// schema per storetest directory (so that reopening a directory finds its
// data and other directories find none).
func TestConformance(t *testing.T) {
	dsn := pgtest.DSN(t)
	storetest.Run(t, storetest.Harness{
		Open: func(tb testing.TB, dir string) spent.Store { return openDir(tb, dsn, dir) },
	})
}

// schemaFor derives the schema of a storetest directory.
func schemaFor(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "st_" + hex.EncodeToString(sum[:10])
}

// openDir opens the store of dir and drops its schema when tb ends (a crash
// child, which exits without cleanups, leaves it to the parent).
func openDir(tb testing.TB, dsn, dir string) *postgres.Store {
	tb.Helper()
	o := testOptions(tb, dsn, schemaFor(dir))
	s := MustOpen(tb, o)
	dropSchemaAtEnd(tb, dsn, o.Schema)
	return s
}

// testOptions returns the default options for the server at dsn and
// schema, logging warnings and errors only.
func testOptions(tb testing.TB, dsn, schema string) postgres.Options {
	tb.Helper()
	o, err := postgres.ParseURL(dsn)
	if err != nil {
		tb.Fatalf("ParseURL: %v", err)
	}
	o.Schema = schema
	o.MaxConns = 16
	o.MinConns = 4
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return o
}

// MustOpen opens a store with opts and closes it when tb ends.
func MustOpen(tb testing.TB, opts postgres.Options) *postgres.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, opts)
	if err != nil {
		tb.Fatalf("Open(schema %s): %v", opts.Schema, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// freshSchema returns a schema name of its own for tb, dropped when tb
// ends.
func freshSchema(tb testing.TB, dsn string) string {
	tb.Helper()
	schema := schemaFor(tb.Name() + time.Now().String())
	dropSchemaAtEnd(tb, dsn, schema)
	return schema
}

var dropped sync.Map

// dropSchemaAtEnd drops schema when tb ends, once, on a server named by
// SPENT_TEST_POSTGRES_DSN, so that the tests leave nothing there. (A
// throwaway cluster is removed whole.)
func dropSchemaAtEnd(tb testing.TB, dsn, schema string) {
	if os.Getenv(pgtest.EnvDSN) == "" || dsn != os.Getenv(pgtest.EnvDSN) {
		return
	}
	if _, loaded := dropped.LoadOrStore(schema, true); loaded {
		return
	}
	tb.Cleanup(func() {
		execSQL(tb, dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
}

// execSQL runs sql on a connection of its own.
func execSQL(tb testing.TB, dsn, sql string, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// withParam returns dsn with one more query parameter.
func withParam(tb testing.TB, dsn, name, value string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

var t0 = time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.UTC)

func hashOf(s string) spent.Hash {
	sum := sha256.Sum256([]byte(s))
	var h spent.Hash
	copy(h[:], sum[:])
	return h
}

// completeOp is a one-step claim of key made at now, live for an hour.
func completeOp(key string, counter uint64, now time.Time) spent.ClaimOp {
	return spent.ClaimOp{Now: now, Record: spent.Record{
		Namespace: "ns", Hash: hashOf(key), FirstSeen: now, Place: "gate-1",
		State: spent.StateComplete, Result: []byte("result of " + key), ExpiresAt: now.Add(time.Hour),
		Seq: spent.Seq{Node: 1, Counter: counter},
	}}
}

// pendingOp is a two-step claim of key made at now, with a 5s lease.
func pendingOp(key string, counter uint64, now time.Time) spent.ClaimOp {
	return spent.ClaimOp{Now: now, Record: spent.Record{
		Namespace: "ns", Hash: hashOf(key), FirstSeen: now, Place: "gate-1",
		State: spent.StatePending, ExpiresAt: now.Add(time.Hour), LeaseUntil: now.Add(5 * time.Second),
		Seq: spent.Seq{Node: 1, Counter: counter},
	}}
}

// sameRecord compares every field, telling nil from empty byte slices.
func sameRecord(a, b spent.Record) bool {
	return a.Namespace == b.Namespace && a.Hash == b.Hash && a.RawKey == b.RawKey &&
		a.FirstSeen.Equal(b.FirstSeen) && a.FirstSeen.IsZero() == b.FirstSeen.IsZero() && a.Place == b.Place &&
		bytes.Equal(a.Fingerprint, b.Fingerprint) && (a.Fingerprint == nil) == (b.Fingerprint == nil) &&
		a.State == b.State && bytes.Equal(a.Result, b.Result) && (a.Result == nil) == (b.Result == nil) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.LeaseUntil.Equal(b.LeaseUntil) &&
		a.LeaseUntil.IsZero() == b.LeaseUntil.IsZero() && a.Seq == b.Seq
}

func mustClaim(tb testing.TB, s spent.Store, op spent.ClaimOp) spent.ClaimAnswer {
	tb.Helper()
	res, err := s.Claim(context.Background(), op)
	if err != nil {
		tb.Fatalf("Claim(%v): %v", op.Record.Hash, err)
	}
	return res
}

func describe(r spent.Record) string {
	return fmt.Sprintf("%+v", r)
}
