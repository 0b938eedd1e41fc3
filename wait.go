package spent

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// MaxWait is the longest [Claim].Wait a ledger accepts. Servers bound it
// lower (spent serve's max_wait, 30 seconds by default): a waiting request
// holds a connection and a goroutine.
const MaxWait = 10 * time.Minute

// MaxWaiters is the most claims one ledger lets wait at once. Past it, a
// claim with a wait answers at once, as without one: each waiter holds a
// goroutine (and, over HTTP, a connection).
const MaxWaiters = 1 << 16

// maxWaiters is MaxWaiters, lowered by tests.
var maxWaiters int64 = MaxWaiters

// waitHub is a ledger's register of waiting claims, keyed by hash. A
// completing or releasing write wakes the waiters of its hash: the ledger's
// own (Complete, Release), and, through the store's [EndWatcher], those of
// other servers sharing the store. Its zero value is ready to use.
type waitHub struct {
	n       atomic.Int64 // how many wait: a write skips the lock when none do
	mu      sync.Mutex
	waiters map[Hash][]*waiter
	stopped bool
	stop    chan struct{} // closed by StopWaiting; made lazily

	// watchMu serializes subscribing to the store's ends.
	watchMu   sync.Mutex
	watching  bool
	stopWatch func()
	failed    time.Time // when subscribing last failed
	failErr   error
}

// watchRetry is how long after a failed subscription to the store's ends
// waiting claims answer at once with its error rather than try again.
const watchRetry = time.Second

// waiter is one waiting claim. ch holds one wake-up: a wake while the
// waiter is busy re-checking is kept for its next wait.
type waiter struct {
	hash Hash
	ch   chan struct{}
}

// doneLocked returns the channel that StopWaiting closes, made on first
// use. The caller holds mu.
func (h *waitHub) doneLocked() chan struct{} {
	if h.stop == nil {
		h.stop = make(chan struct{})
	}
	return h.stop
}

// add registers a waiter for hash, or returns nil once StopWaiting was
// called or when maxWaiters wait already.
func (h *waitHub) add(hash Hash) (*waiter, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	done := h.doneLocked()
	if h.stopped || h.n.Load() >= maxWaiters {
		return nil, done
	}
	if h.waiters == nil {
		h.waiters = make(map[Hash][]*waiter)
	}
	w := &waiter{hash: hash, ch: make(chan struct{}, 1)}
	h.waiters[hash] = append(h.waiters[hash], w)
	h.n.Add(1)
	return w, done
}

// remove unregisters w.
func (h *waitHub) remove(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n.Add(-1)
	ws := h.waiters[w.hash]
	for i, x := range ws {
		if x == w {
			ws[i] = ws[len(ws)-1]
			ws[len(ws)-1] = nil
			ws = ws[:len(ws)-1]
			break
		}
	}
	if len(ws) == 0 {
		delete(h.waiters, w.hash)
	} else {
		h.waiters[w.hash] = ws
	}
}

// wake wakes the waiters of hash, if any.
func (h *waitHub) wake(hash Hash) {
	if h.n.Load() == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.waiters[hash] {
		poke(w)
	}
}

// wakeAll wakes every waiter, to re-check its key: the store's notification
// stream broke and may have lost an end.
func (h *waitHub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ws := range h.waiters {
		for _, w := range ws {
			poke(w)
		}
	}
}

func poke(w *waiter) {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Waiting reports how many claims are waiting now (see [Claim].Wait), for
// metrics and for tests that must know a waiter is in place.
func (l *Ledger) Waiting() int { return int(l.waits.n.Load()) }

// EndWatcher is the optional capability of a [Store] that several servers
// share: it tells of the ends (completions and releases) of pending records
// written through any of them, so that a claim waiting on one server
// ([Claim].Wait) wakes when another server ends the key. The ledger checks
// for it at run time, with [StoreAs] as for every optional store
// capability, so that it finds it under wrapper stores (a tracing store,
// say), and subscribes once, at its first waiting claim. Stores whose
// writes all pass through one ledger (the embedded store, the in-memory
// one) need not implement it: the ledger wakes its waiters itself.
type EndWatcher interface {
	// WatchEnds subscribes to the engine's notifications of ends and
	// returns once subscribed: every end committed after it returns is told
	// to ended, with the record's hash, on a goroutine of the store's. A
	// notification may come more than once, or for a hash whose record did
	// not end (the ledger re-checks the key); none may be missed while the
	// subscription holds. When the notification stream breaks, the store
	// re-establishes it (with backoff) and then calls lost, since ends in
	// between may have been missed. ctx bounds only the subscribing; the
	// returned stop ends the subscription, as the store's Close does.
	// Errors: the subscription could not be made; nothing runs then.
	WatchEnds(ctx context.Context, ended func(Hash), lost func()) (stop func(), err error)
}

// StopWaiting wakes every waiting claim, which answers at once as its wait
// had run out (in_progress), makes later claims answer without waiting,
// and ends the ledger's subscription to the store's notifications. A server
// calls it when its graceful shutdown begins, so that waiting requests do
// not hold the shutdown up. It does not close the store.
func (l *Ledger) StopWaiting() {
	h := &l.waits
	h.mu.Lock()
	if !h.stopped {
		h.stopped = true
		close(h.doneLocked())
	}
	h.mu.Unlock()
	h.watchMu.Lock()
	defer h.watchMu.Unlock()
	if h.stopWatch != nil {
		h.stopWatch()
		h.stopWatch = nil
	}
}

// watchEnds subscribes to the store's ends, once, when the store (or a
// store it wraps) is an [EndWatcher]. A failed subscription is tried again
// by a waiter that comes watchRetry or more after it.
func (l *Ledger) watchEnds(ctx context.Context) error {
	ew, ok := StoreAs[EndWatcher](l.store)
	if !ok {
		return nil
	}
	h := &l.waits
	h.watchMu.Lock()
	defer h.watchMu.Unlock()
	if h.watching {
		return nil
	}
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	if stopped {
		return nil
	}
	if !h.failed.IsZero() && time.Since(h.failed) < watchRetry {
		return h.failErr
	}
	stop, err := ew.WatchEnds(ctx, h.wake, h.wakeAll)
	if err != nil {
		h.failed, h.failErr = time.Now(), err
		return err
	}
	h.watching, h.stopWatch = true, stop
	return nil
}

// ended tells the ledger's waiters that the record of hash ended.
func (l *Ledger) ended(hash Hash) { l.waits.wake(hash) }

// checkWait refuses a wait the ledger does not accept.
func checkWait(d time.Duration) error {
	if d < 0 {
		return Errorf(EInvalid, "wait of %s: must not be negative", d)
	}
	if d > MaxWait {
		return Errorf(EInvalid, "wait of %s: at most %s", d, MaxWait)
	}
	return nil
}

// claimWait is a claim with c.Wait set: it answers as claimOnce does,
// except that while the key is pending under a running lease it waits,
// for up to c.Wait, for the key's end.
//
// The waiter registers for the key's hash (and the ledger subscribes to the
// store's ends) before it first looks at the key, so an end between a look
// and the wait cannot be missed. Each wake-up looks again with a new claim:
// an end that completed the key answers as a repeat would (replayed,
// refused, mismatch); one that released it finds the key free, and the
// claim is fresh. The waiter also wakes when the lease runs out: a retake
// namespace then gives it the key (fresh), a hold namespace answers
// in_progress with Unknown at once. When the wait runs out, one last look
// answers; when ctx is done or the ledger stops waiting (StopWaiting), the
// last in_progress answer is returned as it is.
func (l *Ledger) claimWait(ctx context.Context, c Claim) (Answer, error) {
	w, stop := l.waits.add(l.HashKey(c.Namespace, c.Key))
	if w == nil {
		return l.claimOnce(ctx, c)
	}
	defer l.waits.remove(w)
	deadline := time.NewTimer(c.Wait)
	defer deadline.Stop()
	if err := l.watchEnds(ctx); err != nil {
		// Without the store's notifications this server cannot learn of
		// another's end: answer as a claim that does not wait would.
		return l.claimOnce(ctx, c)
	}
	var lease *time.Timer
	defer func() {
		if lease != nil {
			lease.Stop()
		}
	}()
	for {
		a, err := l.claimOnce(ctx, c)
		if err != nil || a.Outcome != InProgress || a.Unknown {
			return a, err
		}
		left := a.RetryAfter
		if left <= 0 {
			left = time.Millisecond
		}
		if lease == nil {
			lease = time.NewTimer(left)
		} else {
			lease.Reset(left)
		}
		select {
		case <-w.ch:
		case <-lease.C:
		case <-deadline.C:
			return l.claimOnce(ctx, c)
		case <-ctx.Done():
			return a, nil
		case <-stop:
			return a, nil
		}
	}
}
