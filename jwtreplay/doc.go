// Package jwtreplay refuses replayed JWTs and DPoP proofs on top of a spent
// ledger: each JWT's (issuer, jti) and each DPoP proof's (key thumbprint,
// jti) is accepted once, and remembered exactly as long as the token or
// proof could still be accepted. Parsing and signature verification are
// github.com/go-jose/go-jose/v4's (and its jwt package's), with the accepted
// algorithms listed explicitly.
//
// In the common case, configure the namespaces the options' Policy methods
// return, build a [JTI] with [NewJTI] and a [DPoP] with [NewDPoP], and wrap
// the routes:
//
//	jo := jwtreplay.DefaultJTIOptions()
//	jo.Issuers = []string{"https://issuer.example"}
//	jo.Audience = []string{"https://api.example"}
//	jo.Keys = jwtreplay.StaticKeys(issuerKeys) // a jose.JSONWebKeySet
//	do := jwtreplay.DefaultDPoPOptions()
//	cfg.Namespaces[jo.Namespace] = jo.Policy()
//	cfg.Namespaces[do.Namespace] = do.Policy()
//	ledger, err := spent.NewLedger(ctx, store, cfg)
//	jti, err := jwtreplay.NewJTI(ledger, jo)
//	mux.Handle("POST /orders", jti.Handler(http.HandlerFunc(order)))
//
// A handler behind [JTI.Handler] reads the token with [TokenFrom]; behind
// [DPoP.Handler], the proof with [ProofFrom] and its key's thumbprint with
// [ThumbprintFrom], which [CheckBinding] compares with a bound access
// token's cnf.jkt. [JTI.Verify] and [DPoP.Verify] do the same checks
// without HTTP.
//
// # What is checked
//
// A JWT: a compact JWS with an alg of JTIOptions.Algorithms (never none),
// signed by the key JTIOptions.Keys returns for its issuer and header; iss
// one of JTIOptions.Issuers; aud naming one of JTIOptions.Audience; exp and
// jti present; exp, nbf and iat within JTIOptions.Skew. Then the lifetime:
// in refuse mode (the default) a token whose exp is more than MaxLifetime
// away is refused before any ledger write; in cap mode a token is accepted
// until min(exp + Skew, iat + MaxLifetime) and needs an iat. Last, the
// one-step claim of "<len(iss)>:<iss>:<jti>" ([JTIKey]) in a refuse
// namespace, expiring when the token stops being accepted.
//
// A DPoP proof (RFC 9449 section 4.3): one DPoP header; typ dpop+jwt; an
// asymmetric alg of DPoPOptions.Algorithms; a jwk header holding a public
// key and no private member, which verifies the signature; jti, htm, htu
// and iat present; htm the request's method; htu the request's URI, both
// without query and fragment and normalized ([NormalizeURI]); iat no more
// than Skew ahead and no more than ProofAge + Skew behind; ath the hash of
// the access token when one is presented. Last, the one-step claim of
// "<jkt>:<jti>" expiring at iat + ProofAge + Skew.
//
// # Guarantees
//
//   - Once: of any number of presentations of one token (or proof), however
//     concurrent, exactly one passes while the token is accepted; the
//     others are refused with code replayed. A token whose claim is not
//     durable in the ledger never passes.
//   - Memory outlives acceptance: the ledger record of a token expires at
//     the first instant the verifier refuses the token as expired (the
//     window is half open, so there is no instant where both the record is
//     gone and the token accepted). That is why the memory can be short:
//     after it, exp or iat refuses the token.
//   - Bounded memory: no record lives longer than MaxLifetime + Skew (JTI)
//     or ProofAge + 2 × Skew (DPoP) from its write. [NewJTI] and [NewDPoP]
//     refuse a namespace that keeps records shorter than that, or is not in
//     refuse mode, when the service reports its policies.
//   - No collisions across issuers or keys: the issuer is length-prefixed,
//     the thumbprint is fixed-length.
//   - Names are case-sensitive (RFC 7519 section 4, RFC 7515 section 4):
//     claims and header parameters are read by their exact names, as go-jose
//     reads a header, so "JTI" or "Exp" is an unknown member, ignored (a
//     token whose id is only under "JTI" is refused as having no jti). A
//     claims set or proof header that names a member twice is refused, so
//     that no other parser of the token can read another jti than the one
//     claimed.
//   - Fail closed: a ledger error is answered 503 (unavailable) or 500
//     (internal), never let through.
//   - Every refusal names its cause, with a stable code ([ErrorCode]); the
//     middlewares answer RFC 9457 problem documents and the
//     WWW-Authenticate challenges of RFC 6750 (invalid_token) and RFC 9449
//     (invalid_dpop_proof, with algs).
//
// # Caveats
//
//   - The ledger's clock and the verifier's must agree: the verifier
//     computes expires_at from its clock, the ledger forgets by its own. A
//     *spent.Ledger in process shares its clock (the default Now).
//   - A ledger with a per-namespace max_expiry refuses a claim that would
//     outlive it (code expiry_too_long); a JTI answers that as
//     lifetime_too_long (the token is refused), a DPoP as internal (the
//     namespace is misconfigured).
//   - Server-provided DPoP nonces (RFC 9449 section 8) are not supported:
//     the replay cache is the defence against replays, and iat bounds the
//     window.
//   - A JTI makes every token single-use: it is for JWTs meant to be
//     presented once (RFC 7523 client assertions, one-shot signed
//     requests), not for access tokens a client sends with every request.
//   - The DPoP middleware checks the proof, not the access token (which is
//     reused across requests): verify the token yourself, then
//     [CheckBinding]. At a token endpoint RFC 9449 section 5 asks for a 400
//     with {"error":"invalid_dpop_proof"}; the middleware answers 401 with
//     a problem document and a challenge, as a resource server does.
//   - htu is compared with the URI this server sees ([RequestURI]): behind
//     a proxy that terminates TLS or rewrites the host, set
//     DPoPOptions.URI.
//   - A rejected request burns nothing, but an accepted token or proof is
//     spent even if the handler then fails: the client needs a new one.
package jwtreplay
