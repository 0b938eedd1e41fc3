package audit_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/audit"
)

// Two nodes each accepted one key fresh, the second while the first
// acceptance still held it (its record was lost in a failover): the merged
// logs report the double with both seqs and nodes.
func ExampleDoubles() {
	dir, _ := os.MkdirTemp("", "audit-example")
	defer os.RemoveAll(dir)
	at := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	h := spent.KeyHash([]byte("an example secret of 32 bytes..."), "payments", "order-17")
	for node, t := range map[uint32]time.Time{1: at, 2: at.Add(time.Minute)} {
		l, _ := audit.Open(audit.Config{Dir: dir, Node: node})
		l.Append(context.Background(), []spent.AuditEvent{{
			Kind: spent.AuditAccepted, Time: t, Node: node, Namespace: "payments", Hash: h,
			Seq: spent.Seq{Node: node, Counter: 100 * uint64(node)}, State: spent.StateComplete, ExpiresAt: t.Add(24 * time.Hour),
		}})
		l.Close()
	}
	evs, _, err := audit.Read([]string{dir}, audit.ReadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range audit.Doubles(evs) {
		fmt.Printf("%s accepted by node %d (seq %s) and node %d (seq %s)\n", d.Namespace, d.First.Node, d.First.Seq, d.Second.Node, d.Second.Seq)
	}
	// Output: payments accepted by node 1 (seq 1:100) and node 2 (seq 2:200)
}
