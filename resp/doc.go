// Package resp serves the ledger to Redis clients: a RESP2 and RESP3
// listener (HELLO picks the protocol) on which the Redis commands a relay or
// an idempotency layer uses are claims, so that every language's Redis
// client is a spent client.
//
// Keys are mapped to namespaces by prefix: with "tokens:redeemed:" mapped to
// "relay-tokens", SET tokens:redeemed:k1:n1 1 NX EX 108000 claims key
// "k1:n1" in namespace relay-tokens, its value the result. It answers as
// Redis does (OK when fresh, nil on any repeat), but only once the claim is
// durable, and the expiry asked for is kept within the namespace's
// retention. Writes that would overwrite, shorten or forget a record (SET
// without NX, EXPIRE, INCR, DEL of a complete record, …) are refused with an
// error reply that says why. SPENT.CLAIM, SPENT.COMPLETE, SPENT.RELEASE and
// SPENT.GET speak the ledger's own terms. docs/resp.md has the full mapping.
//
// The commands of a connection are decided in order and answered in order;
// a run of pipelined claims goes to the ledger as one batch, so they share
// one store write. The request parser is written here rather than taken
// from a library (github.com/tidwall/redcon was considered) because every
// length must be checked before anything is allocated: MaxArgs, MaxBulk and
// MaxPipeline bound what one client can make the server hold.
package resp
