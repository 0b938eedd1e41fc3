package audit_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/audit"
	"github.com/spentledger/spent/pebble"
)

// BenchmarkAuditedClaim measures the cost per claim of the acceptance audit:
// fresh one-step claims through a Ledger over the embedded (Pebble) store,
// with the audit off and on side by side, by one caller and by 64. Every
// claim is fresh, so every claim appends to the log and waits for its fsync
// (shared with the claims that arrived meanwhile).
//
//	go test ./audit -run '^$' -bench AuditedClaim -benchtime 3s -count 3
func BenchmarkAuditedClaim(b *testing.B) {
	for _, callers := range []int{1, 64} {
		for _, on := range []bool{false, true} {
			name := "Off"
			if on {
				name = "On"
			}
			b.Run("Callers"+strconv.Itoa(callers)+"/Audit"+name, func(b *testing.B) {
				opts := pebble.DefaultOptions()
				opts.Logger = slog.New(slog.DiscardHandler)
				s, err := pebble.Open(b.TempDir(), opts)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				cfg := spent.DefaultConfig()
				cfg.Secret = make([]byte, spent.MinSecretLen)
				cfg.Namespaces = map[string]spent.Policy{"tickets": {
					Mode: spent.ModeRefuse, Retention: 30 * time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold,
				}}
				if on {
					log, err := audit.Open(audit.Config{Dir: b.TempDir(), Node: 1})
					if err != nil {
						b.Fatal(err)
					}
					defer log.Close()
					cfg.Audit = log
				}
				l, err := spent.NewLedger(context.Background(), s, cfg)
				if err != nil {
					b.Fatal(err)
				}
				var n atomic.Uint64
				// RunParallel starts parallelism × GOMAXPROCS goroutines.
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				claim := func() {
					var key [8]byte
					binary.LittleEndian.PutUint64(key[:], n.Add(1))
					a, err := l.Claim(context.Background(), spent.Claim{Namespace: "tickets", Key: string(key[:]), Place: "gate-12", Result: []byte{}})
					if err != nil || a.Outcome != spent.Fresh {
						b.Errorf("claim: got %v, %v, want fresh", a.Outcome, err)
					}
				}
				b.ResetTimer()
				if callers == 1 {
					for b.Loop() {
						claim()
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						claim()
					}
				})
			})
		}
	}
}
