package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/spentledger/spent"
)

// The linearizability check runs random concurrent histories of claims (one-
// and two-step, over a few keys, with two fingerprints), completes, releases
// and reads against the service, in rounds. Between rounds, with nothing in
// flight, the fake clock moves; the move is an operation of the history too,
// and the model's state holds the time. The ledger reads the clock before it
// calls the store, so a clock move during a round would make the history
// depend on when each call read it; between rounds it cannot.

// linKeys are the keys of the histories: two per echo namespace, one per
// refuse namespace.
var linKeys = []struct{ ns, key string }{
	{nsEchoHold, "a"}, {nsEchoHold, "b"},
	{nsEchoRetake, "a"}, {nsEchoRetake, "b"},
	{nsRefuseHold, "a"}, {nsRefuseRetake, "a"},
}

var (
	linFPs      = [][]byte{fpA, fpB}
	linPolicies = policies()
	// linAdvances are the clock moves between rounds, around the lease (5s)
	// and the retention (60s).
	linAdvances = []time.Duration{time.Nanosecond, 500 * time.Millisecond, time.Second, 2 * time.Second,
		testLease - time.Nanosecond, testLease, 10 * time.Second, 30 * time.Second}
	// linExpiries are the per-claim expires_at offsets; 1s cuts the lease short.
	linExpiries = []time.Duration{time.Second, 3 * time.Second, 7 * time.Second}
)

// The operations of a history.
const (
	opClaim    = "claim"
	opComplete = "complete"
	opRelease  = "release"
	opGet      = "get"
	opAdvance  = "advance"
)

type linInput struct {
	Op      string
	Key     int           // index into linKeys
	FP      int           // claim: index into linFPs
	OneStep bool          // claim: store Result at once
	Result  string        // claim (one-step) and complete
	Expires time.Duration // claim: per-claim expires_at as an offset from now; 0 for none
	Seq     spent.Seq     // complete and release
	Advance time.Duration // advance
}

type linOutput struct {
	Code    string // domain error code, "" for none
	Outcome spent.Outcome
	Seq     spent.Seq
	Result  string
	Unknown bool
	State   spent.State
}

// linState is the model's state of one key: the time (as an offset from the
// epoch) and the key's record, if any.
type linState struct {
	Now     time.Duration
	Has     bool
	Seq     spent.Seq
	FP      int
	State   spent.State
	Result  string
	Expires time.Duration
	Lease   time.Duration
}

// linStep is the sequential specification of the ledger for one key.
func linStep(s linState, in linInput, out linOutput) (bool, linState) {
	if in.Op == opAdvance {
		s.Now += in.Advance
		return true, s
	}
	p := linPolicies[linKeys[in.Key].ns]
	live := s.Has && s.Now < s.Expires
	if !live {
		s = linState{Now: s.Now}
	}
	switch in.Op {
	case opClaim:
		if out.Code != "" {
			return false, s
		}
		free := !live || (p.OnLeaseExpiry == spent.LeaseExpiryRetake && s.State == spent.StatePending && s.Now >= s.Lease)
		if free {
			if out.Outcome != spent.Fresh || out.Seq.IsZero() || (live && out.Seq == s.Seq) {
				return false, s
			}
			if in.OneStep && out.Result != in.Result {
				return false, s
			}
			n := linState{Now: s.Now, Has: true, Seq: out.Seq, FP: in.FP, Expires: s.Now + p.Retention}
			if in.Expires != 0 {
				n.Expires = s.Now + in.Expires
			}
			if in.OneStep {
				n.State, n.Result = spent.StateComplete, in.Result
			} else {
				n.State, n.Lease = spent.StatePending, min(s.Now+p.Lease, n.Expires)
			}
			return true, n
		}
		if out.Seq != s.Seq {
			return false, s
		}
		switch {
		case p.Mode == spent.ModeEcho && in.FP != s.FP:
			return out.Outcome == spent.Mismatch, s
		case s.State == spent.StatePending:
			return out.Outcome == spent.InProgress && out.Unknown == (s.Now >= s.Lease), s
		case p.Mode == spent.ModeRefuse:
			return out.Outcome == spent.Refused, s
		default:
			return out.Outcome == spent.Replayed && out.Result == s.Result, s
		}
	case opComplete, opRelease:
		code := ""
		switch {
		case !live:
			code = spent.ENotFound
		case s.State != spent.StatePending:
			code = spent.ENotPending
		case in.Seq != s.Seq:
			code = spent.ESeqMismatch
		case in.Op == opRelease && p.OnLeaseExpiry == spent.LeaseExpiryHold && s.Now >= s.Lease:
			// Past its lease under hold, the record is an unknown outcome:
			// the ledger releases it only when forced, even with the seq.
			code = spent.ELeaseExpired
		}
		if out.Code != code {
			return false, s
		}
		if code == "" && in.Op == opComplete {
			s.State, s.Result, s.Lease = spent.StateComplete, in.Result, 0
		} else if code == "" {
			s = linState{Now: s.Now}
		}
		return true, s
	case opGet:
		if !live {
			return out.Code == spent.ENotFound, s
		}
		return out.Code == "" && out.Seq == s.Seq && out.State == s.State && out.Result == s.Result, s
	}
	return false, s
}

// linPartition splits a history by key; the clock moves belong to every part.
// Since no operation is in flight while the clock moves, each part orders
// them the same way, so the history is linearizable if every part is.
func linPartition(history []porcupine.Operation) [][]porcupine.Operation {
	var clock []porcupine.Operation
	byKey := make([][]porcupine.Operation, len(linKeys))
	for _, op := range history {
		in := op.Input.(linInput)
		if in.Op == opAdvance {
			clock = append(clock, op)
			continue
		}
		byKey[in.Key] = append(byKey[in.Key], op)
	}
	var parts [][]porcupine.Operation
	for _, ops := range byKey {
		if len(ops) > 0 {
			parts = append(parts, append(ops[:len(ops):len(ops)], clock...))
		}
	}
	return parts
}

func linModel() porcupine.Model {
	return porcupine.Model{
		Partition: linPartition,
		Init:      func() any { return linState{} },
		Step: func(state, input, output any) (bool, any) {
			return linStep(state.(linState), input.(linInput), output.(linOutput))
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(linInput), output.(linOutput)
			var call string
			switch in.Op {
			case opAdvance:
				return "advance " + in.Advance.String()
			case opClaim:
				k := linKeys[in.Key]
				call = fmt.Sprintf("claim(%s/%s fp%d", k.ns, k.key, in.FP)
				if in.OneStep {
					call += fmt.Sprintf(" result=%q", in.Result)
				}
				if in.Expires != 0 {
					call += " expires=+" + in.Expires.String()
				}
				call += ")"
			case opComplete:
				call = fmt.Sprintf("complete(%s/%s %v %q)", linKeys[in.Key].ns, linKeys[in.Key].key, in.Seq, in.Result)
			case opRelease:
				call = fmt.Sprintf("release(%s/%s %v)", linKeys[in.Key].ns, linKeys[in.Key].key, in.Seq)
			case opGet:
				call = fmt.Sprintf("get(%s/%s)", linKeys[in.Key].ns, linKeys[in.Key].key)
			}
			switch {
			case out.Code != "":
				return call + " -> " + out.Code
			case in.Op == opClaim:
				s := fmt.Sprintf("%s -> %s %v", call, out.Outcome, out.Seq)
				if out.Result != "" {
					s += fmt.Sprintf(" %q", out.Result)
				}
				if out.Unknown {
					s += " unknown"
				}
				return s
			case in.Op == opGet:
				return fmt.Sprintf("%s -> %v %v %q", call, out.Seq, out.State, out.Result)
			}
			return call + " -> ok"
		},
		DescribeState: func(state any) string {
			s := state.(linState)
			if !s.Has || s.Now >= s.Expires {
				return fmt.Sprintf("t=%v: none", s.Now)
			}
			d := fmt.Sprintf("t=%v: %v %v fp%d expires %v", s.Now, s.Seq, s.State, s.FP, s.Expires)
			if s.State == spent.StatePending {
				d += fmt.Sprintf(" lease %v", s.Lease)
			} else {
				d += fmt.Sprintf(" %q", s.Result)
			}
			return d
		},
	}
}

// linRecorder runs operations against a service and records them.
type linRecorder struct {
	svc   spent.Service
	clock *Clock
	base  time.Time

	mu   sync.Mutex
	hist []porcupine.Operation
}

func newLinRecorder(svc spent.Service, clock *Clock) *linRecorder {
	return &linRecorder{svc: svc, clock: clock, base: time.Now()}
}

func (r *linRecorder) stamp() int64 { return int64(time.Since(r.base)) }

// do runs in for client and records it.
func (r *linRecorder) do(client int, in linInput) linOutput {
	call := r.stamp()
	out := r.exec(in)
	ret := r.stamp()
	r.mu.Lock()
	r.hist = append(r.hist, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
	return out
}

func (r *linRecorder) exec(in linInput) linOutput {
	ctx := context.Background()
	if in.Op == opAdvance {
		r.clock.Advance(in.Advance)
		return linOutput{}
	}
	k := linKeys[in.Key]
	switch in.Op {
	case opClaim:
		c := spent.Claim{Namespace: k.ns, Key: k.key, Fingerprint: linFPs[in.FP], Place: "lin"}
		if in.OneStep {
			c.Result = []byte(in.Result)
		}
		if in.Expires != 0 {
			c.ExpiresAt = r.clock.Now().Add(in.Expires)
		}
		res, err := r.svc.Claim(ctx, c)
		if err != nil {
			return linOutput{Code: spent.ErrorCode(err)}
		}
		return linOutput{Outcome: res.Outcome, Seq: res.Record.Seq, Result: string(res.Record.Result), Unknown: res.Unknown}
	case opComplete:
		_, err := r.svc.Complete(ctx, spent.Completion{Namespace: k.ns, Key: k.key, Seq: in.Seq, Result: []byte(in.Result)})
		return linOutput{Code: spent.ErrorCode(err)}
	case opRelease:
		err := r.svc.Release(ctx, spent.Release{Namespace: k.ns, Key: k.key, Seq: in.Seq})
		return linOutput{Code: spent.ErrorCode(err)}
	case opGet:
		rec, err := r.svc.Get(ctx, k.ns, k.key)
		if err != nil {
			return linOutput{Code: spent.ErrorCode(err)}
		}
		return linOutput{Seq: rec.Seq, State: rec.State, Result: string(rec.Result)}
	}
	panic("storetest: unknown operation " + in.Op)
}

// linClient generates a client's random operations. It remembers the seqs of
// its fresh two-step claims, to complete or release them (sometimes after
// they went stale).
type linClient struct {
	id   int
	rng  *testRand
	n    int
	held []linHeld
}

type linHeld struct {
	key int
	seq spent.Seq
}

func (c *linClient) next() linInput {
	c.n++
	x := c.rng.IntN(100)
	if len(c.held) == 0 && x >= 45 && x < 80 {
		x = 0
	}
	switch {
	case x < 45:
		in := linInput{Op: opClaim, Key: c.rng.IntN(len(linKeys)), OneStep: c.rng.IntN(5) < 2}
		if c.rng.IntN(4) == 0 {
			in.FP = 1
		}
		if in.OneStep {
			in.Result = fmt.Sprintf("o%d.%d", c.id, c.n)
		}
		if c.rng.IntN(4) == 0 {
			in.Expires = linExpiries[c.rng.IntN(len(linExpiries))]
		}
		return in
	case x < 80:
		i := c.rng.IntN(len(c.held))
		hd := c.held[i]
		if c.rng.IntN(3) > 0 {
			c.held = append(c.held[:i], c.held[i+1:]...)
		}
		key := hd.key
		if c.rng.IntN(10) == 0 {
			key = c.rng.IntN(len(linKeys))
		}
		if x < 65 {
			return linInput{Op: opComplete, Key: key, Seq: hd.seq, Result: fmt.Sprintf("c%d.%d", c.id, c.n)}
		}
		return linInput{Op: opRelease, Key: key, Seq: hd.seq}
	default:
		return linInput{Op: opGet, Key: c.rng.IntN(len(linKeys))}
	}
}

func (c *linClient) saw(in linInput, out linOutput) {
	if in.Op == opClaim && !in.OneStep && out.Outcome == spent.Fresh {
		c.held = append(c.held, linHeld{key: in.Key, seq: out.Seq})
	}
}

// runLinRounds runs rounds of clients×perRound random operations, moving the
// clock between rounds, and returns the history.
func runLinRounds(rec *linRecorder, rng *testRand, rounds, clients, perRound int) []porcupine.Operation {
	cs := make([]*linClient, clients)
	for i := range cs {
		cs[i] = &linClient{id: i, rng: rng.child()}
	}
	for round := range rounds {
		if round > 0 {
			rec.do(clients, linInput{Op: opAdvance, Advance: linAdvances[rng.IntN(len(linAdvances))]})
		}
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perRound {
					in := c.next()
					c.saw(in, rec.do(c.id, in))
				}
			}()
		}
		wg.Wait()
	}
	return rec.hist
}

// checkLinearizable checks a history with porcupine. When it is not
// linearizable (or the check times out), it writes the visualization to the
// test's artifact directory (a temporary directory unless go test runs with
// -artifacts) and returns its path.
func checkLinearizable(t *testing.T, hist []porcupine.Operation) (porcupine.CheckResult, string) {
	t.Helper()
	model := linModel()
	res, info := porcupine.CheckOperationsVerbose(model, hist, time.Minute)
	if res == porcupine.Ok {
		return res, ""
	}
	path := filepath.Join(t.ArtifactDir(), "linearizability.html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		t.Errorf("writing the visualization: %v", err)
	}
	return res, path
}

// testLinearizability checks random concurrent histories with porcupine, and
// that the checker rejects a store whose claim is not atomic.
func testLinearizability(t *testing.T, h Harness) {
	t.Run("RandomHistories", func(t *testing.T) {
		rounds := 60
		if testing.Short() {
			rounds = 25
		}
		rng := newRand(t)
		e := newEnv(t, h)
		hist := runLinRounds(newLinRecorder(e.svc, e.clock), rng, rounds, 4, 4)
		res, path := checkLinearizable(t, hist)
		if res != porcupine.Ok {
			t.Fatalf("history of %d operations: got %v, want %v; visualization: %s (go test -artifacts keeps it)", len(hist), res, porcupine.Ok, path)
		}
		// Fresh seqs are unique across keys.
		seen := map[spent.Seq]bool{}
		for _, op := range hist {
			if out := op.Output.(linOutput); op.Input.(linInput).Op == opClaim && out.Outcome == spent.Fresh {
				if seen[out.Seq] {
					t.Fatalf("seq %v: fresh twice, want unique seqs", out.Seq)
				}
				seen[out.Seq] = true
			}
		}
	})

	t.Run("CheckerCatchesNonAtomicClaim", func(t *testing.T) {
		e := newEnv(t, h, withoutWrap(), withStoreWrapper(func(s spent.Store) spent.Store { return &racyStore{Store: s} }))
		rec := newLinRecorder(e.svc, e.clock)
		const clients = 4
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				rec.do(c, linInput{Op: opClaim, Key: 0})
			}()
		}
		close(start)
		wg.Wait()
		rec.do(0, linInput{Op: opGet, Key: 0})
		res, path := checkLinearizable(t, rec.hist)
		if res != porcupine.Illegal {
			t.Fatalf("history of a non-atomic claim: got %v, want %v", res, porcupine.Illegal)
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
			t.Fatalf("visualization %s: got %v, want a written file", path, err)
		}
	})
}

// racyStore breaks invariant 1 in docs/concepts.md on purpose: its Claim
// reads the key, then writes without looking again, and reports the write
// as its own. It shows that the linearizability check can fail.
type racyStore struct {
	spent.Store
}

func (s *racyStore) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	r, err := s.Store.Get(ctx, op.Record.Hash, op.Now)
	if err == nil && !spent.FreeAt(&r, op.Now, op.Retake) {
		return spent.ClaimAnswer{Record: r}, nil
	}
	time.Sleep(20 * time.Millisecond) // let the others read the key too
	if _, err := s.Store.Claim(ctx, op); err != nil {
		return spent.ClaimAnswer{}, err
	}
	return spent.ClaimAnswer{Inserted: true, Record: op.Record}, nil
}
