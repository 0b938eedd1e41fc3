package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRollbackClaimAfterCrash (found by an attacker after issue 31's
// fixes): a claim of a RESP rollback prefix acknowledged OK, then kill -9
// before its window's end, stays spent after the restart whatever front end
// tries to free it: the HTTP API's /v1/release without its seq, or with the
// seq any reader of the record sees, RESP's DEL and SPENT.RELEASE. Before,
// the window lived only in the listener's memory, and /v1/release freed the
// key once the process was gone, so that a second SET … NX was OK again.
func TestRollbackClaimAfterCrash(t *testing.T) {
	config := WriteConfig(t, `[namespaces.tok]
mode = "refuse"
retention = "1h"
lease = "4s"
on_lease_expiry = "hold"

[resp]
namespaces = { "tok:" = "tok" }
rollback = ["tok:"]
`)
	data := t.TempDir()
	respAddr := freePort(t)
	args := []string{"--data", data, "--config", config, "--resp", respAddr}
	a := StartBinary(t, nil, args...)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: respAddr, MaxRetries: -1})
	defer c.Close()
	if err := c.SetNX(ctx, "tok:nonce-1", "1", 0).Err(); err != nil {
		t.Fatalf("SET NX: %v", err)
	}
	claimedAt := time.Now()
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	b := StartBinary(t, nil, args...)
	// Past the window (2 s), within the namespace's lease (4 s): the
	// window was the attack's chance.
	time.Sleep(time.Until(claimedAt.Add(2500 * time.Millisecond)))
	status, body := post(t, b.Addr+"/v1/get", strings.NewReader(`{"namespace":"tok","key":"nonce-1"}`))
	var rec struct {
		State string `json:"state"`
		Seq   string `json:"seq"`
	}
	if err := json.Unmarshal(body, &rec); status != 200 || err != nil || rec.State != "pending" {
		t.Fatalf("/v1/get after the crash: %d %s; want the pending record", status, body)
	}
	for _, req := range []string{
		`{"namespace":"tok","key":"nonce-1"}`,
		`{"namespace":"tok","key":"nonce-1","seq":"` + rec.Seq + `"}`,
	} {
		status, body := post(t, b.Addr+"/v1/release", strings.NewReader(req))
		if status != 409 || !strings.Contains(string(body), `"lease_expired"`) {
			t.Fatalf("/v1/release %s after the window: %d %s; want 409 lease_expired", req, status, body)
		}
	}
	c2 := redis.NewClient(&redis.Options{Addr: respAddr, MaxRetries: -1})
	defer c2.Close()
	if err := c2.Del(ctx, "tok:nonce-1").Err(); err == nil || !strings.HasPrefix(err.Error(), "LEASE_EXPIRED") {
		t.Fatalf("DEL after the crash: %v; want LEASE_EXPIRED", err)
	}
	if err := c2.Do(ctx, "SPENT.RELEASE", "tok", "nonce-1", rec.Seq).Err(); err == nil || !strings.HasPrefix(err.Error(), "LEASE_EXPIRED") {
		t.Fatalf("SPENT.RELEASE with the seq after the crash: %v; want LEASE_EXPIRED", err)
	}
	if ok, err := c2.SetNX(ctx, "tok:nonce-1", "2", 0).Result(); err != nil || ok {
		t.Fatalf("a second SET NX: %v, %v; want nil (the token stays spent)", ok, err)
	}
	// An operator may still settle it: force.
	status, body = post(t, b.Addr+"/v1/release", strings.NewReader(`{"namespace":"tok","key":"nonce-1","force":true}`))
	if status != 200 {
		t.Fatalf("/v1/release with force: %d %s; want 200", status, body)
	}
}
