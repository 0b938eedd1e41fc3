// Package privacypass issues and redeems Privacy Pass tokens (RFC 9576
// architecture, RFC 9577 HTTP authentication, RFC 9578 issuance, RFC 9474
// blind RSA) on top of the spent ledger: an issuer signs tokens blindly, and
// an origin or relay accepts each token once, by claiming (token_key_id,
// nonce) in a refuse-mode namespace.
//
// In the common case, spent serve builds a [Server] from the [privacypass]
// section of its configuration ([Config]) and mounts it with
// [Server.Register]: the issuer directory at DirectoryPath, the token-request
// endpoint, and POST /v1/redeem for relays that delegate verification. A Go
// origin wraps its handler with an [Origin]:
//
//	srv, err := privacypass.New(ctx, cfg, ledger, keyDir, kek, logger)
//	go srv.Run(ctx) // key rotation
//	origin, err := privacypass.NewOrigin(ledger, privacypass.OriginConfig{
//		IssuerName: "issuer.example", OriginInfo: []string{"origin.example"},
//		TokenTypes: []privacypass.TokenType{privacypass.TypeBlindRSA},
//		Keys:       srv.Keyring(),
//	})
//	http.Handle("/", origin.Middleware(app))
//
// and a Go client answers challenges with a [Client]:
//
//	c := &privacypass.Client{AttesterToken: "…"}
//	resp, err := c.Do(req, "https://issuer.example")
//
// The wire formats (TokenChallenge, TokenRequest, TokenResponse, Token), the
// PrivateToken headers and the directory are exported for other uses; every
// parser is strict and re-marshals to exactly its input. Token type 0x0002
// (Blind RSA 2048) is publicly verifiable: an origin elsewhere can verify
// with [DirectoryKeys]. Token type 0x0001 (VOPRF P-384) is privately
// verifiable: only holders of the issuer's key directory and key-encryption
// key can verify (a read-only [Keyring]).
//
// # Keys and time
//
// There is one key per (issuer, token type, epoch); epochs are 24 h by
// default, aligned to midnight UTC. The [Keyring] creates the current and
// the next epoch's keys with crypto/rand, stores each encrypted with
// AES-256-GCM under the key-encryption key (written to a temporary file,
// synced, linked into place so that an existing key is never replaced, and
// the directory synced), publishes each a full epoch ahead with its
// not-before, and reloads the same keys after a restart. Key creation holds
// an exclusive lock on the key directory, so processes sharing it never make
// two keys for one epoch. A new key whose truncated key id (the last byte of
// its token_key_id) equals a live key's is discarded and made again before
// it is written. A key's tokens are accepted until its epoch end plus the
// grace (6 h by default); the grace is stored with each key.
//
// # Guarantees
//
//   - One acceptance per token: of any number of presentations of one token,
//     at any origins sharing a ledger store, exactly one is accepted (the
//     ledger's atomic first claim).
//   - Forget only when harmless: the ledger entry of a spent token expires at
//     exactly its key's last acceptance instant (epoch end + grace), computed
//     from the key, never configured; from that instant the token is refused
//     as key_expired before the ledger is consulted.
//   - Fail closed: when the ledger cannot record a spend, the answer is 503
//     and the token is not spent; the issuer answers 503 when it cannot count
//     a client's quota, and signs nothing.
//   - Anonymous storage: spends are stored as keyed hashes of (token_key_id,
//     nonce); quotas as keyed hashes of a digest of the client identity.
//   - Rollback: a handler behind [Origin.Middleware] may release its spend
//     ([Spend.Release]) so that a request rejected for another reason does
//     not burn the token.
//   - Type 0x0002 signatures are computed with CRT in constant-time
//     arithmetic and checked (s^e = m) before they leave the issuer (package
//     blindsign).
//
// # Caveats
//
//   - Challenges with a fresh redemption context are remembered in memory
//     ([ChallengeSet]): a token is accepted only by the origins of the
//     process (sharing one set) that issued its challenge, within its TTL.
//     Several processes serving one origin use static challenges
//     (OriginConfig.StaticChallenge), which give up the binding of a token to
//     one challenge.
//   - Every origin sharing a ledger must use the issuer's epoch and grace;
//     [DirectoryKeys] takes them as parameters because a directory does not
//     carry them.
//   - Type 0x0001 verification costs a P-384 hash-to-curve and scalar
//     multiplication per token (circl's, not constant time in the key, as its
//     documentation says).
//   - The issuer sees who obtains tokens and when, the origin sees when
//     tokens are spent: run issuance and redemption apart (or through an
//     OHTTP relay) when correlating the two by time or address matters.
package privacypass
