package main_test

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// line is one --json line of a client command.
type line struct {
	Outcome     string
	Key         string
	Namespace   string
	Hash        string
	State       string
	FirstSeen   time.Time `json:"first_seen"`
	Place       string
	Fingerprint string
	ExpiresAt   time.Time `json:"expires_at"`
	LeaseUntil  time.Time `json:"lease_until"`
	Seq         string
	Result      *string
	Unknown     bool
	RetryAfter  *float64 `json:"retry_after"`
	Released    bool
}

// parseLines decodes the --json output of a command, one object per line.
func parseLines(t *testing.T, out string) []line {
	t.Helper()
	var ls []line
	for _, s := range strings.Split(strings.TrimSpace(out), "\n") {
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("--json line %q: %v", s, err)
		}
		ls = append(ls, l)
	}
	return ls
}

func parseOne(t *testing.T, out string) line {
	t.Helper()
	ls := parseLines(t, out)
	if len(ls) != 1 {
		t.Fatalf("--json output: got %d lines, want 1:\n%s", len(ls), out)
	}
	return ls[0]
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func contains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Fatalf("%s: got\n%s\nwant it to contain %q", what, got, w)
		}
	}
}

func TestCLI(t *testing.T) {
	s, e, admin := serveWithTokens(t, `
[namespaces.default]

[namespaces.tickets]
mode = "refuse"
retention = "1h"
max_expiry = "48h"

[namespaces.payments]
lease = "300ms"
on_lease_expiry = "hold"
store_raw_key = true`)

	t.Run("ClaimPrintsFreshThenReplayed", func(t *testing.T) {
		out := MustRun(t, e, "claim", "order-1", "--result", `{"status":"paid"}`, "--place", "api-1")
		contains(t, "fresh claim", out, "order-1: fresh (result stored)", "  hash ", "  seq ", "  first_seen ", "  place        api-1", "  expires_at ")
		out = MustRun(t, e, "claim", "order-1", "--result", "other")
		contains(t, "repeat claim", out, "order-1: replayed", `  result       "{\"status\":\"paid\"}" (17 bytes)`)

		l := parseOne(t, MustRun(t, e, "claim", "--json", "order-1", "--result", "other"))
		if l.Outcome != "replayed" || l.Result == nil || *l.Result != b64(`{"status":"paid"}`) || l.Key != "order-1" || l.Place != "api-1" {
			t.Fatalf("--json replay: got %+v", l)
		}
	})

	t.Run("ExpiryBeyondMaxExpiryIsRefused", func(t *testing.T) {
		// tickets: max_expiry 48h over a 1h retention; default: its 24h
		// retention is the limit.
		l := parseOne(t, MustRun(t, e, "claim", "--json", "-n", "tickets", "exp-1", "--result", "", "--expires-at", "47h"))
		if d := l.ExpiresAt.Sub(l.FirstSeen); l.Outcome != "fresh" || d < 46*time.Hour || d > 47*time.Hour {
			t.Fatalf("--expires-at 47h under max_expiry 48h: got %s living %s, want fresh living 47h", l.Outcome, d)
		}
		for _, tc := range [][]string{
			{"claim", "-n", "tickets", "exp-2", "--result", "", "--expires-at", "49h"},
			{"claim", "exp-3", "--result", "", "--expires-at", "25h"},
			{"claim", "exp-4", "--result", "", "--expires-at", "87600h"},
		} {
			r := Run(t, e, tc...)
			if r.Code != 14 || !strings.Contains(r.Stderr, "expiry_too_long") || !strings.Contains(r.Stderr, "max_expiry") {
				t.Fatalf("%v: exit %d, stderr %q; want exit 14 naming expiry_too_long and max_expiry", tc, r.Code, r.Stderr)
			}
		}
		if r := Run(t, e, "get", "-n", "tickets", "exp-2"); r.Code != 7 {
			t.Fatalf("get of a refused claim's key: exit %d, want 7 (not_found: nothing written)", r.Code)
		}
	})

	t.Run("GetPrintsTheRecord", func(t *testing.T) {
		MustRun(t, e, "claim", "get-1", "--result", "\x00\x01binary")
		out := MustRun(t, e, "get", "get-1")
		contains(t, "get", out, "get-1: complete", "  result       base64:"+b64("\x00\x01binary")+" (8 bytes)")
		l := parseOne(t, MustRun(t, e, "get", "--json", "get-1"))
		if l.State != "complete" || *l.Result != b64("\x00\x01binary") || l.ExpiresAt.Sub(l.FirstSeen) != 24*time.Hour {
			t.Fatalf("get --json: got %+v", l)
		}
		r := Run(t, e, "get", "never-claimed")
		if r.Code != 7 || !strings.Contains(r.Stderr, "not_found") {
			t.Fatalf("get of an unclaimed key: exit %d, stderr %q; want exit 7 naming not_found", r.Code, r.Stderr)
		}
	})

	t.Run("ResultIsTextNeverBase64", func(t *testing.T) {
		// "paid" is valid base64 too: --result stores the 4 bytes given,
		// as the API's result_text does, not the 3 it would decode to.
		MustRun(t, e, "claim", "text-1", "--result", "paid")
		contains(t, "get", MustRun(t, e, "get", "text-1"), `  result       "paid" (4 bytes)`)
	})

	t.Run("TwoStepClaimThenComplete", func(t *testing.T) {
		out := MustRun(t, e, "claim", "two-1")
		contains(t, "two-step claim", out, "two-1: fresh (you hold the lease", "  state        pending", "  lease_until ")
		seq := regexp.MustCompile(`--seq (\d+:\d+)`).FindStringSubmatch(out)
		if seq == nil {
			t.Fatalf("fresh two-step claim does not print its seq:\n%s", out)
		}
		l := parseOne(t, MustRun(t, e, "claim", "--json", "two-1"))
		if l.Outcome != "in_progress" || l.RetryAfter == nil || *l.RetryAfter <= 0 {
			t.Fatalf("repeat while pending: got %+v, want in_progress with retry_after", l)
		}
		contains(t, "repeat while pending", MustRun(t, e, "claim", "two-1"), "two-1: in_progress (retry after ")

		out = MustRun(t, e, "complete", "two-1", "--seq", seq[1], "--result", "done")
		contains(t, "complete", out, "two-1: completed", "  state        complete", `  result       "done" (4 bytes)`)
		contains(t, "claim after complete", MustRun(t, e, "claim", "two-1"), "two-1: replayed", `"done"`)
	})

	t.Run("WaitForThePendingClaim", func(t *testing.T) {
		// Without --wait a repeat of a pending key is in_progress; with it,
		// the claim waits and prints the completed record.
		out := MustRun(t, e, "claim", "wait-1")
		seq := regexp.MustCompile(`--seq (\d+:\d+)`).FindStringSubmatch(out)
		if seq == nil {
			t.Fatalf("fresh two-step claim does not print its seq:\n%s", out)
		}
		done := make(chan string, 1)
		go func() {
			time.Sleep(500 * time.Millisecond)
			done <- Run(t, e, "complete", "wait-1", "--seq", seq[1], "--result", "done").Stderr
		}()
		l := parseOne(t, MustRun(t, e, "claim", "--json", "--wait", "20s", "wait-1"))
		if stderr := <-done; stderr != "" {
			t.Fatalf("complete: %s", stderr)
		}
		if l.Outcome != "replayed" || l.Result == nil || *l.Result != b64("done") {
			t.Fatalf("claim --wait of a pending key completed meanwhile: got %+v, want replayed with its result", l)
		}
		if r := Run(t, e, "claim", "--wait", "1s", "wait-2", "wait-3"); r.Code != 2 || !strings.Contains(r.Stderr, "one key") {
			t.Fatalf("--wait with two keys: exit %d, stderr %q; want a usage error", r.Code, r.Stderr)
		}
	})

	t.Run("ReleaseForgetsTheKey", func(t *testing.T) {
		MustRun(t, e, "claim", "rel-1")
		contains(t, "release", MustRun(t, e, "release", "rel-1"), "rel-1: released")
		contains(t, "claim after release", MustRun(t, e, "claim", "rel-1"), "rel-1: fresh")
		l := parseOne(t, MustRun(t, e, "release", "--json", "rel-1"))
		if !l.Released || l.Key != "rel-1" || l.Namespace != "default" {
			t.Fatalf("release --json: got %+v", l)
		}
	})

	t.Run("RefuseNamespace", func(t *testing.T) {
		MustRun(t, e, "claim", "-n", "tickets", "ticket-42", "--result", "", "--place", "gate-3")
		out := MustRun(t, e, "claim", "-n", "tickets", "ticket-42", "--result", "", "--place", "gate-9")
		contains(t, "refused", out, "ticket-42: refused (first seen ", " at gate-3)")
	})

	t.Run("Mismatch", func(t *testing.T) {
		fp1, fp2 := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
		MustRun(t, e, "claim", "mm-1", "--fingerprint", fp1, "--result", "r")
		out := MustRun(t, e, "claim", "mm-1", "--fingerprint", fp2, "--result", "r")
		contains(t, "other fingerprint", out, "mm-1: mismatch")
		l := parseOne(t, MustRun(t, e, "claim", "--json", "mm-1", "--fingerprint", fp1, "--result", "r"))
		if l.Outcome != "replayed" || l.Fingerprint != fp1 {
			t.Fatalf("same fingerprint: got %+v", l)
		}
	})

	t.Run("BatchResultFileAndExpiresAt", func(t *testing.T) {
		r := RunStdin(t, e, "from stdin", "claim", "--json", "--result-file", "-", "--expires-at", "90m", "b-1", "b-2", "b-1")
		if r.Code != 0 {
			t.Fatalf("exit %d: %s", r.Code, r.Stderr)
		}
		ls := parseLines(t, r.Stdout)
		if len(ls) != 3 || ls[0].Outcome != "fresh" || ls[1].Outcome != "fresh" || ls[2].Outcome != "replayed" {
			t.Fatalf("batch: got %+v, want fresh, fresh, replayed", ls)
		}
		if *ls[2].Result != b64("from stdin") {
			t.Fatalf("batch replay: got result %q, want the stdin bytes", *ls[2].Result)
		}
		if d := ls[0].ExpiresAt.Sub(ls[0].FirstSeen); d < 89*time.Minute || d > 91*time.Minute {
			t.Fatalf("--expires-at 90m: record lives %s", d)
		}
	})

	t.Run("UnknownListAndResolve", func(t *testing.T) {
		l := parseOne(t, MustRun(t, e, "claim", "--json", "-n", "payments", "pay-1"))
		l2 := parseOne(t, MustRun(t, e, "claim", "--json", "-n", "payments", "pay-2"))
		time.Sleep(400 * time.Millisecond) // past the 300ms lease: unknown outcomes

		l3 := parseOne(t, MustRun(t, e, "claim", "--json", "-n", "payments", "pay-1"))
		if l3.Outcome != "in_progress" || !l3.Unknown {
			t.Fatalf("claim of an unknown outcome: got %+v, want in_progress, unknown", l3)
		}
		r := Run(t, e, "unknown", "list")
		if r.Code != 12 || !strings.Contains(r.Stderr, "forbidden") {
			t.Fatalf("unknown list with a claim token: exit %d, stderr %q; want 12 (forbidden)", r.Code, r.Stderr)
		}
		out := MustRun(t, admin, "unknown", "list")
		contains(t, "unknown list", out, "HASH", l.Hash, l2.Hash, "pay-1", "payments")
		ls := parseLines(t, MustRun(t, admin, "unknown", "list", "--json", "-n", "payments"))
		if len(ls) != 2 {
			t.Fatalf("unknown list --json: got %d records, want 2", len(ls))
		}

		r = Run(t, e, "unknown", "resolve", "-n", "payments", l.Hash, "--complete", "--result", "paid")
		if r.Code != 12 {
			t.Fatalf("resolve with a claim token: exit %d, stderr %q; want 12 (forbidden)", r.Code, r.Stderr)
		}
		out = MustRun(t, admin, "unknown", "resolve", "-n", "payments", l.Hash, "--seq", l.Seq, "--complete", "--result", "paid")
		contains(t, "resolve --complete", out, l.Hash+": completed", `"paid"`)
		contains(t, "claim after resolve", MustRun(t, e, "claim", "-n", "payments", "pay-1"), "pay-1: replayed", `"paid"`)

		contains(t, "resolve --release", MustRun(t, admin, "unknown", "resolve", "-n", "payments", l2.Hash, "--release"), l2.Hash+": released")
		contains(t, "claim after release", MustRun(t, e, "claim", "-n", "payments", "pay-2", "--result", "x"), "pay-2: fresh")
		contains(t, "unknown list when resolved", MustRun(t, admin, "unknown", "list"), "no unknown outcomes")
	})

	t.Run("Errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			env  env
			args []string
			code int
			want string
		}{
			{"NoToken", env{"SPENT_ADDR": s.Addr}, []string{"claim", "k"}, 11, "unauthorized"},
			{"UnknownNamespace", e, []string{"claim", "-n", "nope", "k"}, 4, "unknown_namespace"},
			{"KeyTooLong", e, []string{"claim", strings.Repeat("k", 513)}, 5, "key_too_long"},
			{"Unreachable", env{"SPENT_ADDR": "http://127.0.0.1:1"}, []string{"get", "k"}, 13, "unavailable"},
			{"BadFingerprint", e, []string{"claim", "k", "--fingerprint", "abc"}, 2, "--fingerprint"},
			{"BadSeq", e, []string{"complete", "k", "--seq", "x"}, 2, "--seq"},
			{"BadExpiresAt", e, []string{"claim", "k", "--expires-at", "tomorrow"}, 2, "--expires-at"},
			{"NoKey", e, []string{"claim"}, 2, "missing KEY"},
			{"UnknownFlag", e, []string{"claim", "--bogus", "k"}, 2, "unknown flag"},
			{"UnknownCommand", e, []string{"clam", "k"}, 2, "unknown command"},
			{"ResolveNeedsAction", admin, []string{"unknown", "resolve", strings.Repeat("0", 32)}, 2, "complete"},
			{"ResolveBadHash", admin, []string{"unknown", "resolve", "xyz", "--release"}, 2, "HASH"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := Run(t, tc.env, tc.args...)
				if r.Code != tc.code || !strings.Contains(r.Stderr, tc.want) {
					t.Fatalf("spent %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), r.Code, r.Stderr, tc.code, tc.want)
				}
			})
		}
	})

	t.Run("Help", func(t *testing.T) {
		out := MustRun(t, nil, "--help")
		contains(t, "help", out, "serve", "claim", "complete", "release", "get", "unknown", "bench")
	})
}
