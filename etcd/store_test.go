package etcd_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/etcd"
	"github.com/spentledger/spent/internal/etcdtest"
)

// openFresh opens a store under a prefix of its own on the shared cluster.
func openFresh(tb testing.TB) (*etcd.Store, etcd.Options) {
	tb.Helper()
	opts := testOptions(tb, prefixFor(tb.TempDir()))
	return MustOpen(tb, opts), opts
}

var t0 = time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.UTC)

func hashOf(s string) spent.Hash {
	sum := sha256.Sum256([]byte(s))
	var h spent.Hash
	copy(h[:], sum[:])
	return h
}

func completeOp(key string, seq uint64, now, exp time.Time) spent.ClaimOp {
	return spent.ClaimOp{Now: now, Record: spent.Record{
		Namespace: "ns", Hash: hashOf(key), FirstSeen: now, Place: "test",
		State: spent.StateComplete, Result: []byte("result of " + key), ExpiresAt: exp,
		Seq: spent.Seq{Node: 1, Counter: seq},
	}}
}

func pendingOp(ns, key string, seq uint64, now, lease, exp time.Time) spent.ClaimOp {
	return spent.ClaimOp{Now: now, Record: spent.Record{
		Namespace: ns, Hash: hashOf(key), FirstSeen: now, Place: "test",
		State: spent.StatePending, ExpiresAt: exp, LeaseUntil: lease,
		Seq: spent.Seq{Node: 1, Counter: seq},
	}}
}

func mustClaim(tb testing.TB, s spent.Store, op spent.ClaimOp) spent.ClaimAnswer {
	tb.Helper()
	res, err := s.Claim(context.Background(), op)
	if err != nil {
		tb.Fatalf("Claim(%v): %v", op.Record.Hash, err)
	}
	return res
}

// leaseOf returns the lease the key is attached to.
func leaseOf(tb testing.TB, cli *clientv3.Client, key string) clientv3.LeaseID {
	tb.Helper()
	resp, err := cli.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		tb.Fatalf("Get(%q): got %v, %v, want one key", key, resp, err)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

func TestOneLeasePerBucket(t *testing.T) {
	s, opts := openFresh(t)
	cli := s.Client()
	ctx := context.Background()
	// Real time, so that the TTLs can be checked: records expiring within
	// one 1-second bucket an hour from now share a lease.
	now := time.Now()
	end := etcd.BucketEnd(opts.LeaseBucket, now.Add(time.Hour))
	base := time.Unix(end-1, 0)
	var ops []spent.ClaimOp
	for i := range 20 {
		ops = append(ops, completeOp(fmt.Sprintf("same-bucket-%d", i), uint64(i+1), now, base.Add(time.Duration(i+1)*40*time.Millisecond)))
	}
	if _, err := s.ClaimBatch(ctx, ops); err != nil {
		t.Fatal(err)
	}
	two := pendingOp("ns", "pending-same-bucket", 100, now, now.Add(time.Minute), time.Unix(end, 0))
	mustClaim(t, s, two)
	lease := leaseOf(t, cli, etcd.RecordKey(opts.Prefix, ops[0].Record.Hash))
	if lease == clientv3.NoLease {
		t.Fatal("record without lease, want its bucket's lease")
	}
	for _, op := range append(ops, two) {
		if got := leaseOf(t, cli, etcd.RecordKey(opts.Prefix, op.Record.Hash)); got != lease {
			t.Fatalf("record expiring at %v: got lease %x, want the bucket's lease %x", op.Record.ExpiresAt, got, lease)
		}
	}
	if got := leaseOf(t, cli, etcd.PendingKey(opts.Prefix, &two.Record)); got != lease {
		t.Fatalf("pending-index entry: got lease %x, want the record's %x", got, lease)
	}
	ttl, err := cli.TimeToLive(ctx, lease, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	// The records with their seq-index entries, the pending entry and the
	// key that publishes the lease.
	if got, want := len(ttl.Keys), 2*(len(ops)+1)+2; got != want {
		t.Fatalf("keys attached to the bucket's lease: got %d, want %d", got, want)
	}
	// It runs at least to the bucket's end, and not much beyond.
	left := time.Duration(ttl.TTL) * time.Second
	if until := time.Until(time.Unix(end, 0)); left < until-time.Second || left > until+5*time.Second {
		t.Fatalf("lease TTL: got %v, want about %v", left, until)
	}
	// The next bucket has another lease.
	next := completeOp("next-bucket", 200, now, time.Unix(end, 1))
	mustClaim(t, s, next)
	if got := leaseOf(t, cli, etcd.RecordKey(opts.Prefix, next.Record.Hash)); got == lease || got == clientv3.NoLease {
		t.Fatalf("record of the next bucket: got lease %x, want a lease other than %x", got, lease)
	}

	// A second store on the same prefix (another server) uses the same
	// lease for the bucket.
	other := MustOpen(t, opts)
	more := completeOp("other-server", 300, now, base.Add(500*time.Millisecond))
	mustClaim(t, other, more)
	if got := leaseOf(t, cli, etcd.RecordKey(opts.Prefix, more.Record.Hash)); got != lease {
		t.Fatalf("record of another store in the same bucket: got lease %x, want %x", got, lease)
	}
}

func TestBucketEnd(t *testing.T) {
	cases := []struct {
		bucket time.Duration
		exp    time.Time
		want   int64
	}{
		{time.Minute, time.Unix(120, 0), 120},
		{time.Minute, time.Unix(120, 1), 180},
		{time.Minute, time.Unix(61, 0), 120},
		{time.Second, time.Unix(5, 999999999), 6},
		{time.Second, time.Unix(5, 0), 5},
		{time.Minute, time.Unix(-61, 0), -60},
		{time.Hour, time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC), time.Date(2031, 3, 14, 16, 0, 0, 0, time.UTC).Unix()},
	}
	for _, tc := range cases {
		if got := etcd.BucketEnd(tc.bucket, tc.exp); got != tc.want {
			t.Errorf("BucketEnd(%v, %v): got %d, want %d", tc.bucket, tc.exp.Unix(), got, tc.want)
		}
	}
}

func TestNoLeaseBeyondEtcdMaxTTL(t *testing.T) {
	s, opts := openFresh(t)
	far := completeOp("far", 1, t0, time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC))
	mustClaim(t, s, far)
	if got := leaseOf(t, s.Client(), etcd.RecordKey(opts.Prefix, far.Record.Hash)); got != clientv3.NoLease {
		t.Fatalf("record expiring in 2500: got lease %x, want none (beyond etcd's longest TTL)", got)
	}
	if _, err := s.Get(context.Background(), far.Record.Hash, t0); err != nil {
		t.Fatalf("Get: %v", err)
	}
}

func TestLostLeaseIsGrantedAgain(t *testing.T) {
	s, opts := openFresh(t)
	cli := s.Client()
	ctx := context.Background()
	exp := t0.Add(time.Hour)
	first := completeOp("first", 1, t0, exp)
	mustClaim(t, s, first)
	lease := leaseOf(t, cli, etcd.RecordKey(opts.Prefix, first.Record.Hash))
	// Revoke the bucket's lease behind the store's back: etcd forgets the
	// record and the key that published the lease.
	if _, err := cli.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, first.Record.Hash, t0); !errors.Is(err, spent.ErrNotFound) {
		t.Fatalf("Get after the revoke: got %v, want ErrNotFound", err)
	}
	// The store's cache still names the lost lease: the next claims in the
	// bucket must still be written, under a new lease, single or batched.
	second := completeOp("second", 2, t0, exp)
	if res := mustClaim(t, s, second); !res.Inserted {
		t.Fatal("claim after the lease was lost: got not inserted, want inserted")
	}
	got := leaseOf(t, cli, etcd.RecordKey(opts.Prefix, second.Record.Hash))
	if got == lease || got == clientv3.NoLease {
		t.Fatalf("record after the lease was lost: got lease %x, want a new one", got)
	}
	if _, err := cli.Revoke(ctx, got); err != nil {
		t.Fatal(err)
	}
	batch := []spent.ClaimOp{completeOp("third", 3, t0, exp), completeOp("fourth", 4, t0, exp)}
	res, err := s.ClaimBatch(ctx, batch)
	if err != nil {
		t.Fatalf("ClaimBatch after the lease was lost: %v", err)
	}
	for i, r := range res {
		if !r.Inserted {
			t.Fatalf("batch op %d: got not inserted, want inserted", i)
		}
		if _, err := s.Get(ctx, batch[i].Record.Hash, t0); err != nil {
			t.Fatalf("Get of batch op %d: %v", i, err)
		}
	}
	// A counter too.
	cres, err := s.Count(ctx, spent.CountOp{Key: hashOf("counter"), Limit: 3, ExpiresAt: exp, Now: t0})
	if err != nil || !cres.Added {
		t.Fatalf("Count: got %+v, %v, want added", cres, err)
	}
}

func TestClaimBatchAcrossTransactions(t *testing.T) {
	s, _ := openFresh(t)
	ctx := context.Background()
	exp := t0.Add(time.Hour)
	// 300 keys need three transactions of 128 keys; a few big results cut
	// them by bytes too (1 MiB per transaction).
	var ops []spent.ClaimOp
	for i := range 300 {
		op := completeOp(fmt.Sprintf("k%d", i), uint64(i+1), t0, exp)
		if i%50 == 7 {
			op.Record.Result = bytes.Repeat([]byte{byte(i)}, 300<<10)
		}
		ops = append(ops, op)
	}
	res, err := s.ClaimBatch(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Inserted {
			t.Fatalf("op %d: got not inserted, want inserted", i)
		}
	}
	// Again with other seqs, each key twice, and a retake of a pending
	// record whose lease ran out: everything is answered from the stored
	// records, in order.
	var again []spent.ClaimOp
	for i := range ops {
		op := ops[i]
		op.Record.Seq.Counter += 1000
		op.Record.Result = []byte("other")
		again = append(again, op, op)
	}
	p := pendingOp("ns", "retake", 5000, t0, t0.Add(time.Second), exp)
	mustClaim(t, s, p)
	later := t0.Add(2 * time.Second)
	r1 := pendingOp("ns", "retake", 5001, later, later.Add(time.Second), exp)
	r1.Retake = true
	r2 := r1
	r2.Record.Seq.Counter = 5002
	again = append(again, r1, r2)
	res, err = s.ClaimBatch(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ops {
		for _, r := range res[2*i : 2*i+2] {
			if r.Inserted || r.Record.Seq != ops[i].Record.Seq || !bytes.Equal(r.Record.Result, ops[i].Record.Result) {
				t.Fatalf("repeat of op %d: got inserted=%v seq %v, want the stored record %v", i, r.Inserted, r.Record.Seq, ops[i].Record.Seq)
			}
		}
	}
	n := len(res)
	if !res[n-2].Inserted || res[n-1].Inserted || res[n-1].Record.Seq != r1.Record.Seq {
		t.Fatalf("retake then repeat: got inserted %v, %v (seq %v), want true, false (seq %v)",
			res[n-2].Inserted, res[n-1].Inserted, res[n-1].Record.Seq, r1.Record.Seq)
	}
	// The retaken record's pending entry replaced the old one.
	recs, err := s.ListPending(ctx, "ns", later.Add(time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Seq != r1.Record.Seq {
		t.Fatalf("ListPending after the retake: got %d records, want only seq %v", len(recs), r1.Record.Seq)
	}
}

func TestListPendingPages(t *testing.T) {
	s, _ := openFresh(t)
	ctx := context.Background()
	exp := t0.Add(time.Hour)
	// 600 pending records over three namespaces, more than a page each; in
	// "b" every other one is completed, leaving no index entry behind.
	var ops []spent.ClaimOp
	for i := range 600 {
		ns := []string{"a", "b", "c"}[i%3]
		ops = append(ops, pendingOp(ns, fmt.Sprintf("p%d", i), uint64(i+1), t0, t0.Add(time.Duration(i)*time.Millisecond), exp))
	}
	if _, err := s.ClaimBatch(ctx, ops); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 600; i += 6 {
		if _, err := s.Complete(ctx, ops[i].Record.Hash, ops[i].Record.Seq, []byte("done"), t0); err != nil {
			t.Fatal(err)
		}
	}
	at := t0.Add(time.Second)
	for _, tc := range []struct {
		ns    string
		limit int
		want  int
	}{{"a", 1000, 200}, {"b", 1000, 100}, {"a", 150, 150}, {"", 1000, 500}, {"", 450, 450}, {"d", 10, 0}} {
		recs, err := s.ListPending(ctx, tc.ns, at, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != tc.want {
			t.Fatalf("ListPending(%q, limit %d): got %d records, want %d", tc.ns, tc.limit, len(recs), tc.want)
		}
		for i, r := range recs {
			if r.State != spent.StatePending || (tc.ns != "" && r.Namespace != tc.ns) {
				t.Fatalf("ListPending(%q): record %d: got %s %s, want pending in %q", tc.ns, i, r.Namespace, r.State, tc.ns)
			}
			if i > 0 && r.LeaseUntil.Before(recs[i-1].LeaseUntil) {
				t.Fatalf("ListPending(%q): record %d: lease %v before %v, want oldest first", tc.ns, i, r.LeaseUntil, recs[i-1].LeaseUntil)
			}
		}
	}
	// Only leases ended by then.
	recs, err := s.ListPending(ctx, "", t0.Add(99*time.Millisecond), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if want := 100 - 100/6 - 1; len(recs) != want {
		t.Fatalf("ListPending up to lease 99ms: got %d, want %d", len(recs), want)
	}
}

func TestTwoStoresRace(t *testing.T) {
	_, opts := openFresh(t)
	a, b := MustOpen(t, opts), MustOpen(t, opts)
	ctx := context.Background()
	const keys, rounds = 20, 8
	var mu sync.Mutex
	fresh := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	for g := range 2 * rounds {
		s := a
		if g%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for k := range keys {
				op := completeOp(fmt.Sprintf("race-%d", k), uint64(1000*g+k+1), t0, t0.Add(time.Hour))
				res, err := s.Claim(ctx, op)
				if err != nil {
					errs <- err
					return
				}
				if res.Inserted {
					mu.Lock()
					fresh[fmt.Sprintf("race-%d", k)]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k := range keys {
		if n := fresh[fmt.Sprintf("race-%d", k)]; n != 1 {
			t.Fatalf("key race-%d: inserted %d times through two stores, want once", k, n)
		}
	}
}

func TestCorruptDataIsRefused(t *testing.T) {
	s, opts := openFresh(t)
	cli := s.Client()
	ctx := context.Background()
	h := hashOf("garbage")
	if _, err := cli.Put(ctx, etcd.RecordKey(opts.Prefix, h), "\x09not a record"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, h, t0); !errors.Is(err, etcd.ErrCorrupt) {
		t.Fatalf("Get of a garbage value: got %v, want ErrCorrupt", err)
	}
	op := completeOp("garbage", 1, t0, t0.Add(time.Hour))
	if _, err := s.Claim(ctx, op); !errors.Is(err, etcd.ErrCorrupt) {
		t.Fatalf("Claim over a garbage value: got %v, want ErrCorrupt", err)
	}
	// A prefix holding another format is refused at Open.
	if _, err := cli.Put(ctx, opts.Prefix+"m/format", "99"); err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Open(ctx, opts); !errors.Is(err, etcd.ErrCorrupt) {
		t.Fatalf("Open of a prefix in format 99: got %v, want ErrCorrupt", err)
	}
}

func TestRecordCodecRoundTrip(t *testing.T) {
	h := hashOf("codec")
	recs := []spent.Record{
		{Namespace: "n", Hash: h, FirstSeen: t0, Place: "p", State: spent.StateComplete, Result: []byte{},
			ExpiresAt: t0.Add(time.Hour), Seq: spent.Seq{Node: 1, Counter: 2}},
		{Namespace: strings.Repeat("x", 64), Hash: h, RawKey: "raw", FirstSeen: t0.Add(1), Place: "",
			Fingerprint: bytes.Repeat([]byte{7}, 32), State: spent.StatePending,
			ExpiresAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), LeaseUntil: t0.Add(5 * time.Second),
			Seq: spent.Seq{Node: 1<<32 - 1, Counter: 1<<64 - 1}},
		{Namespace: "n", Hash: h, FirstSeen: time.Unix(-5, 3), State: spent.StateComplete, Result: []byte{0, 0, 1},
			ExpiresAt: time.Unix(0, 1), Seq: spent.Seq{Node: 3, Counter: 4}},
	}
	for i, r := range recs {
		got, err := etcd.DecodeRecord(h, etcd.EncodeRecord(&r))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if got.Namespace != r.Namespace || got.RawKey != r.RawKey || !got.FirstSeen.Equal(r.FirstSeen) || got.Place != r.Place ||
			!bytes.Equal(got.Fingerprint, r.Fingerprint) || got.State != r.State || !bytes.Equal(got.Result, r.Result) ||
			(got.Result == nil) != (r.Result == nil) || !got.ExpiresAt.Equal(r.ExpiresAt) || !got.LeaseUntil.Equal(r.LeaseUntil) ||
			got.LeaseUntil.IsZero() != r.LeaseUntil.IsZero() || got.Seq != r.Seq || got.Hash != h {
			t.Fatalf("record %d: got %+v, want %+v", i, got, r)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	h := hashOf("fuzz")
	r := spent.Record{Namespace: "n", Hash: h, FirstSeen: t0, Place: "p", Fingerprint: bytes.Repeat([]byte{1}, 32),
		State: spent.StatePending, ExpiresAt: t0.Add(time.Hour), LeaseUntil: t0.Add(time.Second), Seq: spent.Seq{Node: 1, Counter: 9}}
	f.Add(etcd.EncodeRecord(&r))
	r.State, r.Result, r.LeaseUntil = spent.StateComplete, []byte("done"), time.Time{}
	f.Add(etcd.EncodeRecord(&r))
	f.Add([]byte{1, 2, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		rec, err := etcd.DecodeRecord(h, v)
		if err != nil {
			if !errors.Is(err, etcd.ErrCorrupt) {
				t.Fatalf("got error %v, want ErrCorrupt", err)
			}
			return
		}
		// What decodes re-encodes to the same bytes.
		if again := etcd.EncodeRecord(&rec); !bytes.Equal(again, v) {
			t.Fatalf("re-encoded %x, want %x", again, v)
		}
	})
}

func TestOpenChecksTheCluster(t *testing.T) {
	eps := etcdtest.Shared(t)
	ctx := context.Background()
	dead := deadEndpoint(t)
	base := testOptions(t, prefixFor(t.TempDir()))
	base.DialTimeout = 2 * time.Second

	// One endpoint of three silent: the store runs on the others, and says so.
	var logs bytes.Buffer
	o := base
	o.Endpoints = []string{eps[0], eps[1], dead}
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, err := etcd.Open(ctx, o)
	if err != nil {
		t.Fatalf("Open with one endpoint of three silent: %v", err)
	}
	s.Close()
	if !strings.Contains(logs.String(), dead) {
		t.Fatalf("log: got %q, want a warning naming %s", logs.String(), dead)
	}

	// A majority silent: refused.
	o = base
	o.Endpoints = []string{eps[0], dead, deadEndpoint(t)}
	start := time.Now()
	if _, err := etcd.Open(ctx, o); !errors.Is(err, etcd.ErrUnhealthy) {
		t.Fatalf("Open with two endpoints of three silent: got %v, want ErrUnhealthy", err)
	}
	if d := time.Since(start); d > 2*o.DialTimeout+2*time.Second {
		t.Fatalf("Open took %v, want about the dial timeout %v", d, o.DialTimeout)
	}

	// AllowNonDurable is accepted, and logged as meaningless.
	logs.Reset()
	o = base
	o.AllowNonDurable = true
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, err = etcd.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !strings.Contains(logs.String(), "no effect") {
		t.Fatalf("log: got %q, want a warning that allow-non-durable has no effect", logs.String())
	}
}

// deadEndpoint returns a loopback endpoint where nothing listens.
func deadEndpoint(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
