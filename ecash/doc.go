// Package ecash issues and spends value tokens on the spent ledger: blind-RSA
// tokens (privacypass token type 0x0002) whose key says what they are worth,
// spent one at a time with change, and issued against proof-of-work
// challenges. A lost response is fetched again by resending the identical
// request, and never yields a second spend.
//
// In the common case an issuer builds an [Issuer] over a ledger that
// configures the two namespaces [NamespacePolicies] returns, and mounts it:
//
//	iss, err := ecash.New(ctx, cfg, ledger)
//	iss.Register(mux) // /v1/ecash/keys, /challenge, /issue, /spend
//
// and a client (the wallet package does this, with a journal) builds
// requests with [NewOutputs], [SpendRequest] and [IssueRequest] and sends
// them with a [Client].
//
// # Guarantees
//
//   - One response per nullifier. A spend records nullifier → (request
//     digest, response) in one atomic, durable ledger claim (echo mode) and
//     answers only after it. The same request bytes get the stored response
//     back byte for byte with replayed: true (no re-verification, no
//     re-signing); other bytes under the same nullifier get double_spend
//     (409, final). Two identical requests racing both return the stored
//     bytes of the one the ledger kept, even if both signed.
//   - Issuance works the same way keyed by the challenge id: an identical
//     resend replays, another request gets challenge_mismatch (409, final),
//     an unknown or expired challenge gets challenge_gone (410, final).
//   - proof_invalid and bad_request are answered before the ledger is
//     touched: the input token is not spent and the challenge not consumed.
//   - A spend's ledger entry expires exactly when its input token's key
//     stops accepting tokens (epoch end + grace), so a token is never
//     forgotten while it could still be presented.
//   - Blind signatures are computed by privacypass/blindsign (CRT with a
//     fault check); clients blind and unblind with privacypass.
//
// # Caveats
//
//   - Keys are one RSA-2048 key per (denomination, epoch), kept encrypted in
//     the issuer's key directory; processes issuing for one issuer must share
//     that directory.
//   - Restoring the ledger to an earlier point re-validates spent tokens:
//     the server's rollback fence (cmd/spent) refuses to start on it.
//   - The issuer sees when challenges are solved and tokens spent; clients
//     spend their oldest tokens and wait a minimum age (see package wallet)
//     so that issuance and spending are not adjacent in time.
package ecash
