package postgres_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/postgres"
)

// These tests stage, with a real server, the races in which a statement's
// snapshot (taken when it starts) misses a change committed while it waits
// for a row lock: another session changes a row in an open transaction, the
// store's statement starts and waits for that row, and the transaction
// commits (or rolls back). They check that the store then answers from the
// row as committed, not from its snapshot.

// raceEnv is a store whose sessions are named app, so that the test can see
// them wait, and a connection of its own for the other session.
type raceEnv struct {
	t      *testing.T
	dsn    string
	app    string
	schema string
	store  *postgres.Store
}

func newRaceEnv(t *testing.T, dsn string) *raceEnv {
	schema := freshSchema(t, dsn)
	app := "race_" + schema
	o := testOptions(t, withParam(t, dsn, "application_name", app), schema)
	s := MustOpen(t, o)
	// The other session writes records of these periods without the
	// store's help.
	if err := s.MakePartitions(context.Background(), t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return &raceEnv{t: t, dsn: dsn, app: app, schema: schema, store: s}
}

func (e *raceEnv) table(name string) string { return pgx.Identifier{e.schema, name}.Sanitize() }

// begin opens the other session's transaction; it is rolled back at the end
// unless committed.
func (e *raceEnv) begin() pgx.Tx {
	e.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { tx.Rollback(context.Background()) })
	return tx
}

// exec runs sql in tx.
func (e *raceEnv) exec(tx pgx.Tx, sql string, args ...any) {
	e.t.Helper()
	if _, err := tx.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// insertRecord is the other session writing r as the store would: under
// the advisory lock of its key, in place of any row of the key.
func (e *raceEnv) insertRecord(tx pgx.Tx, r spent.Record) {
	e.t.Helper()
	var lease any
	if !r.LeaseUntil.IsZero() {
		lease = r.LeaseUntil.UnixNano()
	}
	e.exec(tx, "SELECT pg_advisory_xact_lock($1)", int64(binary.BigEndian.Uint64(r.Hash[:8])))
	e.exec(tx, "DELETE FROM "+e.table("records")+" WHERE key = $1", r.Hash[:])
	e.exec(tx, "INSERT INTO "+e.table("records")+` (key, namespace, raw_key, first_seen, place, fingerprint, state, result, expires_at, lease_until, seq_node, seq_counter)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		r.Hash[:], []byte(r.Namespace), []byte(r.RawKey), r.FirstSeen.UnixNano(), []byte(r.Place), r.Fingerprint,
		int16(r.State), r.Result, r.ExpiresAt.UnixNano(), lease, int64(r.Seq.Node), int64(r.Seq.Counter))
}

// whileWaiting starts f, waits until a session of the store waits for a
// lock, runs then, and returns when f has returned.
func (e *raceEnv) whileWaiting(f func(), then func()) {
	e.t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", e.app).Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		if n > 0 {
			break
		}
		select {
		case <-done:
			e.t.Fatal("the store's call returned without waiting for the other session's lock")
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the store's call never waited for the other session's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	then()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		e.t.Fatal("the store's call did not return after the other session ended")
	}
}

func (e *raceEnv) commit(tx pgx.Tx) func() {
	return func() {
		if err := tx.Commit(context.Background()); err != nil {
			e.t.Errorf("commit: %v", err)
		}
	}
}

func (e *raceEnv) rollback(tx pgx.Tx) func() {
	return func() {
		if err := tx.Rollback(context.Background()); err != nil {
			e.t.Errorf("rollback: %v", err)
		}
	}
}

func wantRecord(tb testing.TB, what string, got, want spent.Record) {
	tb.Helper()
	if !sameRecord(got, want) {
		tb.Fatalf("%s: got %s, want %s", what, describe(got), describe(want))
	}
}

func TestRacesCommittedAfterSnapshot(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()

	t.Run("ClaimLosesToWinnerCommittedAfterItsSnapshot", func(t *testing.T) {
		e := newRaceEnv(t, dsn)
		winner := completeOp("k", 1, t0).Record
		tx := e.begin()
		e.insertRecord(tx, winner)
		var res spent.ClaimAnswer
		var err error
		e.whileWaiting(func() { res, err = e.store.Claim(ctx, completeOp("k", 2, t0)) }, e.commit(tx))
		if err != nil || res.Inserted {
			t.Fatalf("Claim: got inserted=%v, %v, want the winner's record", res.Inserted, err)
		}
		wantRecord(t, "answer", res.Record, winner)
	})

	t.Run("ClaimWinsWhenTheOtherInsertRollsBack", func(t *testing.T) {
		e := newRaceEnv(t, dsn)
		tx := e.begin()
		e.insertRecord(tx, completeOp("k", 1, t0).Record)
		op := completeOp("k", 2, t0)
		var res spent.ClaimAnswer
		var err error
		e.whileWaiting(func() { res, err = e.store.Claim(ctx, op) }, e.rollback(tx))
		if err != nil || !res.Inserted {
			t.Fatalf("Claim: got inserted=%v, %v, want inserted", res.Inserted, err)
		}
		wantRecord(t, "answer", res.Record, op.Record)
	})

	t.Run("ClaimSeesTakeoverCommittedAfterItsSnapshot", func(t *testing.T) {
		e := newRaceEnv(t, dsn)
		old := pendingOp("k", 1, t0)
		mustClaim(t, e.store, old)
		// At the end of the lease, both the other session and the store may
		// retake the key; the other session is first.
		now := old.Record.LeaseUntil
		taker := pendingOp("k", 2, now).Record
		tx := e.begin()
		e.insertRecord(tx, taker)
		op := pendingOp("k", 3, now)
		op.Retake = true
		var res spent.ClaimAnswer
		var err error
		e.whileWaiting(func() { res, err = e.store.Claim(ctx, op) }, e.commit(tx))
		if err != nil || res.Inserted {
			t.Fatalf("Claim: got inserted=%v, %v, want the taker's record", res.Inserted, err)
		}
		wantRecord(t, "answer", res.Record, taker)
	})

	t.Run("BatchLoserIsAnsweredInOrder", func(t *testing.T) {
		e := newRaceEnv(t, dsn)
		winner := completeOp("k", 1, t0).Record
		tx := e.begin()
		e.insertRecord(tx, winner)
		ops := []spent.ClaimOp{completeOp("k", 2, t0), completeOp("other", 3, t0), completeOp("k", 4, t0)}
		var res []spent.ClaimAnswer
		var err error
		e.whileWaiting(func() { res, err = e.store.ClaimBatch(ctx, ops) }, e.commit(tx))
		if err != nil {
			t.Fatalf("ClaimBatch: %v", err)
		}
		if res[0].Inserted || !res[1].Inserted || res[2].Inserted {
			t.Fatalf("inserted: got %v %v %v, want false true false", res[0].Inserted, res[1].Inserted, res[2].Inserted)
		}
		wantRecord(t, "ops[0]", res[0].Record, winner)
		wantRecord(t, "ops[2]", res[2].Record, winner)
	})

	t.Run("BatchLoserIsSettledAfterTheBatch", func(t *testing.T) {
		e := newRaceEnv(t, dsn)
		winner := completeOp("k", 1, t0).Record
		tx := e.begin()
		e.insertRecord(tx, winner)
		ops := []spent.ClaimOp{completeOp("k", 2, t0), completeOp("other", 3, t0)}
		var res []spent.ClaimAnswer
		var err error
		e.whileWaiting(func() { res, err = e.store.ClaimBatch(ctx, ops) }, e.commit(tx))
		if err != nil {
			t.Fatalf("ClaimBatch: %v", err)
		}
		if res[0].Inserted || !res[1].Inserted {
			t.Fatalf("inserted: got %v %v, want false true", res[0].Inserted, res[1].Inserted)
		}
		wantRecord(t, "ops[0]", res[0].Record, winner)
	})

	t.Run("CompleteSeesCompletionCommittedAfterItsSnapshot", func(t *testing.T) {
		e := newRaceEnv(t, dsn)
		p := pendingOp("k", 1, t0)
		mustClaim(t, e.store, p)
		done := p.Record
		done.State, done.Result, done.LeaseUntil = spent.StateComplete, []byte("stored"), time.Time{}
		for _, tc := range []struct {
			result  string
			wantErr error
		}{{"stored", nil}, {"other bytes", spent.ErrNotPending}} {
			tx := e.begin()
			e.insertRecord(tx, done)
			var got spent.Record
			var err error
			e.whileWaiting(func() { got, err = e.store.Complete(ctx, p.Record.Hash, p.Record.Seq, []byte(tc.result), t0) }, e.commit(tx))
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("Complete with %q: got %v, want %v", tc.result, err, tc.wantErr)
			}
			if err == nil {
				wantRecord(t, "completed record", got, done)
			}
			// Back to pending for the next case.
			tx = e.begin()
			e.insertRecord(tx, p.Record)
			e.commit(tx)()
		}
	})

	t.Run("ReleaseSeesDeletionCommittedAfterItsSnapshot", func(t *testing.T) {
		e := newRaceEnv(t, dsn)
		p := pendingOp("k", 1, t0)
		mustClaim(t, e.store, p)
		tx := e.begin()
		e.exec(tx, "DELETE FROM "+e.table("records")+" WHERE key = $1", p.Record.Hash[:])
		var err error
		e.whileWaiting(func() { err = e.store.Release(ctx, p.Record.Hash, p.Record.Seq, t0) }, e.commit(tx))
		if !errors.Is(err, spent.ErrNotFound) {
			t.Fatalf("Release of a record deleted meanwhile: got %v, want ErrNotFound", err)
		}
	})

	t.Run("DeleteExpiredKeepsRowRetakenAfterItsSnapshot", func(t *testing.T) {
		e := newRaceEnv(t, dsn)
		old := completeOp("k", 1, t0)
		old.Record.ExpiresAt = t0.Add(time.Second)
		mustClaim(t, e.store, old)
		sweep := t0.Add(2 * time.Second)
		taker := completeOp("k", 2, sweep).Record
		tx := e.begin()
		e.insertRecord(tx, taker)
		var n int
		var err error
		e.whileWaiting(func() { n, err = e.store.DeleteExpired(ctx, sweep, 10) }, e.commit(tx))
		if err != nil || n != 0 {
			t.Fatalf("DeleteExpired: got %d, %v, want 0, nil (the row was retaken)", n, err)
		}
		got, err := e.store.Get(ctx, taker.Hash, sweep)
		if err != nil {
			t.Fatalf("Get of the retaken record after the sweep: %v", err)
		}
		wantRecord(t, "retaken record", got, taker)
	})

	t.Run("CountAtLimitCommittedAfterItsSnapshot", func(t *testing.T) {
		e := newRaceEnv(t, dsn)
		key := hashOf("quota")
		exp := t0.Add(time.Hour)
		tx := e.begin()
		e.exec(tx, "INSERT INTO "+e.table("counters")+" (key, value, expires_at) VALUES ($1, 3, $2)", key[:], exp.UnixNano())
		var res spent.CountAnswer
		var err error
		e.whileWaiting(func() {
			res, err = e.store.Count(ctx, spent.CountOp{Key: key, Limit: 3, ExpiresAt: t0.Add(time.Minute), Now: t0})
		}, e.commit(tx))
		if err != nil || res.Added || res.Value != 3 || !res.ExpiresAt.Equal(exp) {
			t.Fatalf("Count: got %+v, %v, want value 3 at the limit, not added, expiring at %v", res, err, exp)
		}
	})
}
