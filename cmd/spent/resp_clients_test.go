package main_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// relayConfig is a Privacy Pass relay's ledger: spent tokens
// under "tokens:redeemed:", refused on any repeat, kept 30 h, and a
// rollback window of half the 2 s lease in which DEL gives a spend back.
const relayConfig = `[namespaces.relay-tokens]
mode = "refuse"
retention = "30h"
lease = "2s"
on_lease_expiry = "hold"

[resp]
namespaces = { "tokens:redeemed:" = "relay-tokens" }
rollback = ["tokens:redeemed:"]
`

// relayLines are the lines, in order, that each client script prints when
// every answer was the expected one; each is a prefix of its line.
var relayLines = []string{
	"spend1 fresh",
	"spend1-again repeat",
	"ttl1 ",
	"spend2 fresh",
	"rollback2 deleted 1",
	"spend2-again fresh",
	"burst 200 fresh",
	"burst-again 200 repeat",
	"complete1 get 1 after ",
	"del1 refused NOT_PENDING ",
	"spend1-after-del repeat",
	"done",
}

// TestRESPClients runs a token relay's flow (spend, repeat, roll back
// by DEL, a pipelined burst, DEL refused once the rollback window closed)
// with Redis clients written elsewhere: redis-cli, redis-py and node-redis,
// each against its own spent.
func TestRESPClients(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "resp-clients"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildSpent(t)

	t.Run("redis-cli", func(t *testing.T) {
		cli, err := exec.LookPath("redis-cli")
		if err != nil {
			missingClient(t, "redis-cli: "+err.Error(), "install the Debian package redis-tools")
		}
		raddr := startRelaySpent(t, bin)
		relayRedisCLI(t, cli, raddr)
	})

	t.Run("python-redis", func(t *testing.T) {
		py, why := pythonWithRedis()
		if py == "" {
			missingClient(t, "no python3 that can import redis.Redis: "+why, "install the Debian package python3-redis")
		}
		raddr := startRelaySpent(t, bin)
		out := runRelayScript(t, raddr, py, filepath.Join(dir, "relay.py"))
		checkRelayLines(t, out, relayLines)
		if strings.Contains(out, "resp3 skipped") {
			t.Logf("the RESP3 burst did not run: %s", lineWith(out, "resp3 skipped"))
		} else {
			checkRelayLines(t, out, []string{"resp3-burst 200 fresh", "resp3-burst-again 200 repeat"})
		}
	})

	t.Run("node-redis", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			missingClient(t, "node: "+err.Error(), "install Node.js (Debian package nodejs)")
		}
		mod := filepath.Join(dir, "node", "node_modules", "redis", "package.json")
		if _, err := os.Stat(mod); err != nil {
			missingClient(t, "node-redis is not installed: "+err.Error(), "run `npm ci --prefix cmd/spent/testdata/resp-clients/node`")
		}
		raddr := startRelaySpent(t, bin)
		out := runRelayScript(t, raddr, node, filepath.Join(dir, "node", "relay.mjs"))
		checkRelayLines(t, out, relayLines)
		checkRelayLines(t, out, []string{"resp3-burst 200 fresh", "resp3-burst-again 200 repeat"})
	})
}

// missingClient fails the test under CI and skips it elsewhere, naming what
// to install.
func missingClient(t *testing.T, what, install string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; under CI every client must be there (.ci/run installs them): %s", what, install)
	}
	t.Skipf("%s; to run this test, %s", what, install)
}

// startRelaySpent starts spent with relayConfig and returns its RESP
// address.
func startRelaySpent(t *testing.T, bin string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "spent.toml")
	if err := os.WriteFile(cfg, []byte(relayConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	_, raddr := startSpentRESP(t, bin, t.TempDir(), "--config", cfg)
	return raddr
}

// pythonWithRedis finds a Python interpreter whose redis module has
// redis.Redis: Debian's first, then the python3 on PATH (which may be a
// pyenv shim without it). It returns "" and why when none does.
func pythonWithRedis() (string, string) {
	var tried []string
	for _, name := range []string{"/usr/bin/python3", "python3"} {
		py, err := exec.LookPath(name)
		if err != nil {
			tried = append(tried, name+": "+err.Error())
			continue
		}
		cmd := exec.Command(py, "-c", "import redis; redis.Redis")
		// Not the package's folder: a folder named redis there would be
		// imported as a namespace package.
		cmd.Dir = os.TempDir()
		if out, err := cmd.CombinedOutput(); err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v %s", py, err, lastLine(string(out))))
			continue
		}
		return py, ""
	}
	return "", strings.Join(tried, "; ")
}

// runRelayScript runs a client script as `prog script HOST PORT KEY_ID`
// and returns what it printed; a non-zero exit fails the test.
func runRelayScript(t *testing.T, raddr, prog, script string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(raddr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, script, host, port, randomKeyID())
	cmd.Dir = filepath.Dir(script)
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s:\n%s", filepath.Base(prog), filepath.Base(script), out)
	if err != nil {
		t.Fatalf("%s %s: %v (an answer was not the expected one; its output is above)", prog, script, err)
	}
	return string(out)
}

// checkRelayLines checks that out has a line starting with each of want,
// in that order.
func checkRelayLines(t *testing.T, out string, want []string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	i := 0
	for _, w := range want {
		for i < len(lines) && !strings.HasPrefix(lines[i], w) {
			i++
		}
		if i == len(lines) {
			t.Fatalf("the client's output has no line starting %q (after the lines before it); output:\n%s", w, out)
		}
		i++
	}
}

// lineWith is the first line of out containing s.
func lineWith(out, s string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// randomKeyID is a key_id for one run's tokens.
func randomKeyID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// relayToken is a token's ledger key: tokens:redeemed:<key_id>:<nonce>.
func relayToken(keyID string) string {
	b := make([]byte, 16)
	rand.Read(b)
	return "tokens:redeemed:" + keyID + ":" + hex.EncodeToString(b)
}

// redisCLI runs redis-cli against one spent. Replies are printed in
// redis-cli's formatted style (--no-raw) so that nil, integers and errors
// can be told apart: OK, (nil), (integer) 1, (error) CODE ….
type redisCLI struct {
	t          *testing.T
	bin        string
	host, port string
}

// args are redis-cli's connection flags, then extra.
func (c redisCLI) args(extra ...string) []string {
	return append([]string{"-h", c.host, "-p", c.port, "--no-raw"}, extra...)
}

// run runs one redis-cli; stdin, when not nil, is its input.
func (c redisCLI) run(stdin []byte, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("redis-cli %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}

// do runs one command, one redis-cli invocation, and checks its reply.
func (c redisCLI) do(step, want string, cmd ...string) string {
	c.t.Helper()
	got := c.run(nil, c.args(cmd...)...)
	if want != "" && got != want {
		c.t.Fatalf("%s: redis-cli %s: got %q, want %q", step, strings.Join(cmd, " "), got, want)
	}
	c.t.Logf("%s: %s -> %s", step, strings.Join(cmd, " "), got)
	return got
}

// redisCLITiming is the line redis-cli's prompt loop prints after a
// command that took 500 ms or more.
var redisCLITiming = regexp.MustCompile(`^\(\d+\.\d\ds\)$`)

// script feeds commands, one a line, to one redis-cli and checks that each
// reply is want.
func (c redisCLI) script(step, want string, flags []string, cmds []string) {
	c.t.Helper()
	in := strings.Join(cmds, "\n") + "\n"
	out := c.run([]byte(in), c.args(flags...)...)
	// redis-cli reading commands from stdin runs its prompt loop, which
	// prints a command's time, "(0.61s)", on a line of its own after any
	// command that took half a second or more: those lines are not replies.
	var got []string
	slow := 0
	for _, line := range strings.Split(out, "\n") {
		if redisCLITiming.MatchString(line) {
			slow++
			continue
		}
		got = append(got, line)
	}
	if slow > 0 {
		c.t.Logf("%s: %d commands took half a second or more", step, slow)
	}
	if len(got) != len(cmds) {
		c.t.Fatalf("%s: %d replies for %d commands:\n%s", step, len(got), len(cmds), out)
	}
	for i, g := range got {
		if g != want {
			c.t.Fatalf("%s: %s: got %q, want %q", step, cmds[i], g, want)
		}
	}
	c.t.Logf("%s: %d × %q", step, len(cmds), want)
}

// relayRedisCLI runs the relay flow with redis-cli: single commands one
// invocation each, the fresh burst pipelined with --pipe, and the repeats
// as a script on stdin, over RESP2 and RESP3 (-3).
func relayRedisCLI(t *testing.T, bin, raddr string) {
	host, port, err := net.SplitHostPort(raddr)
	if err != nil {
		t.Fatal(err)
	}
	c := redisCLI{t: t, bin: bin, host: host, port: port}
	keyID := randomKeyID()
	const ttl = "108000"

	// 1. Spend a token: fresh.
	t1 := relayToken(keyID)
	c.do("spend1", "OK", "SET", t1, "1", "NX", "EX", ttl)
	spent1 := time.Now()
	// 2. Spend it again: a repeat.
	c.do("spend1-again", "(nil)", "SET", t1, "1", "NX", "EX", ttl)
	got := c.do("ttl1", "", "TTL", t1)
	n, err := strconv.Atoi(strings.TrimPrefix(got, "(integer) "))
	if err != nil || n <= 0 || n > 108000 {
		t.Fatalf("TTL %s: got %q, want (integer) 1..108000", t1, got)
	}

	// 3. A second token whose later check fails: spend it, roll it back,
	// and it is fresh again; SETNX, the seed's own command, says so too.
	t2 := relayToken(keyID)
	c.do("spend2", "OK", "SET", t2, "1", "NX", "EX", ttl)
	c.do("rollback2", "(integer) 1", "DEL", t2)
	c.do("spend2-again", "(integer) 1", "SETNX", t2, "1")
	c.do("spend2-repeat", "(integer) 0", "SETNX", t2, "1")

	// 4. A burst of 200 distinct nonces, pipelined with --pipe: none of
	// them is there before, no reply is an error, and all are there after.
	// --pipe counts replies without showing them, so the repeats go as a
	// script, each reply printed: all nil.
	keys := make([]string, 200)
	var proto bytes.Buffer
	sets := make([]string, len(keys))
	for i := range keys {
		keys[i] = relayToken(keyID)
		fmt.Fprintf(&proto, "*6\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\n1\r\n$2\r\nNX\r\n$2\r\nEX\r\n$%d\r\n%s\r\n", len(keys[i]), keys[i], len(ttl), ttl)
		sets[i] = "SET " + keys[i] + " 1 NX EX " + ttl
	}
	exists := func(step, want string) {
		var cmds []string
		for i := 0; i < len(keys); i += 50 {
			cmds = append(cmds, "EXISTS "+strings.Join(keys[i:i+50], " "))
		}
		c.script(step, want, nil, cmds)
	}
	exists("burst-before", "(integer) 0")
	out := c.run(proto.Bytes(), "-h", host, "-p", port, "--pipe")
	if !strings.Contains(out, "errors: 0, replies: 200") {
		t.Fatalf("burst: redis-cli --pipe: got\n%s\nwant errors: 0, replies: 200", out)
	}
	t.Logf("burst: redis-cli --pipe: %s", lastLine(out))
	exists("burst-after", "(integer) 50")
	c.script("burst-again", "(nil)", nil, sets)

	// The same over RESP3: redis-cli -3 says HELLO 3 first.
	sets3 := make([]string, 200)
	for i := range sets3 {
		sets3[i] = "SET " + relayToken(keyID) + " 1 NX EX " + ttl
	}
	c.script("resp3-burst", "OK", []string{"-3"}, sets3)
	c.script("resp3-burst-again", "(nil)", []string{"-3"}, sets3)

	// 5. Once the first token's rollback window (half the 2 s lease) has
	// closed, it is a complete record: GET gives its value, and DEL is
	// refused with NOT_PENDING.
	time.Sleep(time.Until(spent1.Add(1500 * time.Millisecond)))
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.run(nil, c.args("GET", t1)...)
		if got == `"1"` {
			break
		}
		if got != "(nil)" {
			t.Fatalf("GET %s: got %q, want \"1\" or (nil) while pending", t1, got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: still pending %v after the spend", t1, time.Since(spent1))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("complete1: GET gives \"1\" %v after the spend", time.Since(spent1).Round(time.Millisecond))
	got = c.do("del1", "", "DEL", t1)
	if !strings.HasPrefix(got, "(error) NOT_PENDING ") {
		t.Fatalf("DEL %s of a complete record: got %q, want (error) NOT_PENDING …", t1, got)
	}
	c.do("spend1-after-del", "(nil)", "SET", t1, "1", "NX", "EX", ttl)
}
