package spent

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"sort"
	"strings"
	"sync"
	"time"
)

// Limits on claim fields.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 512
	// MaxPlaceLen is the longest place, in bytes.
	MaxPlaceLen = 256
	// FingerprintLen is the length of a fingerprint (SHA-256).
	FingerprintLen = sha256.Size
	// MinSecretLen is the shortest HMAC secret accepted.
	MinSecretLen = 32
	// DefaultMaxResult is the default limit on a stored result.
	DefaultMaxResult = 1 << 20
	// MaxBatch is the most claims in one batch.
	MaxBatch = 10000
	// DefaultMaxBatchResult is the default budget of result bytes in the
	// answer to one batch: 16 MiB.
	DefaultMaxBatchResult = 16 << 20
	// ReservedPrefix starts the names of the namespaces the server keeps for
	// itself (its secret check and its rollback fence); configured namespaces
	// may not use it.
	ReservedPrefix = "spent."
)

// Config configures a Ledger. Build it with [DefaultConfig] and check it with
// [Config.Validate].
type Config struct {
	// Secret keys the HMAC that hashes every key. At least MinSecretLen bytes.
	// Changing it forgets every record.
	Secret []byte
	// Node is this server's node number, the first half of every Seq it
	// writes. Servers sharing one store need distinct nodes.
	Node uint32
	// Namespaces maps each namespace name to its policy.
	Namespaces map[string]Policy
	// MaxResult is the largest result accepted, in bytes.
	MaxResult int
	// MaxBatchResult is the most result bytes the answer to one ClaimBatch
	// carries, summed over its replayed claims. Replays past it come without
	// their result ([Answer].ResultOmitted), for the caller to read with
	// Get. It bounds the memory one batch can take: without it, a batch of
	// MaxBatch repeats of a key holding a MaxResult result would build an
	// answer of MaxBatch × MaxResult bytes.
	MaxBatchResult int
	// SeqBlock is how many seq counters are reserved from the store at once.
	SeqBlock uint64
	// Now is the clock. Tests inject a fake one.
	Now func() time.Time
	// Observer, when set, is told of every operation and every answer, for
	// metrics and traces (see [Observer]). Nil costs nothing.
	Observer Observer
	// Audit, when set, records every fresh answer, completion and release
	// before it is answered (see [Auditor]). Nil costs nothing.
	Audit Auditor
}

// DefaultConfig returns a configuration with one namespace, "default", under
// [DefaultPolicy], node 1 and the system clock. The secret must still be set.
func DefaultConfig() Config {
	return Config{
		Node:           1,
		Namespaces:     map[string]Policy{"default": DefaultPolicy()},
		MaxResult:      DefaultMaxResult,
		MaxBatchResult: DefaultMaxBatchResult,
		SeqBlock:       1 << 16,
		Now:            time.Now,
	}
}

// Validate refuses unusable or unsafe settings.
func (c *Config) Validate() error {
	if len(c.Secret) < MinSecretLen {
		return fmt.Errorf("spent: secret of %d bytes: need at least %d", len(c.Secret), MinSecretLen)
	}
	if c.Node == 0 {
		return errors.New("spent: node must be at least 1")
	}
	if len(c.Namespaces) == 0 {
		return errors.New("spent: no namespaces")
	}
	for name, p := range c.Namespaces {
		if err := checkNamespaceName(name); err != nil {
			return fmt.Errorf("spent: %w", err)
		}
		if err := p.Validate(); err != nil {
			return fmt.Errorf("spent: namespace %s: %w", QuoteInput(name), err)
		}
	}
	if c.MaxResult <= 0 {
		return errors.New("spent: max result must be positive")
	}
	if c.MaxBatchResult <= 0 {
		return errors.New("spent: max batch result must be positive")
	}
	if c.SeqBlock == 0 {
		return errors.New("spent: seq block must be positive")
	}
	if c.Now == nil {
		return errors.New("spent: no clock")
	}
	return nil
}

// Ledger applies namespace policies over a Store. It implements [Service].
type Ledger struct {
	store Store
	cfg   Config
	macs  sync.Pool

	seqMu   sync.Mutex
	seqNext uint64
	seqEnd  uint64
	// seqBehind, once set, refuses every new seq: the store's counter
	// went back (see ErrSeqBehind).
	seqBehind error

	// configured lists the namespaces for the unknown-namespace error.
	configured string

	// waits holds the claims waiting for a key's end (wait.go).
	waits waitHub
}

var _ Service = (*Ledger)(nil)

// NewLedger validates cfg and returns a Ledger over store. It reserves a first
// block of seq counters, so it fails when the store is unwell.
func NewLedger(ctx context.Context, store Store, cfg Config) (*Ledger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Ledger{store: store, cfg: cfg}
	l.configured = namespaceList(l.Namespaces())
	secret := append([]byte(nil), cfg.Secret...)
	l.macs.New = func() any { return &keyMAC{m: hmac.New(sha256.New, secret)} }
	if err := l.reserve(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Store returns the ledger's store.
func (l *Ledger) Store() Store { return l.store }

// MaxResult returns the largest result the ledger stores ([Config].MaxResult),
// and so the largest a read or a replay returns.
func (l *Ledger) MaxResult() int { return l.cfg.MaxResult }

// MaxBatchResult returns the most result bytes the answer to one
// ClaimBatch carries ([Config].MaxBatchResult).
func (l *Ledger) MaxBatchResult() int { return l.cfg.MaxBatchResult }

// Policy returns the policy of a namespace and whether it exists.
func (l *Ledger) Policy(namespace string) (Policy, bool) {
	p, ok := l.cfg.Namespaces[namespace]
	return p, ok
}

// Namespaces returns the configured namespace names, sorted.
func (l *Ledger) Namespaces() []string {
	names := make([]string, 0, len(l.cfg.Namespaces))
	for n := range l.cfg.Namespaces {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Now returns the ledger's time.
func (l *Ledger) Now() time.Time { return l.cfg.Now() }

// HashKey returns the stored form of key in namespace:
// HMAC-SHA256(secret, uint16be(len(namespace)) ‖ namespace ‖ key)[:16].
// The length prefix keeps ("ab","c") and ("a","bc") apart.
func (l *Ledger) HashKey(namespace, key string) Hash {
	k := l.macs.Get().(*keyMAC)
	// One Write of a buffer the pool keeps: writing the strings through
	// the hash.Hash interface would allocate a copy of each.
	k.buf = append(k.buf[:0], byte(len(namespace)>>8), byte(len(namespace)))
	k.buf = append(k.buf, namespace...)
	k.buf = append(k.buf, key...)
	k.m.Reset()
	k.m.Write(k.buf)
	k.sum = k.m.Sum(k.sum[:0])
	var h Hash
	copy(h[:], k.sum[:HashSize])
	if cap(k.buf) <= 4<<10 {
		l.macs.Put(k)
	}
	return h
}

// keyMAC is a pooled HMAC with its scratch buffers.
type keyMAC struct {
	m   hash.Hash
	buf []byte
	sum []byte
}

func (l *Ledger) reserve(ctx context.Context) error {
	first, err := l.store.ReserveSeq(ctx, l.cfg.Node, l.cfg.SeqBlock)
	if err != nil {
		return &Error{Code: EUnavailable, Message: "reserving seq", Err: err}
	}
	if l.seqEnd > 0 && first < l.seqEnd {
		// A store keeps its counter with its records: one that went back
		// lost what was written after it, and may answer fresh for keys
		// this ledger accepted. Refuse from now on (fail closed).
		l.seqBehind = &Error{Code: EUnavailable, Err: ErrSeqBehind, Message: fmt.Sprintf(
			"the store handed out seq %d:%d, below %d:%d that this server already used: the store lost acknowledged writes "+
				"(a failover to a replica that was behind, or a restore); claims are refused until the server is restarted: "+
				"run `spent audit` to find keys accepted twice, then see docs/operations.md, \"After a failover: run the audit\"",
			l.cfg.Node, first, l.cfg.Node, l.seqEnd-1)}
		return l.seqBehind
	}
	l.seqNext, l.seqEnd = first, first+l.cfg.SeqBlock
	return nil
}

func (l *Ledger) nextSeq(ctx context.Context) (Seq, error) {
	l.seqMu.Lock()
	defer l.seqMu.Unlock()
	if l.seqBehind != nil {
		return Seq{}, l.seqBehind
	}
	if l.seqNext >= l.seqEnd {
		if err := l.reserve(ctx); err != nil {
			return Seq{}, err
		}
	}
	s := Seq{Node: l.cfg.Node, Counter: l.seqNext}
	l.seqNext++
	return s, nil
}

// policy returns the namespace's policy or an EUnknownNamespace error.
func (l *Ledger) policy(ns string) (Policy, error) {
	p, ok := l.cfg.Namespaces[ns]
	if !ok {
		return p, Errorf(EUnknownNamespace, "unknown namespace %s (configured: %s)", QuoteInput(ns), l.configured)
	}
	return p, nil
}

// Bounds of the list of namespaces an unknown-namespace error gives.
const (
	maxListed    = 10
	maxListedLen = 200
)

// namespaceList lists names (sorted) for an error message: at most
// maxListed names and about maxListedLen bytes (a name is at most 64), then
// how many more there are.
func namespaceList(names []string) string {
	var b strings.Builder
	for i, name := range names {
		if i == maxListed || b.Len()+len(name) > maxListedLen {
			fmt.Fprintf(&b, ", and %d more", len(names)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
	}
	return b.String()
}

func checkKey(key string) error {
	if key == "" {
		return Errorf(EInvalid, "empty key")
	}
	if len(key) > MaxKeyLen {
		return Errorf(EKeyTooLong, "key of %d bytes: at most %d", len(key), MaxKeyLen)
	}
	return nil
}

// prepare validates c and builds the store op for it at now.
func (l *Ledger) prepare(ctx context.Context, c *Claim, now time.Time) (ClaimOp, Policy, error) {
	p, err := l.policy(c.Namespace)
	if err != nil {
		return ClaimOp{}, p, err
	}
	if err := checkKey(c.Key); err != nil {
		return ClaimOp{}, p, err
	}
	if n := len(c.Fingerprint); n != 0 && n != FingerprintLen {
		return ClaimOp{}, p, Errorf(EInvalid, "fingerprint of %d bytes: want %d (SHA-256)", n, FingerprintLen)
	}
	if err := CheckPlace(c.Place); err != nil {
		return ClaimOp{}, p, err
	}
	if c.Lease < 0 || c.Lease > p.Lease {
		return ClaimOp{}, p, Errorf(EInvalid, "lease %v: want more than 0 and at most the namespace's, %v", c.Lease, p.Lease)
	}
	if len(c.Result) > l.cfg.MaxResult {
		return ClaimOp{}, p, Errorf(ETooLarge, "result of %d bytes: at most %d", len(c.Result), l.cfg.MaxResult)
	}
	e := c.Expiry
	if !c.ExpiresAt.IsZero() {
		if !e.IsZero() {
			return ClaimOp{}, p, Errorf(EInvalid, "both expires_at and expires_in given: give one")
		}
		e = ExpiresAtTime(c.ExpiresAt)
	}
	exp, err := p.ExpiresAt(now, e)
	if err != nil {
		var de *Error
		if errors.As(err, &de) && de.Code == EExpiryTooLong {
			de.Message = "namespace " + QuoteInput(c.Namespace) + ": " + de.Message
		}
		return ClaimOp{}, p, err
	}
	seq, err := l.nextSeq(ctx)
	if err != nil {
		return ClaimOp{}, p, err
	}
	rec := Record{
		Namespace:   c.Namespace,
		Hash:        l.HashKey(c.Namespace, c.Key),
		FirstSeen:   now,
		Place:       c.Place,
		Fingerprint: c.Fingerprint,
		ExpiresAt:   exp,
		Seq:         seq,
	}
	if p.StoreRawKey {
		rec.RawKey = c.Key
	}
	if c.Result != nil {
		rec.State = StateComplete
		rec.Result = c.Result
	} else {
		rec.State = StatePending
		lease := p.Lease
		if c.Lease > 0 {
			lease = c.Lease
		}
		rec.LeaseUntil = now.Add(lease)
		if rec.LeaseUntil.After(exp) {
			rec.LeaseUntil = exp
		}
	}
	return ClaimOp{Record: rec, Now: now, Retake: p.OnLeaseExpiry == LeaseExpiryRetake, Early: c.Early && c.Result == nil}, p, nil
}

// answer turns a store's answer into an outcome under policy p.
func answer(p Policy, c *Claim, op *ClaimOp, res ClaimAnswer) Answer {
	if res.Inserted {
		return Answer{Outcome: Fresh, Record: res.Record}
	}
	r := res.Record
	out := Answer{Record: r}
	if p.Mode == ModeEcho && !sameFingerprint(r.Fingerprint, c.Fingerprint) {
		out.Outcome = Mismatch
		out.Record.Result = nil
		return out
	}
	if r.State == StatePending {
		out.Outcome = InProgress
		if r.LeaseExpiredAt(op.Now) {
			out.Unknown = true
		} else {
			out.RetryAfter = r.LeaseUntil.Sub(op.Now)
		}
		return out
	}
	if p.Mode == ModeRefuse {
		out.Outcome = Refused
		out.Record.Result = nil
		return out
	}
	out.Outcome = Replayed
	return out
}

func sameFingerprint(a, b []byte) bool { return bytes.Equal(a, b) }

// Claim records the first claim of c.Key in c.Namespace, or answers from the
// stored record. It returns only once the answer is durable. With c.Wait
// set, a claim that finds the key pending under a running lease waits, up
// to c.Wait, for the key's end (see [Claim].Wait). Store failures
// are returned as EUnavailable errors, never fresh (invariant 5 in
// docs/concepts.md); a failed write that may have committed is read back
// first (invariant 8).
func (l *Ledger) Claim(ctx context.Context, c Claim) (Answer, error) {
	obs := l.cfg.Observer
	if obs == nil {
		return l.claim(ctx, c)
	}
	return observe(ctx, obs, "claim", c.Namespace, func(ctx context.Context) (Answer, error) { return l.claim(ctx, c) },
		func(ctx context.Context, a Answer) { obs.Answered(ctx, c.Namespace, a.Outcome) })
}

// claim is Claim without the observer.
func (l *Ledger) claim(ctx context.Context, c Claim) (Answer, error) {
	if c.Wait != 0 {
		if err := checkWait(c.Wait); err != nil {
			return Answer{}, err
		}
		return l.claimWait(ctx, c)
	}
	return l.claimOnce(ctx, c)
}

// claimOnce is a claim that does not wait.
func (l *Ledger) claimOnce(ctx context.Context, c Claim) (Answer, error) {
	now := l.cfg.Now()
	op, p, err := l.prepare(ctx, &c, now)
	if err != nil {
		return Answer{}, err
	}
	res, err := l.store.Claim(ctx, op)
	if err != nil {
		r, _, err := l.resolve(ctx, p, &c, &op, err, l.readBack)
		if err != nil {
			return r, err
		}
		return l.audited(ctx, r, now)
	}
	return l.audited(ctx, answer(p, &c, &op, res), now)
}

// resolve settles an ambiguous claim by reading the key back: its own seq
// means the write happened (fresh); another record gives the normal second
// answer; no record, or no answer from the store, is a retryable error.
// read reads the key back; it may leave out a long result (ResultOmitted),
// whose length resolve returns.
func (l *Ledger) resolve(ctx context.Context, p Policy, c *Claim, op *ClaimOp, cause error,
	read func(context.Context, *ClaimOp) (ClaimAnswer, error)) (Answer, int, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	got, err := read(rctx, op)
	if err != nil {
		return Answer{}, 0, &Error{Code: EUnavailable, Message: "claim failed and could not be read back", Err: cause}
	}
	r := got.Record
	if r.Seq == op.Record.Seq {
		if got.ResultOmitted {
			// The record is the op's own: its result is the op's.
			r.Result = op.Record.Result
		}
		return Answer{Outcome: Fresh, Record: r}, 0, nil
	}
	if FreeAt(&r, op.Now, op.Retake) {
		return Answer{}, 0, &Error{Code: EUnavailable, Message: "claim failed; key still free, retry", Err: cause}
	}
	return answer(p, c, op, got), got.ResultLen, nil
}

// readBack reads op's key back, result and all.
func (l *Ledger) readBack(ctx context.Context, op *ClaimOp) (ClaimAnswer, error) {
	r, err := l.store.Get(ctx, op.Record.Hash, op.Now)
	return ClaimAnswer{Record: r}, err
}

// ClaimBatch answers each claim in order, as Claim would, with everything
// durable on return (Claim.Early is ignored). A malformed claim rejects the
// whole batch before anything is written.
//
// The answer carries at most [Config].MaxBatchResult result bytes: each op
// asks the store for results of at most MaxBatchResult/len(cs) bytes
// ([ClaimOp].ResultLimit), and the replays whose result was left out are
// then filled in order, reading each key once, while the answer's total
// stays within the budget. Replays still without their result are marked
// [Answer].ResultOmitted. Repeats of one key in the answer share the bytes
// of its result.
func (l *Ledger) ClaimBatch(ctx context.Context, cs []Claim) ([]Answer, error) {
	obs := l.cfg.Observer
	if obs == nil {
		return l.claimBatch(ctx, cs)
	}
	return observe(ctx, obs, "claim_batch", "", func(ctx context.Context) ([]Answer, error) { return l.claimBatch(ctx, cs) },
		func(ctx context.Context, out []Answer) {
			for i := range out {
				obs.Answered(ctx, cs[i].Namespace, out[i].Outcome)
			}
		})
}

// claimBatch is ClaimBatch without the observer.
func (l *Ledger) claimBatch(ctx context.Context, cs []Claim) ([]Answer, error) {
	if len(cs) > MaxBatch {
		return nil, Errorf(ETooLarge, "batch of %d claims: at most %d", len(cs), MaxBatch)
	}
	now := l.cfg.Now()
	ops := make([]ClaimOp, len(cs))
	pols := make([]Policy, len(cs))
	limit := max(1, l.cfg.MaxBatchResult/max(1, len(cs)))
	for i := range cs {
		op, p, err := l.prepare(ctx, &cs[i], now)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				return nil, &Error{Code: e.Code, Message: fmt.Sprintf("claims[%d]: %s", i, e.Message), Err: e.Err}
			}
			return nil, err
		}
		op.Early = false
		op.ResultLimit = limit
		ops[i], pols[i] = op, p
	}
	out := make([]Answer, len(cs))
	omitted := make([]int, len(cs)) // the length of each result left out
	res, cause := l.store.ClaimBatch(ctx, ops)
	if cause != nil {
		// Read each key back once, leaving out long results as the
		// store would have.
		seen := make(map[Hash]ClaimAnswer)
		read := func(ctx context.Context, op *ClaimOp) (ClaimAnswer, error) {
			if got, ok := seen[op.Record.Hash]; ok {
				return got, nil
			}
			got, err := l.readBack(ctx, op)
			if err != nil {
				return got, err
			}
			got = LimitResult(got, limit)
			seen[op.Record.Hash] = got
			return got, nil
		}
		for i := range cs {
			var err error
			if out[i], omitted[i], err = l.resolve(ctx, pols[i], &cs[i], &ops[i], cause, read); err != nil {
				return nil, err
			}
		}
	} else {
		if len(res) != len(ops) {
			return nil, &Error{Code: EInternal, Message: fmt.Sprintf("store answered %d of %d claims", len(res), len(ops))}
		}
		for i := range cs {
			out[i] = answer(pols[i], &cs[i], &ops[i], res[i])
			if res[i].ResultOmitted {
				omitted[i] = res[i].ResultLen
			}
		}
	}
	if err := l.auditBatch(ctx, out, now); err != nil {
		return nil, err
	}
	l.fitResults(ctx, now, out, omitted)
	return out, nil
}

// fitResults keeps the result bytes of a batch's answer within
// MaxBatchResult. It walks the replays in order: a result present is kept
// while it fits, else dropped; a result the store left out (omitted[i] is
// its length) is read, once per key, while it fits. Replays left without
// their result are marked ResultOmitted.
func (l *Ledger) fitResults(ctx context.Context, now time.Time, out []Answer, omitted []int) {
	budget := l.cfg.MaxBatchResult
	total := 0
	read := make(map[Hash][]byte)
	for i := range out {
		r := &out[i]
		if r.Outcome != Replayed {
			continue
		}
		if omitted[i] == 0 {
			if n := len(r.Record.Result); total+n <= budget {
				total += n
			} else {
				r.Record.Result, r.ResultOmitted = nil, true
			}
			continue
		}
		r.ResultOmitted = true
		n := omitted[i]
		if total+n > budget {
			continue
		}
		b, ok := read[r.Record.Hash]
		if !ok {
			b = l.readResult(ctx, &r.Record, now)
			read[r.Record.Hash] = b
		}
		if b != nil && len(b) == n {
			r.Record.Result, r.ResultOmitted = b, false
			total += n
		}
	}
}

// readResult reads the result of the complete record rec, found by a claim
// at now, or returns nil when the store cannot be read or holds another
// record by now (the caller then leaves the result out, for its reader to
// read with Get).
func (l *Ledger) readResult(ctx context.Context, rec *Record, now time.Time) []byte {
	r, err := l.store.Get(ctx, rec.Hash, now)
	if err != nil || r.Seq != rec.Seq || r.State != StateComplete || r.Result == nil {
		return nil
	}
	return r.Result
}

// direct reports whether a completion or release can go straight to the
// store, without reading the record first: when the caller names the key
// (so the hash is of this namespace) and the seq of its own fresh claim, and
// does not force. It returns the key's hash then.
func (l *Ledger) direct(ns, key string, seq Seq, force bool) (Hash, bool, error) {
	if key == "" || seq.IsZero() || force {
		return Hash{}, false, nil
	}
	h, err := l.address(ns, key, Hash{})
	return h, err == nil, err
}

// address checks the namespace and returns the hash a completion or release
// addresses: that of key when given, else h.
func (l *Ledger) address(ns, key string, h Hash) (Hash, error) {
	if _, err := l.policy(ns); err != nil {
		return Hash{}, err
	}
	if key != "" {
		if err := checkKey(key); err != nil {
			return Hash{}, err
		}
		return l.HashKey(ns, key), nil
	}
	if h.IsZero() {
		return Hash{}, Errorf(EInvalid, "neither key nor hash given")
	}
	return h, nil
}

// target reads the record a completion or release addresses and rules on
// ending e against it with [RuleEnd], after checking that the record is of
// namespace ns (a hash names a key of one namespace only). done reports a
// retried completion that finds its own result stored: r is then the
// answer, and nothing is to be written.
func (l *Ledger) target(ctx context.Context, ns, key string, h Hash, e Ending, now time.Time) (r Record, done bool, err error) {
	h, err = l.address(ns, key, h)
	if err != nil {
		return Record{}, false, err
	}
	r, err = l.store.Get(ctx, h, now)
	if err != nil {
		return Record{}, false, storeError(err)
	}
	if r.Namespace != ns {
		return Record{}, false, Errorf(ENotFound, "no live record for this key")
	}
	done, err = RuleEnd(&r, now, e)
	switch {
	case errors.Is(err, ErrSeqMismatch):
		return r, false, Errorf(ESeqMismatch, "record %s was written by another claim", r.Seq)
	case errors.Is(err, ErrLeaseExpired):
		return r, false, Errorf(ELeaseExpired, "lease ran out at %s; an operator must resolve this outcome", r.LeaseUntil.Format(time.RFC3339Nano))
	case err != nil:
		return r, false, storeError(err)
	}
	return r, done, nil
}

// Complete stores the result of a fresh two-step claim, durable on return. See
// [Completion] for who may complete what. Completing again with the same seq
// and the same bytes succeeds, so a completion whose answer was lost can be
// retried; other bytes get ENotPending.
func (l *Ledger) Complete(ctx context.Context, c Completion) (Record, error) {
	if l.cfg.Observer == nil {
		return l.complete(ctx, c)
	}
	return observe(ctx, l.cfg.Observer, "complete", c.Namespace, func(ctx context.Context) (Record, error) { return l.complete(ctx, c) }, nil)
}

// complete is Complete without the observer.
func (l *Ledger) complete(ctx context.Context, c Completion) (Record, error) {
	if len(c.Result) > l.cfg.MaxResult {
		return Record{}, Errorf(ETooLarge, "result of %d bytes: at most %d", len(c.Result), l.cfg.MaxResult)
	}
	now := l.cfg.Now()
	result := c.Result
	if result == nil {
		result = []byte{}
	}
	if h, ok, err := l.direct(c.Namespace, c.Key, c.Seq, c.Force); err != nil {
		return Record{}, err
	} else if ok {
		// The caller holds the seq of its fresh claim: the store checks the
		// state and the seq itself (and accepts a retry with the same bytes),
		// so the read that target does is not needed.
		rec, err := l.store.Complete(ctx, h, c.Seq, result, now)
		// Waiters look again even after an error: the write may have
		// happened.
		l.ended(h)
		if err != nil {
			return Record{}, storeError(err)
		}
		if err := l.auditEnd(ctx, AuditCompleted, c.Namespace, h, c.Seq, now); err != nil {
			return Record{}, err
		}
		return rec, nil
	}
	r, done, err := l.target(ctx, c.Namespace, c.Key, c.Hash, Ending{Seq: c.Seq, AnySeq: c.Seq.IsZero(), Result: result, Force: c.Force}, now)
	if err != nil {
		return Record{}, err
	}
	if done {
		// A completion retried after an ambiguous failure found its own
		// result already stored: that is success, not a conflict.
		if err := l.auditEnd(ctx, AuditCompleted, c.Namespace, r.Hash, r.Seq, now); err != nil {
			return Record{}, err
		}
		return r, nil
	}
	rec, err := l.store.Complete(ctx, r.Hash, r.Seq, result, now)
	l.ended(r.Hash)
	if err != nil {
		return Record{}, storeError(err)
	}
	if err := l.auditEnd(ctx, AuditCompleted, c.Namespace, r.Hash, r.Seq, now); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// Release rolls back a fresh two-step claim: its key is forgotten, so the
// next claim is fresh. See [Release] for who may release what.
func (l *Ledger) Release(ctx context.Context, rel Release) error {
	if l.cfg.Observer == nil {
		return l.release(ctx, rel)
	}
	_, err := observe(ctx, l.cfg.Observer, "release", rel.Namespace, func(ctx context.Context) (struct{}, error) { return struct{}{}, l.release(ctx, rel) }, nil)
	return err
}

// release is Release without the observer.
func (l *Ledger) release(ctx context.Context, rel Release) error {
	now := l.cfg.Now()
	p, err := l.policy(rel.Namespace)
	if err != nil {
		return err
	}
	// Under hold the record is read first, even with the claim's seq: a
	// release after the lease must be refused (see Release).
	if p.OnLeaseExpiry == LeaseExpiryHold {
		return l.releaseRead(ctx, rel, now)
	}
	if h, ok, err := l.direct(rel.Namespace, rel.Key, rel.Seq, rel.Force); err != nil {
		return err
	} else if ok {
		err := l.store.Release(ctx, h, rel.Seq, now)
		l.ended(h) // also after an error, as in complete
		if err != nil {
			return storeError(err)
		}
		return l.auditEnd(ctx, AuditReleased, rel.Namespace, h, rel.Seq, now)
	}
	return l.releaseRead(ctx, rel, now)
}

// releaseRead releases after reading the record and ruling on it, and, in
// a namespace that holds expired leases, refuses a release after the lease
// unless forced.
func (l *Ledger) releaseRead(ctx context.Context, rel Release, now time.Time) error {
	r, _, err := l.target(ctx, rel.Namespace, rel.Key, rel.Hash, Ending{Seq: rel.Seq, AnySeq: rel.Seq.IsZero(), Release: true, Force: rel.Force}, now)
	if err != nil {
		return err
	}
	if p, _ := l.policy(rel.Namespace); p.OnLeaseExpiry == LeaseExpiryHold && !rel.Force && r.LeaseExpiredAt(now) {
		return Errorf(ELeaseExpired, "lease ran out at %s: the record is an unknown outcome, which only an operator may release (force); its side effect may have happened", r.LeaseUntil.Format(time.RFC3339Nano))
	}
	err = l.store.Release(ctx, r.Hash, r.Seq, now)
	l.ended(r.Hash)
	if err != nil {
		return storeError(err)
	}
	return l.auditEnd(ctx, AuditReleased, rel.Namespace, r.Hash, r.Seq, now)
}

// Get returns the live record of key in namespace, or an ENotFound error.
func (l *Ledger) Get(ctx context.Context, namespace, key string) (Record, error) {
	if l.cfg.Observer == nil {
		return l.get(ctx, namespace, key)
	}
	return observe(ctx, l.cfg.Observer, "get", namespace, func(ctx context.Context) (Record, error) { return l.get(ctx, namespace, key) }, nil)
}

// get is Get without the observer.
func (l *Ledger) get(ctx context.Context, namespace, key string) (Record, error) {
	if _, err := l.policy(namespace); err != nil {
		return Record{}, err
	}
	if err := checkKey(key); err != nil {
		return Record{}, err
	}
	r, err := l.store.Get(ctx, l.HashKey(namespace, key), l.cfg.Now())
	if err != nil {
		return Record{}, storeError(err)
	}
	return r, nil
}

// Count adds one to the bounded counter named by (scope, key) unless it
// already holds limit, and reports the counter after the op (see
// [Store.Count]). The key is stored only as its HMAC, like a claim's key, so
// a client identity used as key is never kept in the clear. A counter that
// does not exist or has expired starts from zero and expires at expiresAt,
// which must be after the ledger's now. Scopes need no configuration; they
// keep unrelated counters apart. Over the limit, Added is false and no error
// is returned: the caller decides what that means (a 429, say).
func (l *Ledger) Count(ctx context.Context, scope, key string, limit uint64, expiresAt time.Time) (CountAnswer, error) {
	if l.cfg.Observer == nil {
		return l.count(ctx, scope, key, limit, expiresAt)
	}
	return observe(ctx, l.cfg.Observer, "count", "", func(ctx context.Context) (CountAnswer, error) {
		return l.count(ctx, scope, key, limit, expiresAt)
	}, nil)
}

// count is Count without the observer.
func (l *Ledger) count(ctx context.Context, scope, key string, limit uint64, expiresAt time.Time) (CountAnswer, error) {
	if err := checkKey(key); err != nil {
		return CountAnswer{}, err
	}
	if len(scope) > MaxKeyLen {
		return CountAnswer{}, Errorf(EKeyTooLong, "counter scope of %d bytes: at most %d", len(scope), MaxKeyLen)
	}
	now := l.cfg.Now()
	if !expiresAt.After(now) {
		return CountAnswer{}, Errorf(EInvalid, "counter expiry %s is not after now (%s)", expiresAt.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	res, err := l.store.Count(ctx, CountOp{Key: l.HashKey(scope, key), Limit: limit, ExpiresAt: expiresAt, Now: now})
	if err != nil {
		return CountAnswer{}, storeError(err)
	}
	return res, nil
}

// Unknown lists up to limit unknown outcomes: pending records of hold
// namespaces whose lease has run out, oldest lease first. An empty namespace
// lists all hold namespaces. Operators resolve them with Complete or Release with Force.
func (l *Ledger) Unknown(ctx context.Context, namespace string, limit int) ([]Record, error) {
	if namespace != "" {
		p, err := l.policy(namespace)
		if err != nil {
			return nil, err
		}
		if p.OnLeaseExpiry != LeaseExpiryHold {
			return nil, nil
		}
	}
	if limit <= 0 || limit > MaxBatch {
		limit = MaxBatch
	}
	now := l.cfg.Now()
	names := []string{namespace}
	if namespace == "" {
		// One page per hold namespace, so that expired leases of retake
		// namespaces (which are not unknown outcomes) never fill the page.
		names = names[:0]
		for _, n := range l.Namespaces() {
			if l.cfg.Namespaces[n].OnLeaseExpiry == LeaseExpiryHold {
				names = append(names, n)
			}
		}
	}
	var out []Record
	for _, n := range names {
		recs, err := l.store.ListPending(ctx, n, now, limit)
		if err != nil {
			return nil, storeError(err)
		}
		out = append(out, recs...)
	}
	// Each page is oldest lease first; merge them and keep the oldest limit.
	out = OldestLeaseFirst(out, limit)
	return out, nil
}

// Sweep forgets expired records in batches of batch until none are left, and
// returns how many it removed.
func (l *Ledger) Sweep(ctx context.Context, batch int) (int, error) {
	total := 0
	for {
		n, err := l.store.DeleteExpired(ctx, l.cfg.Now(), batch)
		total += n
		if err != nil {
			return total, storeError(err)
		}
		if n < batch {
			return total, nil
		}
	}
}

// checkNamespaceName says what is wrong with a namespace name: it must be 1
// to 64 bytes and must not start with [ReservedPrefix].
func checkNamespaceName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("namespace name %s: 1 to 64 bytes", QuoteInput(name))
	}
	if strings.HasPrefix(name, ReservedPrefix) {
		return fmt.Errorf("namespace name %s: names starting with %q are the server's own", QuoteInput(name), ReservedPrefix)
	}
	return nil
}

// PurgeBatch is how many records [Ledger.Purge] asks the store to forget at
// once.
const PurgeBatch = 1000

// Purge forgets every record of namespace, live or expired, pending or
// complete, in batches of [PurgeBatch] (see [Store.Purge]), and returns how
// many it removed, also when it fails part way. Any name is accepted, not
// only a configured one: an epoch retirement may purge a token namespace
// that the configuration no longer has. The server's own namespaces (names
// starting with [ReservedPrefix]: its secret check and rollback fence) are
// refused. It is an operator's tool: it may read every record of the store,
// and forgetting live records is harmless only where their keys can no
// longer be presented (the issuing keys of a token namespace were retired).
// Counters are untouched.
func (l *Ledger) Purge(ctx context.Context, namespace string) (int, error) {
	if err := checkNamespaceName(namespace); err != nil {
		return 0, Errorf(EInvalid, "%v", err)
	}
	total := 0
	for {
		n, err := l.store.Purge(ctx, namespace, PurgeBatch)
		total += n
		if err != nil {
			return total, storeError(err)
		}
		if n < PurgeBatch {
			return total, nil
		}
	}
}

// storeError maps a store error to a domain error.
func storeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return Errorf(ENotFound, "no live record for this key")
	case errors.Is(err, ErrNotPending):
		return Errorf(ENotPending, "record is already complete")
	case errors.Is(err, ErrSeqMismatch):
		return Errorf(ESeqMismatch, "record was written by another claim")
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: EUnavailable, Message: "store failure", Err: err}
}
