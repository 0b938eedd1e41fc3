package spent

import (
	"context"
	"time"
)

// Claim is one claim of a key.
type Claim struct {
	// Namespace names a configured namespace.
	Namespace string `json:"namespace"`
	// Key is the caller's key, 1 to MaxKeyLen bytes.
	Key string `json:"key"`
	// Fingerprint is the SHA-256 of the canonical request bytes (32 bytes) or
	// empty. In echo mode a repeat with another fingerprint is a mismatch.
	Fingerprint []byte `json:"fingerprint,omitempty"`
	// Place says who is claiming: a gate, a node, a relay.
	Place string `json:"place,omitempty"`
	// Result, when non-nil, makes the claim one-step: the result is stored in
	// the same atomic write and the record is complete at once. Use []byte{}
	// for an empty result.
	Result []byte `json:"result"`
	// ExpiresAt, when set, overrides the namespace's retention for this key,
	// within the namespace's min_expiry and max_expiry (see
	// [Policy.ExpiresAt]; beyond max_expiry it is refused).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Expiry, when set, is the claim's expiry in the form its client sent it
	// (an integer in any unit, an ISO 8601 duration; see [Expiry]), for the
	// ledger's one expiry rule. Set ExpiresAt or Expiry, not both. The HTTP
	// client sends a lifetime as expires_in and an instant as expires_at;
	// [Expiry.Clamped] and [Expiry.AtLeast] are for front ends in the
	// server's process and are refused by the HTTP client.
	Expiry Expiry `json:"-"`
	// Early lets a store answer a fresh two-step claim as soon as it is
	// decided, before anything of it is durable (the embedded store does;
	// the others ignore it and answer once durable). Every other answer
	// (replayed, in progress, ...) still waits until what it reports is
	// durable, and one-step claims ignore it.
	//
	// A caller in the same process as the ledger sets it (it is never sent
	// over the wire) when losing the claim to a crash is harmless: until a
	// later durable write of its own has returned (the claim's Complete),
	// a crash may leave the key free, as a Release would, so nothing that
	// tells anyone the claim was made may leave the process before then.
	// The idempotency middleware claims so before it runs a handler: it
	// sends the handler's answer only once stored, and a handler whose
	// effect must happen at most once calls Applied first, whose marker is
	// an ordinary, durable claim.
	Early bool `json:"-"`
	// Wait, when positive, lets a claim that finds the key pending under a
	// running lease wait up to Wait for the pending claim to end, rather
	// than answer in_progress at once: a completion answers the waiter as a
	// repeat (replayed, refused or mismatch); a release lets it claim the
	// key (fresh: the waiter now holds it); a lease that runs out gives it
	// the key under retake, or answers in_progress with Unknown under hold;
	// a wait that runs out answers in_progress as before. At most
	// [MaxWait] (a server bounds it lower; see its max_wait). Negative is
	// refused. A waiter is woken by the completing or releasing write, never
	// by polling (see [EndWatcher]). At most [MaxWaiters] claims wait at
	// once; past it a claim answers as without a wait. ClaimBatch ignores
	// it: a batch never waits. The HTTP client sends it as the claim's
	// "wait" member.
	Wait time.Duration `json:"-"`
	// Lease, when positive, holds a two-step claim's key for this long
	// rather than the namespace's lease, which it may not exceed. A front
	// end in the server's process sets it (it is never sent over the
	// wire): the RESP listener's rollback window is the lease of its
	// claims, so that the ledger, not the listener's memory, ends the
	// window for every front end (see [Release]).
	Lease time.Duration `json:"-"`
}

// Answer is the ledger's answer to a [Claim]. (In this package "result"
// means only the bytes a claim stores, [Record].Result; an answer is called
// an answer: the ledger's Answer, a store's [ClaimAnswer] and [CountAnswer].)
type Answer struct {
	// Outcome is fresh, replayed, in_progress, refused or mismatch.
	Outcome Outcome
	// Record is the record just written (fresh) or the stored one. On
	// replayed, Record.Result holds the stored bytes exactly.
	Record Record
	// Unknown is set with InProgress when the record's lease ran out under the
	// hold policy: its outcome is unknown until an operator resolves it.
	Unknown bool
	// RetryAfter is set with InProgress while the lease runs: how long until it
	// ends.
	RetryAfter time.Duration
	// ResultOmitted is set on a Replayed answer of a batch whose stored
	// result did not fit in the batch's budget ([Config].MaxBatchResult):
	// Record.Result is nil, and the caller reads the result with Get. A
	// single Claim never omits it.
	ResultOmitted bool
}

// Completion ends a fresh two-step claim with its result.
type Completion struct {
	Namespace string
	// Key is the caller's key. When empty, Hash addresses the record instead
	// (operators resolving unknown outcomes know only the hash).
	Key  string
	Hash Hash
	// Seq, when set, must be the seq the fresh claim returned. Without it the
	// lease must still run, unless Force is set.
	Seq    Seq
	Result []byte
	// Force completes the pending record even after its lease ran out: the
	// operator's resolution of an unknown outcome (admin scope over HTTP).
	Force bool
}

// Release rolls back a fresh two-step claim, forgetting its key.
//
// In a namespace that holds expired leases, a release after the pending
// record's lease ran out is refused (ELeaseExpired) unless forced, even with
// the claim's seq: the record is an unknown outcome then, and forgetting it
// would let its key be claimed again although its side effect may have
// happened; only an operator (Force) settles that. A seq is no secret (a
// Get shows it), so it cannot be what allows it. A completion after the
// lease, with the seq, is still taken: it can only make the key spent.
type Release struct {
	Namespace string
	// Key or, when empty, Hash addresses the record, as in Completion.
	Key  string
	Hash Hash
	// Seq and Force as in Completion.
	Seq   Seq
	Force bool
}

// Service is what both the in-process [Ledger] and the HTTP client offer.
type Service interface {
	// Claim records the first claim of a key or answers from the record.
	Claim(ctx context.Context, c Claim) (Answer, error)
	// ClaimBatch answers each claim in order; everything is durable on return.
	// A replayed answer whose result does not fit in the batch's budget
	// comes without it (Result.ResultOmitted); read it with Get.
	ClaimBatch(ctx context.Context, cs []Claim) ([]Answer, error)
	// Complete stores the result of a fresh two-step claim.
	Complete(ctx context.Context, c Completion) (Record, error)
	// Release rolls back a fresh two-step claim.
	Release(ctx context.Context, r Release) error
	// Get returns the live record of a key.
	Get(ctx context.Context, namespace, key string) (Record, error)
	// Unknown lists up to limit unknown outcomes of a hold namespace: pending
	// records whose lease ran out. An empty namespace lists all.
	Unknown(ctx context.Context, namespace string, limit int) ([]Record, error)
}
