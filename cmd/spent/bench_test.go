package main_test

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
)

// benchJSON is the part of bench --json the tests read.
type benchJSON struct {
	Target          string
	Claims          int64
	Requests        int64
	ClaimsPerSecond float64 `json:"claims_per_second"`
	Latency         struct {
		P50, P99, P999, Max float64
	} `json:"latency_ms"`
	Outcomes map[string]int64
	Errors   int64
}

func runBench(t *testing.T, e env, args ...string) benchJSON {
	t.Helper()
	r := Run(t, e, append([]string{"bench", "--json", "--duration", "1s", "--concurrency", "4"}, args...)...)
	if r.Code != 0 {
		t.Fatalf("bench: exit %d; stderr: %s", r.Code, r.Stderr)
	}
	var b benchJSON
	if err := json.Unmarshal([]byte(r.Stdout), &b); err != nil {
		t.Fatalf("bench --json printed %q: %v", r.Stdout, err)
	}
	if strings.Count(strings.TrimSpace(r.Stdout), "\n") != 0 {
		t.Fatalf("bench --json printed more than one line:\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stderr, "claims/s") {
		t.Fatalf("bench printed no progress line on stderr: %q", r.Stderr)
	}
	if b.Claims == 0 || b.Errors != 0 || b.ClaimsPerSecond <= 0 {
		t.Fatalf("bench: got %d claims, %d errors, %.0f claims/s; want claims and no errors", b.Claims, b.Errors, b.ClaimsPerSecond)
	}
	if !(0 < b.Latency.P50 && b.Latency.P50 <= b.Latency.P99 && b.Latency.P99 <= b.Latency.P999 && b.Latency.P999 <= b.Latency.Max) {
		t.Fatalf("bench latencies out of order: %+v", b.Latency)
	}
	var sum int64
	for _, n := range b.Outcomes {
		sum += n
	}
	if sum != b.Claims {
		t.Fatalf("bench outcomes add up to %d, want %d claims", sum, b.Claims)
	}
	return b
}

func TestBench(t *testing.T) {
	t.Run("EmbeddedFreshKeys", func(t *testing.T) {
		b := runBench(t, nil, "--embedded")
		if b.Outcomes["fresh"] != b.Claims {
			t.Fatalf("fresh keys: got outcomes %v, want all %d fresh", b.Outcomes, b.Claims)
		}
	})

	t.Run("EmbeddedRateIsAnOpenLoopSchedule", func(t *testing.T) {
		// 1 s at 100 requests/s: the schedule allows 100 requests, and the
		// workers are far faster than that, so it is what bounds the run.
		b := runBench(t, nil, "--embedded", "--rate", "100")
		if b.Requests < 50 || b.Requests > 100 {
			t.Fatalf("--rate 100 for 1s: got %d requests, want 50 to 100", b.Requests)
		}
	})

	t.Run("EmbeddedRepeatAndBatch", func(t *testing.T) {
		b := runBench(t, nil, "--embedded", "--repeat", "0.5", "--batch", "10", "--data", t.TempDir())
		if b.Outcomes["fresh"] == 0 || b.Outcomes["replayed"] == 0 {
			t.Fatalf("--repeat 0.5: got outcomes %v, want fresh and replayed", b.Outcomes)
		}
		if b.Claims != 10*b.Requests {
			t.Fatalf("--batch 10: got %d claims in %d requests", b.Claims, b.Requests)
		}
	})

	t.Run("EmbeddedKeySpace", func(t *testing.T) {
		b := runBench(t, nil, "--embedded", "--keys", "10")
		if b.Outcomes["fresh"] != 10 {
			t.Fatalf("--keys 10: got %d fresh, want 10", b.Outcomes["fresh"])
		}
	})

	t.Run("Server", func(t *testing.T) {
		s := MustServe(t, t.TempDir(), nil, nil)
		b := runBench(t, nil, "--addr", s.Addr, "--batch", "5")
		if b.Target != s.Addr {
			t.Fatalf("target: got %q, want %q", b.Target, s.Addr)
		}
	})

	t.Run("ServerDownFailsWithTheCause", func(t *testing.T) {
		// A port nothing listens on: every request is refused at once.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := "http://" + ln.Addr().String()
		ln.Close()
		r := Run(t, nil, "bench", "--addr", addr, "--duration", "1500ms", "--concurrency", "2")
		if r.Code != 13 {
			t.Fatalf("bench against a server that is down: exit %d, want 13 (unavailable); stderr %q", r.Code, r.Stderr)
		}
		contains(t, "bench stderr", r.Stderr, "errors, last: unavailable: ", "connection refused", "every request failed", addr)
		if !strings.Contains(r.Stdout, "errors") {
			t.Fatalf("bench printed no report: %q", r.Stdout)
		}
	})

	t.Run("Table", func(t *testing.T) {
		out := MustRun(t, nil, "bench", "--embedded", "--duration", "200ms", "--concurrency", "2")
		contains(t, "bench table", out, "claims/s", "latency p50", "latency p99 ", "latency p99.9", "fresh", "replayed", "errors")
	})

	t.Run("BadFlags", func(t *testing.T) {
		for _, args := range [][]string{
			{"--repeat", "1.5"}, {"--batch", "0"}, {"--concurrency", "0"}, {"--embedded", "--addr", "http://x"}, {"--data", "/tmp"},
		} {
			if r := Run(t, nil, append([]string{"bench"}, args...)...); r.Code != 2 {
				t.Errorf("bench %v: exit %d, want 2; stderr %q", args, r.Code, r.Stderr)
			}
		}
	})
}
