// Package http serves a spent.Ledger as JSON over HTTP/1.1 and provides the
// Go client of that API.
//
// In the common case, a server builds a handler with [NewServer] and hands
// it to an http.Server; a Go program talks to it through [NewClient], whose
// [Client] implements spent.Service exactly as a Ledger in the same process
// does:
//
//	import (
//		"net/http"
//		sphttp "github.com/spentledger/spent/http"
//	)
//
//	srv, err := sphttp.NewServer(ledger, sphttp.DefaultConfig())
//	hs := &http.Server{Addr: "127.0.0.1:7070", Handler: srv, ReadHeaderTimeout: 5 * time.Second}
//	err = hs.ListenAndServe()
//
//	c := sphttp.NewClient("http://127.0.0.1:7070", sphttp.ClientConfig{Token: token})
//	res, err := c.Claim(ctx, spent.Claim{Namespace: "payments", Key: idemKey, Fingerprint: sum[:]})
//	switch res.Outcome {
//	case spent.Fresh: // do the work, then c.Complete or c.Release with res.Record.Seq
//	case spent.Replayed: // answer with res.Record.Result
//	}
//
// Programs in other languages speak the same API: POST a JSON object to
// /v1/claim and read the outcome. docs/http-api.md is its full reference:
// every endpoint with examples, the outcome and error tables, headers,
// scopes, limits and metric names.
//
// Every claim outcome is a 200 answer whose "outcome" member says fresh,
// replayed, in_progress, refused or mismatch. Errors are RFC 9457 problem
// documents (application/problem+json) with a stable "code" member, one of
// the spent.E* codes; one table maps each code to one status ([StatusOf]),
// and the client turns the code back into a *spent.Error.
//
// # Guarantees
//
//   - A 200 answer leaves the server only after the ledger returned, so the
//     record it reports is durable (the ledger's guarantee; batches too).
//   - Fail closed: when the store cannot be written or read the answer is 503
//     with code unavailable, never a fresh outcome.
//   - A replayed answer carries the stored result bytes exactly (base64 on
//     the wire) and the header Idempotent-Replayed: true.
//   - Requests are parsed strictly: one JSON object, known members only, each
//     at most once, valid UTF-8, no trailing data; anything else is 400.
//     Bodies over Config.MaxBody are 413.
//   - Bearer tokens are compared in constant time; a token acts only in its
//     namespaces and scopes, and force and /v1/unknown need the admin scope.
//   - Memory per request is bounded: one /v1/claims answer carries at most
//     the ledger's MaxBatchResult of results (replays past it say
//     "result_omitted": true, for the client to read with /v1/get), and
//     [LimitBodies] puts every route of a server behind one budget of bodies
//     in flight (503 unavailable with Retry-After past it).
//   - A problem's detail quotes at most a short prefix of any input
//     (spent.QuoteInput), never a whole namespace, member name or path.
//   - A failing store is logged when it starts failing, at most once per
//     Config.StoreLogInterval while it goes on, and when it answers again,
//     with counts: never once per request.
//
// # Caveats
//
//   - With no tokens configured, authentication is off and any caller may do
//     anything, force included: bind such a server to loopback only, and put
//     it behind [LoopbackOnly] so that a web page that rebinds its DNS name
//     to 127.0.0.1 is refused (421 host_not_allowed). /healthz, /readyz and
//     /metrics never ask for a token.
//   - Keys, places and namespaces travel as JSON strings, so they must be
//     valid UTF-8; the client refuses other keys with code invalid rather
//     than let them be altered in transit.
//   - A claim whose answer was lost (connection reset, timeout) may have been
//     recorded. The client reports it as unavailable; a retry with the same
//     key then meets the record: replayed for an echo one-step claim, which
//     is harmless, but in_progress for your own two-step claim and refused
//     in a refuse namespace. Give each caller its own place, and the
//     answer's place tells whose claim it was.
//   - The seq is not a secret: in_progress, refused and mismatch answers
//     show it to anyone who claims the same key. Namespaces and scopes, not
//     seqs, decide who may complete or release.
//   - The server sets no timeouts of its own; the http.Server around it
//     should (ReadHeaderTimeout at least), with a WriteTimeout longer than
//     Config.MaxWait, or a claim that waits ("wait") is cut off. Call the
//     ledger's StopWaiting when a graceful shutdown begins, so that waiting
//     claims answer in_progress rather than hold the shutdown up.
//
// This package is named http and imports net/http under the same name, as
// Ben Johnson's WTF Dial does; import it as sphttp (or similar) in code that
// also uses net/http.
package http
