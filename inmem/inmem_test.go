package inmem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/storetest"
)

// TestStore runs the conformance suite. The harness keeps one store per
// directory and reopens it with Reopen; inmem keeps nothing across a
// process, so the crash test is skipped.
func TestStore(t *testing.T) {
	var dirs inmem.Dirs
	storetest.Run(t, storetest.Harness{
		Open:    func(tb testing.TB, dir string) spent.Store { return dirs.Open(dir) },
		NoCrash: true,
	})
}

func testRecord(key byte, now time.Time) spent.Record {
	return spent.Record{
		Namespace: "ns", Hash: spent.Hash{key}, FirstSeen: now, State: spent.StateComplete,
		Result: []byte("r"), ExpiresAt: now.Add(time.Hour), Seq: spent.Seq{Node: 1, Counter: uint64(key)},
	}
}

func TestReopenClosesOldStore(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	old := inmem.New()
	if _, err := old.Claim(ctx, spent.ClaimOp{Record: testRecord(1, now), Now: now}); err != nil {
		t.Fatal(err)
	}
	s := old.Reopen()
	if _, err := old.Get(ctx, spent.Hash{1}, now); !errors.Is(err, spent.ErrClosed) {
		t.Fatalf("Get on the old store: got %v, want %v", err, spent.ErrClosed)
	}
	// Closing the old store does not close the new one.
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, spent.Hash{1}, now); err != nil {
		t.Fatalf("Get on the reopened store: got %v, want the record", err)
	}
	if got := s.Len(); got != 1 {
		t.Fatalf("Len: got %d, want 1", got)
	}
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	boom := errors.New("boom")
	t.Run("BeforeWritesNothing", func(t *testing.T) {
		s := inmem.New()
		var ops []string
		s.SetFaults(inmem.Faults{Before: func(op string) error { ops = append(ops, op); return boom }})
		if _, err := s.Claim(ctx, spent.ClaimOp{Record: testRecord(1, now), Now: now}); !errors.Is(err, boom) {
			t.Fatalf("Claim: got %v, want %v", err, boom)
		}
		s.SetFaults(inmem.Faults{})
		if got := s.Len(); got != 0 {
			t.Fatalf("Len: got %d, want 0", got)
		}
		if len(ops) != 1 || ops[0] != "claim" {
			t.Fatalf("hooked operations: got %v, want [claim]", ops)
		}
	})
	t.Run("AfterWritesThenFails", func(t *testing.T) {
		s := inmem.New()
		s.SetFaults(inmem.Faults{After: func(op string) error { return boom }})
		if _, err := s.Claim(ctx, spent.ClaimOp{Record: testRecord(1, now), Now: now}); !errors.Is(err, boom) {
			t.Fatalf("Claim: got %v, want %v", err, boom)
		}
		s.SetFaults(inmem.Faults{})
		if _, err := s.Get(ctx, spent.Hash{1}, now); err != nil {
			t.Fatalf("Get after an ambiguous Claim: got %v, want the record", err)
		}
	})
}
