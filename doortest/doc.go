// Package doortest is the conformance suite every front end ("door") of a
// spent server must pass: the HTTP API, the RESP listener, the operator's
// page, and whatever comes next. It is for tests only, as storetest is for
// stores.
//
// In the common case, a door's harness runs the whole suite from one test,
// against the spent binary built without the race detector:
//
//	func TestDoorRESP(t *testing.T) {
//		doortest.Run(t, SpentBinary(t), respDoor{})
//	}
//
// The suite owns the attacks, the server's configuration and what every
// door must do under them; a harness knows only its protocol. It
// implements [Door] (its name, its flags and tables of the configuration,
// its address, its sign-in, and the answers its documentation promises),
// and, for what the door can do, [Claimer] (a signed-in [Client] and its
// forms of expiry), [Wire] (its requests as bytes, and a reader of its
// answers) and [Rollbacker] (values held in memory for a rollback window).
// A test needing a capability the door lacks is not run, and the run's log
// names the test and the capability; the operator's page, for one, only
// signs in.
//
// Each test starts `spent serve` as a process of its own on a temporary
// data directory, with the suite's namespaces and tokens ([NSClaims],
// [NSBounded], [NSRollback], [ClaimToken], [AdminToken]) and the door
// limits at their defaults unless the test says otherwise, and drives it
// over real sockets:
//
//   - BigReplies: 16 connections each pipeline 1,024 reads of a 1 MiB value
//     and read none of the replies.
//   - PreAuthFrames: 1,000 connections that have not signed in each declare
//     a 64 MiB request; each is refused as documented, at once, and closed.
//   - IdleFlood: 10,000 idle connections while a signed-in client claims;
//     every claim is answered, and at most max_unauthenticated of the
//     idle ones stay open.
//   - HalfFlood: 2,000 connections that have not signed in each send half
//     a request and stop; a client with a token still connects and
//     claims, and at most max_unauthenticated of them stay open.
//   - RollbackFlood: 700 values of 1 MiB under a rollback prefix, sent
//     over one and a half rollback windows; what fits max_rollback_bytes
//     is stored after its window, what does not is refused and leaves no
//     record.
//   - SlowClient: half a request, no sign-in, and a signed-in idle
//     connection are closed at read_timeout, auth_timeout and
//     idle_timeout, with the documented last answer.
//   - AuthThrottle: wrong tokens on one connection are refused in one
//     set of words, after the throttle's delays, and logged; the
//     connection is closed after max_auth_failures where the door says
//     so; the right token still signs in.
//   - ExpiryOverflow: every expiry form with integers across the int64
//     range: the record lives between the namespace's min_expiry and
//     max_expiry, or the claim is refused as documented and claims
//     nothing.
//   - ControlCharacters: places with control characters, bidirectional
//     overrides or invalid UTF-8 are refused and claim nothing; printable
//     UTF-8 is kept.
//   - Kill9: a kill -9 under pipelined claims; after the restart every key
//     that was answered fresh is a repeat.
//
// # Guarantees
//
// The memory attacks hold the server to [PeakLimit] (512 MiB) of peak
// resident set (VmHWM, read from /proc every 5 ms), with its default
// limits; a guard kills the server the moment it reaches the limit, so a
// door without its bounds fails the test instead of exhausting the
// machine. Every test can fail: each checks exact answers against the
// door's documented ones, and each attack checks that it reached the
// server (replies were produced, values were refused, claims were
// acknowledged) before it counts the server's survival as a pass.
// Timings are only ever deadlines the server promises (a connection closed
// at its timeout, a refusal delayed by the throttle), checked with wide
// margins; no test measures speed.
//
// # Caveats
//
// The suite needs Linux (/proc, and the peak resident set it reports) and
// room for about 10,000 open files in the test process and as many in the
// server's: raise `ulimit -n` where it is lower. The tests run one after
// another and take under a minute per door. They run the binary they are
// given, so it must be built from the tree under test, without -race (the
// race detector's memory would swamp the figures).
package doortest
