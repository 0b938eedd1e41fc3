// Package spent is a double-spend ledger: the small, durable memory that lets
// a service accept something exactly once.
//
// In the common case, open a store (the embedded pebble store in
// github.com/spentledger/spent/pebble), build a [Ledger] over it with
// [NewLedger], and call [Ledger.Claim] with a namespace and a key. The first
// claim of a key is answered [Fresh]; every later claim is answered from the
// stored record, as the namespace's [Policy] says: [Replayed] with the stored
// result bytes (echo mode), [Refused] with the time and place the key was first
// seen (refuse mode), [InProgress] while a two-step claim holds its lease, or
// [Mismatch] when the same key arrives with another request fingerprint.
//
// A one-step claim stores its result in the same atomic, durable write as the
// claim itself. A two-step claim takes a lease and ends with
// [Ledger.Complete] (store the result) or [Ledger.Release] (roll back, so a
// request rejected for an unrelated reason does not burn its key).
//
// This package holds the domain only and imports nothing but the standard
// library. Storage engines live in their own packages and implement [Store];
// the HTTP server and its Go client live in package http and implement
// [Service], as [Ledger] does.
//
// # Guarantees
//
//   - Atomic first claim: of any number of concurrent claims of one live key,
//     exactly one is fresh.
//   - Durable before reply: a claim returns only after the record it reports is
//     durable in the store's strongest sense.
//   - Replay, never recompute: a replay returns the stored bytes.
//   - Forget only when harmless: a record is forgotten only at its expires_at,
//     unless an operator purges a token namespace whose issuing keys were
//     retired ([Ledger.Purge]): its keys can no longer be presented.
//   - Fail closed: when the store cannot be written or read, the answer is an
//     error with code [EUnavailable], never fresh.
//   - Clients never shape storage: stored keys are
//     HMAC-SHA256(secret, len(namespace) ‖ namespace ‖ key) truncated to 16 bytes.
//   - Ambiguous writes are resolved, not guessed: after a failed write the
//     ledger reads the key back and recognises its own seq.
//
// # Caveats
//
// A claim may wait for a pending key to end ([Claim].Wait); the waiter is
// woken by the completing or releasing write, through this ledger or, for a
// shared store that is an [EndWatcher], through any server. A store that
// cannot subscribe to its ends leaves the claim answering at once, as
// without a wait. Call [Ledger.StopWaiting] when a server shuts down.
//
// A pending record under the hold policy expires at its expires_at like any
// other record: unknown outcomes (see [Ledger.Unknown]) must be resolved
// within the namespace's retention, by a [ResolveRunner] running the
// service's [Resolver], or by an operator. Rotating the secret
// forgets every record; it is an epoch retirement, not a setting.
package spent
