// Package console is the operator's web page of a spent server: the
// namespaces with their policies and the claims this server has answered,
// a chart of claims per second by outcome over the last hour, the unknown
// outcomes with buttons that resolve them, and the lookup of one key.
//
// In the common case, build one with [New] over the server's ledger, tokens
// and Prometheus registry, start its sampler with [Console.Run], and mount
// it at [Prefix] ("/ui/") beside the API, as `spent serve` does:
//
//	c, err := console.New(cfg)
//	go c.Run(ctx)
//	mux.Handle(console.Prefix, c)
//
// # Guarantees
//
// The page is server-rendered with html/template and a little JavaScript
// embedded in the binary; every answer carries a strict
// Content-Security-Policy (no inline script or style), nosniff,
// Referrer-Policy no-referrer and Cache-Control no-store, and, when the
// request came over TLS, Strict-Transport-Security with a max-age of a year
// (without includeSubDomains: the server does not own its domain's other
// hosts).
//
// With tokens configured, an operator logs in once with an admin bearer
// token. Every refused token (unknown, without the admin scope, too long)
// gets the same answer, 401 unauthorized with one message, so that the
// page cannot tell a guesser which tokens exist; the log says which it was.
// Each refusal is counted by the sign-in throttle ([Config].Throttle, the
// server's [door.Throttle]) and answered only after the delay it gives the
// source address, doubling with its failures in a row; it delays, it does
// not lock out, so the right token is still accepted. The token is never put
// in the cookie: the server keeps sessions in memory and the cookie
// (HttpOnly, SameSite=Strict, Secure under TLS) carries only a random
// session id, which a login replaces. Sessions end after
// [Config].SessionLife, at logout, or when the server restarts.
//
// Every POST needs the session's CSRF token (compared in constant time) and
// passes net/http's CrossOriginProtection, which refuses cross-site
// requests by their Sec-Fetch-Site or Origin header. Form bodies are
// limited to [Config].MaxForm bytes.
//
// Resolving an unknown outcome is what `spent unknown resolve --seq` does:
// a forced completion or release of the record addressed by its hash, only
// while it still carries the seq the page listed.
//
// # Caveats
//
// The stores keep no count of records per namespace, and the page does not
// scan a store to count them: the counts it shows are the claims this
// server answered since it started, by outcome, whichever front end asked
// (the HTTP API, the RESP listener, Privacy Pass, e-cash), read from the
// ledger's spent_ledger_claims_total counter, and the unknown outcomes it
// lists. The chart shows the same counter: what this server answered, not
// the whole ledger of a shared store.
//
// Sessions live in one server's memory: behind a load balancer, send an
// operator's requests to one server (or log in on each).
package console
