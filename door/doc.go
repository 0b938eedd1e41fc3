// Package door holds what every front end of the ledger shares: the HTTP
// API, the RESP listener, the operator's page, and whatever comes next are
// each one more door to the same ledger, and each is bounded by the one
// policy here rather than by limits of its own.
//
// In the common case a server builds one [Limits] (start from
// [DefaultLimits], check it with [Limits.Validate]), one [Budget] of bytes
// in flight shared by every door, one [Throttle] of failed sign-ins, and one
// [Conns] per listener, which admits connections within MaxClients and
// keeps those that have not signed in to their share.
//
// # Guarantees
//
//   - Bytes in flight: a door reserves the bytes of a request (an HTTP
//     body, the arguments of RESP commands) from the shared [Budget] before
//     it holds them, so the requests of every door together hold at most
//     the budget, whatever the number of connections.
//   - Connections: a listener serves at most MaxClients connections, and
//     at most MaxUnauthenticated of them before they sign in. A connection
//     that arrives when the share is full closes the oldest idle one that
//     has not signed in, so that a flood of idle sockets can never keep an
//     authorised client out.
//   - Sign-in: every refused sign-in is counted per source address, logged
//     (once at once, then once a minute per address with the count), and
//     answered only after a delay that doubles with the address's recent
//     failures; a connection is closed after MaxAuthFailures of them.
//   - Revocation: [Conns.Revalidate] closes the TLS connections whose client
//     certificate no longer verifies, as a reload of the client CAs needs.
//
// # Caveats
//
// The delay of a refused sign-in holds the connection (and its goroutine)
// for up to MaxAuthDelay; the connection bounds above still hold while it
// waits. Addresses are counted by IP (IPv6 by its /64), so clients behind one
// NAT share their count.
package door
