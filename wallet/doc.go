// Package wallet is the client side of ecash value tokens: a wallet file
// that holds tokens and a journal of the requests in flight, written so that
// a crash at any instant loses no value.
//
// In the common case, create the file once, then open it, resume whatever a
// crash left journaled, and issue or spend:
//
//	err := wallet.Create("wallet.json", "https://issuer.example")
//	w, err := wallet.Open("wallet.json", wallet.DefaultOptions())
//	defer w.Close()
//	report, err := w.Resume(ctx)
//	coins, err := w.Issue(ctx)        // solve a challenge, get tokens
//	resp, err := w.Spend(ctx, 3)      // pay 3, get the change back
//
// # Guarantees
//
//   - One file, saved atomically: written to a temporary file in the same
//     directory, synced, renamed over the old one, and the directory synced.
//     A crash leaves the old file or the new one, never a mix.
//   - Journal before network: before a request is sent, its exact bytes and
//     the seed its blinding secrets derive from are saved; the token being
//     spent leaves the spendable set in that same save. No saved state ever
//     counts a token that may be burned.
//   - Resume resends every journaled request byte for byte. A replayed
//     response finishes the entry as if nothing happened. Final errors
//     clear the entry; after proof_invalid and bad_request (the issuer
//     touched nothing) the input token returns to the spendable set.
//     Network errors and 5xx keep the entry for the next resume.
//   - Tokens are spent oldest first and never before they are MinAge old
//     (default 60 s), so that issuance and spending are not adjacent.
//   - The file is locked (flock) while open: two processes never write it
//     at once.
//
// # Caveats
//
//   - The file holds bearer tokens and blinding seeds in the clear (mode
//     0600): whoever reads it can spend the tokens.
//   - A journaled spend whose response never arrives keeps its value out
//     of the spendable set until a resume gets an answer; a final answer the
//     wallet never receives (the issuer is gone) leaves it there.
//   - The issuer remembers a spend until its token's key stops accepting
//     tokens (epoch end + grace, 30 h by default) and an issuance until its
//     challenge's expiry + grace: resume within that window, or the request
//     is answered as new (proof_invalid or challenge_gone).
package wallet
