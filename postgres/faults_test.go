package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/postgres"
	"github.com/spentledger/spent/storetest"
)

// faults injects errors with a real server: a trigger on the records table
// raises the SQLSTATE of fault_plan for the first fault_plan.times inserts
// it sees, and counts every insert it sees in a sequence (which a rollback
// does not take back).
type faults struct {
	tb     testing.TB
	dsn    string
	schema string
}

func injectFaults(tb testing.TB, dsn, schema string) *faults {
	tb.Helper()
	f := &faults{tb: tb, dsn: dsn, schema: schema}
	q := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	execSQL(tb, dsn, "CREATE SEQUENCE "+q("fault_calls"))
	execSQL(tb, dsn, "CREATE TABLE "+q("fault_plan")+" (code text NOT NULL, times bigint NOT NULL)")
	execSQL(tb, dsn, "INSERT INTO "+q("fault_plan")+" VALUES ('00000', 0)")
	execSQL(tb, dsn, `CREATE FUNCTION `+q("fault")+`() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	n bigint := nextval('`+q("fault_calls")+`');
	p record;
BEGIN
	SELECT * INTO p FROM `+q("fault_plan")+`;
	IF n <= p.times THEN
		RAISE EXCEPTION 'injected fault % of %', n, p.times USING ERRCODE = p.code;
	END IF;
	RETURN NEW;
END $$`)
	execSQL(tb, dsn, "CREATE TRIGGER fault BEFORE INSERT ON "+q("records")+" FOR EACH ROW EXECUTE FUNCTION "+q("fault")+"()")
	return f
}

// plan makes the next times inserts fail with code, and resets the count.
func (f *faults) plan(code string, times int) {
	f.tb.Helper()
	execSQL(f.tb, f.dsn, "UPDATE "+pgx.Identifier{f.schema, "fault_plan"}.Sanitize()+" SET code = $1, times = $2", code, times)
	execSQL(f.tb, f.dsn, "SELECT setval($1, 1, false)", f.schema+".fault_calls")
}

// calls returns how many inserts the trigger saw since the last plan.
func (f *faults) calls() int64 {
	f.tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		f.tb.Fatal(err)
	}
	defer conn.Close(ctx)
	var last int64
	var called bool
	if err := conn.QueryRow(ctx, "SELECT last_value, is_called FROM "+pgx.Identifier{f.schema, "fault_calls"}.Sanitize()).Scan(&last, &called); err != nil {
		f.tb.Fatal(err)
	}
	if !called {
		return 0
	}
	return last
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestServerFaults(t *testing.T) {
	dsn := pgtest.DSN(t)
	o := testOptions(t, dsn, freshSchema(t, dsn))
	o.MaxRetries = 3
	o.RetryBackoff = time.Millisecond
	s := MustOpen(t, o)
	f := injectFaults(t, dsn, o.Schema)
	ctx := context.Background()
	seq := uint64(0)
	op := func(key string) spent.ClaimOp {
		seq++
		return completeOp(key, seq, t0)
	}

	t.Run("SerializationFailureIsRetried", func(t *testing.T) {
		f.plan("40001", 2)
		res, err := s.Claim(ctx, op("retried"))
		if err != nil || !res.Inserted {
			t.Fatalf("Claim after two serialization failures: got %v, %v, want inserted", res.Inserted, err)
		}
		if got := f.calls(); got != 3 {
			t.Fatalf("attempts: got %d, want 3", got)
		}
	})

	t.Run("DeadlockIsRetried", func(t *testing.T) {
		f.plan("40P01", 1)
		res, err := s.Claim(ctx, op("deadlocked"))
		if err != nil || !res.Inserted {
			t.Fatalf("Claim after a deadlock: got %v, %v, want inserted", res.Inserted, err)
		}
		if got := f.calls(); got != 2 {
			t.Fatalf("attempts: got %d, want 2", got)
		}
	})

	t.Run("RetriesAreBounded", func(t *testing.T) {
		f.plan("40001", 1000)
		_, err := s.Claim(ctx, op("never"))
		if pgCode(err) != "40001" {
			t.Fatalf("Claim under endless serialization failures: got %v, want the 40001 error", err)
		}
		if got, want := f.calls(), int64(o.MaxRetries+1); got != want {
			t.Fatalf("attempts: got %d, want %d (1 + MaxRetries)", got, want)
		}
		if _, err := s.Get(ctx, hashOf("never"), t0); !errors.Is(err, spent.ErrNotFound) {
			t.Fatalf("Get after the failed claim: got %v, want ErrNotFound", err)
		}
	})

	t.Run("UnknownOutcomeIsReportedNotRetried", func(t *testing.T) {
		f.plan("40003", 1000)
		_, err := s.Claim(ctx, op("unknown"))
		if !errors.Is(err, postgres.ErrOutcomeUnknown) || pgCode(err) != "40003" {
			t.Fatalf("Claim answered 40003: got %v, want ErrOutcomeUnknown wrapping the 40003 error", err)
		}
		if got := f.calls(); got != 1 {
			t.Fatalf("attempts: got %d, want 1 (an unknown outcome is not retried)", got)
		}
	})

	t.Run("OtherErrorsAreNotRetried", func(t *testing.T) {
		f.plan("23514", 1000) // check_violation
		_, err := s.Claim(ctx, op("checked"))
		if pgCode(err) != "23514" || errors.Is(err, postgres.ErrOutcomeUnknown) {
			t.Fatalf("Claim answered 23514: got %v, want that error", err)
		}
		if got := f.calls(); got != 1 {
			t.Fatalf("attempts: got %d, want 1", got)
		}
	})

	t.Run("BatchIsRetriedWhole", func(t *testing.T) {
		f.plan("40001", 1)
		ops := make([]spent.ClaimOp, 20)
		for i := range ops {
			ops[i] = op("batch-" + string(rune('a'+i)))
		}
		res, err := s.ClaimBatch(ctx, ops)
		if err != nil {
			t.Fatalf("ClaimBatch after a serialization failure: %v", err)
		}
		for i := range res {
			if !res[i].Inserted || res[i].Record.Seq != ops[i].Record.Seq {
				t.Fatalf("ops[%d]: got inserted=%v seq %v, want inserted with %v", i, res[i].Inserted, res[i].Record.Seq, ops[i].Record.Seq)
			}
		}
		// The first attempt failed on its first insert; the second ran all.
		if got := f.calls(); got != 21 {
			t.Fatalf("inserts seen: got %d, want 21", got)
		}
	})

	t.Run("LedgerFailsClosedOnUnknownOutcome", func(t *testing.T) {
		f.plan("40003", 1000)
		cfg := spent.DefaultConfig()
		cfg.Secret = []byte("a test secret of at least 32 bytes!!")
		cfg.Node = 3
		cfg.Now = storetest.NewClock(t0).Now
		l, err := spent.NewLedger(ctx, s, cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Claim(ctx, spent.Claim{Namespace: "default", Key: "k", Result: []byte("r")})
		if spent.ErrorCode(err) != spent.EUnavailable {
			t.Fatalf("Ledger.Claim on 40003 with nothing written: got %v, %v, want an unavailable error (never fresh)", res.Outcome, err)
		}
	})
	f.plan("00000", 0)
}
