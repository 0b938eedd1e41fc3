package spent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
)

type ctxKey struct{}

// recorder is an Observer that writes down what it is told, and marks the
// context it returns so that the test can see the store got it.
type recorder struct {
	name string
	mu   sync.Mutex
	log  []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *recorder) Start(ctx context.Context, op, ns string) (context.Context, func(error)) {
	r.add(fmt.Sprintf("%s start %s %s", r.name, op, ns))
	ctx = context.WithValue(ctx, ctxKey{}, append(slices.Clone(marks(ctx)), r.name))
	ended := false
	return ctx, func(err error) {
		if ended {
			r.add(r.name + " ended twice")
		}
		ended = true
		r.add(fmt.Sprintf("%s end %s %s", r.name, op, spent.ErrorCode(err)))
	}
}

func (r *recorder) Answered(ctx context.Context, ns string, o spent.Outcome) {
	r.add(fmt.Sprintf("%s answered %s %s [%s]", r.name, ns, o, strings.Join(marks(ctx), ",")))
}

func marks(ctx context.Context) []string { m, _ := ctx.Value(ctxKey{}).([]string); return m }

// ctxStore records the marks on the context of each Claim and ClaimBatch
// the store gets.
type ctxStore struct {
	spent.Store
	seen []string
}

func (s *ctxStore) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	s.seen = append(s.seen, strings.Join(marks(ctx), ","))
	return s.Store.Claim(ctx, op)
}

func (s *ctxStore) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	s.seen = append(s.seen, strings.Join(marks(ctx), ","))
	return s.Store.ClaimBatch(ctx, ops)
}

func TestObserver(t *testing.T) {
	a, b := &recorder{name: "a"}, &recorder{name: "b"}
	store := &ctxStore{Store: inmem.New()}
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("0123456789abcdef0123456789abcdef")
	cfg.Namespaces["other"] = spent.DefaultPolicy()
	cfg.Observer = spent.Observers(nil, a, b)
	ctx := context.Background()
	l, err := spent.NewLedger(ctx, store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Claim(ctx, spent.Claim{Namespace: "default", Key: "k1", Result: []byte("r")})
	if err != nil || res.Outcome != spent.Fresh {
		t.Fatalf("claim: got %v %v, want fresh", res.Outcome, err)
	}
	if _, err := l.ClaimBatch(ctx, []spent.Claim{
		{Namespace: "default", Key: "k1", Result: []byte("r")},
		{Namespace: "other", Key: "k2", Result: []byte("r")},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(ctx, spent.Claim{Namespace: "nope", Key: "k3"}); spent.ErrorCode(err) != spent.EUnknownNamespace {
		t.Fatalf("claim in an unknown namespace: got %v, want unknown_namespace", err)
	}
	if _, err := l.Get(ctx, "default", "k1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, spent.Release{Namespace: "default", Key: "k1", Seq: res.Record.Seq}); spent.ErrorCode(err) != spent.ENotPending {
		t.Fatalf("release of a complete record: got %v, want not_pending", err)
	}
	if _, err := l.Count(ctx, "s", "k", 2, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a start claim default", "b start claim default",
		"a answered default fresh [a,b]", "b answered default fresh [a,b]",
		"b end claim ", "a end claim ",
		"a start claim_batch ", "b start claim_batch ",
		"a answered default replayed [a,b]", "b answered default replayed [a,b]",
		"a answered other fresh [a,b]", "b answered other fresh [a,b]",
		"b end claim_batch ", "a end claim_batch ",
		"a start claim nope", "b start claim nope", "b end claim unknown_namespace", "a end claim unknown_namespace",
		"a start get default", "b start get default", "b end get ", "a end get ",
		"a start release default", "b start release default", "b end release not_pending", "a end release not_pending",
		"a start count ", "b start count ", "b end count ", "a end count ",
	}
	// Merge the two logs in the order the calls happened: each recorder's
	// own log is in order, and a's and b's calls alternate as Observers
	// makes them (a then b on the way in, b then a on the way out).
	got := mergeLogs(a.log, b.log)
	if !slices.Equal(got, want) {
		t.Fatalf("observer calls:\ngot  %q\nwant %q", got, want)
	}
	if !slices.Equal(store.seen, []string{"a,b", "a,b"}) {
		t.Fatalf("contexts the store's Claim and ClaimBatch got: %q, want the observers' (a,b) on each", store.seen)
	}
}

// mergeLogs interleaves two logs by the rule of Observers: starts and
// answers a first, ends b first.
func mergeLogs(a, b []string) []string {
	var out []string
	for i := range a {
		if strings.Contains(a[i], " end ") {
			out = append(out, b[i], a[i])
		} else {
			out = append(out, a[i], b[i])
		}
	}
	return out
}

func TestObserversNone(t *testing.T) {
	if o := spent.Observers(nil, nil); o != nil {
		t.Fatalf("Observers of nils: got %v, want nil", o)
	}
	r := &recorder{name: "r"}
	if o := spent.Observers(nil, r); o != spent.Observer(r) {
		t.Fatalf("Observers of one: got %v, want it unwrapped", o)
	}
}
