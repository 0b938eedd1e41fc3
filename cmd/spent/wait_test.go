package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// postClaim posts a claim's JSON to the server at addr and returns the
// status and the decoded body.
func postClaim(t *testing.T, addr, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(addr+"/v1/claim", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %d %q: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, m
}

// TestServeMaxWait: spent serve refuses a wait above its max_wait (400
// invalid, naming the bound), and a shutdown answers a waiting claim
// in_progress at once rather than after its wait.
func TestServeMaxWait(t *testing.T) {
	s := MustServe(t, t.TempDir(), nil, nil, "--config", WriteConfig(t, "max_wait = \"5m\"\n"))
	if code, m := postClaim(t, s.Addr, `{"namespace":"default","key":"k"}`); code != 200 || m["outcome"] != "fresh" {
		t.Fatalf("first claim: %d %v, want 200 fresh", code, m)
	}
	code, m := postClaim(t, s.Addr, `{"namespace":"default","key":"k","wait":301}`)
	if d, _ := m["detail"].(string); code != 400 || m["code"] != "invalid" || !strings.Contains(d, "at most 300 seconds (max_wait)") {
		t.Fatalf("wait above max_wait: %d %v; want 400 invalid naming 300 seconds", code, m)
	}
	type answer struct {
		code int
		m    map[string]any
		at   time.Time
	}
	got := make(chan answer, 1)
	go func() {
		code, m := postClaim(t, s.Addr, `{"namespace":"default","key":"k","wait":240}`)
		got <- answer{code, m, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond) // the waiter is in place (if not, it answers in_progress all the same)
	start := time.Now()
	if c := s.Stop(); c != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", c, s.Stderr)
	}
	select {
	case a := <-got:
		if a.code != 200 || a.m["outcome"] != "in_progress" {
			t.Fatalf("waiter: %d %v, want 200 in_progress", a.code, a.m)
		}
		if el := a.at.Sub(start); el > time.Minute {
			t.Fatalf("waiter answered %v after the shutdown began: it held the shutdown up", el)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("waiter never answered")
	}
}
