package doortest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/door"
)

// testAuthThrottle: on one connection, wrong tokens, one more than
// max_auth_failures. Every refusal is the door's documented answer, the
// same words whatever the token (unknown, or without the scope the door
// needs), each waits the throttle's delay (100 ms doubling), and a door
// that closes connections after max_auth_failures does so, with its
// documented last answer. The server's log says "NAME: sign-in refused".
// The right token still signs in afterwards, from the same address.
func testAuthThrottle(t *testing.T, bin string, d Door) {
	lim := defaults()
	docs := d.Docs(lim)
	s := startServer(t, bin, d, "")

	right := ClaimToken
	wrong := []string{"doortest-wrong-token-1-0123456789"}
	if docs.AdminOnly {
		right = AdminToken
		wrong = append(wrong, ClaimToken) // a real token, without the admin scope
	}
	for i := len(wrong); i <= lim.MaxAuthFailures; i++ {
		wrong = append(wrong, fmt.Sprintf("doortest-wrong-token-%d-0123456789", i+1))
	}
	ctx, cancel := opCtx()
	defer cancel()
	t0 := time.Now()
	answers, closed, err := d.SignIn(ctx, s.Addr, wrong)
	el := time.Since(t0)
	if err != nil {
		t.Fatalf("%d sign-ins with wrong tokens on one connection: %v", len(wrong), err)
	}
	for i, a := range answers {
		t.Logf("wrong token %d: %s", i+1, show(a))
	}
	wantN := len(wrong)
	if docs.ClosesAfterFailures {
		wantN = lim.MaxAuthFailures
	}
	if len(answers) != wantN {
		t.Fatalf("%d sign-ins with wrong tokens on one connection: got %d answers (closed: %v), want %d", len(wrong), len(answers), closed, wantN)
	}
	if closed != docs.ClosesAfterFailures {
		t.Fatalf("connection closed after %d refused sign-ins: got %v, want %v (max_auth_failures = %d)", len(answers), closed, docs.ClosesAfterFailures, lim.MaxAuthFailures)
	}
	for i, a := range answers {
		want := docs.WrongToken
		if docs.ClosesAfterFailures && i == lim.MaxAuthFailures-1 && !docs.LastWrongToken.IsZero() {
			want = docs.LastWrongToken
		}
		if !want.Matches(a) {
			t.Fatalf("wrong token %d (%s): got %s, want %s", i+1, clip(wrong[i], 12), show(a), showWant(want))
		}
		if last := docs.ClosesAfterFailures && i == lim.MaxAuthFailures-1; !last && a.Text != answers[0].Text {
			t.Fatalf("wrong token %d: got %q, want the same words as for the first, %q: a refusal must not tell one wrong token from another", i+1, a.Text, answers[0].Text)
		}
	}
	// The throttle's delays: the first refusal of an address waits
	// FirstAuthDelay, each further one twice the last.
	var delays time.Duration
	for i := range answers {
		delays += min(door.FirstAuthDelay<<i, door.MaxAuthDelay)
	}
	if el < delays*9/10 {
		t.Fatalf("%d refused sign-ins were answered within %v, want each delayed by the throttle (%v in all)", len(answers), el.Round(time.Millisecond), delays)
	}
	t.Logf("%d refused sign-ins answered in %v (the throttle's delays add up to %v)", len(answers), el.Round(time.Millisecond), delays)
	if line := d.Name() + ": sign-in refused"; !strings.Contains(s.Log(), line) {
		t.Fatalf("the server's log has no line %q; log:\n%s", line, tail(s.Log(), 20))
	}

	// The right token still signs in.
	answers, closed, err = d.SignIn(ctx, s.Addr, []string{right})
	if err != nil || len(answers) != 1 || answers[0].Code != "" || closed {
		var got string
		if len(answers) > 0 {
			got = show(answers[0])
		}
		t.Fatalf("sign-in with the right token after the refusals: got %q (%d answers, closed %v), %v; want it signed in", got, len(answers), closed, err)
	}
}
