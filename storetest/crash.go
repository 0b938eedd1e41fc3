package storetest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// The crash test re-executes the test binary as a child process, selected
// with -test.run so that it enters Run again, and tells it through these
// environment variables to serve claims instead of running the suite.
const (
	crashDirEnv  = "SPENT_STORETEST_CRASH_DIR"  // the store's directory
	crashTestEnv = "SPENT_STORETEST_CRASH_TEST" // the name of the test that called Run
)

const (
	crashNS        = nsEchoHold
	crashSeqBlock  = 64
	crashWorkers   = 32  // claims the child serves at once
	crashInFlight  = 128 // claims the parent keeps unanswered at most
	crashMinKills  = 25  // kills with claims in flight, in the normal mode
	crashShortKill = 20  // and in short mode: never fewer
	crashFinalKeys = 300 // new keys in the last, clean incarnation
)

// isCrashChild reports whether this process is a crash-test child for t.
func isCrashChild(t *testing.T) bool {
	return os.Getenv(crashDirEnv) != "" && os.Getenv(crashTestEnv) == t.Name()
}

// crashTwoStep reports whether key is claimed in two steps (about a third
// of the keys): its record then stays pending.
func crashTwoStep(key string) bool {
	sum := sha256.Sum256([]byte(key))
	return sum[0]%3 == 0
}

// crashResult is the stored result of a one-step key: it holds a zero byte.
func crashResult(key string) []byte { return []byte("result of " + key + "\x00.") }

func crashClaim(key string) spent.Claim {
	c := spent.Claim{Namespace: crashNS, Key: key, Fingerprint: fpA, Place: "crash"}
	if !crashTwoStep(key) {
		c.Result = crashResult(key)
	}
	return c
}

// crashSecond is the answer to a repeat of key.
func crashSecond(key string) spent.Outcome {
	if crashTwoStep(key) {
		return spent.InProgress
	}
	return spent.Replayed
}

func crashConfig() spent.Config {
	cfg := testConfig(NewClock(epoch))
	cfg.SeqBlock = crashSeqBlock
	return cfg
}

// runCrashChild is the child's side of the crash test. It opens the store,
// prints READY, reads one key per line from stdin and claims it, many at
// once, and prints "ACK key outcome seq" once Claim has returned. It exits on
// EOF and never returns.
func runCrashChild(t *testing.T, h Harness) {
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "storetest crash child: "+format+"\n", args...)
		os.Exit(3)
	}
	ctx := context.Background()
	store := h.Open(t, os.Getenv(crashDirEnv))
	l, err := spent.NewLedger(ctx, store, crashConfig())
	if err != nil {
		fail("NewLedger: %v", err)
	}
	var mu sync.Mutex
	emit := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := os.Stdout.WriteString(line + "\n"); err != nil {
			fail("stdout: %v", err)
		}
	}
	emit("READY")
	keys := make(chan string)
	var wg sync.WaitGroup
	for range crashWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range keys {
				res, err := l.Claim(ctx, crashClaim(key))
				switch {
				case err != nil:
					emit(fmt.Sprintf("ERR %s %s", key, spent.ErrorCode(err)))
				case res.Outcome == spent.Replayed && !bytes.Equal(res.Record.Result, crashResult(key)):
					emit(fmt.Sprintf("BAD %s replayed %x", key, res.Record.Result))
				default:
					emit(fmt.Sprintf("ACK %s %s %s", key, res.Outcome, res.Record.Seq))
				}
			}
		}()
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		keys <- sc.Text()
	}
	close(keys)
	wg.Wait()
	if err := store.Close(); err != nil {
		fail("Close: %v", err)
	}
	os.Exit(0)
}

// runPattern turns a test name into the -test.run pattern that selects
// exactly that test.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// testCrash kills a child holding the store at random moments and checks that
// every acknowledged claim survives.
func testCrash(t *testing.T, h Harness, runName string) {
	if h.NoCrash {
		t.Skip("storetest: crash test NOT RUN: Harness.NoCrash says this store keeps nothing across a process; this is a skip, not a pass")
	}
	kills := crashMinKills
	if testing.Short() {
		kills = crashShortKill
	}
	cr := newCrashRun(t, h, runName, newRand(t))
	cr.run(kills)
	for _, v := range cr.violations() {
		t.Error(v)
	}
}

// crashRun is one crash test: the directory, the incarnations of the child,
// and everything the children acknowledged.
type crashRun struct {
	t       *testing.T
	h       Harness
	dir     string
	runName string
	rng     *testRand
	next    int // key counter

	mu       sync.Mutex
	keys     map[string]*crashKey
	acked    []string             // keys with an acknowledged seq, for re-claims
	inDoubt  map[string]bool      // keys sent but never answered
	freshSeq map[spent.Seq]string // key acknowledged fresh with each seq
	incAcks  int                  // answers in the current incarnation
	errs     []string
	sent     int
	answers  int
}

// crashKey is what the children said about one key.
type crashKey struct {
	seq      spent.Seq // acknowledged seq (fresh or repeat)
	seqInc   int       // the incarnation that first acknowledged seq
	fresh    bool
	freshInc int
}

func newCrashRun(t *testing.T, h Harness, runName string, rng *testRand) *crashRun {
	return &crashRun{
		t: t, h: h, dir: t.TempDir(), runName: runName, rng: rng,
		keys: map[string]*crashKey{}, inDoubt: map[string]bool{}, freshSeq: map[spent.Seq]string{},
	}
}

func (cr *crashRun) violatef(format string, args ...any) {
	cr.errs = append(cr.errs, fmt.Sprintf(format, args...))
}

func (cr *crashRun) violations() []string {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if len(cr.errs) > 20 {
		return append(cr.errs[:20:20], fmt.Sprintf("... and %d more violations", len(cr.errs)-20))
	}
	return cr.errs
}

// run kills children until kills of them died with claims in flight, runs a
// last child to a clean exit, and checks the store through a fresh open.
func (cr *crashRun) run(kills int) {
	t := cr.t
	start := time.Now()
	loaded, early, inc := 0, 0, 0
	for ; loaded < kills; inc++ {
		if inc > 3*kills {
			t.Fatalf("after %d incarnations: got %d kills with claims in flight, want %d", inc, loaded, kills)
		}
		// About one child in six is killed early, possibly before it is ready.
		if cr.incarnation(inc, cr.rng.IntN(6) == 0, false) {
			loaded++
		} else {
			early++
		}
	}
	cr.incarnation(inc, false, true)
	cr.verify()
	t.Logf("crash test: %d incarnations, %d kills with claims in flight, %d early kills, %d claims sent, %d answered, %d keys acknowledged, %v",
		inc+1, loaded, early, cr.sent, cr.answers, len(cr.keys), time.Since(start).Round(time.Millisecond))
}

// incarnation runs one child. Unless last, it kills the child with SIGKILL
// (early: at a random moment soon after start; otherwise: at a random moment
// after its first answers) and reports whether claims were answered before
// the kill. The last child gets its input closed and must exit cleanly.
func (cr *crashRun) incarnation(inc int, early, last bool) bool {
	t := cr.t
	cmd := exec.Command(os.Args[0], "-test.run="+runPattern(cr.runName), "-test.timeout=5m")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+cr.dir, crashTestEnv+"="+cr.runName)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr

	resend := cr.resendList(last)
	cr.mu.Lock()
	cr.incAcks = 0
	cr.mu.Unlock()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting child: %v", err)
	}

	// The reader takes the child's answers; each frees an in-flight slot.
	slots := make(chan struct{}, crashInFlight)
	ready := make(chan struct{})
	readerDone := make(chan struct{})
	var other bytes.Buffer // anything else the child printed
	go func() {
		defer close(readerDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "READY":
				close(ready)
			case strings.HasPrefix(line, "ACK "), strings.HasPrefix(line, "ERR "), strings.HasPrefix(line, "BAD "):
				cr.answer(inc, line)
				select {
				case <-slots:
				default:
				}
			default:
				other.WriteString(line + "\n")
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()

	// The sender keeps up to crashInFlight claims unanswered: first the
	// re-claims, then new keys (every tenth sent twice at once).
	stop := make(chan struct{})
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		send := func(key string) bool {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return false
			}
			cr.mu.Lock()
			cr.sent++
			if _, ok := cr.keys[key]; !ok {
				cr.inDoubt[key] = true
			}
			cr.mu.Unlock()
			_, err := io.WriteString(stdin, key+"\n")
			return err == nil
		}
		for _, key := range resend {
			if !send(key) {
				return
			}
		}
		for i := 0; !last || i < crashFinalKeys; i++ {
			key := fmt.Sprintf("k%d-%d", inc, cr.next)
			cr.next++
			if !send(key) || (i%10 == 0 && !send(key)) {
				return
			}
		}
		stdin.Close()
	}()

	childFailed := func(what string) {
		t.Helper()
		t.Fatalf("crash child %d: %s\nstdout:\n%s\nstderr:\n%s", inc, what, other.String(), stderr.String())
	}
	kill := func() {
		_ = cmd.Process.Kill()
		close(stop)
		<-senderDone
		<-readerDone
		_ = cmd.Wait()
	}
	if early {
		time.Sleep(time.Duration(cr.rng.IntN(40)) * time.Millisecond)
		kill()
		if code := cmd.ProcessState.ExitCode(); code != -1 {
			childFailed(fmt.Sprintf("exited with status %d before it was killed", code))
		}
		return false
	}
	select {
	case <-ready:
	case <-readerDone:
		select {
		case <-ready: // it was ready, and has already finished
		default:
			kill()
			childFailed("exited before it was ready")
		}
	case <-time.After(30 * time.Second):
		kill()
		childFailed("not ready after 30s")
	}
	if last {
		select {
		case <-readerDone:
		case <-time.After(60 * time.Second):
			kill()
			childFailed("last child did not finish within 60s")
		}
		close(stop)
		<-senderDone
		if err := cmd.Wait(); err != nil {
			childFailed(fmt.Sprintf("last child: %v", err))
		}
		return true
	}
	// Wait for the first answers, then kill at a random moment.
	deadline := time.After(30 * time.Second)
	for cr.answered() == 0 {
		select {
		case <-readerDone:
			kill()
			childFailed("exited before it answered")
		case <-deadline:
			kill()
			childFailed("no answer within 30s")
		case <-time.After(time.Millisecond):
		}
	}
	time.Sleep(time.Duration(5+cr.rng.IntN(150)) * time.Millisecond)
	kill()
	if code := cmd.ProcessState.ExitCode(); code != -1 {
		childFailed(fmt.Sprintf("exited with status %d before it was killed", code))
	}
	return true
}

func (cr *crashRun) answered() int {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return cr.incAcks
}

// resendList is what a new child claims first: a sample of acknowledged keys
// (their answers must repeat the acknowledged seq) and keys left in doubt by
// a kill (all of them for the last child, so that each gets an answer).
func (cr *crashRun) resendList(last bool) []string {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	var out []string
	for range min(16, len(cr.acked)) {
		out = append(out, cr.acked[cr.rng.IntN(len(cr.acked))])
	}
	n := 0
	for key := range cr.inDoubt {
		if !last && n == 16 {
			break
		}
		out = append(out, key)
		n++
	}
	return out
}

// answer records one answer line of child inc.
func (cr *crashRun) answer(inc int, line string) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.answers++
	cr.incAcks++
	f := strings.Fields(line)
	if f[0] != "ACK" || len(f) != 4 {
		cr.violatef("child %d: got %q, want ACK key outcome seq", inc, line)
		return
	}
	key, outcome := f[1], spent.Outcome(f[2])
	seq, err := spent.ParseSeq(f[3])
	if err != nil {
		cr.violatef("child %d: %q: %v", inc, line, err)
		return
	}
	delete(cr.inDoubt, key)
	k, known := cr.keys[key]
	if !known {
		k = &crashKey{}
		cr.keys[key] = k
	}
	switch {
	case seq.Node != testNode:
		cr.violatef("key %s: got seq %v, want node %d", key, seq, testNode)
	case outcome == spent.Fresh:
		if k.fresh {
			cr.violatef("key %s acknowledged fresh twice: seq %v in child %d, seq %v in child %d", key, k.seq, k.freshInc, seq, inc)
		} else if !k.seq.IsZero() && (k.seq != seq || k.seqInc != inc) {
			cr.violatef("key %s fresh with seq %v in child %d after it was acknowledged with seq %v in child %d", key, seq, inc, k.seq, k.seqInc)
		}
		if other, ok := cr.freshSeq[seq]; ok && other != key {
			cr.violatef("seq %v acknowledged fresh for two keys: %s in child %d, %s in child %d", seq, other, cr.keys[other].freshInc, key, inc)
		}
		cr.freshSeq[seq] = key
		k.fresh, k.freshInc = true, inc
	case outcome == crashSecond(key):
		if !k.seq.IsZero() && k.seq != seq {
			cr.violatef("key %s: got %v with seq %v in child %d, want seq %v acknowledged in child %d", key, outcome, seq, inc, k.seq, k.seqInc)
		}
	default:
		cr.violatef("key %s: got %v in child %d, want fresh or %v", key, outcome, inc, crashSecond(key))
	}
	if k.seq.IsZero() {
		k.seq, k.seqInc = seq, inc
		cr.acked = append(cr.acked, key)
	}
}

// verify opens the store afresh and checks every acknowledged claim, and that
// the last child answered everything it was sent.
func (cr *crashRun) verify() {
	t := cr.t
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if len(cr.inDoubt) > 0 {
		cr.violatef("%d keys sent to the last child got no answer", len(cr.inDoubt))
	}
	ctx := context.Background()
	store := cr.h.Open(t, cr.dir)
	defer store.Close()
	l, err := spent.NewLedger(ctx, store, crashConfig())
	if err != nil {
		t.Fatalf("NewLedger after the last child: %v", err)
	}
	for key, k := range cr.keys {
		r, err := l.Get(ctx, crashNS, key)
		if err != nil {
			cr.violatef("key %s acknowledged with seq %v by child %d: got %v after reopen, want the record", key, k.seq, k.seqInc, err)
			continue
		}
		want := spent.StateComplete
		if crashTwoStep(key) {
			want = spent.StatePending
		}
		switch {
		case r.Seq != k.seq:
			cr.violatef("key %s: got seq %v after reopen, want %v acknowledged by child %d", key, r.Seq, k.seq, k.seqInc)
		case r.State != want:
			cr.violatef("key %s: got state %v after reopen, want %v", key, r.State, want)
		case want == spent.StateComplete && !bytes.Equal(r.Result, crashResult(key)):
			cr.violatef("key %s: got result %s after reopen, want %s", key, short(r.Result), short(crashResult(key)))
		}
	}
}
