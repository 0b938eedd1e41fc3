package doortest

import (
	"fmt"
	"testing"
	"time"

	"github.com/spentledger/spent/door"
)

// The deadlines of SlowClient: short, and far enough apart that the
// moment a connection is closed says which of them closed it.
const (
	slowRead = 2 * time.Second
	slowAuth = 6 * time.Second
	slowIdle = 10 * time.Second
)

// early and late bound when a deadline of d may close a connection, from
// the moment its last byte was sent: not before d less early (the
// server's clock starts when the byte arrives, a little after), and not
// after d plus late, which keeps the three deadlines apart.
const (
	early = 250 * time.Millisecond
	late  = 3500 * time.Millisecond
)

// testSlowClient runs three slow clients at once against a server whose
// read_timeout, auth_timeout and idle_timeout are short: a signed-in
// connection that sends the first half of a request and then nothing is
// closed at read_timeout; one that never signs in, at auth_timeout; a
// signed-in one that sends nothing more, at idle_timeout. Each is closed
// at its deadline, neither before nor much after, with the last answer the
// door documents for it (or none, where it documents none).
func testSlowClient(t *testing.T, bin string, d Door) {
	w := wire(t, d)
	lim := door.DefaultLimits()
	lim.ReadTimeout, lim.AuthTimeout, lim.IdleTimeout = slowRead, slowAuth, slowIdle
	docs := d.Docs(lim)
	s := startServer(t, bin, d, fmt.Sprintf("read_timeout = %q\nauth_timeout = %q\nidle_timeout = %q\n", slowRead, slowAuth, slowIdle))

	half := Claim{Namespace: NSClaims, Key: "half", Value: pattern("half", 4<<10)}
	cases := []struct {
		name    string
		signIn  bool
		send    []byte
		timeout time.Duration
		want    Want
	}{
		{"HalfRequest", true, w.Half(ClaimToken, half), slowRead, docs.ReadTimeout},
		{"NeverSignsIn", false, nil, slowAuth, docs.AuthTimeout},
		{"IdleSignedIn", true, nil, slowIdle, docs.IdleTimeout},
	}
	t.Run("group", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				rc := dialRaw(t, s.Addr)
				if tc.signIn {
					// Signed in, and one request answered, so that a
					// door whose requests carry their token (HTTP) has
					// seen one too.
					hello(t, w, rc, ClaimToken)
					if _, err := rc.Write(w.Read(ClaimToken, NSClaims, "nothing-here")); err != nil {
						t.Fatal(err)
					}
					if r, err := rc.reply(w); err != nil {
						t.Fatalf("a read on a signed-in connection: %v", err)
					} else if r.Code != "" && r.Code != "not_found" {
						// (HTTP answers a read of no record 404
						// not_found; RESP a nil.)
						t.Fatalf("a read on a signed-in connection: got %s, want it answered", show(r))
					}
				}
				if tc.send != nil {
					if _, err := rc.Write(tc.send); err != nil {
						t.Fatal(err)
					}
				}
				t0 := time.Now()
				var answers []Reply
				var err error
				for {
					rc.SetReadDeadline(t0.Add(tc.timeout + late + time.Second))
					var r Reply
					if r, err = w.ReadReply(rc.r); err != nil {
						break
					}
					answers = append(answers, r)
				}
				el := time.Since(t0)
				if !closedErr(err) {
					t.Fatalf("after %v: read %v, want the connection closed at %v", el.Round(time.Millisecond), err, tc.timeout)
				}
				t.Logf("closed after %v (deadline %v), answers %d", el.Round(time.Millisecond), tc.timeout, len(answers))
				if el < tc.timeout-early || el > tc.timeout+late {
					t.Errorf("closed after %v, want at its deadline, %v", el.Round(time.Millisecond), tc.timeout)
				}
				switch {
				case tc.want.IsZero() && len(answers) > 0:
					t.Errorf("answers before the close: got %s, want none", show(answers[0]))
				case !tc.want.IsZero() && len(answers) != 1:
					t.Errorf("answers before the close: got %d, want one: %s", len(answers), showWant(tc.want))
				case !tc.want.IsZero() && !tc.want.Matches(answers[0]):
					t.Errorf("the answer before the close: got %s, want %s", show(answers[0]), showWant(tc.want))
				}
			})
		}
	})
}
