package resp_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/grant"
	"github.com/spentledger/spent/pebble"
	"github.com/spentledger/spent/resp"
)

// countingStore passes every call to the pebble store beneath, counting the
// claim writes, so that a test can see how many store writes a pipeline
// took.
type countingStore struct {
	spent.Store
	claims, batches atomic.Int64
	// gate, when set, holds every Complete until it is closed.
	gate atomic.Pointer[chan struct{}]
}

func (s *countingStore) Complete(ctx context.Context, key spent.Hash, seq spent.Seq, result []byte, now time.Time) (spent.Record, error) {
	if g := s.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return spent.Record{}, ctx.Err()
		}
	}
	return s.Store.Complete(ctx, key, seq, result, now)
}

func (s *countingStore) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	s.claims.Add(1)
	return s.Store.Claim(ctx, op)
}

func (s *countingStore) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	s.batches.Add(1)
	return s.Store.ClaimBatch(ctx, ops)
}

const (
	tokAll    = "resp-all-token-0123456789"
	tokTokens = "resp-tokens-only-012345"
	tokAdmin  = "resp-admin-token-0123456"
)

type fixture struct {
	addr   string
	store  *countingStore
	ledger *spent.Ledger
	srv    *resp.Server
}

// start serves a ledger over a fresh pebble store with namespaces echo
// (prefix "e:"), refuse ("t:", minimum expiry 30 h), roll ("r:", rollback,
// lease 2 s) and retake ("x:"), with tokens when auth is set.
func start(t testing.TB, auth bool, mod func(*resp.Config)) *fixture {
	t.Helper()
	opts := pebble.DefaultOptions()
	opts.ExpectedRecords = 1 << 21 // room for the benchmarks, so the filter is made once
	st, err := pebble.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &countingStore{Store: st}
	lc := spent.DefaultConfig()
	lc.Secret = bytes.Repeat([]byte("k"), 32)
	lc.Namespaces = map[string]spent.Policy{
		"echo":   spent.DefaultPolicy(),
		"refuse": {Mode: spent.ModeRefuse, Retention: 30 * time.Hour, MaxExpiry: 48 * time.Hour, Lease: 10 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold},
		"roll":   {Mode: spent.ModeRefuse, Retention: time.Hour, Lease: 2 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold},
		"retake": {Mode: spent.ModeEcho, Retention: time.Hour, Lease: 2 * time.Second, OnLeaseExpiry: spent.LeaseExpiryRetake},
	}
	l, err := spent.NewLedger(context.Background(), cs, lc)
	if err != nil {
		t.Fatal(err)
	}
	rc := resp.DefaultConfig()
	rc.Prefixes = []resp.Prefix{
		{Prefix: "e:", Namespace: "echo"},
		{Prefix: "t:", Namespace: "refuse", MinExpiry: 30 * time.Hour},
		{Prefix: "r:", Namespace: "roll", Rollback: true},
		{Prefix: "x:", Namespace: "retake"},
	}
	if auth {
		rc.Tokens = []grant.Token{
			{Token: tokAll, Scopes: []grant.Scope{grant.ScopeClaim}},
			{Token: tokTokens, Namespaces: []string{"refuse"}, Scopes: []grant.Scope{grant.ScopeClaim}},
			{Token: tokAdmin, Scopes: []grant.Scope{grant.ScopeAdmin}},
		}
	}
	if mod != nil {
		mod(&rc)
	}
	srv, err := resp.NewServer(l, rc)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &fixture{addr: ln.Addr().String(), store: cs, ledger: l, srv: srv}
}

func (f *fixture) client(t *testing.T, opts *redis.Options) *redis.Client {
	t.Helper()
	if opts == nil {
		opts = &redis.Options{}
	}
	opts.Addr = f.addr
	opts.MaxRetries = -1
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// errPrefix checks that err is a reply whose first word is code.
func errPrefix(t *testing.T, what string, err error, code string) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), code+" ") {
		t.Fatalf("%s: got error %v, want a %s reply", what, err, code)
	}
}

func TestSetNXIsAClaim(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			f := start(t, false, nil)
			c := f.client(t, &redis.Options{Protocol: proto})
			ctx := context.Background()
			ok, err := c.SetNX(ctx, "e:order-1", "charged", time.Minute).Result()
			if err != nil || !ok {
				t.Fatalf("first SET NX: %v, %v; want true", ok, err)
			}
			ok, err = c.SetNX(ctx, "e:order-1", "charged again", time.Minute).Result()
			if err != nil || ok {
				t.Fatalf("repeat SET NX: %v, %v; want false", ok, err)
			}
			// SET … NX GET: the stored value, whatever the repeat carries.
			v, err := c.SetArgs(ctx, "e:order-1", "other", redis.SetArgs{Mode: "NX", Get: true}).Result()
			if err != nil || v != "charged" {
				t.Fatalf("SET NX GET of a repeat: %q, %v; want the stored %q", v, err, "charged")
			}
			_, err = c.SetArgs(ctx, "e:order-2", "x", redis.SetArgs{Mode: "NX", Get: true}).Result()
			if err != redis.Nil {
				t.Fatalf("SET NX GET of a fresh key: %v, want nil (no value was there)", err)
			}
			// In a refuse namespace the value is not shown, but the answer
			// still says the key was there.
			if _, err := c.SetNX(ctx, "t:nonce-1", "1", 0).Result(); err != nil {
				t.Fatal(err)
			}
			v, err = c.SetArgs(ctx, "t:nonce-1", "1", redis.SetArgs{Mode: "NX", Get: true}).Result()
			if err != nil || v != "" {
				t.Fatalf("SET NX GET of a refused repeat: %q, %v; want an empty string", v, err)
			}
			// SETNX answers 1 and 0.
			n, err := c.Do(ctx, "SETNX", "e:order-3", "v").Int()
			if err != nil || n != 1 {
				t.Fatalf("SETNX fresh: %d, %v", n, err)
			}
			n, err = c.Do(ctx, "SETNX", "e:order-3", "v").Int()
			if err != nil || n != 0 {
				t.Fatalf("SETNX repeat: %d, %v", n, err)
			}
			got, err := c.Get(ctx, "e:order-1").Result()
			if err != nil || got != "charged" {
				t.Fatalf("GET: %q, %v", got, err)
			}
			if _, err := c.Get(ctx, "e:absent").Result(); err != redis.Nil {
				t.Fatalf("GET of an absent key: %v, want nil", err)
			}
			if n, err := c.Exists(ctx, "e:order-1", "e:order-3", "e:absent").Result(); err != nil || n != 2 {
				t.Fatalf("EXISTS: %d, %v; want 2", n, err)
			}
			// The ledger holds the claim under the namespace, keyed without
			// the prefix.
			rec, err := f.ledger.Get(ctx, "echo", "order-1")
			if err != nil || string(rec.Result) != "charged" || rec.State != spent.StateComplete {
				t.Fatalf("ledger record: %+v, %v", rec, err)
			}
		})
	}
}

func TestExpiry(t *testing.T) {
	f := start(t, false, nil)
	c := f.client(t, nil)
	ctx := context.Background()
	// Asked for a minute: kept for a minute.
	c.SetNX(ctx, "e:a", "v", time.Minute)
	if ttl, err := c.TTL(ctx, "e:a").Result(); err != nil || ttl < 59*time.Second || ttl > time.Minute {
		t.Fatalf("TTL after EX 60: %v, %v", ttl, err)
	}
	// Asked for a year: capped at the namespace's retention (24 h).
	c.SetNX(ctx, "e:b", "v", 365*24*time.Hour)
	if ttl, err := c.PTTL(ctx, "e:b").Result(); err != nil || ttl > 24*time.Hour || ttl < 23*time.Hour {
		t.Fatalf("PTTL after a year's EX: %v, %v; want at most the 24 h retention", ttl, err)
	}
	// Asked for a year where max_expiry is 48 h: capped at 48 h.
	c.SetNX(ctx, "t:y", "v", 365*24*time.Hour)
	if ttl, err := c.PTTL(ctx, "t:y").Result(); err != nil || ttl > 48*time.Hour || ttl < 47*time.Hour {
		t.Fatalf("PTTL after a year's EX under max_expiry 48 h: %v, %v; want 48 h", ttl, err)
	}
	// The ledger's own EXPIRESAT is refused beyond max_expiry, not capped.
	far := strconv.FormatInt(time.Now().AddDate(10, 0, 0).UnixMilli(), 10)
	_, err := c.Do(ctx, "SPENT.CLAIM", "refuse", "ten-years", "RESULT", "v", "EXPIRESAT", far).Result()
	errPrefix(t, "SPENT.CLAIM EXPIRESAT ten years away", err, "EXPIRY_TOO_LONG")
	if n, _ := c.Exists(ctx, "t:ten-years").Result(); n != 0 {
		t.Fatalf("a refused SPENT.CLAIM claimed its key")
	}
	// Asked for a second where the minimum is 30 h: raised to 30 h.
	c.SetNX(ctx, "t:c", "v", time.Second)
	if ttl, err := c.TTL(ctx, "t:c").Result(); err != nil || ttl < 29*time.Hour {
		t.Fatalf("TTL after EX 1 under a 30 h minimum: %v, %v; want 30 h", ttl, err)
	}
	// EXAT in the past and a zero EX are refused, as Redis refuses a bad
	// expire time.
	_, err = c.Do(ctx, "SET", "e:d", "v", "NX", "EXAT", "1000").Result()
	errPrefix(t, "SET EXAT in the past", err, "ERR")
	_, err = c.Do(ctx, "SET", "e:d", "v", "NX", "EX", "0").Result()
	errPrefix(t, "SET EX 0", err, "ERR")
	if n, _ := c.Exists(ctx, "e:d").Result(); n != 0 {
		t.Fatalf("a refused SET claimed its key")
	}
	if ttl, err := c.TTL(ctx, "e:absent").Result(); err != nil || ttl != -2*time.Nanosecond {
		t.Fatalf("TTL of an absent key: %v, %v; want -2", ttl, err)
	}
}

func TestWritesThatWouldForgetAreRefused(t *testing.T) {
	f := start(t, false, nil)
	c := f.client(t, nil)
	ctx := context.Background()
	c.SetNX(ctx, "e:k", "v", 0)
	for _, args := range [][]any{
		{"SET", "e:k", "w"},
		{"SET", "e:k", "w", "XX"},
		{"SET", "e:fresh", "w"},
		{"INCR", "e:k"},
		{"EXPIRE", "e:k", "1"},
		{"PERSIST", "e:k"},
		{"GETDEL", "e:k"},
		{"GETSET", "e:k", "w"},
		{"SETEX", "e:k", "10", "w"},
		{"FLUSHALL"},
		{"MULTI"},
	} {
		_, err := c.Do(ctx, args...).Result()
		errPrefix(t, fmt.Sprint(args), err, "ERR")
		if !strings.Contains(err.Error(), "spent") {
			t.Fatalf("%v: %v: want the reason spent refuses it", args, err)
		}
	}
	if n, _ := c.Exists(ctx, "e:fresh").Result(); n != 0 {
		t.Fatal("SET without NX claimed its key")
	}
	// DEL of a complete record is refused; the record stays.
	err := c.Del(ctx, "e:k").Err()
	errPrefix(t, "DEL of a complete record", err, "NOT_PENDING")
	if v, err := c.Get(ctx, "e:k").Result(); err != nil || v != "v" {
		t.Fatalf("GET after the refused DEL: %q, %v", v, err)
	}
	// A key without a configured prefix is an error, never a default.
	errPrefix(t, "SET NX of an unmapped key", c.SetNX(ctx, "other:k", "v", 0).Err(), "ERR")
	errPrefix(t, "GET of an unmapped key", c.Get(ctx, "k").Err(), "ERR")
	errPrefix(t, "unknown command", c.Do(ctx, "HGETALL", "e:k").Err(), "ERR")
	errPrefix(t, "SELECT 1", c.Do(ctx, "SELECT", "1").Err(), "ERR")
}

func TestDelReleasesAPendingClaim(t *testing.T) {
	f := start(t, false, nil)
	c := f.client(t, &redis.Options{Protocol: 3})
	ctx := context.Background()
	m, err := c.Do(ctx, "SPENT.CLAIM", "echo", "job-1").Result()
	if err != nil {
		t.Fatal(err)
	}
	rec := m.(map[any]any)
	if rec["outcome"] != "fresh" || rec["state"] != "pending" || rec["namespace"] != "echo" {
		t.Fatalf("SPENT.CLAIM: %v", rec)
	}
	// A repeat while pending: in progress, with the time to retry.
	m, _ = c.Do(ctx, "SPENT.CLAIM", "echo", "job-1").Result()
	if r := m.(map[any]any); r["outcome"] != "in_progress" || r["retry_after"].(int64) <= 0 {
		t.Fatalf("SPENT.CLAIM repeat: %v", r)
	}
	if ok, _ := c.SetNX(ctx, "e:job-1", "v", 0).Result(); ok {
		t.Fatal("SET NX of a pending key answered fresh")
	}
	if v, err := c.Get(ctx, "e:job-1").Result(); err != redis.Nil {
		t.Fatalf("GET of a pending key: %q, %v; want nil", v, err)
	}
	if n, err := c.Del(ctx, "e:job-1", "e:absent").Result(); err != nil || n != 1 {
		t.Fatalf("DEL of a pending claim: %d, %v; want 1", n, err)
	}
	if ok, _ := c.SetNX(ctx, "e:job-1", "done", 0).Result(); !ok {
		t.Fatal("SET NX after DEL: want fresh, the claim was released")
	}
	// SPENT.COMPLETE and SPENT.RELEASE with the seq.
	m, _ = c.Do(ctx, "SPENT.CLAIM", "echo", "job-2", "PLACE", "gate-7").Result()
	seq := m.(map[any]any)["seq"].(string)
	if err := c.Do(ctx, "SPENT.COMPLETE", "echo", "job-2", "9:9", "r").Err(); err == nil || !strings.HasPrefix(err.Error(), "SEQ_MISMATCH") {
		t.Fatalf("SPENT.COMPLETE with another seq: %v", err)
	}
	m, err = c.Do(ctx, "SPENT.COMPLETE", "echo", "job-2", seq, "result-2").Result()
	if err != nil || m.(map[any]any)["result"] != "result-2" || m.(map[any]any)["place"] != "gate-7" {
		t.Fatalf("SPENT.COMPLETE: %v, %v", m, err)
	}
	m, err = c.Do(ctx, "SPENT.GET", "echo", "job-2").Result()
	if err != nil || m.(map[any]any)["state"] != "complete" {
		t.Fatalf("SPENT.GET: %v, %v", m, err)
	}
	errPrefix(t, "SPENT.RELEASE of a complete record", c.Do(ctx, "SPENT.RELEASE", "echo", "job-2", seq).Err(), "NOT_PENDING")
}

func TestRollbackWindow(t *testing.T) {
	f := start(t, false, nil)
	c := f.client(t, nil)
	ctx := context.Background()
	// Spend, then roll back within the window (half the 2 s lease).
	if ok, _ := c.SetNX(ctx, "r:tok-1", "1", 0).Result(); !ok {
		t.Fatal("first spend: want fresh")
	}
	if ok, _ := c.SetNX(ctx, "r:tok-1", "1", 0).Result(); ok {
		t.Fatal("second spend within the window: want a repeat")
	}
	if n, err := c.Del(ctx, "r:tok-1").Result(); err != nil || n != 1 {
		t.Fatalf("rollback: %d, %v", n, err)
	}
	if ok, _ := c.SetNX(ctx, "r:tok-1", "1", 0).Result(); !ok {
		t.Fatal("spend after the rollback: want fresh")
	}
	// Past the window the listener has completed it: DEL is refused, the
	// value is stored, and the token stays spent.
	if ok, _ := c.SetNX(ctx, "r:tok-2", "v2", 0).Result(); !ok {
		t.Fatal("spend tok-2: want fresh")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, err := f.ledger.Get(ctx, "roll", "tok-2")
		if err == nil && rec.State == spent.StateComplete {
			if string(rec.Result) != "v2" {
				t.Fatalf("completed with %q, want v2", rec.Result)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tok-2 not completed 5 s after its spend: %+v, %v", rec, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	errPrefix(t, "DEL after the window", c.Del(ctx, "r:tok-2").Err(), "NOT_PENDING")
	if ok, _ := c.SetNX(ctx, "r:tok-2", "1", 0).Result(); ok {
		t.Fatal("spend of tok-2 after the window: want a repeat")
	}
	// The claim rolled back with DEL has no completion left to run.
	if ok, _ := c.SetNX(ctx, "r:tok-3", "1", 0).Result(); !ok {
		t.Fatal("spend tok-3")
	}
	c.Del(ctx, "r:tok-3")
	time.Sleep(1500 * time.Millisecond)
	if _, err := f.ledger.Get(ctx, "roll", "tok-3"); spent.ErrorCode(err) != spent.ENotFound {
		t.Fatalf("tok-3 after its rollback and the window: %v, want not found", err)
	}
}

func TestRollbackNeedsHold(t *testing.T) {
	st, err := pebble.Open(t.TempDir(), pebble.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lc := spent.DefaultConfig()
	lc.Secret = bytes.Repeat([]byte("k"), 32)
	lc.Namespaces = map[string]spent.Policy{"retake": {Mode: spent.ModeRefuse, Retention: time.Hour, Lease: time.Second, OnLeaseExpiry: spent.LeaseExpiryRetake}}
	l, err := spent.NewLedger(context.Background(), st, lc)
	if err != nil {
		t.Fatal(err)
	}
	rc := resp.DefaultConfig()
	rc.Prefixes = []resp.Prefix{{Prefix: "t:", Namespace: "retake", Rollback: true}}
	if _, err := resp.NewServer(l, rc); err == nil || !strings.Contains(err.Error(), "hold") {
		t.Fatalf("rollback over a retake namespace: %v, want a refusal naming hold", err)
	}
	rc.Prefixes = []resp.Prefix{{Prefix: "t:", Namespace: "nope"}}
	if _, err := resp.NewServer(l, rc); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Fatalf("prefix of an unknown namespace: %v", err)
	}
}

// TestPipelineSharesOneWrite sends 100 pipelined claims and checks they
// were decided in order, by one store write.
func TestPipelineSharesOneWrite(t *testing.T) {
	f := start(t, false, nil)
	c := f.client(t, &redis.Options{PoolSize: 1})
	ctx := context.Background()
	before := f.store.batches.Load() + f.store.claims.Load()
	pipe := c.Pipeline()
	var cmds []*redis.BoolCmd
	for i := range 100 {
		// Every key twice in a row: the second must see the first.
		k := fmt.Sprintf("e:p-%d", i/2)
		cmds = append(cmds, pipe.SetNX(ctx, k, "v", 0))
	}
	get := pipe.Get(ctx, "e:p-0")
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if cmd.Val() != (i%2 == 0) || cmd.Err() != nil {
			t.Fatalf("pipelined SETNX %d: %v, %v; want %v (decided in order)", i, cmd.Val(), cmd.Err(), i%2 == 0)
		}
	}
	if get.Val() != "v" {
		t.Fatalf("GET after the claims in the same pipeline: %q, %v", get.Val(), get.Err())
	}
	if writes := f.store.batches.Load() + f.store.claims.Load() - before; writes != 1 {
		t.Fatalf("100 pipelined claims took %d store writes, want 1", writes)
	}
	// A malformed claim in a pipeline fails alone.
	pipe = c.Pipeline()
	a := pipe.SetNX(ctx, "e:q-1", "v", 0)
	b := pipe.SetNX(ctx, "e:"+strings.Repeat("k", spent.MaxKeyLen+1), "v", 0)
	d := pipe.SetNX(ctx, "e:q-2", "v", 0)
	pipe.Exec(ctx)
	if !a.Val() || !d.Val() {
		t.Fatalf("claims beside a malformed one: %v %v, %v %v", a.Val(), a.Err(), d.Val(), d.Err())
	}
	errPrefix(t, "a key too long in a pipeline", b.Err(), "KEY_TOO_LONG")
}

func TestAuth(t *testing.T) {
	f := start(t, true, nil)
	ctx := context.Background()
	c := f.client(t, nil)
	errPrefix(t, "SET NX before AUTH", c.SetNX(ctx, "e:a", "v", 0).Err(), "NOAUTH")
	errPrefix(t, "GET before AUTH", c.Get(ctx, "e:a").Err(), "NOAUTH")
	bad := f.client(t, &redis.Options{Password: "wrong-token-0123456789"})
	errPrefix(t, "a wrong token", bad.Ping(ctx).Err(), "WRONGPASS")

	for _, proto := range []int{2, 3} {
		// go-redis authenticates with HELLO proto AUTH default <token>.
		all := f.client(t, &redis.Options{Password: tokAll, Protocol: proto})
		if ok, err := all.SetNX(ctx, fmt.Sprintf("e:a%d", proto), "v", 0).Result(); err != nil || !ok {
			t.Fatalf("RESP%d: SET NX with a token: %v, %v", proto, ok, err)
		}
	}
	scoped := f.client(t, &redis.Options{Password: tokTokens})
	if ok, err := scoped.SetNX(ctx, "t:n1", "1", 0).Result(); err != nil || !ok {
		t.Fatalf("SET NX in the token's namespace: %v, %v", ok, err)
	}
	errPrefix(t, "SET NX outside the token's namespaces", scoped.SetNX(ctx, "e:b", "v", 0).Err(), "NOPERM")
	m, _ := scoped.Do(ctx, "SPENT.CLAIM", "refuse", "n2").Result()
	if m == nil {
		t.Fatal("SPENT.CLAIM in the token's namespace")
	}
	errPrefix(t, "FORCE without admin", scoped.Do(ctx, "SPENT.RELEASE", "refuse", "n2", "*", "FORCE").Err(), "NOPERM")
	admin := f.client(t, &redis.Options{Password: tokAdmin})
	if err := admin.Do(ctx, "SPENT.RELEASE", "refuse", "n2", "*", "FORCE").Err(); err != nil {
		t.Fatalf("FORCE with admin: %v", err)
	}
	// AUTH token, the one-argument form.
	raw := f.client(t, &redis.Options{PoolSize: 1})
	conn := raw.Conn()
	defer conn.Close()
	if err := conn.Do(ctx, "AUTH", tokAll).Err(); err != nil {
		t.Fatalf("AUTH token: %v", err)
	}
	if err := conn.Get(ctx, "e:a2").Err(); err != nil {
		t.Fatalf("GET after AUTH: %v", err)
	}
}

// TestLimits sends commands past each limit: the connection is answered
// with a protocol error and closed, and the server serves the next one.
func TestLimits(t *testing.T) {
	f := start(t, false, func(c *resp.Config) { c.MaxArgs, c.MaxBulk, c.MaxClients = 8, 4096, 3 })
	for name, req := range map[string]string{
		"arguments":     "*9\r\n",
		"bulk":          "*3\r\n$5\r\nSETNX\r\n$10000\r\n",
		"negative bulk": "*1\r\n$-5\r\n",
		"inline line":   strings.Repeat("x", 70<<10) + "\r\n",
		"not a bulk":    "*1\r\n+OK\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("tcp", f.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.Write([]byte(req))
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			var buf bytes.Buffer
			b := make([]byte, 4096)
			for {
				n, err := nc.Read(b)
				buf.Write(b[:n])
				if err != nil {
					break
				}
			}
			if !strings.HasPrefix(buf.String(), "-ERR Protocol error") {
				t.Fatalf("got %q, want a protocol error, then the connection closed", buf.String())
			}
		})
	}
	// max_clients: the fourth connection is refused while three are open.
	var conns []net.Conn
	for range 3 {
		nc, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write([]byte("PING\r\n"))
		r := make([]byte, 7)
		nc.Read(r)
		conns = append(conns, nc)
	}
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 200)
	n, _ := nc.Read(b)
	if !strings.HasPrefix(string(b[:n]), "-ERR max number of clients") {
		t.Fatalf("a connection past max_clients: %q", b[:n])
	}
	nc.Close()
	for _, c := range conns {
		c.Close()
	}
	// An HTTP request to the port is cut off at its first line, once the
	// server has let go of the closed connections.
	var hc net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if hc, err = net.Dial("tcp", f.addr); err != nil {
			t.Fatal(err)
		}
		hc.Write([]byte("PING\r\n"))
		hc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ = hc.Read(b)
		if string(b[:n]) == "+PONG\r\n" {
			break
		}
		hc.Close()
		if time.Now().After(deadline) {
			t.Fatalf("no connection served 10 s after the others closed: %q", b[:n])
		}
	}
	hc.Write([]byte("POST / HTTP/1.1\r\nHost: localhost\r\n\r\nSETNX e:web x\r\n"))
	hc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err = hc.Read(b)
	hc.Close()
	if n != 0 || err == nil {
		t.Fatalf("an HTTP request: got %q, %v; want the connection closed without an answer", b[:n], err)
	}
	if _, err := f.ledger.Get(context.Background(), "echo", "web"); spent.ErrorCode(err) != spent.ENotFound {
		t.Fatalf("a command smuggled after an HTTP request line was run: %v", err)
	}
}

// TestShutdownFinishesInFlight checks that Shutdown answers the commands a
// connection has read and completes the open rollback windows.
func TestShutdownCompletesRollbacks(t *testing.T) {
	f := start(t, false, nil)
	c := f.client(t, nil)
	ctx := context.Background()
	if ok, _ := c.SetNX(ctx, "r:s-1", "value", 0).Result(); !ok {
		t.Fatal("spend")
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := f.srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	rec, err := f.ledger.Get(ctx, "roll", "s-1")
	if err != nil || rec.State != spent.StateComplete || string(rec.Result) != "value" {
		t.Fatalf("after shutdown: %+v, %v; want complete with the value", rec, err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a command after shutdown was answered")
	}
}

// TestManyConnectionsOneKey races one key from 100 connections.
func TestManyConnectionsOneKey(t *testing.T) {
	f := start(t, false, nil)
	var wins atomic.Int64
	var wg sync.WaitGroup
	clients := make([]*redis.Client, 100)
	for i := range clients {
		clients[i] = f.client(t, &redis.Options{PoolSize: 1})
		if err := clients[i].Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 20 {
		wins.Store(0)
		start := make(chan struct{})
		for _, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if ok, err := c.SetNX(context.Background(), fmt.Sprintf("t:race-%d", round), "1", 0).Result(); err == nil && ok {
					wins.Add(1)
				} else if err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if w := wins.Load(); w != 1 {
			t.Fatalf("round %d: %d winners, want 1", round, w)
		}
	}
}

// TestDelOfACompleteRecordReleasesNothing checks that DEL of several keys,
// one of them complete, refuses the whole command: the pending claim named
// before it is not released.
func TestDelOfACompleteRecordReleasesNothing(t *testing.T) {
	f := start(t, false, nil)
	c := f.client(t, &redis.Options{Protocol: 3})
	ctx := context.Background()
	if err := c.Do(ctx, "SPENT.CLAIM", "echo", "pending-1").Err(); err != nil {
		t.Fatal(err)
	}
	c.SetNX(ctx, "e:done-1", "v", 0)
	err := c.Del(ctx, "e:pending-1", "e:done-1").Err()
	errPrefix(t, "DEL of a pending and a complete key", err, "NOT_PENDING")
	if !strings.Contains(err.Error(), "no key of this DEL was released") {
		t.Fatalf("DEL refusal: %v; want it to say nothing was released", err)
	}
	if rec, err := f.ledger.Get(ctx, "echo", "pending-1"); err != nil || rec.State != spent.StatePending {
		t.Fatalf("the pending claim after the refused DEL: %+v, %v; want it still pending", rec, err)
	}
	if n, err := c.Del(ctx, "e:pending-1", "e:absent").Result(); err != nil || n != 1 {
		t.Fatalf("DEL of a pending and an absent key: %d, %v; want 1", n, err)
	}
}
