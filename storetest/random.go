package storetest

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// seedEnv names the environment variable that fixes the seed of the suite's
// random tests, to replay a failure.
const seedEnv = "SPENT_STORETEST_SEED"

// testRand is a seeded random source that also fills byte slices.
type testRand struct {
	*rand.Rand
	src *rand.ChaCha8
}

// newRand returns a random source seeded from SPENT_STORETEST_SEED or the
// time, and logs the seed so that a failure can be replayed.
func newRand(tb testing.TB) *testRand {
	tb.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(seedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			tb.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
		seed = v
	}
	tb.Logf("random seed %d (set %s=%d to replay)", seed, seedEnv, seed)
	return seededRand(seed)
}

func seededRand(seed uint64) *testRand {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	src := rand.NewChaCha8(s)
	return &testRand{Rand: rand.New(src), src: src}
}

// Read fills b with random bytes.
func (r *testRand) Read(b []byte) { _, _ = r.src.Read(b) }

// child returns an independent source derived from r, for another goroutine.
func (r *testRand) child() *testRand { return seededRand(r.Uint64()) }

func itoa(i int) string { return strconv.Itoa(i) }
