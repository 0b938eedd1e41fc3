package spent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Verdict is what a [Resolver] found out about an unknown outcome.
type Verdict uint8

// The verdicts. The zero Verdict is CannotTell, so that a resolver that
// forgets to decide leaves the record alone.
const (
	// CannotTell: the resolver could not find out (yet). The record stays
	// pending and is tried again later, with backoff; while it stays, an
	// operator sees it listed by [Service.Unknown].
	CannotTell Verdict = iota
	// Applied: the effect happened. The record is completed with
	// [Resolution].Result, which later claims of the key replay.
	Applied
	// NotApplied: the effect did not happen and can no longer happen (the
	// look-up fenced it; see [Resolver]). The record is released, so the
	// next claim of the key is fresh and its request runs again.
	NotApplied
)

// String returns "cannot_tell", "applied" or "not_applied".
func (v Verdict) String() string {
	switch v {
	case CannotTell:
		return "cannot_tell"
	case Applied:
		return "applied"
	case NotApplied:
		return "not_applied"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// Resolution is a [Resolver]'s answer for one unknown outcome.
type Resolution struct {
	// Verdict says what to do with the record.
	Verdict Verdict
	// Result is stored in the record when Verdict is Applied (nil stores
	// an empty result); ignored otherwise. It is subject to the ledger's
	// result limit ([Config].MaxResult): a larger one is not stored and the
	// record is left, as if the resolver could not tell.
	Result []byte
}

// Resolver looks up the real outcome of an unknown outcome, r: a pending
// record of a hold namespace whose lease ran out (its claimer may or may not
// have made its effect), typically by asking the system the effect went to
// (the payment provider, the issuer's log), by r's key, hash or seq, which
// the claimer passed along with its request.
//
// The contract, which keeps every effect at most once:
//
//   - Applied only when the effect happened: the record is completed with
//     the resolution's result, and later claims replay it.
//   - NotApplied only when the effect did not happen and the look-up itself
//     fenced it, atomically: from the look-up on, the system refuses this
//     attempt (the provider voids the key or the attempt's seq), so a
//     request still in flight cannot land after the release. The record is
//     released and the next claim of the key runs the request again; without
//     the fence, a late arrival of the first attempt would make the effect
//     twice. A system that cannot fence cannot say NotApplied: answer
//     CannotTell and leave the record to an operator.
//   - CannotTell, or an error, whenever in doubt (the system did not answer,
//     the attempt is still in flight there): the record is left and tried
//     again later.
//
// A resolver may be called again for the same record (after an error, a
// crash, or by two runners), so its look-up and its fence must be
// idempotent, and it must give the same verdict for the same record.
type Resolver func(ctx context.Context, r Record) (Resolution, error)

// ResolveOptions configures a [ResolveRunner]. The zero value of each field
// means its default.
type ResolveOptions struct {
	// Namespace is the hold namespace whose unknown outcomes are resolved;
	// empty means every hold namespace.
	Namespace string
	// Interval is how often the runner lists the unknown outcomes
	// ([ResolveRunner.Run]). Default 10 seconds.
	Interval time.Duration
	// MinBackoff and MaxBackoff bound the wait before a record left
	// unsettled is tried again: MinBackoff after the first attempt, doubled
	// after each further one, at most MaxBackoff. Defaults 1 second and 5
	// minutes.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Timeout bounds each record's look-up and settling together. Default
	// 30 seconds.
	Timeout time.Duration
	// Limit is how many unknown outcomes one listing asks for, per
	// namespace, oldest lease first (see Caveats in [ResolveRunner]).
	// Default and maximum [MaxBatch].
	Limit int
	// OnLeft, when set, is called for each attempt that left a record
	// unsettled, in the runner's goroutine.
	OnLeft func(ResolveLeft)
	// OnListError, when set, is called when listing the unknown outcomes
	// failed, in the runner's goroutine.
	OnListError func(error)
	// Now is the runner's clock, which times the backoff. Default time.Now.
	Now func() time.Time
	// After waits as time.After does; [ResolveRunner.Run] waits with it.
	// Default time.After.
	After func(time.Duration) <-chan time.Time
}

// ResolveLeft is a record that one attempt of a [ResolveRunner] left unsettled.
type ResolveLeft struct {
	// Record is the unknown outcome, as listed.
	Record Record
	// Verdict is the resolver's verdict (CannotTell when it failed).
	Verdict Verdict
	// Err is the resolver's error, or the ledger's when settling failed; nil
	// when the resolver answered CannotTell.
	Err error
	// Attempts counts the attempts on this record so far.
	Attempts int
	// Next is when the record is tried again, at the earliest.
	Next time.Time
}

// ResolveStats counts what a [ResolveRunner] did since it was made.
type ResolveStats struct {
	// Completed and Released count the records the runner settled: applied
	// and not applied.
	Completed uint64
	Released  uint64
	// Elsewhere counts records found settled by someone else (an operator,
	// another runner) when the runner settled them: the ledger refused the
	// ending with not_found, not_pending or seq_mismatch.
	Elsewhere uint64
	// Left counts attempts that left a record unsettled (CannotTell, an
	// error of the resolver or of the ledger).
	Left uint64
	// Waiting is how many records are left at their last attempt and wait
	// for their next one.
	Waiting int
	// ListErrors counts failed listings.
	ListErrors uint64
}

// ResolvePass is the account of one [ResolveRunner.Pass].
type ResolvePass struct {
	// Listed is how many unknown outcomes were listed.
	Listed int
	// Tried is how many of them were due and given to the resolver.
	Tried int
	// Completed, Released, Elsewhere and Left count the attempts' ends, as
	// in [ResolveStats].
	Completed, Released, Elsewhere, Left int
}

// ResolveRunner runs a [Resolver] for each unknown outcome of a [Service]
// (a *[Ledger], or the HTTP client of a spent server, whose token then needs
// the admin scope to list them), and settles each as the resolver says,
// with the record's seq: a record that someone settled meanwhile (or that
// was released and claimed again) is never overwritten. A release is
// forced (an operator's, as a release past the lease of a hold namespace
// must be), a completion is not.
// What it cannot settle it tries again with exponential backoff per record,
// and reports through [ResolveOptions].OnLeft and [ResolveRunner.Stats];
// those records stay listed by [Service.Unknown] for an operator. Build it
// with [NewResolveRunner]; call Run in a goroutine, or Pass on a schedule
// of one's own. It is safe for concurrent use; passes run one at a time.
//
// Caveats: each listing sees at most Limit unknown outcomes per namespace,
// the oldest first, so when more than that many are left unsettled the
// newer ones wait until older ones are settled or expire. Records are
// settled one at a time. Backoff state lives in memory: a new runner tries
// every listed record at once.
type ResolveRunner struct {
	svc     Service
	resolve Resolver
	o       ResolveOptions

	pass  sync.Mutex // one pass at a time
	mu    sync.Mutex // guards what follows
	wait  map[resolveKey]*backoff
	stats ResolveStats
}

// resolveKey names one record: a released key claimed again is another
// record, with another seq.
type resolveKey struct {
	ns   string
	hash Hash
	seq  Seq
}

type backoff struct {
	attempts int
	next     time.Time
}

// NewResolveRunner returns a runner of resolve over svc. When svc can
// report its namespace policies (a *Ledger can), a namespace that is not
// configured with hold is refused: it has no unknown outcomes.
func NewResolveRunner(svc Service, resolve Resolver, o ResolveOptions) (*ResolveRunner, error) {
	switch {
	case svc == nil:
		return nil, errors.New("spent: resolve: nil service")
	case resolve == nil:
		return nil, errors.New("spent: resolve: nil resolver")
	case o.Interval < 0, o.MinBackoff < 0, o.MaxBackoff < 0, o.Timeout < 0, o.Limit < 0:
		return nil, errors.New("spent: resolve: negative option")
	case o.Limit > MaxBatch:
		return nil, fmt.Errorf("spent: resolve: Limit %d: at most %d", o.Limit, MaxBatch)
	}
	if o.Interval == 0 {
		o.Interval = 10 * time.Second
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.MaxBackoff < o.MinBackoff {
		return nil, fmt.Errorf("spent: resolve: MaxBackoff %v under MinBackoff %v", o.MaxBackoff, o.MinBackoff)
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Limit == 0 {
		o.Limit = MaxBatch
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Namespace != "" {
		if err := RequirePolicy(svc, o.Namespace, PolicyNeed{
			Component: "spent: resolve", OnLeaseExpiry: LeaseExpiryHold,
			Why: "only a hold namespace has unknown outcomes",
		}); err != nil {
			return nil, err
		}
	}
	return &ResolveRunner{svc: svc, resolve: resolve, o: o, wait: make(map[resolveKey]*backoff)}, nil
}

// Stats returns the runner's counters.
func (rr *ResolveRunner) Stats() ResolveStats {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	s := rr.stats
	s.Waiting = len(rr.wait)
	return s
}

// Run lists and resolves the unknown outcomes every Interval, sooner when a
// record's backoff ends first, until ctx ends; it then returns ctx's error.
// A failed listing is reported to OnListError and tried again at the next
// interval.
func (rr *ResolveRunner) Run(ctx context.Context) error {
	for {
		_, err := rr.Pass(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && rr.o.OnListError != nil {
			rr.o.OnListError(err)
		}
		d := rr.o.Interval
		if next, ok := rr.nextDue(); ok {
			if w := next.Sub(rr.o.Now()); w < d {
				d = max(w, 0)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-rr.o.After(d):
		}
	}
}

// nextDue returns the earliest time a waiting record is due.
func (rr *ResolveRunner) nextDue() (time.Time, bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	var first time.Time
	for _, b := range rr.wait {
		if first.IsZero() || b.next.Before(first) {
			first = b.next
		}
	}
	return first, !first.IsZero()
}

// Pass lists the unknown outcomes once and gives each that is due (never
// tried, or whose backoff has ended) to the resolver, then settles it. It
// returns an error only when the listing failed; what happened to each
// record is in the ResolvePass and the counters.
func (rr *ResolveRunner) Pass(ctx context.Context) (ResolvePass, error) {
	rr.pass.Lock()
	defer rr.pass.Unlock()
	var p ResolvePass
	recs, err := rr.svc.Unknown(ctx, rr.o.Namespace, rr.o.Limit)
	if err != nil {
		rr.mu.Lock()
		rr.stats.ListErrors++
		rr.mu.Unlock()
		return p, fmt.Errorf("spent: resolve: listing unknown outcomes: %w", err)
	}
	p.Listed = len(recs)
	// Forget the backoff of records no longer listed: settled, expired.
	listed := make(map[resolveKey]bool, len(recs))
	for i := range recs {
		listed[resolveKey{recs[i].Namespace, recs[i].Hash, recs[i].Seq}] = true
	}
	rr.mu.Lock()
	for k := range rr.wait {
		if !listed[k] {
			delete(rr.wait, k)
		}
	}
	rr.mu.Unlock()
	for i := range recs {
		if ctx.Err() != nil {
			break
		}
		rec := &recs[i]
		k := resolveKey{rec.Namespace, rec.Hash, rec.Seq}
		rr.mu.Lock()
		b := rr.wait[k]
		due := b == nil || !rr.o.Now().Before(b.next)
		rr.mu.Unlock()
		if !due {
			continue
		}
		p.Tried++
		switch rr.settle(ctx, k, rec, b) {
		case endCompleted:
			p.Completed++
		case endReleased:
			p.Released++
		case endElsewhere:
			p.Elsewhere++
		default:
			p.Left++
		}
	}
	return p, nil
}

type end uint8

const (
	endLeft end = iota
	endCompleted
	endReleased
	endElsewhere
)

// settle runs the resolver on rec and ends the record as it says.
func (rr *ResolveRunner) settle(ctx context.Context, k resolveKey, rec *Record, b *backoff) end {
	ctx, cancel := context.WithTimeout(ctx, rr.o.Timeout)
	defer cancel()
	res, err := rr.call(ctx, rec)
	if err == nil {
		switch res.Verdict {
		case Applied:
			result := res.Result
			if result == nil {
				result = []byte{}
			}
			_, err = rr.svc.Complete(ctx, Completion{Namespace: rec.Namespace, Hash: rec.Hash, Seq: rec.Seq, Result: result})
		case NotApplied:
			// Forced, with the seq: past its lease, a record of a hold
			// namespace is released only by an operator (see Release), and
			// the seq still keeps a record claimed again meanwhile safe.
			err = rr.svc.Release(ctx, Release{Namespace: rec.Namespace, Hash: rec.Hash, Seq: rec.Seq, Force: true})
		case CannotTell:
		default:
			err = fmt.Errorf("spent: resolve: resolver returned %s", res.Verdict)
			res.Verdict = CannotTell
		}
		if err == nil && res.Verdict != CannotTell {
			rr.mu.Lock()
			delete(rr.wait, k)
			if res.Verdict == Applied {
				rr.stats.Completed++
			} else {
				rr.stats.Released++
			}
			rr.mu.Unlock()
			if res.Verdict == Applied {
				return endCompleted
			}
			return endReleased
		}
		switch ErrorCode(err) {
		case ENotFound, ENotPending, ESeqMismatch:
			// Settled meanwhile by someone else, or released and claimed
			// again: another record now. Nothing to do.
			rr.mu.Lock()
			delete(rr.wait, k)
			rr.stats.Elsewhere++
			rr.mu.Unlock()
			return endElsewhere
		}
	} else {
		res.Verdict = CannotTell
	}
	rr.mu.Lock()
	if b == nil {
		b = &backoff{}
		rr.wait[k] = b
	}
	b.attempts++
	d := rr.o.MinBackoff
	for i := 1; i < b.attempts && d < rr.o.MaxBackoff; i++ {
		d *= 2
	}
	b.next = rr.o.Now().Add(min(d, rr.o.MaxBackoff))
	left := ResolveLeft{Record: *rec, Verdict: res.Verdict, Err: err, Attempts: b.attempts, Next: b.next}
	rr.stats.Left++
	rr.mu.Unlock()
	if rr.o.OnLeft != nil {
		rr.o.OnLeft(left)
	}
	return endLeft
}

// call runs the resolver, turning a panic into an error so that one bad
// record does not stop the runner.
func (rr *ResolveRunner) call(ctx context.Context, rec *Record) (res Resolution, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("spent: resolve: resolver panicked: %v", v)
		}
	}()
	return rr.resolve(ctx, rec.Clone())
}
