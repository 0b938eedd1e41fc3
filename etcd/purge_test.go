package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/etcd"
	"github.com/spentledger/spent/storetest"
)

// TestPurge checks what the conformance suite does not see of Purge: it
// walks many pages from call to call (round to the start in the call that
// finds what is left), deletes in transactions of MaxTxnOps operations,
// deletes the pending-index entries of what it purges and no lease, deletes
// records completed while it runs, and leaves alone the records of a store
// under another prefix.
func TestPurge(t *testing.T) {
	ctx := context.Background()
	opts := testOptions(t, prefixFor(t.TempDir()))
	opts.MaxTxnOps = 6 // a claim takes up to five; a purged pending record three
	s := MustOpen(t, opts)
	other := MustOpen(t, testOptions(t, prefixFor(t.TempDir())))
	exp := t0.Add(time.Hour)
	var pendingA []spent.Record
	write := func(st *etcd.Store, ns string, n int, seq uint64) []spent.Hash {
		t.Helper()
		var ops []spent.ClaimOp
		for i := range n {
			key := fmt.Sprintf("%s %d %d", ns, seq, i)
			op := completeOp(key, seq+uint64(i), t0, exp)
			if i%4 == 0 {
				op = pendingOp(ns, key, seq+uint64(i), t0, t0.Add(time.Minute), exp)
			}
			op.Record.Namespace = ns
			ops = append(ops, op)
		}
		res, err := st.ClaimBatch(ctx, ops)
		if err != nil {
			t.Fatal(err)
		}
		hs := make([]spent.Hash, n)
		for i, r := range res {
			if !r.Inserted {
				t.Fatalf("op %d: got not inserted, want inserted", i)
			}
			hs[i] = r.Record.Hash
			if st == s && ns == "A" && r.Record.State == spent.StatePending {
				pendingA = append(pendingA, r.Record)
			}
		}
		return hs
	}
	count := func(prefix string) int64 {
		resp, err := s.Client().Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	purged := write(s, "A", 700, 1)
	kept := write(s, "B", 300, 10000)
	elsewhere := write(other, "A", 20, 1)
	leases := count(opts.Prefix + "l/")

	// Complete A's pending records while the purge runs: each is then
	// deleted as read, or read again and deleted once completed.
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, r := range pendingA[:100] {
			_, err := s.Complete(ctx, r.Hash, r.Seq, []byte("done"), t0)
			if err != nil && !errors.Is(err, spent.ErrNotFound) {
				t.Errorf("Complete during Purge: %v", err)
			}
		}
	})
	var got []int
	for {
		n, err := s.Purge(ctx, "A", 250)
		if err != nil {
			t.Fatalf("Purge: %v", err)
		}
		got = append(got, n)
		if len(got) == 1 {
			// Records written after the first call, some of them
			// behind where it stopped.
			purged = append(purged, write(s, "A", 40, 20000)...)
		}
		if n < 250 || len(got) > 10 {
			break
		}
	}
	wg.Wait()
	if fmt.Sprint(got) != "[250 250 240]" {
		t.Fatalf("Purge of 740 records in calls of 250: got %v, want [250 250 240]", got)
	}
	if n, err := s.Purge(ctx, "A", 250); err != nil || n != 0 {
		t.Fatalf("Purge once more: got %d, %v, want 0, nil", n, err)
	}
	if n := storetest.Missing(t, s, purged, t0); n != len(purged) {
		t.Fatalf("records of A gone after Purge: %d, want %d", n, len(purged))
	}
	if n := storetest.Missing(t, s, kept, t0); n != 0 {
		t.Fatalf("records of B gone after purging A: %d, want 0", n)
	}
	if n := storetest.Missing(t, other, elsewhere, t0); n != 0 {
		t.Fatalf("records of A under another prefix gone: %d, want 0", n)
	}
	// hex("A") is 41, hex("B") 42.
	if n := count(opts.Prefix + "p/41/"); n != 0 {
		t.Fatalf("pending-index entries of A after Purge: got %d, want 0", n)
	}
	if n := count(opts.Prefix + "p/42/"); n != 75 {
		t.Fatalf("pending-index entries of B after purging A: got %d, want 75", n)
	}
	if n := count(opts.Prefix + "l/"); n != leases {
		t.Fatalf("lease keys after Purge: got %d, want the %d before", n, leases)
	}
}
