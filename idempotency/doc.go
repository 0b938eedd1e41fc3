// Package idempotency makes HTTP handlers idempotent under the
// Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header, and
// Stripe's conventions) on top of a spent ledger, and provides the client
// that retries such requests safely.
//
// In the common case, configure the two namespaces [Policies] returns in
// the ledger, build a [Middleware] with [New], wrap the routes that have
// effects, and call [Applied] just before the irreversible effect:
//
//	opts := idempotency.DefaultOptions()
//	opts.Scope = idempotency.HeaderScope("Authorization")
//	cfg.Namespaces = idempotency.Policies(opts, 30*time.Second) // plus your own
//	ledger, err := spent.NewLedger(ctx, store, cfg)
//	idem, err := idempotency.New(ledger, opts)
//	mux.Handle("POST /payments", idem.Handler(http.HandlerFunc(pay)))
//
//	func pay(w http.ResponseWriter, r *http.Request) {
//		// validate, look things up: anything that may run twice
//		if err := idempotency.Applied(r); err != nil {
//			return // the middleware answers
//		}
//		sendMoney() // at most once per key
//		w.WriteHeader(http.StatusCreated)
//	}
//
// A client sends requests through a [Client], which picks one key per
// logical request and retries with it ([NewClient], [Client.Do]).
//
// # What the middleware answers
//
// The key is parsed (an RFC 8941 string, or bare as Stripe's clients send
// it; see [ParseKey]), looked up in the client's scope (Options.Scope), and
// the request's fingerprint (SHA-256 over method, path and query, chosen
// headers and body; [DefaultFingerprint]) is compared with the stored one:
//
//	first request               the handler runs; its status, chosen headers and body
//	                            are stored durably, then sent
//	same key, same fingerprint  the stored status, headers and body, byte for byte,
//	                            with Idempotent-Replayed: true
//	same key, other request     422, code mismatch
//	first one still running     409, code in_progress, with Retry-After; with
//	                            Options.Wait, the request first waits for the first
//	                            one's stored answer (replayed) or release (it runs)
//	first one died after its    409, code outcome_unknown: an operator must resolve it
//	  effect, answer not stored
//	no key (route requires one) 400, code idempotency_key_missing
//	malformed key               400, code idempotency_key_invalid
//	body over Options.MaxBody   413, code too_large
//	ledger unavailable          503, code unavailable, with Retry-After (fail closed:
//	                            the handler does not run)
//
// Errors are RFC 9457 problem documents (application/problem+json) with a
// stable "code" member (the Code constants). Every response of a route under
// the middleware carries Idempotency-Retention: the seconds a key is
// remembered (Options.Retention, 24 hours by default).
//
// # How it works: two namespaces
//
// The ledger has no operation that changes a record's lease policy, and a
// request's key must change policy halfway: before the effect, a request
// that dies must leave its key retakeable (nothing happened, so the retry
// runs it again); after the effect, it must leave the key held (the retry
// must not run it again, whatever happened). So each key is claimed in two
// namespaces, as [Policies] configures them:
//
//  1. On arrival, a two-step claim of the key in Options.Namespace (echo,
//     retake). Fresh: the handler runs. Otherwise the claim's outcome is the
//     answer (replay, 409, 422).
//  2. [Applied] makes a two-step claim of the same key in
//     Options.AppliedNamespace (echo, hold): the marker, durable before
//     Applied returns, before the effect. Only a fresh marker lets the
//     handler go on, so the effect happens at most once per key, whatever
//     the retries, crashes and leases do. A marker that exists already is
//     the answer: its stored response (replayed), in progress (409),
//     unknown (409 outcome_unknown) or another request's (422).
//  3. When the handler returns, its response is stored: in the marker first
//     (if Applied was called), then in the key's record; then it is sent.
//
// # Failure windows
//
//   - Before Applied, a handler that panics or answers 5xx, 408 or 429
//     releases the key: that answer is sent but not stored, and a retry runs
//     the handler again. A process that dies there leaves the key pending in
//     the retake namespace: retries get 409 until its lease ends, then take
//     it over and run the handler again.
//   - After Applied, every answer is stored and replayed, 5xx included (the
//     effect happened; the handler's answer says how). A handler that panics
//     after Applied, or a process that dies before the marker holds the
//     answer, leaves the marker pending: retries get 409 in_progress until
//     the marker's lease ends, then 409 outcome_unknown, and the marker is
//     listed by "spent unknown list -n <AppliedNamespace>" until an operator
//     resolves it: "spent unknown resolve HASH --complete --result BYTES"
//     when the effect happened (retries then replay BYTES as a 200, typed
//     application/json when they are valid JSON, text/plain otherwise) or
//     "--release" when it did not (the next retry runs the handler again).
//   - A process that dies after the marker holds the answer but before the
//     key's record does: the next retry, once the lease ends, runs the
//     handler up to Applied, which finds the marker's answer; it is stored in
//     the key's record and replayed.
//   - A process that dies after storing and before sending: retries replay.
//   - With Options.Resolve set and [Middleware.ResolveRunner] running, each
//     unknown outcome is looked up in the system the effect went to and
//     completed (retries replay the answer Resolve gave) or released (the
//     next retry runs the handler again), so that an operator sees only
//     those it could not settle; see [spent.Resolver] for when releasing
//     is safe.
//
// # Guarantees
//
//   - At most once: an effect made only after Applied returned nil happens
//     at most once per (scope, key) within AppliedRetention, under any
//     concurrency, lease expiry or crash.
//   - Durable before reply: no answer is sent before it is stored, so any
//     answer a client received is the one a retry replays. Replays are the
//     stored bytes, never recomputed.
//   - Fail closed: when the ledger cannot be written the request is
//     answered 503 and the handler does not run (or, inside Applied, stops
//     before its effect).
//   - Clients never read each other's answers: the scope is part of the
//     ledger key, and the ledger stores keys as HMACs.
//
// # Caveats
//
//   - Code before Applied may run more than once per key (after a failure
//     or a crash) and must make the same decision for the same request: a
//     retry whose handler answers without reaching Applied stores that
//     answer even when an earlier attempt applied its effect (the marker
//     still stops any second effect, and stays listed as unknown).
//   - A key reused with another request after a crash before Applied is a
//     new request: the crashed one made no effect, and the key is taken
//     over, as after a released failure.
//   - The lease of Options.Namespace must outlast the slowest handler; a
//     handler still running when it ends may see a retry start beside it,
//     which Applied then stops (only one marker is ever fresh), at the cost
//     of running code before Applied twice.
//   - Unknown outcomes are remembered for AppliedRetention (7 days by
//     default): an operator must resolve them within it.
//   - Responses are buffered whole (no streaming, Flush or Hijack) and
//     limited to Options.MaxResponse.
//   - Over a remote spent server each request makes two to four round trips
//     to it; an embedded ledger makes them in process.
package idempotency
