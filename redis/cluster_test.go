package redis_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/redis"
)

// TestTagsAreEvenlySpaced checks the hash tags without a server: 256
// distinct tags whose slots are 0, 64, 128, ... 16320.
func TestTagsAreEvenlySpaced(t *testing.T) {
	seen := map[string]bool{}
	for i, tag := range redis.Tags() {
		if seen[tag] {
			t.Fatalf("tag %d %q: got it twice, want distinct tags", i, tag)
		}
		seen[tag] = true
		if got, want := int(redis.CRC16(tag)%16384), i*64; got != want {
			t.Fatalf("tag %d %q: got slot %d, want %d", i, tag, got, want)
		}
	}
	// The check value of CRC-16/XMODEM, and Redis's own example.
	if got := redis.CRC16("123456789"); got != 0x31c3 {
		t.Fatalf("CRC16(123456789): got %#x, want 0x31c3", got)
	}
}

// testTagSlots checks that the server agrees on each tag's slot.
func testTagSlots(t *testing.T, admin *goredis.ClusterClient) {
	ctx := context.Background()
	for i, tag := range redis.Tags() {
		got, err := admin.ClusterKeySlot(ctx, "spent:{"+tag+"}:r:00").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got != int64(i*64) {
			t.Fatalf("tag %d %q: server says slot %d, want %d", i, tag, got, i*64)
		}
	}
}

// testSpread claims random hashes (as HMACs are) and checks that each of
// the three primaries holds close to a third of the records.
func testSpread(t *testing.T, addrs []string, admin *goredis.ClusterClient) {
	ctx := context.Background()
	dir := t.TempDir()
	s := MustOpen(t, clusterOptions(addrs, dir))
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	const n = 6000
	ops := make([]spent.ClaimOp, 0, 500)
	for i := range n {
		ops = append(ops, oneStep(randHash(rng), uint64(i+1)))
		if len(ops) == cap(ops) {
			if _, err := s.ClaimBatch(ctx, ops); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	var mu sync.Mutex
	counts := map[string]int{}
	err := admin.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		// Record keys only: the seq indexes (one per tag) sit beside them.
		iter := c.Scan(ctx, 0, prefixFor(dir)+"{*}:r:*", 1000).Iterator()
		k := 0
		for iter.Next(ctx) {
			k++
		}
		mu.Lock()
		counts[c.Options().Addr] = k
		mu.Unlock()
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 3 {
		t.Fatalf("primaries: got %d, want 3", len(counts))
	}
	total := 0
	for _, k := range counts {
		total += k
	}
	if total != n {
		t.Fatalf("record keys: got %d, want %d", total, n)
	}
	for addr, k := range counts {
		// A third is 2000; binomial noise is about 37, the tags' own
		// rounding 4 tags in 256.
		if k < 1800 || k > 2200 {
			t.Errorf("primary %s: got %d of %d records, want about a third", addr, k, n)
		}
	}
	t.Logf("records per primary: %v", counts)
}
