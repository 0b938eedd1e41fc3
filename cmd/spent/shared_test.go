package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/internal/etcdtest"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/internal/redistest"
)

// TestSharedStore runs two servers on one shared store, on real engines, and
// races every key through both: exactly one claim of each key is fresh, and
// the other answer carries the winner's result.
func TestSharedStore(t *testing.T) {
	engines := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"redis", func(t *testing.T) string { return redistest.Start(t).URL() }},
		{"redis-cluster", func(t *testing.T) string { return redistest.StartCluster(t, 3).URL() }},
		{"postgres", func(t *testing.T) string {
			dsn := pgtest.DSN(t)
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			return dsn + sep + "schema=" + fmt.Sprintf("shared_%d", os.Getpid())
		}},
		{"etcd", func(t *testing.T) string {
			return "etcd://" + strings.Join(stripScheme(etcdtest.Start(t, 3).Endpoints()), ",") + "/shared-test"
		}},
	}
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			url := eng.url(t)
			dataA, dataB := t.TempDir(), t.TempDir()
			a := MustServe(t, dataA, nil, nil, "--store", url)
			secret, err := os.ReadFile(filepath.Join(dataA, "secret"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dataB, "secret"), secret, 0o600); err != nil {
				t.Fatal(err)
			}
			// B joins a store that holds records: its first start says so.
			b := MustServe(t, dataB, nil, nil, "--store", url, "--config", WriteConfig(t, "node = 2\n"), "--new-fence")

			// A server with a secret of its own is refused.
			r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--store", url, "--config", WriteConfig(t, "node = 3\n"))
			if r.Code == 0 || !strings.Contains(r.Stderr, "set up with another secret") {
				t.Fatalf("third server with another secret: exit %d, stderr %q; want a refusal", r.Code, r.Stderr)
			}

			clients := []*sphttp.Client{sphttp.NewClient(a.Addr, sphttp.ClientConfig{}), sphttp.NewClient(b.Addr, sphttp.ClientConfig{})}
			const keys = 150
			type answer struct {
				res spent.Answer
				err error
			}
			answers := make([][2]answer, keys)
			var wg sync.WaitGroup
			for k := range keys {
				for i, c := range clients {
					wg.Go(func() {
						res, err := c.Claim(context.Background(), spent.Claim{
							Namespace: "default", Key: fmt.Sprintf("race-%d", k), Place: fmt.Sprintf("server-%d", i),
							Result: []byte(fmt.Sprintf("result from server %d", i)),
						})
						answers[k][i] = answer{res, err}
					})
				}
			}
			wg.Wait()
			for k, pair := range answers {
				fresh := 0
				for i, an := range pair {
					if an.err != nil {
						t.Fatalf("key %d through server %d: %v", k, i, an.err)
					}
					if an.res.Outcome == spent.Fresh {
						fresh++
					} else if an.res.Outcome != spent.Replayed {
						t.Fatalf("key %d through server %d: got %s, want fresh or replayed", k, i, an.res.Outcome)
					}
				}
				if fresh != 1 {
					t.Fatalf("key %d: %d fresh answers through two servers, want exactly 1", k, fresh)
				}
				r0, r1 := pair[0].res.Record, pair[1].res.Record
				if string(r0.Result) != string(r1.Result) || r0.Seq != r1.Seq || r0.Place != r1.Place {
					t.Fatalf("key %d: the servers disagree on the record: %+v vs %+v", k, r0, r1)
				}
			}
		})
	}
}

// stripScheme turns http://host:port endpoints into host:port.
func stripScheme(eps []string) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		_, out[i], _ = strings.Cut(e, "://")
		if out[i] == "" {
			out[i] = e
		}
	}
	return out
}
