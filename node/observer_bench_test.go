package node

import (
	"context"
	"strconv"
	"testing"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
)

// BenchmarkLedgerObserver measures what the ledger metrics observer costs a
// claim, beside the same ledger without it, on the in-memory store (so that
// the store's own cost hides nothing).
func BenchmarkLedgerObserver(b *testing.B) {
	for _, c := range []struct {
		name     string
		observer func(map[string]spent.Policy) spent.Observer
	}{
		{"None", func(map[string]spent.Policy) spent.Observer { return nil }},
		{"Metrics", func(ns map[string]spent.Policy) spent.Observer { return newLedgerMetrics(ns) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := spent.DefaultConfig()
			cfg.Secret = []byte("0123456789abcdef0123456789abcdef")
			cfg.Observer = c.observer(cfg.Namespaces)
			l, err := spent.NewLedger(context.Background(), inmem.New(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := l.Claim(ctx, spent.Claim{Namespace: "default", Key: strconv.Itoa(i), Result: []byte("r")}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
