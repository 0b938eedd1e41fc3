package main_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	spentcmd "github.com/spentledger/spent/cmd/spent"
)

// soakJSON is the part of bench --soak --json the tests read.
type soakJSON struct {
	Rows []struct {
		ElapsedSeconds float64 `json:"elapsed_seconds"`
		Requests       int64
		Errors         int64
		P50            float64 `json:"p50_ms"`
		P99            float64 `json:"p99_ms"`
		ServerP99      float64 `json:"server_p99_ms"`
		RSSBytes       int64   `json:"rss_bytes"`
		HeapBytes      int64   `json:"heap_bytes"`
		Goroutines     int64
		Records        int64
		Expired        int64
	}
	Operations   map[string]int64
	Requests     int64
	Outcomes     map[string]int64
	Errors       int64
	ErrorsByCode map[string]int64 `json:"errors_by_code"`
	SampleErrors int64            `json:"sample_errors"`
}

// soakConfig is the shape of the config bench/soak.sh gives the server, with
// times short enough for a test: records expire after 2 s, a pending claim's
// lease after 1 s, and the sweeper runs every second.
const soakConfig = `sweep_interval = "1s"

[namespaces.soak]
mode = "echo"
retention = "2s"
lease = "1s"
on_lease_expiry = "retake"
`

// soakArgs are the arguments bench/soak.sh passes, for a short run.
func soakArgs(addr, namespace, duration string, more ...string) []string {
	return append([]string{"bench", "--soak", "--addr", addr, "--namespace", namespace, "--duration", duration,
		"--interval", "1s", "--rate", "300", "--concurrency", "4"}, more...)
}

func TestBenchSoak(t *testing.T) {
	s := MustServe(t, t.TempDir(), nil, nil, "--config", WriteConfig(t, soakConfig))

	t.Run("RowsAndEveryOperation", func(t *testing.T) {
		r := Run(t, nil, soakArgs(s.Addr, "soak", "4s", "--json")...)
		if r.Code != 0 {
			t.Fatalf("bench --soak: exit %d, want 0; stderr: %s", r.Code, r.Stderr)
		}
		var rep soakJSON
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("bench --soak --json printed %q: %v", r.Stdout, err)
		}
		// One row before the load, then one a second.
		if got, want := len(rep.Rows), 5; got != want {
			t.Fatalf("rows: got %d, want %d: %+v", got, want, rep.Rows)
		}
		if got := strings.Count(r.Stderr, "\n"); got < 1+len(rep.Rows) {
			t.Fatalf("stderr: got %d lines, want a header and %d rows: %q", got, len(rep.Rows), r.Stderr)
		}
		var expired int64
		for i, row := range rep.Rows {
			if row.RSSBytes <= 0 || row.HeapBytes <= 0 || row.Goroutines <= 0 || row.Records < 0 {
				t.Errorf("row %d: got RSS %d, heap %d, goroutines %d, records %d; want them read from /metrics",
					i, row.RSSBytes, row.HeapBytes, row.Goroutines, row.Records)
			}
			if row.Errors != 0 {
				t.Errorf("row %d: got %d errors, want 0", i, row.Errors)
			}
			if i == 0 {
				continue
			}
			if row.Requests == 0 || !(0 < row.P50 && row.P50 <= row.P99) || row.ServerP99 <= 0 {
				t.Errorf("row %d: got %d requests, p50 %g ms, p99 %g ms, server p99 %g ms; want requests, 0 < p50 <= p99 and a server p99",
					i, row.Requests, row.P50, row.P99, row.ServerP99)
			}
			if row.ElapsedSeconds <= rep.Rows[i-1].ElapsedSeconds {
				t.Errorf("row %d: elapsed %gs after %gs", i, row.ElapsedSeconds, rep.Rows[i-1].ElapsedSeconds)
			}
			expired += row.Expired
		}
		if expired == 0 {
			t.Errorf("no record expired in 4s with a retention of 2s and a sweep every 1s: rows %+v", rep.Rows)
		}

		var sum, rowSum int64
		for _, kind := range []string{"claim", "repeat", "two_step", "complete", "release", "abandon"} {
			if rep.Operations[kind] == 0 {
				t.Errorf("operations: no %s in %v", kind, rep.Operations)
			}
			sum += rep.Operations[kind]
		}
		for _, row := range rep.Rows {
			rowSum += row.Requests
		}
		if sum != rep.Requests || rowSum != rep.Requests {
			t.Errorf("requests: got %d in total, %d by kind, %d in the rows; want the same", rep.Requests, sum, rowSum)
		}
		var claims, outcomes int64
		for _, kind := range []string{"claim", "repeat", "two_step", "abandon"} {
			claims += rep.Operations[kind]
		}
		for _, n := range rep.Outcomes {
			outcomes += n
		}
		if outcomes != claims {
			t.Errorf("outcomes %v add up to %d, want the %d claims", rep.Outcomes, outcomes, claims)
		}
		if rep.Outcomes["fresh"] == 0 || rep.Outcomes["replayed"] == 0 {
			t.Errorf("outcomes: got %v, want fresh and replayed", rep.Outcomes)
		}
		if rep.Errors != 0 || rep.SampleErrors != 0 {
			t.Errorf("got %d errors %v and %d failed samples, want none", rep.Errors, rep.ErrorsByCode, rep.SampleErrors)
		}
	})

	t.Run("MarkdownTable", func(t *testing.T) {
		out := MustRun(t, nil, soakArgs(s.Addr, "soak", "1s")...)
		contains(t, "soak output", out, "p99 ms", "RSS MiB", "goroutines", "operations: claim ",
			"| elapsed | requests | errors | p50 ms | p99 ms | server p99 ms | RSS MiB | heap MiB | goroutines | records | expired |")
		_, table, _ := strings.Cut(out, "| ---:")
		if got := strings.Count(table, "\n| "); got != 2 {
			t.Fatalf("markdown table: got %d rows, want 2 (before the load, after 1s):\n%s", got, out)
		}
	})

	t.Run("FailedRequestsExitNonZero", func(t *testing.T) {
		// The server has no namespace "nope": every request is refused.
		r := Run(t, nil, soakArgs(s.Addr, "nope", "1s", "--json")...)
		if r.Code == 0 || !strings.Contains(r.Stderr, "requests failed") {
			t.Fatalf("soak of an unknown namespace: exit %d, stderr %q; want a failure that counts the failed requests", r.Code, r.Stderr)
		}
		var rep soakJSON
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("bench --soak --json printed %q: %v", r.Stdout, err)
		}
		if rep.Errors == 0 || rep.ErrorsByCode["unknown_namespace"] != rep.Errors {
			t.Fatalf("errors: got %d, by code %v; want them all unknown_namespace", rep.Errors, rep.ErrorsByCode)
		}
	})

	t.Run("WrongAnswersFail", func(t *testing.T) {
		for _, tc := range []struct {
			name, old, new, want string
		}{
			{"NewKeyNotFresh", `{"outcome":"fresh"`, `{"outcome":"mismatch"`, "never claimed before, answered mismatch"},
			// The soak's results are 16 bytes, "abcdefghijklmnop".
			{"ReplayOfOtherBytes", `"result":"YWJjZGVmZ2hpamtsbW5vcA=="`, `"result":"eHh4"`, `replayed 3 bytes "xxx"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				bad := MustServe(t, t.TempDir(), nil, rewriting(tc.old, tc.new), "--config", WriteConfig(t, soakConfig))
				r := Run(t, nil, soakArgs(bad.Addr, "soak", "1s", "--json")...)
				if r.Code == 0 || !strings.Contains(r.Stderr, tc.want) {
					t.Fatalf("soak of a server that answers wrongly: exit %d, stderr %q; want a failure that says %q", r.Code, r.Stderr, tc.want)
				}
				var rep soakJSON
				if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
					t.Fatalf("bench --soak --json printed %q: %v", r.Stdout, err)
				}
				if rep.ErrorsByCode["unexpected_answer"] == 0 {
					t.Fatalf("errors by code: got %v, want unexpected_answer", rep.ErrorsByCode)
				}
			})
		}
	})

	t.Run("NoServer", func(t *testing.T) {
		r := Run(t, nil, soakArgs("http://127.0.0.1:1", "soak", "1s")...)
		if r.Code == 0 || !strings.Contains(r.Stderr, "is a spent server running at http://127.0.0.1:1") {
			t.Fatalf("soak of no server: exit %d, stderr %q; want a refusal that names the address", r.Code, r.Stderr)
		}
	})

	t.Run("BadFlags", func(t *testing.T) {
		for _, args := range [][]string{
			{"--soak", "--embedded"},
			{"--soak", "--batch", "10"},
			{"--soak", "--repeat", "0.5"},
			{"--soak", "--interval", "0s"},
			{"--soak", "--duration", "10s", "--interval", "1m"},
			{"--soak", "--mix", "claim=1,eat=2"},
			{"--soak", "--mix", "claim=0"},
			{"--soak", "--mix", "claim=1,claim=2"},
			{"--soak", "--mix", "claim"},
			{"--interval", "1s"},
			{"--mix", "claim=1"},
		} {
			if r := Run(t, nil, append([]string{"bench"}, args...)...); r.Code != 2 {
				t.Errorf("bench %v: exit %d, want 2; stderr %q", args, r.Code, r.Stderr)
			}
		}
	})
}

// rewriting sets a WrapHandler that replaces old by new in the server's
// answers to POST /v1/claim: a server that answers wrongly.
func rewriting(old, new string) func(*spentcmd.Main) {
	return func(m *spentcmd.Main) {
		m.WrapHandler = func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/claim" {
					h.ServeHTTP(w, r)
					return
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				body := bytes.ReplaceAll(rec.Body.Bytes(), []byte(old), []byte(new))
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				w.WriteHeader(rec.Code)
				w.Write(body)
			})
		}
	}
}
