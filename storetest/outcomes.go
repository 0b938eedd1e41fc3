package storetest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// testClaim checks every outcome of a claim in both modes.
func testClaim(t *testing.T, h Harness) {
	t.Run("OneStepIsFresh", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			now := e.clock.Now()
			res := e.claimWant(oneStep(ns, "k", []byte("result")), spent.Fresh)
			want := spent.Record{
				Namespace: ns, Hash: e.hash(ns, "k"), FirstSeen: now, Place: "gate-1",
				Fingerprint: fpA, State: spent.StateComplete, Result: []byte("result"),
				ExpiresAt: now.Add(testRetention), Seq: res.Record.Seq,
			}
			if ns == nsEchoHold {
				want.RawKey = "k"
			}
			checkRecord(t, "fresh record", res.Record, want)
			if res.Record.Seq.Node != testNode {
				t.Fatalf("seq node: got %v, want %v", res.Record.Seq.Node, testNode)
			}
			if res.Unknown || res.RetryAfter != 0 {
				t.Fatalf("Unknown, RetryAfter: got %v, %v, want false, 0", res.Unknown, res.RetryAfter)
			}
			got, err := e.get(ns, "k")
			wantCode(t, "Get", err, "")
			checkRecord(t, "Get", got, want)
		})
	})

	t.Run("TwoStepIsFresh", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			now := e.clock.Now()
			res := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			want := spent.Record{
				Namespace: ns, Hash: e.hash(ns, "k"), FirstSeen: now, Place: "gate-1",
				Fingerprint: fpA, State: spent.StatePending, ExpiresAt: now.Add(testRetention),
				LeaseUntil: now.Add(testLease), Seq: res.Record.Seq,
			}
			if ns == nsEchoHold {
				want.RawKey = "k"
			}
			checkRecord(t, "fresh record", res.Record, want)
			got, err := e.get(ns, "k")
			wantCode(t, "Get", err, "")
			checkRecord(t, "Get", got, want)
		})
	})

	t.Run("FreshSeqsIncrease", func(t *testing.T) {
		e := newEnv(t, h)
		var last spent.Seq
		for i := range 5 * testSeqBlock {
			ns := allNamespaces[i%len(allNamespaces)]
			res := e.claimWant(oneStep(ns, "k"+itoa(i), nil), spent.Fresh)
			if i > 0 && !last.Less(res.Record.Seq) {
				t.Fatalf("claim %d: got seq %v after %v, want an increasing seq", i, res.Record.Seq, last)
			}
			last = res.Record.Seq
		}
	})

	t.Run("EchoRepeatIsReplayed", func(t *testing.T) {
		forEachNamespace(t, []string{nsEchoHold, nsEchoRetake}, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			first := e.claimWant(oneStep(ns, "k", []byte("first result")), spent.Fresh)
			e.clock.Advance(time.Second)
			again := oneStep(ns, "k", []byte("another result"))
			again.Place = "gate-2"
			res := e.claimWant(again, spent.Replayed)
			checkRecord(t, "replayed record", res.Record, first.Record)
		})
	})

	t.Run("EchoOtherFingerprintIsMismatch", func(t *testing.T) {
		forEachNamespace(t, []string{nsEchoHold, nsEchoRetake}, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			first := e.claimWant(oneStep(ns, "k", []byte("secret result")), spent.Fresh)
			for _, fp := range [][]byte{fpB, nil} {
				c := oneStep(ns, "k", []byte("x"))
				c.Fingerprint = fp
				res := e.claimWant(c, spent.Mismatch)
				if res.Record.Seq != first.Record.Seq {
					t.Fatalf("mismatch seq: got %v, want %v", res.Record.Seq, first.Record.Seq)
				}
				if len(res.Record.Result) != 0 {
					t.Fatalf("mismatch discloses the result: got %q, want none", res.Record.Result)
				}
			}
			// A mismatch changes nothing: the right fingerprint still replays.
			res := e.claimWant(oneStep(ns, "k", nil), spent.Replayed)
			if !bytes.Equal(res.Record.Result, []byte("secret result")) {
				t.Fatalf("result: got %q, want %q", res.Record.Result, "secret result")
			}
			// A claim without fingerprint is matched only by claims without one.
			c := oneStep(ns, "nofp", []byte("r"))
			c.Fingerprint = nil
			e.claimWant(c, spent.Fresh)
			e.claimWant(c, spent.Replayed)
			e.claimWant(oneStep(ns, "nofp", []byte("r")), spent.Mismatch)
		})
	})

	t.Run("RefuseRepeatIsRefused", func(t *testing.T) {
		forEachNamespace(t, []string{nsRefuseHold, nsRefuseRetake}, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			t0 := e.clock.Now()
			first := e.claimWant(oneStep(ns, "ticket", []byte("admitted")), spent.Fresh)
			e.clock.Advance(90 * time.Millisecond)
			for _, fp := range [][]byte{fpA, fpB, nil} {
				c := oneStep(ns, "ticket", []byte("admitted"))
				c.Fingerprint, c.Place = fp, "gate-2"
				res := e.claimWant(c, spent.Refused)
				if !res.Record.FirstSeen.Equal(t0) || res.Record.Place != "gate-1" {
					t.Fatalf("refused: got first seen %v at %q, want %v at %q", res.Record.FirstSeen, res.Record.Place, t0, "gate-1")
				}
				if res.Record.Seq != first.Record.Seq {
					t.Fatalf("refused seq: got %v, want %v", res.Record.Seq, first.Record.Seq)
				}
				if len(res.Record.Result) != 0 {
					t.Fatalf("refused discloses the result: got %q, want none", res.Record.Result)
				}
			}
		})
	})

	t.Run("PendingRepeatIsInProgress", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			first := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			e.clock.Advance(2 * time.Second)
			res := e.claimWant(twoStep(ns, "k"), spent.InProgress)
			if res.RetryAfter != testLease-2*time.Second || res.Unknown {
				t.Fatalf("RetryAfter, Unknown: got %v, %v, want %v, false", res.RetryAfter, res.Unknown, testLease-2*time.Second)
			}
			checkRecord(t, "in-progress record", res.Record, first.Record)
			// A one-step repeat waits as well, and writes nothing.
			e.claimWant(oneStep(ns, "k", []byte("r")), spent.InProgress)
			if !isEcho(ns) {
				c := twoStep(ns, "k")
				c.Fingerprint = fpB
				e.claimWant(c, spent.InProgress)
			}
		})
	})

	t.Run("EchoPendingOtherFingerprintIsMismatch", func(t *testing.T) {
		forEachNamespace(t, []string{nsEchoHold, nsEchoRetake}, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			e.claimWant(twoStep(ns, "k"), spent.Fresh)
			c := twoStep(ns, "k")
			c.Fingerprint = fpB
			e.claimWant(c, spent.Mismatch)
		})
	})

	t.Run("PerClaimExpiresAt", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			t0 := e.clock.Now()
			exp := t0.Add(10*time.Minute + 7)
			c := oneStep(ns, "long", []byte("r"))
			c.ExpiresAt = exp
			res := e.claimWant(c, spent.Fresh)
			if !res.Record.ExpiresAt.Equal(exp) {
				t.Fatalf("expires_at: got %v, want %v", res.Record.ExpiresAt, exp)
			}
			// Outlives the namespace's retention.
			e.clock.Set(t0.Add(2 * testRetention))
			e.claimWant(oneStep(ns, "long", []byte("r")), secondAnswer(ns))
			e.clock.Set(exp)
			e.claimWant(oneStep(ns, "long", []byte("r")), spent.Fresh)

			// A per-claim expiry before the lease would end cuts the lease short.
			e.clock.Set(t0)
			short := twoStep(ns, "short")
			short.ExpiresAt = t0.Add(2 * time.Second)
			res = e.claimWant(short, spent.Fresh)
			if !res.Record.LeaseUntil.Equal(short.ExpiresAt) || !res.Record.ExpiresAt.Equal(short.ExpiresAt) {
				t.Fatalf("lease_until, expires_at: got %v, %v, want both %v", res.Record.LeaseUntil, res.Record.ExpiresAt, short.ExpiresAt)
			}

			// An expiry that is not in the future is refused.
			for _, at := range []time.Time{t0, t0.Add(-time.Nanosecond)} {
				c := oneStep(ns, "past", []byte("r"))
				c.ExpiresAt = at
				_, err := e.svc.Claim(context.Background(), c)
				wantCode(t, "Claim expiring at "+at.Sub(t0).String(), err, spent.EInvalid)
			}
			_, err := e.get(ns, "past")
			wantCode(t, "Get after refused claims", err, spent.ENotFound)
		})
	})

	t.Run("NamespacesAreSeparate", func(t *testing.T) {
		e := newEnv(t, h)
		seen := map[spent.Hash]string{}
		for _, ns := range allNamespaces {
			res := e.claimWant(oneStep(ns, "same key", []byte(ns)), spent.Fresh)
			if other, ok := seen[res.Record.Hash]; ok {
				t.Fatalf("hash of %q in %s: got the hash of %s, want a distinct hash", "same key", ns, other)
			}
			seen[res.Record.Hash] = ns
		}
		for _, ns := range allNamespaces {
			r, err := e.get(ns, "same key")
			wantCode(t, "Get", err, "")
			if r.Namespace != ns || string(r.Result) != ns {
				t.Fatalf("Get(%s): got namespace %q result %q, want %q, %q", ns, r.Namespace, r.Result, ns, ns)
			}
		}
	})

	t.Run("UnknownNamespaceIsRejected", func(t *testing.T) {
		e := newEnv(t, h)
		ctx := context.Background()
		const ns = "nowhere"
		_, err := e.svc.Claim(ctx, oneStep(ns, "k", nil))
		wantCode(t, "Claim", err, spent.EUnknownNamespace)
		_, err = e.svc.ClaimBatch(ctx, []spent.Claim{oneStep(nsEchoHold, "k", nil), oneStep(ns, "k", nil)})
		wantCode(t, "ClaimBatch", err, spent.EUnknownNamespace)
		_, err = e.svc.Get(ctx, ns, "k")
		wantCode(t, "Get", err, spent.EUnknownNamespace)
		_, err = e.svc.Complete(ctx, spent.Completion{Namespace: ns, Key: "k", Result: []byte("r")})
		wantCode(t, "Complete", err, spent.EUnknownNamespace)
		err = e.svc.Release(ctx, spent.Release{Namespace: ns, Key: "k"})
		wantCode(t, "Release", err, spent.EUnknownNamespace)
		_, err = e.svc.Unknown(ctx, ns, 10)
		wantCode(t, "Unknown", err, spent.EUnknownNamespace)
		_, err = e.get(nsEchoHold, "k")
		wantCode(t, "Get after rejected batch", err, spent.ENotFound)
	})

	t.Run("LimitsAreEnforced", func(t *testing.T) {
		e := newEnv(t, h)
		ctx := context.Background()
		e.claimWant(oneStep(nsEchoHold, strings.Repeat("k", spent.MaxKeyLen), nil), spent.Fresh)
		cases := []struct {
			name string
			c    spent.Claim
			want string
		}{
			{"KeyTooLong", oneStep(nsEchoHold, strings.Repeat("k", spent.MaxKeyLen+1), nil), spent.EKeyTooLong},
			{"EmptyKey", oneStep(nsEchoHold, "", nil), spent.EInvalid},
			{"ShortFingerprint", spent.Claim{Namespace: nsEchoHold, Key: "k", Fingerprint: fpA[:31]}, spent.EInvalid},
			{"LongFingerprint", spent.Claim{Namespace: nsEchoHold, Key: "k", Fingerprint: append(fpA[:32:32], 0)}, spent.EInvalid},
			{"ResultTooLarge", oneStep(nsEchoHold, "k", make([]byte, testMaxResult+1)), spent.ETooLarge},
		}
		for _, tc := range cases {
			_, err := e.svc.Claim(ctx, tc.c)
			wantCode(t, tc.name, err, tc.want)
		}
		_, err := e.get(nsEchoHold, "k")
		wantCode(t, "Get after rejected claims", err, spent.ENotFound)
		res := e.claimWant(oneStep(nsEchoHold, "max", make([]byte, testMaxResult)), spent.Fresh)
		if len(res.Record.Result) != testMaxResult {
			t.Fatalf("result size: got %d, want %d", len(res.Record.Result), testMaxResult)
		}
	})

	t.Run("BatchAnswersInOrder", func(t *testing.T) {
		e := newEnv(t, h)
		other := oneStep(nsEchoHold, "k1", []byte("other"))
		other.Fingerprint = fpB
		cs := []spent.Claim{
			oneStep(nsEchoHold, "k1", []byte("r1")),
			twoStep(nsRefuseHold, "k2"),
			oneStep(nsEchoHold, "k1", []byte("ignored")),
			other,
			twoStep(nsRefuseHold, "k2"),
			oneStep(nsRefuseRetake, "k3", []byte("r3")),
			oneStep(nsRefuseRetake, "k3", []byte("r3")),
		}
		want := []spent.Outcome{spent.Fresh, spent.Fresh, spent.Replayed, spent.Mismatch, spent.InProgress, spent.Fresh, spent.Refused}
		res, err := e.svc.ClaimBatch(context.Background(), cs)
		wantCode(t, "ClaimBatch", err, "")
		if len(res) != len(want) {
			t.Fatalf("results: got %d, want %d", len(res), len(want))
		}
		for i := range want {
			if res[i].Outcome != want[i] {
				t.Fatalf("claims[%d]: got %v, want %v", i, res[i].Outcome, want[i])
			}
		}
		if string(res[2].Record.Result) != "r1" || res[2].Record.Seq != res[0].Record.Seq {
			t.Fatalf("claims[2]: got %q from %v, want %q from %v", res[2].Record.Result, res[2].Record.Seq, "r1", res[0].Record.Seq)
		}
		r, err := e.get(nsEchoHold, "k1")
		wantCode(t, "Get", err, "")
		checkRecord(t, "Get after batch", r, res[0].Record)
		_, err = e.svc.ClaimBatch(context.Background(), nil)
		wantCode(t, "empty ClaimBatch", err, "")
	})
}

// testComplete checks Complete and its error codes.
func testComplete(t *testing.T, h Harness) {
	t.Run("CompleteStoresResult", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			first := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			e.clock.Advance(time.Second)
			got, err := e.complete(spent.Completion{Namespace: ns, Key: "k", Seq: first.Record.Seq, Result: []byte("done")})
			wantCode(t, "Complete", err, "")
			want := first.Record
			want.State, want.Result, want.LeaseUntil = spent.StateComplete, []byte("done"), time.Time{}
			checkRecord(t, "completed record", got, want)
			res := e.claimWant(twoStep(ns, "k"), secondAnswer(ns))
			if isEcho(ns) {
				checkRecord(t, "replayed record", res.Record, want)
			} else if res.Record.Seq != want.Seq {
				t.Fatalf("refused seq: got %v, want %v", res.Record.Seq, want.Seq)
			}
			r, err := e.get(ns, "k")
			wantCode(t, "Get", err, "")
			checkRecord(t, "Get", r, want)
		})
	})

	t.Run("CompleteWithoutSeqWhileLeaseRuns", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			e.claimWant(twoStep(ns, "k"), spent.Fresh)
			e.clock.Advance(testLease - time.Nanosecond)
			_, err := e.complete(spent.Completion{Namespace: ns, Key: "k", Result: []byte("done")})
			wantCode(t, "Complete", err, "")
			e.claimWant(twoStep(ns, "k"), secondAnswer(ns))
		})
	})

	t.Run("NotFound", func(t *testing.T) {
		e := newEnv(t, h)
		_, err := e.complete(spent.Completion{Namespace: nsEchoHold, Key: "never", Result: []byte("r")})
		wantCode(t, "Complete of an unclaimed key", err, spent.ENotFound)
		_, err = e.complete(spent.Completion{Namespace: nsEchoHold, Hash: e.hash(nsEchoHold, "never"), Force: true, Result: []byte("r")})
		wantCode(t, "forced Complete of an unclaimed hash", err, spent.ENotFound)
		res := e.claimWant(twoStep(nsEchoHold, "k"), spent.Fresh)
		e.clock.Advance(testRetention)
		_, err = e.complete(spent.Completion{Namespace: nsEchoHold, Key: "k", Seq: res.Record.Seq, Result: []byte("r")})
		wantCode(t, "Complete after expiry", err, spent.ENotFound)
		// The record of another namespace is not addressed by its hash.
		e.claimWant(twoStep(nsEchoRetake, "k"), spent.Fresh)
		_, err = e.complete(spent.Completion{Namespace: nsEchoHold, Hash: e.hash(nsEchoRetake, "k"), Force: true, Result: []byte("r")})
		wantCode(t, "Complete of another namespace's hash", err, spent.ENotFound)
	})

	t.Run("NotPending", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			one := e.claimWant(oneStep(ns, "one", []byte("r")), spent.Fresh)
			_, err := e.complete(spent.Completion{Namespace: ns, Key: "one", Seq: one.Record.Seq, Result: []byte("other")})
			wantCode(t, "Complete of a one-step record with other bytes", err, spent.ENotPending)
			// The same seq and bytes again is a retried completion: success.
			_, err = e.complete(spent.Completion{Namespace: ns, Key: "one", Seq: one.Record.Seq, Result: []byte("r")})
			wantCode(t, "Complete of a one-step record with its own bytes", err, "")
			two := e.claimWant(twoStep(ns, "two"), spent.Fresh)
			_, err = e.complete(spent.Completion{Namespace: ns, Key: "two", Seq: two.Record.Seq, Result: []byte("first")})
			wantCode(t, "first Complete", err, "")
			_, err = e.complete(spent.Completion{Namespace: ns, Key: "two", Seq: two.Record.Seq, Result: []byte("second")})
			wantCode(t, "second Complete", err, spent.ENotPending)
			r, err := e.get(ns, "two")
			wantCode(t, "Get", err, "")
			if string(r.Result) != "first" {
				t.Fatalf("result after a refused second Complete: got %q, want %q", r.Result, "first")
			}
		})
	})

	t.Run("SeqMismatch", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			res := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			wrong := res.Record.Seq
			wrong.Counter += 1000
			_, err := e.complete(spent.Completion{Namespace: ns, Key: "k", Seq: wrong, Result: []byte("r")})
			wantCode(t, "Complete with another seq", err, spent.ESeqMismatch)
			r, err := e.get(ns, "k")
			wantCode(t, "Get", err, "")
			checkRecord(t, "record after a refused Complete", r, res.Record)
		})
	})

	t.Run("LeaseExpiredWithoutSeq", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			res := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			e.clock.Advance(testLease)
			_, err := e.complete(spent.Completion{Namespace: ns, Key: "k", Result: []byte("r")})
			wantCode(t, "Complete without seq after the lease", err, spent.ELeaseExpired)
			r, err := e.get(ns, "k")
			wantCode(t, "Get", err, "")
			checkRecord(t, "record after a refused Complete", r, res.Record)
			// The holder's seq still completes it.
			_, err = e.complete(spent.Completion{Namespace: ns, Key: "k", Seq: res.Record.Seq, Result: []byte("r")})
			wantCode(t, "Complete with the holder's seq after the lease", err, "")
		})
	})

	t.Run("ForceByOperator", func(t *testing.T) {
		forEachNamespace(t, []string{nsEchoHold, nsRefuseHold}, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			e.claimWant(twoStep(ns, "k"), spent.Fresh)
			e.clock.Advance(testLease + time.Second)
			rec, err := e.complete(spent.Completion{Namespace: ns, Hash: e.hash(ns, "k"), Force: true, Result: []byte("resolved")})
			wantCode(t, "forced Complete by hash", err, "")
			if rec.State != spent.StateComplete || string(rec.Result) != "resolved" {
				t.Fatalf("forced Complete: got %v %q, want complete %q", rec.State, rec.Result, "resolved")
			}
			res := e.claimWant(twoStep(ns, "k"), secondAnswer(ns))
			if isEcho(ns) && string(res.Record.Result) != "resolved" {
				t.Fatalf("replayed result: got %q, want %q", res.Record.Result, "resolved")
			}
		})
	})

	t.Run("NeitherKeyNorHash", func(t *testing.T) {
		e := newEnv(t, h)
		_, err := e.complete(spent.Completion{Namespace: nsEchoHold, Force: true, Result: []byte("r")})
		wantCode(t, "Complete", err, spent.EInvalid)
		err = e.release(spent.Release{Namespace: nsEchoHold, Force: true})
		wantCode(t, "Release", err, spent.EInvalid)
	})

	t.Run("ResultTooLarge", func(t *testing.T) {
		e := newEnv(t, h)
		res := e.claimWant(twoStep(nsEchoHold, "k"), spent.Fresh)
		_, err := e.complete(spent.Completion{Namespace: nsEchoHold, Key: "k", Seq: res.Record.Seq, Result: make([]byte, testMaxResult+1)})
		wantCode(t, "Complete", err, spent.ETooLarge)
		e.claimWant(twoStep(nsEchoHold, "k"), spent.InProgress)
	})
}

// testRelease checks Release and its error codes.
func testRelease(t *testing.T, h Harness) {
	t.Run("ReleaseMakesKeyFresh", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			first := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			wantCode(t, "Release", e.release(spent.Release{Namespace: ns, Key: "k", Seq: first.Record.Seq}), "")
			_, err := e.get(ns, "k")
			wantCode(t, "Get after Release", err, spent.ENotFound)
			second := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			if second.Record.Seq == first.Record.Seq {
				t.Fatalf("seq after Release: got %v again, want a new one", second.Record.Seq)
			}
			wantCode(t, "Release with the old seq", e.release(spent.Release{Namespace: ns, Key: "k", Seq: first.Record.Seq}), spent.ESeqMismatch)
			// Without a seq while the lease runs.
			wantCode(t, "Release without seq", e.release(spent.Release{Namespace: ns, Key: "k"}), "")
			e.claimWant(oneStep(ns, "k", []byte("r")), spent.Fresh)
		})
	})

	t.Run("NotFound", func(t *testing.T) {
		e := newEnv(t, h)
		wantCode(t, "Release of an unclaimed key", e.release(spent.Release{Namespace: nsEchoRetake, Key: "never"}), spent.ENotFound)
		res := e.claimWant(twoStep(nsEchoRetake, "k"), spent.Fresh)
		wantCode(t, "Release", e.release(spent.Release{Namespace: nsEchoRetake, Key: "k", Seq: res.Record.Seq}), "")
		wantCode(t, "second Release", e.release(spent.Release{Namespace: nsEchoRetake, Key: "k", Seq: res.Record.Seq}), spent.ENotFound)
	})

	t.Run("NotPending", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			one := e.claimWant(oneStep(ns, "k", []byte("r")), spent.Fresh)
			wantCode(t, "Release of a complete record", e.release(spent.Release{Namespace: ns, Key: "k", Seq: one.Record.Seq}), spent.ENotPending)
			e.claimWant(oneStep(ns, "k", []byte("r")), secondAnswer(ns))
		})
	})

	t.Run("SeqMismatch", func(t *testing.T) {
		e := newEnv(t, h)
		res := e.claimWant(twoStep(nsRefuseHold, "k"), spent.Fresh)
		wrong := res.Record.Seq
		wrong.Counter++
		wantCode(t, "Release with another seq", e.release(spent.Release{Namespace: nsRefuseHold, Key: "k", Seq: wrong}), spent.ESeqMismatch)
		e.claimWant(twoStep(nsRefuseHold, "k"), spent.InProgress)
	})

	t.Run("LeaseExpiredWithoutSeq", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			res := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			e.clock.Advance(testLease)
			wantCode(t, "Release without seq after the lease", e.release(spent.Release{Namespace: ns, Key: "k"}), spent.ELeaseExpired)
			r, err := e.get(ns, "k")
			wantCode(t, "Get", err, "")
			checkRecord(t, "record after a refused Release", r, res.Record)
		})
	})

	t.Run("ForceByOperator", func(t *testing.T) {
		forEachNamespace(t, []string{nsEchoHold, nsRefuseHold}, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			e.claimWant(twoStep(ns, "k"), spent.Fresh)
			e.clock.Advance(testLease)
			wantCode(t, "forced Release by hash", e.release(spent.Release{Namespace: ns, Hash: e.hash(ns, "k"), Force: true}), "")
			e.claimWant(twoStep(ns, "k"), spent.Fresh)
		})
	})
}

// testLeases checks lease expiry under retake and hold.
func testLeases(t *testing.T, h Harness) {
	t.Run("RetakeAfterLease", func(t *testing.T) {
		forEachNamespace(t, []string{nsEchoRetake, nsRefuseRetake}, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			t0 := e.clock.Now()
			a := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			e.clock.Set(t0.Add(testLease - time.Nanosecond))
			res := e.claimWant(twoStep(ns, "k"), spent.InProgress)
			if res.Unknown || res.RetryAfter <= 0 || res.RetryAfter > time.Second {
				t.Fatalf("1ns before the lease ends: got Unknown %v, RetryAfter %v, want false and (0, 1s]", res.Unknown, res.RetryAfter)
			}
			t1 := e.clock.Advance(time.Nanosecond)
			b := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			if b.Record.Seq == a.Record.Seq || !b.Record.FirstSeen.Equal(t1) || !b.Record.LeaseUntil.Equal(t1.Add(testLease)) {
				t.Fatalf("retaken record: got seq %v first seen %v lease until %v, want a new seq, %v, %v",
					b.Record.Seq, b.Record.FirstSeen, b.Record.LeaseUntil, t1, t1.Add(testLease))
			}
			if recs := e.unknown("", 0); len(recs) != 0 {
				t.Fatalf("Unknown: got %d records, want none under retake", len(recs))
			}
			_, err := e.complete(spent.Completion{Namespace: ns, Key: "k", Seq: a.Record.Seq, Result: []byte("old")})
			wantCode(t, "old holder's Complete", err, spent.ESeqMismatch)
			wantCode(t, "old holder's Release", e.release(spent.Release{Namespace: ns, Key: "k", Seq: a.Record.Seq}), spent.ESeqMismatch)
			e.claimWant(twoStep(ns, "k"), spent.InProgress)
			_, err = e.complete(spent.Completion{Namespace: ns, Key: "k", Seq: b.Record.Seq, Result: []byte("new")})
			wantCode(t, "new holder's Complete", err, "")
			c := e.claimWant(twoStep(ns, "k"), secondAnswer(ns))
			if c.Record.Seq != b.Record.Seq {
				t.Fatalf("seq after retake: got %v, want %v", c.Record.Seq, b.Record.Seq)
			}
			if isEcho(ns) && string(c.Record.Result) != "new" {
				t.Fatalf("replayed result: got %q, want %q", c.Record.Result, "new")
			}
		})
	})

	t.Run("HoldAfterLease", func(t *testing.T) {
		forEachNamespace(t, []string{nsEchoHold, nsRefuseHold}, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			t0 := e.clock.Now()
			a := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			e.clock.Set(t0.Add(testLease - time.Nanosecond))
			res := e.claimWant(twoStep(ns, "k"), spent.InProgress)
			if res.Unknown {
				t.Fatalf("Unknown 1ns before the lease ends: got true, want false")
			}
			if recs := e.unknown(ns, 0); len(recs) != 0 {
				t.Fatalf("Unknown before the lease ends: got %d records, want none", len(recs))
			}
			e.clock.Set(t0.Add(testLease))
			for i := range 2 {
				res = e.claimWant(twoStep(ns, "k"), spent.InProgress)
				if !res.Unknown || res.RetryAfter != 0 || res.Record.Seq != a.Record.Seq {
					t.Fatalf("claim %d after the lease: got Unknown %v RetryAfter %v seq %v, want true, 0, %v",
						i, res.Unknown, res.RetryAfter, res.Record.Seq, a.Record.Seq)
				}
			}
			for _, list := range []string{ns, ""} {
				recs := e.unknown(list, 0)
				if len(recs) != 1 {
					t.Fatalf("Unknown(%q): got %d records, want 1", list, len(recs))
				}
				checkRecord(t, "unknown outcome", recs[0], a.Record)
			}
			_, err := e.complete(spent.Completion{Namespace: ns, Key: "k", Result: []byte("guess")})
			wantCode(t, "Complete without seq", err, spent.ELeaseExpired)
			// The operator resolves it by hash, as Unknown lists it.
			hash := e.unknown(ns, 0)[0].Hash
			_, err = e.complete(spent.Completion{Namespace: ns, Hash: hash, Force: true, Result: []byte("resolved")})
			wantCode(t, "forced Complete", err, "")
			if recs := e.unknown("", 0); len(recs) != 0 {
				t.Fatalf("Unknown after resolution: got %d records, want none", len(recs))
			}
			res = e.claimWant(twoStep(ns, "k"), secondAnswer(ns))
			if res.Record.Seq != a.Record.Seq {
				t.Fatalf("seq after resolution: got %v, want %v", res.Record.Seq, a.Record.Seq)
			}
		})
	})

	t.Run("UnknownListsOnlyHoldPastLease", func(t *testing.T) {
		e := newEnv(t, h)
		t0 := e.clock.Now()
		first := e.claimWant(twoStep(nsRefuseHold, "a"), spent.Fresh)
		e.clock.Advance(time.Second)
		second := e.claimWant(twoStep(nsEchoHold, "b"), spent.Fresh)
		e.claimWant(twoStep(nsEchoRetake, "c"), spent.Fresh)
		e.claimWant(twoStep(nsRefuseRetake, "d"), spent.Fresh)
		e.claimWant(oneStep(nsEchoHold, "e", []byte("r")), spent.Fresh)
		done := e.claimWant(twoStep(nsEchoHold, "f"), spent.Fresh)
		_, err := e.complete(spent.Completion{Namespace: nsEchoHold, Key: "f", Seq: done.Record.Seq, Result: []byte("r")})
		wantCode(t, "Complete", err, "")
		e.clock.Set(t0.Add(testLease + time.Second - time.Nanosecond))
		if recs := e.unknown("", 0); len(recs) != 1 || recs[0].Seq != first.Record.Seq {
			t.Fatalf("Unknown while the second lease runs: got %d records, want only %v", len(recs), first.Record.Seq)
		}
		e.clock.Advance(time.Nanosecond)
		recs := e.unknown("", 0)
		if len(recs) != 2 || recs[0].Seq != first.Record.Seq || recs[1].Seq != second.Record.Seq {
			t.Fatalf("Unknown: got %v, want %v then %v (oldest lease first)", seqs(recs), first.Record.Seq, second.Record.Seq)
		}
		if recs := e.unknown("", 1); len(recs) != 1 || recs[0].Seq != first.Record.Seq {
			t.Fatalf("Unknown with limit 1: got %v, want [%v]", seqs(recs), first.Record.Seq)
		}
		if recs := e.unknown(nsEchoHold, 0); len(recs) != 1 || recs[0].Seq != second.Record.Seq {
			t.Fatalf("Unknown(%s): got %v, want [%v]", nsEchoHold, seqs(recs), second.Record.Seq)
		}
		for _, ns := range []string{nsEchoRetake, nsRefuseRetake} {
			if recs := e.unknown(ns, 0); len(recs) != 0 {
				t.Fatalf("Unknown(%s): got %v, want none", ns, seqs(recs))
			}
		}
		// Forgotten records are no unknown outcomes.
		e.clock.Set(t0.Add(testRetention + time.Second))
		if recs := e.unknown("", 0); len(recs) != 0 {
			t.Fatalf("Unknown after retention: got %v, want none", seqs(recs))
		}
	})
}

func seqs(recs []spent.Record) []spent.Seq {
	out := make([]spent.Seq, len(recs))
	for i := range recs {
		out[i] = recs[i].Seq
	}
	return out
}

// testExpiry checks the TTL boundary (invariant 4 in docs/concepts.md):
// remembered at expires_at - 1ns, forgotten at expires_at.
func testExpiry(t *testing.T, h Harness) {
	boundary := func(t *testing.T, e *env, ns, key string, exp time.Time, again spent.Outcome, first spent.Answer) {
		t.Helper()
		e.clock.Set(exp.Add(-time.Nanosecond))
		r, err := e.get(ns, key)
		wantCode(t, "Get at expires_at-1ns", err, "")
		checkRecord(t, "Get at expires_at-1ns", r, first.Record)
		res := e.claimWant(twoStep(ns, key), again)
		if res.Record.Seq != first.Record.Seq {
			t.Fatalf("claim at expires_at-1ns: got seq %v, want %v", res.Record.Seq, first.Record.Seq)
		}
		e.clock.Set(exp)
		_, err = e.get(ns, key)
		wantCode(t, "Get at expires_at", err, spent.ENotFound)
		res = e.claimWant(twoStep(ns, key), spent.Fresh)
		if res.Record.Seq == first.Record.Seq {
			t.Fatalf("claim at expires_at: got the old seq %v, want a new one", res.Record.Seq)
		}
	}

	t.Run("RememberedUntilExpiresAt", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			first := e.claimWant(oneStep(ns, "k", []byte("r")), spent.Fresh)
			boundary(t, e, ns, "k", epoch.Add(testRetention), secondAnswer(ns), first)
		})
	})

	t.Run("PerClaimExpiresAtBoundary", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			exp := epoch.Add(90*time.Second + 123)
			c := oneStep(ns, "k", []byte("r"))
			c.ExpiresAt = exp
			first := e.claimWant(c, spent.Fresh)
			boundary(t, e, ns, "k", exp, secondAnswer(ns), first)
		})
	})

	t.Run("PendingForgottenAtExpiresAt", func(t *testing.T) {
		forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			first := e.claimWant(twoStep(ns, "k"), spent.Fresh)
			exp := epoch.Add(testRetention)
			if !isRetake(ns) {
				e.clock.Set(exp.Add(-time.Nanosecond))
				if recs := e.unknown(ns, 0); len(recs) != 1 {
					t.Fatalf("Unknown at expires_at-1ns: got %d records, want 1", len(recs))
				}
				boundary(t, e, ns, "k", exp, spent.InProgress, first)
				if recs := e.unknown(ns, 0); len(recs) != 0 {
					t.Fatalf("Unknown at expires_at: got %d records, want none", len(recs))
				}
				return
			}
			// Under retake the lease ran out long ago: the next claim takes over.
			e.clock.Set(exp.Add(-time.Nanosecond))
			e.claimWant(twoStep(ns, "k"), spent.Fresh)
		})
	})

	t.Run("CompleteAtExpiresAtIsNotFound", func(t *testing.T) {
		e := newEnv(t, h)
		c := twoStep(nsEchoHold, "k")
		c.ExpiresAt = epoch.Add(3 * time.Second)
		res := e.claimWant(c, spent.Fresh)
		e.clock.Set(c.ExpiresAt)
		_, err := e.complete(spent.Completion{Namespace: nsEchoHold, Key: "k", Seq: res.Record.Seq, Result: []byte("late")})
		wantCode(t, "Complete at expires_at", err, spent.ENotFound)
		wantCode(t, "Release at expires_at", e.release(spent.Release{Namespace: nsEchoHold, Key: "k", Seq: res.Record.Seq}), spent.ENotFound)
	})
}

// testReplay checks that a replay returns the stored bytes exactly
// (invariant 3 in docs/concepts.md).
func testReplay(t *testing.T, h Harness) {
	t.Run("ReplayReturnsStoredBytes", func(t *testing.T) {
		rng := newRand(t)
		results := [][]byte{{}, {0}, {0, 0, 0, 0}, []byte("\x00\xff\x00\n\r\"\\"), make([]byte, 4096)}
		for _, n := range []int{1, 2, 31, 32, 33, 255, 1000, 65536} {
			b := make([]byte, n)
			rng.Read(b)
			b[0], b[n-1] = 0, 0
			results = append(results, b)
		}
		forEachNamespace(t, []string{nsEchoHold, nsEchoRetake}, func(t *testing.T, ns string) {
			e := newEnv(t, h)
			check := func(what string, got, want []byte) {
				t.Helper()
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: got %s, want %s", what, short(got), short(want))
				}
			}
			for i, want := range results {
				one := "one-" + itoa(i)
				res := e.claimWant(oneStep(ns, one, want), spent.Fresh)
				check("fresh one-step result", res.Record.Result, want)
				res = e.claimWant(oneStep(ns, one, []byte("other")), spent.Replayed)
				check("replayed one-step result", res.Record.Result, want)
				if res.Record.State != spent.StateComplete {
					t.Fatalf("replayed state: got %v, want complete", res.Record.State)
				}
				r, err := e.get(ns, one)
				wantCode(t, "Get", err, "")
				check("Get one-step result", r.Result, want)

				two := "two-" + itoa(i)
				fresh := e.claimWant(twoStep(ns, two), spent.Fresh)
				rec, err := e.complete(spent.Completion{Namespace: ns, Key: two, Seq: fresh.Record.Seq, Result: want})
				wantCode(t, "Complete", err, "")
				check("completed result", rec.Result, want)
				res = e.claimWant(twoStep(ns, two), spent.Replayed)
				check("replayed two-step result", res.Record.Result, want)
			}
		})
	})
}

// testEarly checks that an Early claim is decided like any other two-step
// claim: a store may answer it sooner, never differently. Its record then
// blocks the key, a Release frees it, and a Complete makes it durable.
func testEarly(t *testing.T, h Harness) {
	forEachNamespace(t, allNamespaces, func(t *testing.T, ns string) {
		e := newEnv(t, h)
		early := twoStep(ns, "k")
		early.Early = true
		first := e.claimWant(early, spent.Fresh)
		if first.Record.State != spent.StatePending {
			t.Fatalf("early claim: state %s, want pending", first.Record.State)
		}
		e.claimWant(early, spent.InProgress)
		e.claimWant(twoStep(ns, "k"), spent.InProgress)
		wantCode(t, "Release", e.release(spent.Release{Namespace: ns, Key: "k", Seq: first.Record.Seq}), "")
		again := e.claimWant(early, spent.Fresh)
		if again.Record.Seq == first.Record.Seq {
			t.Fatalf("early claim after Release: seq %v again", again.Record.Seq)
		}
		if _, err := e.complete(spent.Completion{Namespace: ns, Key: "k", Seq: again.Record.Seq, Result: []byte("r")}); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		e.reopen()
		res := e.claimWant(early, secondAnswer(ns))
		if res.Record.Seq != again.Record.Seq || (isEcho(ns) && string(res.Record.Result) != "r") {
			t.Fatalf("after reopen: seq %v result %q, want seq %v result \"r\"", res.Record.Seq, res.Record.Result, again.Record.Seq)
		}
		// An early one-step claim is an ordinary one-step claim.
		one := oneStep(ns, "one", []byte("x"))
		one.Early = true
		e.claimWant(one, spent.Fresh)
		e.claimWant(one, secondAnswer(ns))
	})
}
