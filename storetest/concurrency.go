package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/spentledger/spent"
)

// testConcurrency checks invariant 1 in docs/concepts.md: of any number
// of concurrent claims of one live key, exactly one is fresh.
func testConcurrency(t *testing.T, h Harness) {
	t.Run("OneFreshOf100", func(t *testing.T) {
		cases := []struct {
			name    string
			ns      string
			oneStep bool
			mixed   bool          // half the claims carry fingerprint B
			others  spent.Outcome // answer of the 99 others (same fingerprint)
		}{
			{"EchoOneStep", nsEchoHold, true, false, spent.Replayed},
			{"EchoTwoStep", nsEchoRetake, false, false, spent.InProgress},
			{"RefuseOneStep", nsRefuseHold, true, false, spent.Refused},
			{"RefuseTwoStep", nsRefuseRetake, false, false, spent.InProgress},
			{"EchoMixedFingerprints", nsEchoRetake, true, true, spent.Replayed},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, h)
				for round := range 3 {
					key := "hot-" + itoa(round)
					claims := make([]spent.Claim, 100)
					for i := range claims {
						c := twoStep(tc.ns, key)
						if tc.oneStep {
							c.Result = []byte("from-" + itoa(i))
						}
						if tc.mixed && i%2 == 1 {
							c.Fingerprint = fpB
						}
						claims[i] = c
					}
					res, errs := claimAll(e.svc, claims)
					fresh := -1
					for i := range res {
						if errs[i] != nil {
							t.Fatalf("claim %d: got error %v, want none", i, errs[i])
						}
						if res[i].Outcome == spent.Fresh {
							if fresh >= 0 {
								t.Fatalf("round %d: claims %d and %d both fresh, want exactly one", round, fresh, i)
							}
							fresh = i
						}
					}
					if fresh < 0 {
						t.Fatalf("round %d: no fresh claim, want exactly one", round)
					}
					won := res[fresh].Record
					for i := range res {
						if i == fresh {
							continue
						}
						want := tc.others
						if tc.mixed && i%2 != fresh%2 {
							want = spent.Mismatch
						}
						if res[i].Outcome != want || res[i].Record.Seq != won.Seq {
							t.Fatalf("round %d, claim %d: got %v from %v, want %v from %v", round, i, res[i].Outcome, res[i].Record.Seq, want, won.Seq)
						}
						if want == spent.Replayed && string(res[i].Record.Result) != string(won.Result) {
							t.Fatalf("round %d, claim %d: got result %q, want the winner's %q", round, i, res[i].Record.Result, won.Result)
						}
					}
					r, err := e.get(tc.ns, key)
					wantCode(t, "Get", err, "")
					checkRecord(t, "stored record", r, won)
				}
			})
		}
	})

	t.Run("BatchesRaceOnSharedKeys", func(t *testing.T) {
		e := newEnv(t, h)
		rng := newRand(t)
		const batches, keys = 8, 24
		var wg sync.WaitGroup
		out := make([][]spent.Answer, batches)
		order := make([][]int, batches)
		errs := make([]error, batches)
		start := make(chan struct{})
		for b := range batches {
			order[b] = rng.Perm(keys)
			cs := make([]spent.Claim, keys)
			for i, k := range order[b] {
				cs[i] = oneStep(nsEchoRetake, "shared-"+itoa(k), []byte("batch-"+itoa(b)))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				out[b], errs[b] = e.svc.ClaimBatch(context.Background(), cs)
			}()
		}
		close(start)
		wg.Wait()
		winner := map[int]spent.Record{}
		for b := range batches {
			if errs[b] != nil {
				t.Fatalf("batch %d: got error %v, want none", b, errs[b])
			}
			for i, k := range order[b] {
				if out[b][i].Outcome != spent.Fresh {
					continue
				}
				if w, ok := winner[k]; ok {
					t.Fatalf("key %d: fresh in two batches (seqs %v and %v), want exactly one", k, w.Seq, out[b][i].Record.Seq)
				}
				winner[k] = out[b][i].Record
			}
		}
		for b := range batches {
			for i, k := range order[b] {
				w, ok := winner[k]
				if !ok {
					t.Fatalf("key %d: no fresh claim, want exactly one", k)
				}
				r := out[b][i]
				if r.Record.Seq != w.Seq || (r.Outcome != spent.Fresh && (r.Outcome != spent.Replayed || string(r.Record.Result) != string(w.Result))) {
					t.Fatalf("batch %d, key %d: got %v %q from %v, want replayed %q from %v", b, k, r.Outcome, r.Record.Result, r.Record.Seq, w.Result, w.Seq)
				}
			}
		}
	})
}

// claimAll makes every claim at once, each from its own goroutine, released
// together.
func claimAll(svc spent.Service, claims []spent.Claim) ([]spent.Answer, []error) {
	res := make([]spent.Answer, len(claims))
	errs := make([]error, len(claims))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i], errs[i] = svc.Claim(context.Background(), claims[i])
		}()
	}
	close(start)
	wg.Wait()
	return res, errs
}
