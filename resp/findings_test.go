package resp_test

// Tests of issue 31's findings against the RESP listener: each failed on
// abd636c and passes now.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/door"
	"github.com/spentledger/spent/internal/metricstest"
	"github.com/spentledger/spent/internal/syncbuf"
	"github.com/spentledger/spent/internal/tlstest"
	"github.com/spentledger/spent/resp"
)

// rawConn dials the listener and returns the connection with a reader of
// its replies.
func rawConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc, bufio.NewReader(nc)
}

// replyLine reads one reply line within d.
func replyLine(t *testing.T, nc net.Conn, br *bufio.Reader, d time.Duration) (string, error) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(d))
	l, err := br.ReadString('\n')
	return strings.TrimRight(l, "\r\n"), err
}

// TestSetExpiryOverflow (finding 2): an EX or PX whose nanoseconds overflow
// int64 was wrapped (EX 18446744074 lived 275 ms, and the key was free
// again), and one that wrapped negative was refused. Now every positive
// integer is taken and kept within the namespace's max_expiry, whose
// PTTL shows it.
func TestSetExpiryOverflow(t *testing.T) {
	f := start(t, false, nil)
	c := f.client(t, nil)
	ctx := context.Background()
	for i, opt := range [][]string{
		{"EX", "18446744074"}, {"PX", "18446744073710"}, {"EX", "9300000000"},
		{"EX", "9223372036854775807"}, {"PX", "9223372036854775807"},
		{"EXAT", "9223372036854775807"}, {"PXAT", "9223372036854775807"},
	} {
		key := fmt.Sprintf("e:overflow-%d", i)
		args := []any{"SET", key, "v", "NX", opt[0], opt[1]}
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: got %v, want OK (clamped to max_expiry)", args, err)
		}
		ttl, err := c.PTTL(ctx, key).Result()
		if err != nil || ttl < 23*time.Hour || ttl > 24*time.Hour {
			t.Fatalf("%v: PTTL %v, %v; want the namespace's max_expiry, 24 h", args, ttl, err)
		}
		if ok, err := c.SetNX(ctx, key, "again", 0).Result(); err != nil || ok {
			t.Fatalf("%v: a second SET NX: %v, %v; want nil (the key is spent)", args, ok, err)
		}
	}
	// Not integers as Redis reads them (a sign, a leading zero), zero or
	// negative, and an expiry beside KEEPTTL are refused as Redis refuses
	// them.
	for _, opt := range [][]string{{"EX", "18446744073709551616"}, {"EX", "0"}, {"PX", "-1"}, {"EX", "1.5"}, {"EX", "+10"}, {"EX", "0010"}, {"PX", "-0"}, {"EX", ""}, {"EX", "10", "KEEPTTL"}, {"KEEPTTL", "PX", "10"}} {
		args := []any{"SET", "e:bad", "v", "NX"}
		for _, o := range opt {
			args = append(args, o)
		}
		errPrefix(t, fmt.Sprint(opt), c.Do(ctx, args...).Err(), "ERR")
	}
	if _, err := f.ledger.Get(ctx, "echo", "bad"); spent.ErrorCode(err) != spent.ENotFound {
		t.Fatalf("a refused SET claimed its key: %v", err)
	}
}

// TestDelRacingSetNX (finding 3): under a rollback prefix, A claims a key,
// then B's DEL and C's SET NX of it run at once, 10,000 times. DEL released
// by key and then forgot the queued completion by key, dropping C's; C's
// acknowledged claim then stayed pending and DEL released it after its
// window: a token spent twice. Now every claim C was told OK for holds its
// value after the window, and neither DEL nor SET NX frees it.
func TestDelRacingSetNX(t *testing.T) {
	runs := 10000
	if testing.Short() {
		runs = 1000
	}
	f := start(t, false, nil) // "r:" rolls back in "roll": lease 2 s, window 1 s
	ctx := context.Background()
	const workers = 50
	var mu sync.Mutex
	var ok []string
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range workers {
		wg.Go(func() {
			a := f.client(t, &redis.Options{PoolSize: 1})
			b := f.client(t, &redis.Options{PoolSize: 1})
			c := f.client(t, &redis.Options{PoolSize: 1})
			for i := w; i < runs; i += workers {
				key := fmt.Sprintf("r:race-%d", i)
				if got, err := a.SetNX(ctx, key, "a", 0).Result(); err != nil || !got {
					failed.Store(fmt.Sprintf("A's SET NX of %s: %v, %v", key, got, err))
					return
				}
				var cOK bool
				var cErr error
				var in sync.WaitGroup
				in.Go(func() { b.Del(ctx, key) })
				in.Go(func() { cOK, cErr = c.SetNX(ctx, key, "c", 0).Result() })
				in.Wait()
				if cErr != nil {
					failed.Store(fmt.Sprintf("C's SET NX of %s: %v", key, cErr))
					return
				}
				if cOK {
					mu.Lock()
					ok = append(ok, key)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if v := failed.Load(); v != nil {
		t.Fatal(v)
	}
	if len(ok) == 0 {
		t.Fatalf("no run had C's claim accepted: the race did not happen in %d runs", runs)
	}
	t.Logf("%d of %d runs: C's SET NX was OK (B's DEL came first)", len(ok), runs)
	// Past every window (1 s), each of C's claims must be complete with its
	// value: the completer stores them at the window's end.
	time.Sleep(1500 * time.Millisecond)
	c := f.client(t, nil)
	deadline := time.Now().Add(20 * time.Second)
	for _, key := range ok {
		for {
			v, err := c.Get(ctx, key).Result()
			if err == nil && v == "c" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: C's acknowledged claim: GET %q, %v after its window; want \"c\" (completed with its value)", key, v, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		errPrefix(t, "DEL of "+key+" after its window", c.Del(ctx, key).Err(), "NOT_PENDING")
		if got, err := c.SetNX(ctx, key, "d", 0).Result(); err != nil || got {
			t.Fatalf("%s: SET NX after the window: %v, %v; want nil (spent)", key, got, err)
		}
	}
}

// heapPeak samples the heap in use every few milliseconds until stop is
// closed, and returns the largest value seen.
func heapPeak(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestPipelinedReadsOfALargeValue (finding 4): pipelined GETs (and
// SET … NX GET, SPENT.GET) of a 1 MiB value, replies not read, built every
// reply in memory: hundreds of MiB a connection. Now a connection writes
// its replies once they pass max_reply, so it holds no more than that and
// one value while its client does not read.
func TestPipelinedReadsOfALargeValue(t *testing.T) {
	f := start(t, false, nil)
	f.storeBig(t)
	base := heapInUse()
	stop := make(chan struct{})
	peak := heapPeak(stop)
	const conns, reads = 4, 128
	for i := range conns {
		nc, _ := rawConn(t, f.addr)
		var cmds bytes.Buffer
		for j := range reads {
			switch (i + j) % 3 {
			case 0:
				cmds.WriteString("*2\r\n$3\r\nGET\r\n$5\r\ne:big\r\n")
			case 1:
				cmds.WriteString("*5\r\n$3\r\nSET\r\n$5\r\ne:big\r\n$1\r\nx\r\n$2\r\nNX\r\n$3\r\nGET\r\n")
			default:
				cmds.WriteString("*3\r\n$9\r\nSPENT.GET\r\n$4\r\necho\r\n$3\r\nbig\r\n")
			}
		}
		if _, err := nc.Write(cmds.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	close(stop)
	grew := int64(<-peak) - int64(base)
	t.Logf("heap in use grew by %d MiB at its peak", grew>>20)
	if grew > 96<<20 {
		t.Fatalf("heap grew by %d MiB while %d connections pipelined %d reads of a 1 MiB value without reading: want at most 96 MiB (each connection holds max_reply and a value or two)", grew>>20, conns, reads)
	}
}

// TestPreAuthFrame (finding 5): before AUTH a connection could send (or
// only declare) a command of 64 arguments of 1 MiB and make the server
// allocate them. Now a command before AUTH may carry at most
// door.PreAuthArgs arguments and door.PreAuthFrame bytes, refused as its
// header arrives.
func TestPreAuthFrame(t *testing.T) {
	f := start(t, true, nil)
	for _, tc := range []struct{ send, want string }{
		{"*64\r\n", "before AUTH"},
		{"*2\r\n$4\r\nAUTH\r\n$1048576\r\n", "argument of 1048576 bytes before AUTH"},
		{"*3\r\n$4\r\nAUTH\r\n$10000\r\n" + strings.Repeat("a", 10000) + "\r\n$10000\r\n", "before AUTH"},
		{strings.Repeat("A", 40000), "before AUTH"},
	} {
		nc, br := rawConn(t, f.addr)
		if _, err := nc.Write([]byte(tc.send)); err != nil {
			t.Fatal(err)
		}
		l, err := replyLine(t, nc, br, 5*time.Second)
		if err != nil || !strings.HasPrefix(l, "-ERR Protocol error") || !strings.Contains(l, tc.want) {
			t.Fatalf("%.40q: got %q, %v; want a protocol error %q at once", tc.send, l, err, tc.want)
		}
		if _, err := replyLine(t, nc, br, 5*time.Second); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("%.40q: after the protocol error: %v, want the connection closed", tc.send, err)
		}
	}
	// A signed-in connection may still send a large value, and AUTH
	// followed at once by one is read under the token's limits.
	nc, br := rawConn(t, f.addr)
	big := strings.Repeat("b", 100000)
	fmt.Fprintf(nc, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n*4\r\n$3\r\nSET\r\n$5\r\ne:big\r\n$%d\r\n%s\r\n$2\r\nNX\r\n", len(tokAll), tokAll, len(big), big)
	for _, want := range []string{"+OK", "+OK"} {
		if l, err := replyLine(t, nc, br, 5*time.Second); err != nil || l != want {
			t.Fatalf("AUTH then a 100 kB SET: got %q, %v; want %q", l, err, want)
		}
	}
}

// TestUnauthenticatedShare (finding 6): idle unauthenticated sockets filled
// max_clients, and an administrator was refused; they had no deadline. Now
// they hold at most max_unauthenticated, the oldest making room for a
// newcomer, and are closed at auth_timeout.
func TestUnauthenticatedShare(t *testing.T) {
	f := start(t, true, func(rc *resp.Config) {
		rc.MaxClients = 40
		rc.Limits.MaxUnauthenticated = 8
		rc.Limits.AuthTimeout = 2 * time.Second
	})
	idle := make([]net.Conn, 40)
	for i := range idle {
		idle[i], _ = rawConn(t, f.addr)
	}
	ctx := context.Background()
	c := f.client(t, &redis.Options{Password: tokAdmin, PoolSize: 1})
	if err := c.SetNX(ctx, "e:admin-was-here", "v", 0).Err(); err != nil {
		t.Fatalf("an authorised client among 40 idle unauthenticated sockets: %v; want it served", err)
	}
	// The idle ones are closed within auth_timeout (and those pushed out
	// at once): every one sees its connection end.
	for i, nc := range idle {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(nc)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("idle socket %d: still open after 10 s; want it closed at auth_timeout (2 s)", i)
		}
		if len(b) > 0 && !bytes.HasPrefix(b, []byte("-NOAUTH")) {
			t.Fatalf("idle socket %d: got %q before the close, want nothing or -NOAUTH", i, b)
		}
	}
	// The signed-in client is still served.
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("the signed-in client after the idle ones went: %v", err)
	}
}

// TestDeadlines: a command that stalls half-way is cut at read_timeout, a
// signed-in connection that stays idle at idle_timeout, and a client that
// reads none of its replies at write_timeout (its commands still decided).
func TestDeadlines(t *testing.T) {
	f := start(t, false, func(rc *resp.Config) {
		rc.Limits.ReadTimeout = time.Second
		rc.Limits.IdleTimeout = 2 * time.Second
		rc.Limits.WriteTimeout = time.Second
	})
	nc, br := rawConn(t, f.addr)
	nc.Write([]byte("*3\r\n$3\r\nSET\r\n$5\r\ne:slo"))
	l, err := replyLine(t, nc, br, 10*time.Second)
	if err != nil || !strings.Contains(l, "read_timeout") {
		t.Fatalf("a stalled command: got %q, %v; want an error naming read_timeout", l, err)
	}
	nc, br = rawConn(t, f.addr)
	nc.Write([]byte("PING\r\n"))
	if l, err := replyLine(t, nc, br, 5*time.Second); err != nil || l != "+PONG" {
		t.Fatalf("PING: %q, %v", l, err)
	}
	if _, err := replyLine(t, nc, br, 10*time.Second); err != io.EOF {
		t.Fatalf("an idle connection: got %v, want it closed at idle_timeout (EOF)", err)
	}
}

// TestRollbackBudget (finding 7): values under a rollback prefix waited in
// memory without a bound. Now they hold at most max_rollback_bytes; a claim
// whose value does not fit is refused before it is made, and the others
// complete with their values.
func TestRollbackBudget(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := start(t, false, func(rc *resp.Config) {
		rc.MaxRollbackBytes = 1 << 20
		rc.Registerer = reg
	})
	c := f.client(t, nil)
	ctx := context.Background()
	value := strings.Repeat("v", 256<<10)
	var accepted, refused []string
	for i := range 8 {
		key := fmt.Sprintf("r:big-%d", i)
		err := c.SetNX(ctx, key, value, 0).Err()
		switch {
		case err == nil:
			accepted = append(accepted, key)
		case strings.HasPrefix(err.Error(), "UNAVAILABLE ") && strings.Contains(err.Error(), "max_rollback_bytes"):
			refused = append(refused, key)
		default:
			t.Fatalf("SET NX %s: %v", key, err)
		}
	}
	if len(accepted) == 0 || len(refused) == 0 || len(accepted) > 4 {
		t.Fatalf("8 values of 256 KiB in a budget of 1 MiB: %d accepted, %d refused; want at most 4 accepted and the rest refused", len(accepted), len(refused))
	}
	text := metricstest.Gathered(t, reg)
	if !strings.Contains(text, "spent_resp_rollback_bytes ") {
		t.Fatalf("no spent_resp_rollback_bytes in:\n%s", text)
	}
	for _, key := range refused {
		if _, err := f.ledger.Get(ctx, "roll", strings.TrimPrefix(key, "r:")); spent.ErrorCode(err) != spent.ENotFound {
			t.Fatalf("%s was refused, but the ledger holds it: %v", key, err)
		}
	}
	time.Sleep(1200 * time.Millisecond) // past the 1 s window
	deadline := time.Now().Add(10 * time.Second)
	for _, key := range accepted {
		for {
			v, err := c.Get(ctx, key).Result()
			if err == nil && v == value {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: GET after its window: %d bytes, %v; want its value", key, len(v), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Completed, the budget is free again.
	if err := c.SetNX(ctx, "r:after", value, 0).Err(); err != nil {
		t.Fatalf("SET NX once the others completed: %v", err)
	}
}

// TestRevalidate (finding 8): a client whose CA was removed kept its open
// connection. Revalidate (called by spent serve on a reload) closes it; a
// client of a CA still trusted stays.
func TestRevalidate(t *testing.T) {
	ca1, ca2 := tlstest.NewCA(t, "one"), tlstest.NewCA(t, "two")
	both := ca1.Pool()
	both.AddCert(ca2.Cert)
	f := start(t, false, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go f.srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{ca1.Server(t).TLS}, ClientCAs: both, ClientAuth: tls.RequireAndVerifyClientCert}))
	ctx := context.Background()
	client := func(ca *tlstest.CA) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1, PoolSize: 1,
			TLSConfig: &tls.Config{RootCAs: ca1.Pool(), Certificates: []tls.Certificate{ca.Client(t, "client").TLS}}})
		t.Cleanup(func() { c.Close() })
		if err := c.SetNX(ctx, "e:from-"+ca.Cert.Subject.CommonName, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1, c2 := client(ca1), client(ca2)
	if n := f.srv.Revalidate(ca1.Pool()); n != 1 {
		t.Fatalf("Revalidate: closed %d, want 1", n)
	}
	if err := c2.SetNX(ctx, "e:after", "v", 0).Err(); err == nil {
		t.Fatal("the client of the removed CA claimed again on its open connection; want it closed")
	}
	if err := c1.Ping(ctx).Err(); err != nil {
		t.Fatalf("the client of the kept CA: %v", err)
	}
}

// TestAuthFailures (finding 9): 100,000 wrong AUTHs on one connection were
// answered, the connection kept, nothing logged. Now the connection is
// closed after max_auth_failures, each refusal waits the throttle's delay,
// and the log says so.
func TestAuthFailures(t *testing.T) {
	var log syncbuf.Buffer
	f := start(t, true, func(rc *resp.Config) {
		rc.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	nc, br := rawConn(t, f.addr)
	for range 10 {
		fmt.Fprintf(nc, "AUTH wrong-token-%d\r\n", 1)
	}
	var lines []string
	for {
		l, err := replyLine(t, nc, br, 10*time.Second)
		if err != nil {
			if err != io.EOF {
				t.Fatalf("after %d replies: %v; want the connection closed", len(lines), err)
			}
			break
		}
		lines = append(lines, l)
	}
	if len(lines) != door.DefaultMaxAuthFailures {
		t.Fatalf("10 wrong AUTHs: %d replies %q; want %d, then the connection closed", len(lines), lines, door.DefaultMaxAuthFailures)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "-WRONGPASS") {
			t.Fatalf("reply %q: want WRONGPASS", l)
		}
	}
	if !strings.Contains(lines[len(lines)-1], "closing the connection") {
		t.Fatalf("last reply %q: want it to say the connection closes", lines[len(lines)-1])
	}
	if !strings.Contains(log.String(), "resp: sign-in refused") {
		t.Fatalf("log: want a line for the refused sign-ins\n%s", log.String())
	}
	// The right token still signs in: a delay, not a lockout.
	c := f.client(t, &redis.Options{Password: tokAll})
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the right token after the failures: %v", err)
	}
}

// TestPlaceControlCharacters (finding 10): SPENT.CLAIM … PLACE took
// newlines and ESC, which `spent unknown list` printed raw. Now a place
// with a control character is refused INVALID and nothing is claimed.
func TestPlaceControlCharacters(t *testing.T) {
	f := start(t, false, nil)
	c := f.client(t, nil)
	ctx := context.Background()
	for _, place := range []string{"gate\n1:forged row", "\x1b[2J", "a\x00b", "rtl\u202eoverride", "zero\u200bwidth", "mark\u200fx", "line\u2028sep", "para\u2029sep", "bom\ufeff", "\xff"} {
		errPrefix(t, fmt.Sprintf("PLACE %q", place), c.Do(ctx, "SPENT.CLAIM", "echo", "placed", "PLACE", place).Err(), "INVALID")
	}
	if _, err := f.ledger.Get(ctx, "echo", "placed"); spent.ErrorCode(err) != spent.ENotFound {
		t.Fatalf("a refused claim was made: %v", err)
	}
	if err := c.Do(ctx, "SPENT.CLAIM", "echo", "placed", "PLACE", "gate 7 (north) — ünïcode").Err(); err != nil {
		t.Fatalf("a printable place: %v", err)
	}
}

// TestSmallFindings (finding 11): DEL of a claim in its window counts as
// released in spent_resp_rollback_ended_total, and a bulk length written
// with a sign ($+5) is a protocol error.
func TestSmallFindings(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := start(t, false, func(rc *resp.Config) { rc.Registerer = reg })
	c := f.client(t, nil)
	ctx := context.Background()
	if err := c.SetNX(ctx, "r:rolled", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Del(ctx, "r:rolled").Result(); err != nil || n != 1 {
		t.Fatalf("DEL in the window: %d, %v", n, err)
	}
	text := metricstest.Gathered(t, reg)
	metricstest.Want(t, text, `spent_resp_rollback_ended_total{how="released"}`, 1)
	metricstest.Want(t, text, `spent_resp_rollback_pending`, 0)
	metricstest.Want(t, text, `spent_resp_rollback_bytes`, 0)
	for _, bad := range []string{"*1\r\n$+4\r\nPING\r\n", "*+1\r\n$4\r\nPING\r\n", "*1\r\n$04\r\nPING\r\n", "*1\r\n$ 4\r\nPING\r\n", "*1\r\n$4 \r\nPING\r\n"} {
		nc, br := rawConn(t, f.addr)
		nc.Write([]byte(bad))
		if l, err := replyLine(t, nc, br, 5*time.Second); err != nil || !strings.HasPrefix(l, "-ERR Protocol error") {
			t.Fatalf("%q: got %q, %v; want a protocol error", bad, l, err)
		}
	}
}

// TestRollbackWindowIsTheLease (found by an attacker after finding 3's
// fix): the window lived only in the listener, so another front end (the
// HTTP API's /v1/release, with the claim scope) could release a claim of a
// rollback prefix after its window: without its seq while the namespace's
// lease still ran, with its seq (which any reader of the record sees)
// after it. The key was then claimed a second time. Now the window is the
// claim's lease, and the ledger refuses a release past it, with or without
// the seq, unless forced (an operator): here while the completion is held
// up, as it is under load or after a crash.
func TestRollbackWindowIsTheLease(t *testing.T) {
	f := start(t, false, nil) // "r:" rolls back in "roll": lease 2 s, window 1 s
	gate := make(chan struct{})
	f.store.gate.Store(&gate)
	c := f.client(t, nil)
	ctx := context.Background()
	if err := c.SetNX(ctx, "r:spent-once", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	rec, err := f.ledger.Get(ctx, "roll", "spent-once")
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.LeaseUntil.Sub(rec.FirstSeen); got != time.Second {
		t.Fatalf("the claim's lease: %v, want the window, 1 s (half the namespace's 2 s)", got)
	}
	for time.Now().Before(rec.LeaseUntil.Add(50 * time.Millisecond)) {
		time.Sleep(20 * time.Millisecond)
	}
	// Past the window, the completion held up: no front end releases it.
	for _, rel := range []spent.Release{
		{Namespace: "roll", Key: "spent-once"},
		{Namespace: "roll", Key: "spent-once", Seq: rec.Seq},
		{Namespace: "roll", Hash: rec.Hash, Seq: rec.Seq},
	} {
		if err := f.ledger.Release(ctx, rel); spent.ErrorCode(err) != spent.ELeaseExpired {
			t.Fatalf("Release %+v after the window: %v, want lease_expired", rel, err)
		}
	}
	errPrefix(t, "SPENT.RELEASE * after the window", c.Do(ctx, "SPENT.RELEASE", "roll", "spent-once", "*").Err(), "LEASE_EXPIRED")
	errPrefix(t, "SPENT.RELEASE seq after the window", c.Do(ctx, "SPENT.RELEASE", "roll", "spent-once", rec.Seq.String()).Err(), "LEASE_EXPIRED")
	errPrefix(t, "DEL after the window", c.Del(ctx, "r:spent-once").Err(), "NOT_PENDING")
	if ok, err := c.SetNX(ctx, "r:spent-once", "again", 0).Result(); err != nil || ok {
		t.Fatalf("SET NX after the window: %v, %v; want nil", ok, err)
	}
	close(gate)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if v, err := c.Get(ctx, "r:spent-once").Result(); err == nil && v == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the completion did not land once let through")
		}
	}
}

// TestRefusedSignInsHoldNothing (found by an attacker): a connection closed
// to make room while it waited out the delay of a refused AUTH kept its
// goroutine and buffers for the rest of the delay, so a spray of wrong
// AUTHs on new connections grew the server by the connection rate times
// the delay (30,000 goroutines, 826 MB). Now the wait ends with the
// connection: what refused sign-ins hold is bounded by the
// unauthenticated share.
func TestRefusedSignInsHoldNothing(t *testing.T) {
	th := door.NewThrottle(nil)
	for range 10 {
		th.Failed("resp", "127.0.0.1:1", "warming the throttle up to its longest delay")
	}
	f := start(t, true, func(rc *resp.Config) {
		rc.MaxClients = 1000
		rc.Limits.MaxUnauthenticated = 20
		rc.Throttle = th
	})
	base := runtime.NumGoroutine()
	for range 300 {
		nc, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write([]byte("AUTH wrong-token-0123456789\r\n"))
	}
	// Each waits 5 s; those closed to make room must not.
	var n int
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n = runtime.NumGoroutine() - base; n <= 60 {
			return
		}
	}
	t.Fatalf("300 connections that each sent a wrong AUTH, max_unauthenticated 20: %d more goroutines 3 s later (the delay is 5 s); want at most 60", n)
}

// TestRepliesShareTheBudget (found by an attacker): every signed-in
// connection pipelining reads of a 1 MiB value without reading the replies
// held about 2 MiB, and nothing bounded the sum: 1,000 connections took
// 2 GB. Now the values in replies not yet written reserve room of the
// server's budget of bytes in flight before they are read; past it a read
// is answered -UNAVAILABLE without reading anything.
func TestRepliesShareTheBudget(t *testing.T) {
	reg := prometheus.NewRegistry()
	budget, err := door.NewBudget(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, false, func(rc *resp.Config) { rc.Budget, rc.Registerer = budget, reg })
	f.storeBig(t)
	base := heapInUse()
	stop := make(chan struct{})
	peak := heapPeak(stop)
	var cmds bytes.Buffer
	for j := range 64 {
		if j%2 == 0 {
			cmds.WriteString("*2\r\n$3\r\nGET\r\n$5\r\ne:big\r\n")
		} else {
			cmds.WriteString("*5\r\n$3\r\nSET\r\n$5\r\ne:big\r\n$1\r\nx\r\n$2\r\nNX\r\n$3\r\nGET\r\n")
		}
	}
	for range 100 {
		nc, _ := rawConn(t, f.addr)
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetReadBuffer(4096)
		}
		nc.Write(cmds.Bytes())
	}
	time.Sleep(2 * time.Second)
	close(stop)
	grew := int64(<-peak) - int64(base)
	t.Logf("heap in use grew by %d MiB at its peak", grew>>20)
	if grew > 64<<20 {
		t.Fatalf("100 connections pipelining reads of a 1 MiB value, unread, under a budget of 8 MiB: heap grew by %d MiB; want at most 64", grew>>20)
	}
	text := metricstest.Gathered(t, reg)
	if !strings.Contains(text, `spent_resp_refused_total{reason="busy"}`) {
		t.Fatalf("no read was refused for the budget:\n%s", text)
	}
}

// storeBig claims e:big with a value of 1 MiB and returns the value.
func (f *fixture) storeBig(t *testing.T) []byte {
	t.Helper()
	value := bytes.Repeat([]byte("v"), 1<<20)
	if err := f.client(t, nil).SetNX(context.Background(), "e:big", value, 0).Err(); err != nil {
		t.Fatal(err)
	}
	return value
}
