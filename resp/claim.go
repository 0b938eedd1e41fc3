package resp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spentledger/spent"
)

// A claim command's kinds.
const (
	kindSet    = iota // SET key value NX …
	kindSetNX         // SETNX key value
	kindNative        // SPENT.CLAIM ns key …
)

// pendingClaim is one claim command of a run, parsed.
type pendingClaim struct {
	kind   int
	get    bool    // SET … GET
	prefix *Prefix // nil for SPENT.CLAIM
	value  []byte  // the value of a rollback prefix's claim, stored at completion
	cost   int64   // what value reserved of the rollback budget
	claim  spent.Claim
	reply  []byte // an error reply written while parsing; nil when it goes to the ledger
	answer spent.Answer
	err    error
}

// claims decides a run of claim commands: those that parse go to the ledger
// together (one store write), and the replies are written in order.
func (c *conn) claims(run [][][]byte) {
	items := c.items[:0]
	for range run {
		items = append(items, pendingClaim{})
	}
	batch, at := c.batchOf[:0], c.at[:0]
	defer func() {
		clear(items)
		clear(batch)
		if cap(items) <= maxReused {
			c.items, c.batchOf, c.at = items[:0], batch[:0], at[:0]
		}
	}()
	now := c.s.ledger.Now()
	for i, args := range run {
		it := &items[i]
		saved := c.w.b
		c.w.b = nil
		c.parseClaim(it, args, now)
		if len(c.w.b) > 0 {
			it.reply = c.w.b
		}
		c.w.b = saved
		if it.reply == nil {
			batch = append(batch, it.claim)
			at = append(at, i)
		}
	}
	// Claims that answer with a stored value (SET … GET, SPENT.CLAIM)
	// reserve room for the values of the run's replies, as a read does,
	// before anything is decided: with none, the run is answered
	// -UNAVAILABLE and nothing is claimed.
	if n := c.valueRoom(items); n > 0 {
		if !c.s.budget.TryAcquire(n) {
			c.s.m.refused.WithLabelValues("busy").Inc()
			for i := range items {
				if items[i].reply == nil {
					c.s.rollback.unreserve(items[i].cost)
					items[i].cost = 0
					items[i].err = spent.Errorf(spent.EUnavailable, "server busy: the requests and replies in flight fill the budget of %d bytes (max_bodies); nothing was claimed; retry", c.s.budget.Total())
				}
			}
			for i := range items {
				c.answerClaim(&items[i])
			}
			return
		}
		defer c.s.budget.Release(n)
	}
	ctx, cancel := c.ctx()
	defer cancel()
	switch len(batch) {
	case 0:
	case 1:
		items[at[0]].answer, items[at[0]].err = c.s.ledger.Claim(ctx, batch[0])
	default:
		answers, err := c.s.ledger.ClaimBatch(ctx, batch)
		switch {
		case err == nil:
			for j, i := range at {
				items[i].answer = answers[j]
			}
		case malformed(err):
			// One claim was refused before anything was written: decide
			// each on its own, so that only that one gets the error.
			for j, i := range at {
				items[i].answer, items[i].err = c.s.ledger.Claim(ctx, batch[j])
			}
		default:
			for _, i := range at {
				items[i].err = err
			}
		}
	}
	for i := range items {
		c.answerClaim(&items[i])
		c.spill()
	}
}

// valueRoom is what the values of a run's replies may take: max_bulk for
// each claim that answers with a stored value, at most the ledger's budget
// of results in a batch and one more value (read on its own, past it).
func (c *conn) valueRoom(items []pendingClaim) int64 {
	k := int64(0)
	for i := range items {
		if it := &items[i]; it.reply == nil && (it.get || it.kind == kindNative) {
			k++
		}
	}
	bulk := int64(c.s.cfg.MaxBulk)
	return min(k*bulk, int64(c.s.ledger.MaxBatchResult())+bulk)
}

// maxReused is the most claims whose buffers a connection keeps for its
// next run.
const maxReused = 256

// malformed reports whether a batch was refused for one claim's input, so
// that nothing of it was written.
func malformed(err error) bool {
	switch spent.ErrorCode(err) {
	case spent.EInvalid, spent.EKeyTooLong, spent.ETooLarge, spent.EUnknownNamespace:
		return true
	}
	return false
}

// parseClaim parses one claim command into it, or writes its error reply.
func (c *conn) parseClaim(it *pendingClaim, args [][]byte, now time.Time) {
	name := upper(args[0])
	if c.g == nil {
		c.noauth()
		return
	}
	switch name {
	case "SETNX":
		it.kind = kindSetNX
		if len(args) != 3 {
			c.arity(name)
			return
		}
		c.redisClaim(it, args[1], args[2], spent.Expiry{}, now)
	case "SET":
		it.kind = kindSet
		if len(args) < 3 {
			c.arity(name)
			return
		}
		nx, keepTTL := false, false
		var exp spent.Expiry
		for i := 3; i < len(args); i++ {
			opt := upper(args[i])
			switch opt {
			case "NX":
				nx = true
			case "GET":
				it.get = true
			case "KEEPTTL":
				if !exp.IsZero() {
					c.w.fail("ERR", "syntax error")
					return
				}
				keepTTL = true
			case "XX":
				c.w.fail("ERR", "spent refuses SET … XX: a record is never overwritten; claim with SET key value NX")
				return
			case "EX", "PX", "EXAT", "PXAT":
				if !exp.IsZero() || keepTTL || i+1 == len(args) {
					c.w.fail("ERR", "syntax error")
					return
				}
				i++
				n, err := redisInt(args[i])
				if err != nil {
					c.w.fail("ERR", "value is not an integer or out of range")
					return
				}
				if n <= 0 {
					c.w.fail("ERR", "invalid expire time in 'set' command")
					return
				}
				// Any positive integer is taken: the ledger's one expiry
				// rule (spent.Policy.ExpiresAt) computes it without
				// overflow and keeps it within the namespace's bounds.
				switch opt {
				case "EX":
					exp = spent.ExpiresIn(n, time.Second)
				case "PX":
					exp = spent.ExpiresIn(n, time.Millisecond)
				case "EXAT":
					exp = spent.ExpiresAtUnix(n, time.Second)
				case "PXAT":
					exp = spent.ExpiresAtUnix(n, time.Millisecond)
				}
			default:
				c.w.fail("ERR", "syntax error")
				return
			}
		}
		if !nx {
			c.w.fail("ERR", "spent refuses SET without NX: a record is never overwritten; claim with SET key value NX (or SETNX)")
			return
		}
		c.redisClaim(it, args[1], args[2], exp, now)
	case "SPENT.CLAIM":
		it.kind = kindNative
		c.nativeClaim(it, args)
	}
}

// redisInt parses an integer as Redis does: an optional minus, then
// digits without a leading zero (except 0 itself), in 64 bits.
func redisInt(b []byte) (int64, error) {
	s := string(b)
	d := strings.TrimPrefix(s, "-")
	if d == "" || (d[0] == '0' && len(d) > 1) || d[0] < '0' || d[0] > '9' {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(s, 10, 64)
}

// redisClaim fills in the claim of a SET … NX or SETNX: the key's prefix
// names the namespace, the value is the result (stored at once, or at the
// end of the rollback window), and the expiry asked for goes to the
// ledger's one expiry rule clamped (as Redis clients expect any SET to be
// taken) and at least the prefix's minimum: the record lives between the
// namespace's min_expiry (or the prefix's, when longer) and its
// max_expiry, whatever the integer. A value of a rollback prefix is
// copied, so that it keeps no buffer of the connection alive, and reserved
// of the rollback budget; when it does not fit, the claim is refused before
// it is made.
func (c *conn) redisClaim(it *pendingClaim, k, value []byte, exp spent.Expiry, now time.Time) {
	p, key, ok := c.key(k)
	if !ok {
		return
	}
	pol, _ := c.s.ledger.Policy(p.Namespace)
	if !exp.IsZero() {
		exp = exp.Clamped().AtLeast(p.MinExpiry)
	}
	at, err := pol.ExpiresAt(now, exp)
	if err != nil {
		var e *spent.Error
		errors.As(err, &e)
		c.w.fail("ERR", "invalid expire time in 'set' command: "+e.Message)
		return
	}
	it.prefix = p
	it.claim = spent.Claim{Namespace: p.Namespace, Key: key, Place: c.name, Expiry: exp}
	if !p.Rollback {
		it.claim.Result = value
		return
	}
	// The rollback window is the claim's lease: half the namespace's, or
	// half the time to its expiry when that comes first, so that the
	// completion lands while the record lives. The ledger ends the window
	// for every front end: past it, a release without force is refused.
	it.claim.Lease = max(min(pol.Lease, at.Sub(now))/2, time.Millisecond)
	it.cost = cost(key, value)
	if !c.s.rollback.reserve(it.cost) {
		it.cost = 0
		c.s.m.refused.WithLabelValues("rollback_budget").Inc()
		c.w.fail("UNAVAILABLE", fmt.Sprintf("server busy: the values of rollback prefixes waiting for their window fill the budget of %d bytes (resp max_rollback_bytes); nothing was claimed; retry", c.s.cfg.MaxRollbackBytes))
		return
	}
	// A short value is carved from the connection's read buffer, which
	// it would keep alive for the whole window: it is copied. A longer
	// one has bytes of its own, which the batch lets go of when it ends.
	if len(value) <= maxCarved {
		it.value = append(make([]byte, 0, len(value)), value...)
	} else {
		it.value = value
	}
}

// nativeClaim parses SPENT.CLAIM ns key [RESULT v] [FP hex] [PLACE p]
// [EXPIRESAT ms | EXPIRESIN iso8601]. Their expiry is the HTTP API's:
// beyond max_expiry it is refused (EXPIRY_TOO_LONG), not clamped.
func (c *conn) nativeClaim(it *pendingClaim, args [][]byte) {
	if len(args) < 3 || len(args)%2 == 0 {
		c.arity("SPENT.CLAIM")
		return
	}
	ns := string(args[1])
	if !c.allowed(ns, false) {
		return
	}
	it.claim = spent.Claim{Namespace: ns, Key: string(args[2]), Place: c.name}
	for i := 3; i < len(args); i += 2 {
		v := args[i+1]
		switch upper(args[i]) {
		case "RESULT":
			it.claim.Result = v
		case "FP":
			fp, err := hexFingerprint(v)
			if err != nil {
				c.w.errorReply(err)
				return
			}
			it.claim.Fingerprint = fp
		case "PLACE":
			it.claim.Place = string(v)
		case "EXPIRESAT":
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n <= 0 || !it.claim.Expiry.IsZero() {
				c.w.fail("INVALID", "EXPIRESAT "+spent.QuoteInput(string(v))+": want Unix milliseconds, once, without EXPIRESIN")
				return
			}
			it.claim.Expiry = spent.ExpiresAtUnix(n, time.Millisecond)
		case "EXPIRESIN":
			e, err := spent.ParseExpiresIn(string(v))
			if err == nil && !it.claim.Expiry.IsZero() {
				err = spent.Errorf(spent.EInvalid, "EXPIRESIN given twice, or with EXPIRESAT: give one")
			}
			if err != nil {
				c.w.errorReply(err)
				return
			}
			it.claim.Expiry = e
		default:
			c.w.fail("ERR", "syntax error: SPENT.CLAIM ns key [RESULT v] [FP hex] [PLACE p] [EXPIRESAT ms | EXPIRESIN iso8601], not "+spent.QuoteInput(string(args[i])))
			return
		}
	}
}

// answerClaim writes the reply of one claim command, in Redis's words for
// SET and SETNX: fresh is OK (1), every repeat nil (0).
func (c *conn) answerClaim(it *pendingClaim) {
	label := [...]string{"set", "setnx", "spent.claim"}[it.kind]
	if it.reply != nil {
		c.s.m.command(label, false)
		c.w.b = append(c.w.b, it.reply...)
		return
	}
	if it.err != nil {
		c.s.m.command(label, false)
		c.s.rollback.unreserve(it.cost)
		c.fail(it.err)
		return
	}
	c.s.m.command(label, true)
	a := &it.answer
	if o, ok := c.s.m.byOutcome[a.Outcome]; ok {
		o.Inc()
	}
	fresh := a.Outcome == spent.Fresh
	if fresh && it.prefix != nil && it.prefix.Rollback {
		// The window is half the lease, which ends at the record's expiry
		// when that comes first; DEL reads it from the record too.
		r := &a.Record
		pol, _ := c.s.ledger.Policy(it.claim.Namespace)
		c.s.rollback.add(it.claim.Namespace, it.claim.Key, r.Seq, it.value, it.cost, r.LeaseUntil, r.FirstSeen.Add(pol.Lease))
	} else {
		c.s.rollback.unreserve(it.cost)
	}
	switch it.kind {
	case kindSetNX:
		if fresh {
			c.w.integer(1)
		} else {
			c.w.integer(0)
		}
	case kindSet:
		switch {
		case fresh && it.get:
			c.w.null() // no value was there before
		case fresh:
			c.w.simple("OK")
		case !it.get:
			c.w.null()
		case a.Outcome == spent.Replayed && !a.ResultOmitted:
			c.w.bulk(a.Record.Result)
		case a.Outcome == spent.Replayed && c.broken:
			c.w.null() // its client is gone: the value is not read
		case a.Outcome == spent.Replayed:
			c.replayedValue(it)
		default:
			// A repeat whose value is not shown (refuse namespace, pending,
			// mismatch): an empty string, never nil, which would say the
			// key was free.
			c.w.bulkString("")
		}
	case kindNative:
		if a.ResultOmitted && !c.broken {
			ctx, cancel := c.ctx()
			if rec, err := c.s.ledger.Get(ctx, it.claim.Namespace, it.claim.Key); err == nil && rec.Seq == a.Record.Seq {
				a.Record.Result = rec.Result
			}
			cancel()
		}
		c.record(&a.Record, a)
	}
}

// replayedValue reads the value of a replay whose result the batch left
// out (the batch's result budget was spent).
func (c *conn) replayedValue(it *pendingClaim) {
	ctx, cancel := c.ctx()
	defer cancel()
	rec, err := c.s.ledger.Get(ctx, it.claim.Namespace, it.claim.Key)
	if err != nil || rec.State != spent.StateComplete {
		c.w.bulkString("")
		return
	}
	c.w.bulk(rec.Result)
}
