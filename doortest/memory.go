package doortest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// bigValue is the size of the values of the memory attacks: 1 MiB, the
// default max_result.
const bigValue = 1 << 20

// hold is how long the attacks of BigReplies keep their connections
// unread before the suite looks at what the server holds: long enough for
// the server to fill every socket buffer and stall on each connection.
const hold = 3 * time.Second

// testBigReplies: 16 signed-in connections each pipeline 1,024 reads of a
// 1 MiB value and read none of the replies. The server must write its
// replies as it makes them and stall on a client that does not read,
// rather than hold them: its peak RSS stays under PeakLimit. Each
// connection must have been sent at least a value (so the attack did
// reach the reads), and a new client still claims afterwards.
func testBigReplies(t *testing.T, bin string, d Door) {
	c, w := claimer(t, d), wire(t, d)
	s := startServer(t, bin, d, "")
	cl := dial(t, c, s.Addr, ClaimToken)
	value := pattern("big value", bigValue)
	claimFresh(t, cl, Claim{Namespace: NSClaims, Key: "big", Value: value})
	cl.Close()

	const conns, reads = 16, 1024
	var req []byte
	for range reads {
		req = append(req, w.Read(ClaimToken, NSClaims, "big")...)
	}
	rcs := make([]*rawConn, conns)
	for i := range rcs {
		rcs[i] = dialRaw(t, s.Addr)
		hello(t, w, rcs[i], ClaimToken)
	}
	var wg sync.WaitGroup
	var written atomic.Int64
	for _, rc := range rcs {
		wg.Go(func() {
			// Blocks once the server stops reading: closing the
			// connection at the end unblocks it.
			rc.SetWriteDeadline(time.Now().Add(hold + opTimeout))
			n, _ := rc.Write(req)
			written.Add(int64(n))
		})
	}
	time.Sleep(hold)
	attack := fmt.Sprintf("%d connections pipelining %d reads of a 1 MiB value", conns, reads)
	s.CheckPeak(t, attack)
	// Each connection has replies waiting: read a value's worth of them
	// (which lets the server write a little more), to show the attack
	// made the server produce what it read.
	for i, rc := range rcs {
		rc.SetReadDeadline(time.Now().Add(opTimeout))
		n, err := io.CopyN(io.Discard, rc.r, bigValue)
		if err != nil {
			s.mustLive(t, attack)
			t.Fatalf("connection %d: read %s of replies, then %v; want at least a value's worth (%s)", i, mib(n), err, mib(bigValue))
		}
	}
	for _, rc := range rcs {
		rc.Close()
	}
	wg.Wait()
	t.Logf("%d connections wrote %s of pipelined reads (of %s) without reading", conns, mib(written.Load()), mib(int64(conns*len(req))))
	s.CheckPeak(t, attack)
	stillServes(t, c, s.Addr, "after-big-replies")
}

// testPreAuthFrames: 1,000 connections that have not signed in each
// declare a 64 MiB request (each form of Wire.Frames in turn) and send
// none of it. Each is refused with the door's documented answer before
// any of the frame arrives, then closed; the server's peak RSS stays under
// PeakLimit, and a client still claims afterwards.
func testPreAuthFrames(t *testing.T, bin string, d Door) {
	c, w := claimer(t, d), wire(t, d)
	want := d.Docs(defaults()).Frame
	frames := w.Frames(64 << 20)
	if len(frames) == 0 {
		t.Fatalf("door %s: Frames returned none", d.Name())
	}
	s := startServer(t, bin, d, "")

	// All of them open at once (the default max_unauthenticated is
	// 1,000: none is closed to make room), then all of them declare.
	const conns = 1000
	rcs := make([]*rawConn, conns)
	for i := range rcs {
		rcs[i] = dialRaw(t, s.Addr)
	}
	errs := newFirstErrors()
	var slowest atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, rc := range rcs {
		frame := frames[i%len(frames)]
		wg.Go(func() {
			<-start
			t0 := time.Now()
			if _, err := rc.Write(frame); err != nil {
				errs.add("connection %d: writing the frame's header: %v", i, err)
				return
			}
			r, err := rc.reply(w)
			if err != nil {
				errs.add("connection %d: %q: no answer: %v; want %s", i, clip(string(frame), 80), err, showWant(want))
				return
			}
			for el := int64(time.Since(t0)); ; {
				old := slowest.Load()
				if el <= old || slowest.CompareAndSwap(old, el) {
					break
				}
			}
			if !want.Matches(r) {
				errs.add("connection %d: %q: got %s, want %s", i, clip(string(frame), 80), show(r), showWant(want))
				return
			}
			rc.SetReadDeadline(time.Now().Add(opTimeout))
			if _, err := rc.r.ReadByte(); !closedErr(err) {
				errs.add("connection %d: after the refusal: read %v, want the connection closed", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	errs.report(t, s, fmt.Sprintf("%d unauthenticated connections declaring 64 MiB", conns))
	t.Logf("%d unauthenticated connections declaring 64 MiB (%d forms): each refused as documented and closed, the slowest answer after %v",
		conns, len(frames), time.Duration(slowest.Load()).Round(time.Millisecond))
	s.CheckPeak(t, fmt.Sprintf("%d unauthenticated connections declaring 64 MiB", conns))
	stillServes(t, c, s.Addr, "after-pre-auth-frames")
}

// testIdleFlood: while a signed-in client claims without pause, 10,000
// connections open and never sign in. Every claim is answered fresh, at
// most max_unauthenticated of the idle connections stay open (the server
// closes the oldest to make room for newer ones), a client that connects
// after the flood still signs in and claims, and the server's peak RSS
// stays under PeakLimit.
func testIdleFlood(t *testing.T, bin string, d Door) {
	c := claimer(t, d)
	lim := defaults()
	const idle, dialers = 10000, 32
	s := startServer(t, bin, d, "")
	checkFiles(t, s, idle+100)
	cl := dial(t, c, s.Addr, ClaimToken)

	stop := make(chan struct{})
	claimed := make(chan int, 1)
	errs := newFirstErrors()
	go func() {
		n := 0
		defer func() { claimed <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := opCtx()
			r, err := cl.Claim(ctx, Claim{Namespace: NSClaims, Key: fmt.Sprintf("idle-flood-%d", n), Value: []byte("v")})
			cancel()
			if err != nil || r.Outcome != "fresh" {
				errs.add("claim %d of the signed-in client during the flood: got %s, %v; want fresh", n, show(r), err)
				return
			}
			n++
		}
	}()

	conns := make([]net.Conn, idle)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range dialers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= idle {
					return
				}
				nc, err := net.DialTimeout("tcp", s.Addr, opTimeout)
				if err != nil {
					errs.add("idle connection %d: %v", i, err)
					return
				}
				conns[i] = nc
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	}()
	time.Sleep(time.Second)
	// A client that arrives after the flood, all 10,000 still open on the
	// client's side.
	late := dial(t, c, s.Addr, ClaimToken)
	claimFresh(t, late, Claim{Namespace: NSClaims, Key: "idle-flood-late", Value: []byte("v")})
	close(stop)
	n := <-claimed
	errs.report(t, s, fmt.Sprintf("%d idle connections", idle))
	if n == 0 {
		t.Fatalf("the signed-in client made no claim during the flood")
	}
	open := 0
	for _, nc := range conns {
		if !peerClosed(nc) {
			open++
		}
	}
	t.Logf("%d idle connections: %d claims answered fresh meanwhile; %d still open, the rest closed by the server", idle, n, open)
	if open > lim.MaxUnauthenticated {
		t.Fatalf("%d idle connections that never signed in are still open, want at most max_unauthenticated (%d)", open, lim.MaxUnauthenticated)
	}
	s.CheckPeak(t, fmt.Sprintf("%d idle connections", idle))
}

// testHalfFlood: twice max_unauthenticated connections that have not
// signed in each send the first half of a request (for HTTP, its header
// and half its body) and then nothing, while a signed-in client claims.
// The door may answer them or wait for the rest (until read_timeout), but
// they cannot keep a client with a token out: every claim of the
// signed-in client is answered, a client that connects after the flood
// signs in and claims, at most max_unauthenticated of the half requests
// stay open, and the server's peak RSS stays under PeakLimit.
func testHalfFlood(t *testing.T, bin string, d Door) {
	c, w := claimer(t, d), wire(t, d)
	lim := defaults()
	half := w.Half("", Claim{Namespace: NSClaims, Key: "half", Value: pattern("half", 4<<10)})
	n := 2 * lim.MaxUnauthenticated
	s := startServer(t, bin, d, "")
	checkFiles(t, s, uint64(n+100))
	cl := dial(t, c, s.Addr, ClaimToken)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for i := range n {
		nc, err := net.DialTimeout("tcp", s.Addr, opTimeout)
		if err != nil {
			t.Fatalf("half request %d: %v", i, err)
		}
		conns = append(conns, nc)
		if _, err := nc.Write(half); err != nil && !closedErr(err) {
			t.Fatalf("half request %d: %v", i, err)
		}
		if i%100 == 99 {
			claimFresh(t, cl, Claim{Namespace: NSClaims, Key: fmt.Sprintf("half-flood-%d", i), Value: []byte("v")})
		}
	}
	time.Sleep(time.Second)
	late := dial(t, c, s.Addr, ClaimToken)
	claimFresh(t, late, Claim{Namespace: NSClaims, Key: "half-flood-late", Value: []byte("v")})
	claimFresh(t, cl, Claim{Namespace: NSClaims, Key: "half-flood-after", Value: []byte("v")})
	open := 0
	for _, nc := range conns {
		if !peerClosed(nc) {
			open++
		}
	}
	t.Logf("%d half requests that never sign in: %d still open, the rest closed by the server; a client with a token still connects and claims", n, open)
	if open > lim.MaxUnauthenticated {
		t.Fatalf("%d half requests of connections that never signed in are still open, want at most max_unauthenticated (%d)", open, lim.MaxUnauthenticated)
	}
	s.CheckPeak(t, fmt.Sprintf("%d half requests", n))
}

// testRollbackFlood: seven signed-in connections pipeline 700 claims of 1
// MiB values under a rollback prefix, each held in the server's memory
// until its window ends, for as long as one and a half windows: the first
// are stored while the rest still arrive. The server takes what fits in
// max_rollback_bytes and refuses the rest before claiming them; its peak
// RSS stays under PeakLimit. After the window every accepted value is
// stored, byte for byte, and every refused key has no record.
func testRollbackFlood(t *testing.T, bin string, d Door) {
	c := claimer(t, d)
	rb, ok := d.(Rollbacker)
	if !ok {
		t.Fatalf("door %s has no rollback prefixes (it is no doortest.Rollbacker)", d.Name())
	}
	docs := d.Docs(defaults())
	s := startServer(t, bin, d, "")

	// The values arrive over one and a half windows (half the lease), so
	// that the first windows end, and their values are stored, while the
	// flood goes on.
	const conns, per = 7, 100
	const pace = RollbackLease / 2 * 3 / 2 / per
	start := time.Now()
	key := func(ci, i int) string { return fmt.Sprintf("flood-%d-%d", ci, i) }
	type verdict struct {
		key      string
		accepted bool
	}
	verdicts := make(chan verdict, conns*per)
	errs := newFirstErrors()
	var full, busy atomic.Int64
	var wg sync.WaitGroup
	for ci := range conns {
		rc := dialRaw(t, s.Addr)
		hello(t, rb, rc, ClaimToken)
		wg.Go(func() {
			rc.SetWriteDeadline(time.Now().Add(2 * opTimeout))
			for i := range per {
				time.Sleep(time.Until(start.Add(time.Duration(i) * pace)))
				k := key(ci, i)
				if _, err := rc.Write(rb.Rollback(ClaimToken, k, pattern(k, bigValue))); err != nil {
					errs.add("connection %d: writing value %d: %v", ci, i, err)
					return
				}
			}
		})
		wg.Go(func() {
			for i := range per {
				r, err := rc.reply(rb)
				switch {
				case err != nil:
					errs.add("connection %d: answer %d: %v", ci, i, err)
					return
				case r.Outcome == "fresh":
					verdicts <- verdict{key(ci, i), true}
				case docs.RollbackFull.Matches(r):
					full.Add(1)
					verdicts <- verdict{key(ci, i), false}
				case docs.Busy.Matches(r):
					busy.Add(1)
					verdicts <- verdict{key(ci, i), false}
				default:
					errs.add("connection %d: claim %d: got %s, want fresh, %s or %s", ci, i, show(r), showWant(docs.RollbackFull), showWant(docs.Busy))
					return
				}
			}
		})
	}
	wg.Wait()
	close(verdicts)
	errs.report(t, s, fmt.Sprintf("%d values of 1 MiB under a rollback prefix", conns*per))
	var accepted, refused []string
	for v := range verdicts {
		if v.accepted {
			accepted = append(accepted, v.key)
		} else {
			refused = append(refused, v.key)
		}
	}
	t.Logf("%d values of 1 MiB under a rollback prefix: %d accepted, %d refused (%d by max_rollback_bytes, %d by max_bodies)",
		conns*per, len(accepted), len(refused), full.Load(), busy.Load())
	if len(accepted) == 0 {
		t.Fatal("no value was accepted")
	}
	if full.Load() == 0 {
		t.Fatalf("no value was refused for max_rollback_bytes (64 MiB by default), although %d MiB were sent", conns*per)
	}
	s.CheckPeak(t, fmt.Sprintf("%d values of 1 MiB under a rollback prefix", conns*per))

	// After the window (half the lease) every accepted value is stored.
	cl := dial(t, c, s.Addr, ClaimToken)
	deadline := time.Now().Add(RollbackLease + opTimeout)
	for _, k := range accepted {
		for {
			ctx, cancel := opCtx()
			rec, found, err := cl.Get(ctx, NSRollback, k)
			cancel()
			if err != nil {
				t.Fatalf("reading %s: %v", k, err)
			}
			if !found {
				t.Fatalf("%s: accepted, and now has no record; want its value stored after the window", k)
			}
			if rec.State == "complete" {
				if !bytes.Equal(rec.Value, pattern(k, bigValue)) {
					t.Fatalf("%s: stored %d bytes that are not the value sent (%d bytes)", k, len(rec.Value), bigValue)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %s %v after the flood; want it completed at the end of its window (half the lease, %v); log:\n%s",
					k, rec.State, RollbackLease+opTimeout, RollbackLease/2, tail(s.Log(), 20))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, k := range refused {
		ctx, cancel := opCtx()
		rec, found, err := cl.Get(ctx, NSRollback, k)
		cancel()
		if err != nil {
			t.Fatalf("reading %s: %v", k, err)
		}
		if found {
			t.Fatalf("%s: refused, yet it has a %s record; want nothing claimed", k, rec.State)
		}
	}
	s.CheckPeak(t, fmt.Sprintf("%d values of 1 MiB under a rollback prefix, then their completion", conns*per))
}

// checkFiles fails the test unless both the test process and the server
// may open n files: an attack of n connections would otherwise fail for
// the machine's limit, not the server's.
func checkFiles(t *testing.T, s *server, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < n {
		t.Fatalf("the test process may open %d files, the attack needs %d: raise ulimit -n", lim.Cur, n)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.Pid()) + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			if soft, err := strconv.ParseUint(f[0], 10, 64); err == nil && soft < n {
				t.Fatalf("the server may open %d files, the attack needs %d: raise ulimit -n", soft, n)
			}
			return
		}
	}
	t.Fatalf("no Max open files in /proc/%d/limits", s.Pid())
}
