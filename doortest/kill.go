package doortest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testKill9: several connections pipeline one-step claims of distinct keys
// without waiting for the answers; once many have been answered fresh,
// the server is killed with SIGKILL while claims are still on their way.
// Restarted on the same data directory, the server answers every key any
// connection was told was fresh as a repeat: an acknowledged claim is
// never lost (durable before the reply), so never fresh twice.
func testKill9(t *testing.T, bin string, d Door) {
	w := wire(t, d)
	s := startServer(t, bin, d, "")

	const clients, chunk, enough = 4, 32, 2000
	key := func(ci, i int) string { return fmt.Sprintf("kill9-%d-%d", ci, i) }
	var mu sync.Mutex
	var acked []string
	var fresh atomic.Int64
	errs := newFirstErrors()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	rcs := make([]*rawConn, clients)
	for ci := range clients {
		rc := dialRaw(t, s.Addr)
		rcs[ci] = rc
		hello(t, w, rc, ClaimToken)
		wg.Go(func() {
			var buf []byte
			for i := 0; ; i += chunk {
				select {
				case <-stop:
					return
				default:
				}
				buf = buf[:0]
				for j := i; j < i+chunk; j++ {
					buf = append(buf, w.Claim(ClaimToken, Claim{Namespace: NSClaims, Key: key(ci, j), Value: []byte("v")})...)
				}
				rc.SetWriteDeadline(time.Now().Add(opTimeout))
				if _, err := rc.Write(buf); err != nil {
					return // the server is gone
				}
			}
		})
		wg.Go(func() {
			for i := 0; ; i++ {
				rc.SetReadDeadline(time.Now().Add(opTimeout))
				r, err := w.ReadReply(rc.r)
				if err != nil {
					select {
					case <-stop:
					default:
						errs.add("client %d: answer %d, before the kill: %v", ci, i, err)
					}
					return
				}
				switch {
				case r.Outcome == "fresh":
					mu.Lock()
					acked = append(acked, key(ci, i))
					mu.Unlock()
					fresh.Add(1)
				case r.Outcome == "repeat":
					errs.add("client %d: claim of new key %s answered as a repeat", ci, key(ci, i))
				default:
					// A refusal (a store that failed, the server
					// stopping): not an acknowledgement.
				}
			}
		})
	}
	deadline := time.Now().Add(opTimeout)
	for fresh.Load() < enough && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	s.Kill9()
	for _, rc := range rcs {
		rc.Close()
	}
	wg.Wait()
	errs.report(t, s, "pipelined claims before the kill")
	mu.Lock()
	keys := append([]string(nil), acked...)
	mu.Unlock()
	if len(keys) < enough {
		t.Fatalf("only %d claims were answered fresh in %v, want %d before the kill", len(keys), opTimeout, enough)
	}

	// Every acknowledged key, claimed again, is a repeat.
	s.Restart()
	rc := dialRaw(t, s.Addr)
	hello(t, w, rc, ClaimToken)
	go func() {
		var buf []byte
		for _, k := range keys {
			buf = append(buf, w.Claim(ClaimToken, Claim{Namespace: NSClaims, Key: k, Value: []byte("v")})...)
		}
		rc.SetWriteDeadline(time.Now().Add(opTimeout))
		rc.Write(buf)
	}()
	lost := 0
	var first []string
	for _, k := range keys {
		r, err := rc.reply(w)
		if err != nil {
			t.Fatalf("claiming the acknowledged keys again after the restart: %v", err)
		}
		if r.Outcome != "repeat" {
			lost++
			if len(first) < 5 {
				first = append(first, fmt.Sprintf("%s: %s", k, show(r)))
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d keys answered fresh before a kill -9 were not repeats after it; for example:\n%v", lost, len(keys), first)
	}
	t.Logf("%d keys answered fresh before a kill -9, every one a repeat after it", len(keys))
}
