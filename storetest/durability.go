package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// testDurability checks that closing and reopening the store keeps
// everything (invariant 2 in docs/concepts.md): records, states, results
// and seqs, and that seq blocks are never handed out twice.
func testDurability(t *testing.T, h Harness) {
	t.Run("ReopenKeepsEverything", func(t *testing.T) {
		e := newEnv(t, h)
		rng := newRand(t)
		t0 := e.clock.Now()
		blob := make([]byte, 3000)
		rng.Read(blob)
		blob[0], blob[1500] = 0, 0

		type kept struct{ ns, key string }
		var keys []kept
		claim := func(c spent.Claim) spent.Answer {
			t.Helper()
			keys = append(keys, kept{c.Namespace, c.Key})
			return e.claimWant(c, spent.Fresh)
		}
		claim(oneStep(nsEchoHold, "one-step", blob))
		claim(oneStep(nsRefuseRetake, "ticket", []byte("admitted")))
		claim(oneStep(nsEchoRetake, "empty", []byte{}))
		pending := claim(twoStep(nsEchoRetake, "pending"))
		held := claim(twoStep(nsEchoHold, "held"))
		done := claim(twoStep(nsRefuseHold, "completed"))
		_, err := e.complete(spent.Completion{Namespace: nsRefuseHold, Key: "completed", Seq: done.Record.Seq, Result: []byte("done")})
		wantCode(t, "Complete", err, "")
		c := oneStep(nsEchoRetake, "long", []byte("long-lived"))
		c.ExpiresAt = t0.Add(30 * time.Minute)
		claim(c)
		rel := e.claimWant(twoStep(nsEchoHold, "released"), spent.Fresh)
		wantCode(t, "Release", e.release(spent.Release{Namespace: nsEchoHold, Key: "released", Seq: rel.Record.Seq}), "")
		for i := range 2 * testSeqBlock {
			claim(oneStep(nsRefuseHold, "bulk-"+itoa(i), []byte{byte(i)}))
		}
		// Seq blocks reserved straight from the store.
		ctx := context.Background()
		const node, n = 42, 10
		first, err := e.store.ReserveSeq(ctx, node, n)
		if err != nil {
			t.Fatalf("ReserveSeq: %v", err)
		}
		e.clock.Advance(time.Second)

		saved := map[kept]spent.Record{}
		var maxSeq spent.Seq
		for _, k := range keys {
			r, err := e.get(k.ns, k.key)
			wantCode(t, "Get "+k.key, err, "")
			saved[k] = r
			if maxSeq.Less(r.Seq) {
				maxSeq = r.Seq
			}
		}
		if maxSeq.Less(rel.Record.Seq) {
			maxSeq = rel.Record.Seq
		}

		for reopen := range 2 {
			e.reopen()
			for _, k := range keys {
				r, err := e.get(k.ns, k.key)
				wantCode(t, "Get "+k.key+" after reopen", err, "")
				checkRecord(t, k.key+" after reopen "+itoa(reopen), r, saved[k])
			}
			_, err := e.get(nsEchoHold, "released")
			wantCode(t, "Get of the released key after reopen", err, spent.ENotFound)
		}

		res := e.claimWant(oneStep(nsEchoHold, "one-step", nil), spent.Replayed)
		checkRecord(t, "replay after reopen", res.Record, saved[kept{nsEchoHold, "one-step"}])
		e.claimWant(oneStep(nsRefuseRetake, "ticket", nil), spent.Refused)
		e.claimWant(twoStep(nsEchoRetake, "pending"), spent.InProgress)
		e.claimWant(twoStep(nsRefuseHold, "completed"), spent.Refused)

		// The holder finishes its claim after the restart.
		_, err = e.complete(spent.Completion{Namespace: nsEchoRetake, Key: "pending", Seq: pending.Record.Seq, Result: []byte("late")})
		wantCode(t, "Complete after reopen", err, "")
		// New claims never reuse a seq from before the restart.
		fresh := e.claimWant(twoStep(nsEchoHold, "new"), spent.Fresh)
		if !maxSeq.Less(fresh.Record.Seq) {
			t.Fatalf("seq after reopen: got %v, want one after %v", fresh.Record.Seq, maxSeq)
		}
		// ReserveSeq never repeats a block.
		again, err := e.store.ReserveSeq(ctx, node, n)
		if err != nil {
			t.Fatalf("ReserveSeq after reopen: %v", err)
		}
		if again < first+n {
			t.Fatalf("ReserveSeq after reopen: got first %d, want at least %d (the block [%d, %d) was given before)", again, first+n, first, first+n)
		}
		// The hold record outlives its lease as an unknown outcome.
		e.clock.Set(t0.Add(testLease))
		recs := e.unknown(nsEchoHold, 0)
		if len(recs) != 1 || recs[0].Seq != held.Record.Seq {
			t.Fatalf("Unknown after reopen: got %v, want [%v]", seqs(recs), held.Record.Seq)
		}
		// And expiry still applies to what was reopened.
		e.clock.Set(t0.Add(testRetention))
		_, err = e.get(nsEchoHold, "one-step")
		wantCode(t, "Get at expires_at after reopen", err, spent.ENotFound)
		r, err := e.get(nsEchoRetake, "long")
		wantCode(t, "Get of the long-lived record", err, "")
		checkRecord(t, "long-lived record", r, saved[kept{nsEchoRetake, "long"}])
	})

	t.Run("ReserveSeqNeverRepeatsAcrossReopen", func(t *testing.T) {
		e := newEnv(t, h)
		ctx := context.Background()
		var blocks []seqBlock
		for round := range 4 {
			for node := uint32(1); node <= 3; node++ {
				n := uint64(1 + round*7 + int(node))
				first, err := e.store.ReserveSeq(ctx, node, n)
				if err != nil {
					t.Fatalf("ReserveSeq: %v", err)
				}
				blocks = append(blocks, seqBlock{node, first, n})
			}
			e.reopen()
		}
		checkDisjoint(t, blocks)
	})
}

// seqBlock is a block [first, first+n) of counters reserved for node.
type seqBlock struct {
	node  uint32
	first uint64
	n     uint64
}

// checkDisjoint fails the test when two blocks of one node overlap.
func checkDisjoint(tb testing.TB, blocks []seqBlock) {
	tb.Helper()
	for i, a := range blocks {
		for _, b := range blocks[i+1:] {
			if a.node == b.node && a.first < b.first+b.n && b.first < a.first+a.n {
				tb.Fatalf("node %d: got blocks [%d, %d) and [%d, %d), want disjoint blocks",
					a.node, a.first, a.first+a.n, b.first, b.first+b.n)
			}
		}
	}
}
