package resp

import (
	"container/heap"
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/spentledger/spent"
)

// completer completes the claims of rollback prefixes when their window
// ends: SET … NX there holds the key pending, so that DEL can release it,
// and the completion stores the value. A claim whose completion never comes
// (the process died) stays pending, and its namespace holds expired leases,
// so the key stays spent: an unknown outcome for an operator, never free.
//
// Each claim is known by its seq: a completion names it, and DEL's release
// forgets only the completion of the seq it released, so that a DEL racing
// with a new claim of the same key can neither drop the new claim's
// completion nor release it. The values waiting for their window hold at
// most max_rollback_bytes (reserved before the claim is made), and the
// completions in flight hold at most completingBytes of them at once.
type completer struct {
	l   *spent.Ledger
	log *slog.Logger
	m   *metrics

	maxBytes int64
	inflight *semaphore.Weighted // bytes of the completions in flight

	mu    sync.Mutex
	held  int64 // bytes reserved by values waiting, or being completed
	queue dueQueue
	index map[pendingKey]*due
	// running are the completions under way, by key.
	running map[pendingKey]spent.Seq
	wake    chan struct{}
	closed  bool
	done    chan struct{}
	inner   sync.WaitGroup // completions in flight
	sem     chan struct{}
}

type pendingKey struct{ ns, key string }

type due struct {
	pendingKey
	seq   spent.Seq
	value []byte
	cost  int64     // what the value reserved of the budget
	at    time.Time // the window's end: complete then
	end   time.Time // the lease's end: give up then
	i     int
}

type dueQueue []*due

func (q dueQueue) Len() int           { return len(q) }
func (q dueQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q dueQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i]; q[i].i = i; q[j].i = j }
func (q *dueQueue) Push(x any)        { d := x.(*due); d.i = len(*q); *q = append(*q, d) }
func (q *dueQueue) Pop() any {
	old := *q
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	d.i = -1
	return d
}

// maxCompleting bounds the completions in flight: they are many small
// writes that the store groups.
const maxCompleting = 256

// completingBytes bounds the bytes of the values of the completions in
// flight: each is copied a few times on its way to the store (the record's
// encoding, the batch, the record read back), so that 256 completions of
// 1 MiB values at once would take over a gigabyte. Small values, the
// common case, still complete 256 at a time.
const completingBytes = 4 << 20

// dueOverhead is what a waiting value costs beside its bytes (the entry, its
// key and namespace, the heap slot, the index's entry: about 257 bytes
// measured, counted with room to spare), counted against the budget so
// that many small values are bounded too.
const dueOverhead = 320

func newCompleter(l *spent.Ledger, log *slog.Logger, m *metrics, maxBytes int64) *completer {
	return &completer{l: l, log: log, m: m, maxBytes: maxBytes, inflight: semaphore.NewWeighted(completingBytes),
		index: map[pendingKey]*due{}, running: map[pendingKey]spent.Seq{}, wake: make(chan struct{}, 1), done: make(chan struct{}), sem: make(chan struct{}, maxCompleting)}
}

// cost is what a value of a key reserves of the budget.
func cost(key string, value []byte) int64 {
	return int64(len(value) + len(key) + dueOverhead)
}

// reserve reserves n bytes of the budget for a value about to be claimed,
// reporting whether they fit.
func (c *completer) reserve(n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held+n > c.maxBytes {
		return false
	}
	c.held += n
	c.m.rollbackBytes.Set(float64(c.held))
	return true
}

// unreserve gives back n bytes.
func (c *completer) unreserve(n int64) {
	c.mu.Lock()
	c.held -= n
	c.m.rollbackBytes.Set(float64(c.held))
	c.mu.Unlock()
}

// add schedules the completion of a fresh claim of seq at at, with value
// (its own copy, cost already reserved); end is its lease's end.
func (c *completer) add(ns, key string, seq spent.Seq, value []byte, cost int64, at, end time.Time) {
	d := &due{pendingKey: pendingKey{ns, key}, seq: seq, value: value, cost: cost, at: at, end: end}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.m.rollbackOpen.Inc()
		c.complete(d)
		return
	}
	old := c.index[d.pendingKey]
	if old != nil {
		// The old claim was released (by DEL, or a lease retaken) and the
		// key claimed again: the old one has nothing left to complete.
		heap.Remove(&c.queue, old.i)
		c.held -= old.cost
	}
	c.index[d.pendingKey] = d
	heap.Push(&c.queue, d)
	first := c.queue[0] == d
	c.m.rollbackBytes.Set(float64(c.held))
	c.mu.Unlock()
	if old == nil {
		c.m.rollbackOpen.Inc()
	} else {
		c.m.rollbackDone.WithLabelValues("released").Inc()
	}
	if first {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// forget drops the completion of the claim seq of key, which was released
// or completed by another command (how: "released" or "completed"); the
// completion of another claim of the key is kept.
func (c *completer) forget(ns, key string, seq spent.Seq, how string) {
	c.mu.Lock()
	d := c.index[pendingKey{ns, key}]
	if d != nil && d.seq == seq {
		delete(c.index, d.pendingKey)
		heap.Remove(&c.queue, d.i)
		c.held -= d.cost
		c.m.rollbackBytes.Set(float64(c.held))
	} else {
		d = nil
	}
	c.mu.Unlock()
	if d != nil {
		c.m.rollbackOpen.Dec()
		c.m.rollbackDone.WithLabelValues(how).Inc()
	}
}

// run completes each claim when it is due, until close.
func (c *completer) run() {
	defer close(c.done)
	t := time.NewTimer(time.Hour)
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		var ready []*due
		now := time.Now()
		for len(c.queue) > 0 && !c.queue[0].at.After(now) {
			d := heap.Pop(&c.queue).(*due)
			delete(c.index, d.pendingKey)
			ready = append(ready, d)
		}
		wait := time.Hour
		if len(c.queue) > 0 {
			wait = c.queue[0].at.Sub(now)
		}
		c.mu.Unlock()
		for _, d := range ready {
			c.sem <- struct{}{}
			c.inner.Add(1)
			go func() {
				defer func() { <-c.sem; c.inner.Done() }()
				c.complete(d)
			}()
		}
		t.Reset(wait)
		select {
		case <-t.C:
		case <-c.wake:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
	}
}

// complete stores d's value, retrying a store that does not answer until
// the namespace's lease ends (then the claim is an unknown outcome, still
// spent).
func (c *completer) complete(d *due) {
	defer c.m.rollbackOpen.Dec()
	defer c.unreserve(d.cost)
	c.mu.Lock()
	c.running[d.pendingKey] = d.seq
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.running[d.pendingKey] == d.seq {
			delete(c.running, d.pendingKey)
		}
		c.mu.Unlock()
	}()
	w := min(int64(len(d.value)), completingBytes)
	c.inflight.Acquire(context.Background(), w)
	defer c.inflight.Release(w)
	deadline := d.end
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(time.Second))
	defer cancel()
	wait := 10 * time.Millisecond
	for {
		_, err := c.l.Complete(ctx, spent.Completion{Namespace: d.ns, Key: d.key, Seq: d.seq, Result: d.value})
		switch spent.ErrorCode(err) {
		case "":
			c.m.rollbackDone.WithLabelValues("completed").Inc()
			return
		case spent.ENotFound, spent.ENotPending, spent.ESeqMismatch:
			// Released by DEL meanwhile (and perhaps claimed again), or
			// ended by SPENT.COMPLETE or SPENT.RELEASE.
			c.m.rollbackDone.WithLabelValues("released").Inc()
			return
		}
		if time.Now().Add(wait).After(deadline) {
			c.m.rollbackDone.WithLabelValues("failed").Inc()
			c.log.Error("resp: could not complete a claim of a rollback prefix before its lease ended: it stays pending, an unknown outcome (still spent); resolve it with spent unknown", "namespace", d.ns, "seq", d.seq.String(), "err", err)
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// close stops the timer and completes every claim still in its window now,
// bounded by ctx.
func (c *completer) close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	rest := []*due(c.queue)
	c.queue, c.index = nil, nil
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-c.done
	for _, d := range rest {
		c.sem <- struct{}{}
		c.inner.Add(1)
		go func() {
			defer func() { <-c.sem; c.inner.Done() }()
			c.complete(d)
		}()
	}
	finished := make(chan struct{})
	go func() { c.inner.Wait(); close(finished) }()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// due reports whether the completion of the claim seq of key is queued or
// under way: a pending record past its window is then about to be
// completed, rather than left by a crash as an unknown outcome.
func (c *completer) due(ns, key string, seq spent.Seq) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.index[pendingKey{ns, key}]; d != nil && d.seq == seq {
		return true
	}
	return c.running[pendingKey{ns, key}] == seq
}
