package doortest

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/spentledger/spent/door"
)

// Door is the harness of one front end: what the suite needs to know of its
// protocol, and nothing of the attacks. Every door signs in; what else it
// does it declares by implementing [Claimer], [Wire] and [Rollbacker],
// which the suite checks at run time (a test whose door lacks one is not
// run, and the log says so: it is neither passed nor skipped).
type Door interface {
	// Name names the door in test names and messages, and is the
	// prefix of its lines in the server's log: "http", "resp",
	// "console".
	Name() string
	// Args returns the flags of spent serve the door needs beside the
	// suite's (which are --config, --data and --listen 127.0.0.1:0),
	// such as --resp 127.0.0.1:0.
	Args() []string
	// Config returns TOML tables the door adds at the end of the suite's
	// configuration file (such as [resp]); the suite writes every
	// top-level key itself.
	Config() string
	// Addr returns the door's address when line, one line the server
	// printed on its standard output as it started, announces it.
	Addr(line string) (addr string, ok bool)
	// SignIn opens one connection to addr and tries each token on it in
	// turn, as the door's clients sign in, waiting for each answer. It
	// returns the answers, and closed true when the door closed the
	// connection (then there is no answer to the tokens not tried). An
	// error is a failure of the harness or of the connection other than
	// its close.
	SignIn(ctx context.Context, addr string, tokens []string) (answers []Reply, closed bool, err error)
	// Docs returns the answers the door's documentation promises when
	// the server runs under lim.
	Docs(lim door.Limits) Docs
}

// Claimer is a door that claims keys: a client signed in with a token,
// and the forms of expiry its claims take.
type Claimer interface {
	Door
	// Dial returns a client signed in with token on one new connection
	// to addr.
	Dial(ctx context.Context, addr, token string) (Client, error)
	// ExpiryForms returns every form of a claim's own expiry the door
	// takes, each of which [Client.Claim] accepts in [Claim.Expiry].
	ExpiryForms() []ExpiryForm
}

// Wire is a door's requests as bytes, for the attacks that write them on a
// connection without a client's pacing, and its reader of answers. Every
// request that needs a token is given it: a door whose connections sign in
// once (RESP) ignores it, and one whose requests each carry it (HTTP) puts
// it in each.
type Wire interface {
	// Hello returns the bytes that sign a new connection in with token,
	// answered by one reply; nil for a door whose requests each carry
	// their token.
	Hello(token string) []byte
	// Claim returns a one-step claim of c (the suite uses no place nor
	// expiry here).
	Claim(token string, c Claim) []byte
	// Read returns a read of the value of key in namespace ns.
	Read(token, ns, key string) []byte
	// Frames returns unauthenticated requests that each declare a frame
	// of n bytes (an argument, a body) and send none of its bytes: one for
	// every way the door's protocol declares a size.
	Frames(n int64) [][]byte
	// Half returns the first half of a claim of c: enough that the
	// request has begun, not enough that it can be decided, and past the
	// part the door reads under auth_timeout (HTTP's header). With token
	// "" it is a request of a connection that has not signed in (and
	// carries no token).
	Half(token string, c Claim) []byte
	// ReadReply reads one answer.
	ReadReply(r *bufio.Reader) (Reply, error)
}

// Rollbacker is a door that can hold a claim pending in a rollback window,
// its value in the server's memory until the window ends (RESP's rollback
// prefixes): the suite floods it with large values.
type Rollbacker interface {
	Wire
	// Rollback returns a claim of key with value under a rollback prefix
	// of the namespace [NSRollback], answered fresh (Reply.Outcome) when
	// it holds the key.
	Rollback(token, key string, value []byte) []byte
}

// Client is a connection signed in through a door. Its methods return an
// error only when the connection fails; every answer of the door, a
// refusal included, is a [Reply].
type Client interface {
	// Claim makes a one-step claim of c. It returns ErrInexpressible,
	// and sends nothing, when the door's form of c.Expiry cannot carry
	// its integer.
	Claim(ctx context.Context, c Claim) (Reply, error)
	// Get reads the record of key in namespace ns; found is false when
	// there is none.
	Get(ctx context.Context, ns, key string) (r Record, found bool, err error)
	// Close closes the connection.
	Close() error
}

// ErrInexpressible is returned by [Client.Claim] when the form of the
// claim's expiry cannot carry its integer at all (an RFC 3339 time past
// the year 9999, say): the suite then skips that integer for that form.
var ErrInexpressible = errors.New("doortest: the expiry form cannot carry this integer")

// Claim is a claim a [Client] or a [Wire] sends.
type Claim struct {
	Namespace, Key string
	// Value is the result, stored by the one-step claim.
	Value []byte
	// Place is who claims; "" sends none.
	Place string
	// Expiry is the claim's own expiry; nil asks for the namespace's
	// retention.
	Expiry *Expiry
}

// Expiry is a claim's own expiry: an integer in one of the door's forms.
type Expiry struct {
	// Form is the Name of one of the door's [ExpiryForm]s.
	Form string
	// N is the integer, in the form's Unit.
	N int64
}

// ExpiryForm is one way a door's claims carry their own expiry.
type ExpiryForm struct {
	// Name names the form as the door's documentation does: "EX",
	// "expires_in".
	Name string
	// Unit is the unit of the integer.
	Unit time.Duration
	// Instant says the integer counts Units since the Unix epoch (an
	// instant); otherwise it is a lifetime from the claim.
	Instant bool
	// Clamps says a lifetime past the namespace's max_expiry is capped at
	// it (a Redis client expects SET … EX to be taken); otherwise it is
	// refused with TooLong.
	Clamps bool
	// Invalid is the refusal of an expiry that is not in the future; and
	// TooLong that of one past max_expiry, when the form does not clamp.
	Invalid, TooLong Want
}

// Record is a record as a door reads it.
type Record struct {
	// State is "pending" or "complete".
	State string
	// Value is the stored result of a complete record.
	Value []byte
	// Place is the first claim's place.
	Place string
	// ExpiresAt is when the record is forgotten.
	ExpiresAt time.Time
}

// Reply is one answer of a door, in the suite's terms.
type Reply struct {
	// Outcome is the outcome of a claim: "fresh", or "repeat" for every
	// other outcome; "" for an answer that is not a claim's.
	Outcome string
	// Code is the code of a refusal as the door writes it: the first word
	// of a RESP error, the problem code of an HTTP answer. "" means the
	// request was served.
	Code string
	// Text is a refusal's message as the door writes it (RESP's error
	// line after its code, an HTTP problem's detail).
	Text string
	// Value is the value a read returned.
	Value []byte
	// Close says the answer announced that the door closes the connection
	// after it (HTTP's Connection: close).
	Close bool
}

// Want is an answer a door documents.
type Want struct {
	// Code is the refusal's code (Reply.Code).
	Code string
	// Text is a part of the refusal's message; "" matches any.
	Text string
	// Close says the answer must announce the connection's close
	// (Reply.Close).
	Close bool
}

// IsZero reports whether w asks for no answer at all.
func (w Want) IsZero() bool { return w == Want{} }

// Matches reports whether r is the answer w describes.
func (w Want) Matches(r Reply) bool {
	return r.Code == w.Code && (w.Text == "" || strings.Contains(r.Text, w.Text)) && (!w.Close || r.Close)
}

// Docs are the answers a door's documentation promises, for the suite to
// hold the door to.
type Docs struct {
	// AdminOnly says only a token with the admin scope signs in (the
	// console): the suite then counts a token with the claim scope as a
	// wrong one.
	AdminOnly bool
	// WrongToken is the answer to a refused sign-in, and LastWrongToken
	// the answer to the max_auth_failures-th refusal on one connection
	// when ClosesAfterFailures.
	WrongToken, LastWrongToken Want
	// ClosesAfterFailures says the door closes a connection after
	// max_auth_failures refused sign-ins.
	ClosesAfterFailures bool
	// Frame is the answer to each of [Wire.Frames] for a frame over the
	// bound of an unauthenticated request; the door then closes the
	// connection.
	Frame Want
	// ReadTimeout, AuthTimeout and IdleTimeout are the last answers of a
	// connection closed by each deadline: a request begun and not
	// finished, a connection that did not sign in, a signed-in one that
	// sent nothing more. The zero Want: closed without an answer.
	ReadTimeout, AuthTimeout, IdleTimeout Want
	// InvalidPlace is the refusal of a claim whose place is not printable
	// UTF-8.
	InvalidPlace Want
	// RollbackFull is the refusal of a value under a rollback prefix that
	// does not fit max_rollback_bytes, and Busy that of a request whose
	// bytes do not fit max_bodies.
	RollbackFull, Busy Want
}
