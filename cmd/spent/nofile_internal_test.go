package main

import (
	"log/slog"
	"strings"
	"testing"
)

// TestFitOpenFiles (found by an attacker): max_clients of 10,000 on each of
// two listeners passed a limit of 20,000 open files, and a flood of signed-in
// connections left the store unable to open its tables. The listeners'
// max_clients are lowered to fit the limit, less what the store keeps.
func TestFitOpenFiles(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cfg := defaultServeConfig()
	cfg.RESP.Listen = "127.0.0.1:0"
	if err := fitOpenFiles(&cfg, 20000, log); err != nil {
		t.Fatal(err)
	}
	room := 20000 - reservedFiles
	if got := cfg.Limits.MaxClients + cfg.RESP.MaxClients; got > room || cfg.Limits.MaxClients < room/2-1 {
		t.Fatalf("two listeners under a limit of 20,000: max_clients %d and %d; want them to share %d", cfg.Limits.MaxClients, cfg.RESP.MaxClients, room)
	}
	if cfg.Limits.MaxUnauthenticated > cfg.Limits.MaxClients {
		t.Fatalf("max_unauthenticated %d over max_clients %d", cfg.Limits.MaxUnauthenticated, cfg.Limits.MaxClients)
	}
	one := defaultServeConfig()
	if err := fitOpenFiles(&one, 20000, log); err != nil || one.Limits.MaxClients != 10000 {
		t.Fatalf("one listener under 20,000: %d, %v; want max_clients 10000 kept", one.Limits.MaxClients, err)
	}
	if err := fitOpenFiles(&one, 1000, log); err == nil || !strings.Contains(err.Error(), "ulimit -n") {
		t.Fatalf("a limit of 1,000: %v; want a refusal saying how to raise it", err)
	}
	if err := fitOpenFiles(&one, 0, log); err != nil {
		t.Fatalf("an unknown limit: %v", err)
	}
}
