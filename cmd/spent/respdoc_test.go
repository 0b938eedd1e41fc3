package main_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spentledger/spent/internal/syncbuf"
)

// respDocStep is one command of the session in "## Try it" of docs/resp.md,
// with the answer the page shows for it.
type respDocStep struct {
	line    int      // in docs/resp.md
	command string   // a spent serve or redis-cli line
	want    []string // the lines of its answer, … standing for anything
}

// respDocSession reads the session of docs/resp.md: the ```sh blocks of the
// section "## Try it", where the "# " lines after a command are its answer
// (the convention of the README's tour, see readme_test.go).
func respDocSession(t *testing.T) []respDocStep {
	t.Helper()
	b, err := os.ReadFile("../../docs/resp.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var steps []respDocStep
	in, found := false, false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "## ") {
			if in {
				break
			}
			in = l == "## Try it"
			found = found || in
			continue
		}
		if !in || !strings.HasPrefix(l, "```") {
			continue
		}
		lang, start := strings.TrimPrefix(l, "```"), i+1
		for i++; i < len(lines) && lines[i] != "```"; i++ {
		}
		if i == len(lines) {
			t.Fatalf("docs/resp.md:%d: a ```%s block that is not closed", start, lang)
		}
		if lang != "sh" {
			t.Fatalf("docs/resp.md:%d: a ```%s block in the session: the test runs only ```sh blocks", start, lang)
		}
		block := lines[start:i]
		for j := 0; j < len(block); j++ {
			if strings.TrimSpace(block[j]) == "" {
				continue
			}
			if strings.HasPrefix(block[j], "#") {
				t.Fatalf("docs/resp.md:%d: an answer before any command", start+j+1)
			}
			st := respDocStep{line: start + j + 1, command: block[j]}
			for j+1 < len(block) && strings.HasPrefix(block[j+1], "# ") {
				j++
				st.want = append(st.want, strings.TrimPrefix(block[j], "# "))
			}
			steps = append(steps, st)
		}
	}
	if !found {
		t.Fatal(`docs/resp.md has no section "## Try it"`)
	}
	if len(steps) < 10 {
		t.Fatalf("found %d commands in the session of docs/resp.md: the test reads it wrong", len(steps))
	}
	return steps
}

// redisCLIPath returns the path of redis-cli, skipping the test without it
// (failing it under CI).
func redisCLIPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the session of docs/resp.md needs redis-cli: %v", err)
		}
		t.Skipf("the session of docs/resp.md needs redis-cli (Debian package redis-tools): %v", err)
	}
	return path
}

// shellWords splits a command line as a shell would for the simple lines of
// the session: words separated by blanks, '…' and "…" quoting. Anything that
// needs a shell (variables, pipes, redirections, escapes, comments) is an
// error, since the test runs the line without one.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unclosed %c", c)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case strings.IndexByte("\\$`|;&<>(){}*?", c) >= 0 || c == '#' && !inWord:
			return nil, fmt.Errorf("%q needs a shell, and the test runs redis-cli lines without one", c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// redisCommand returns the Redis command a redis-cli argument list sends:
// the first word that is not an option (nor an option's value), in upper
// case.
func redisCommand(args []string) string {
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-p" || a == "-h" || a == "-a" || a == "-n" || a == "--user" || a == "--pass":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return strings.ToUpper(a)
		}
	}
	return ""
}

// integerReply matches redis-cli's display of an integer reply.
var integerReply = regexp.MustCompile(`^\(integer\) (-?\d+)$`)

// respDocMatch reports whether got, redis-cli's output, is the answer want
// line for line: … in want stands for anything. With countdown (a TTL), a
// positive integer answer may be up to 5 less than shown, as time passes
// between the claim and the TTL.
func respDocMatch(got string, want []string, countdown bool) bool {
	got = strings.TrimRight(strings.ReplaceAll(got, "\r", ""), "\n")
	var lines []string
	if got != "" {
		lines = strings.Split(got, "\n")
	}
	if len(lines) != len(want) {
		return false
	}
	for i, w := range want {
		if answerPattern(w).MatchString(lines[i]) {
			continue
		}
		wm, gm := integerReply.FindStringSubmatch(w), integerReply.FindStringSubmatch(lines[i])
		if !countdown || wm == nil || gm == nil {
			return false
		}
		wn, _ := strconv.ParseInt(wm[1], 10, 64)
		gn, _ := strconv.ParseInt(gm[1], 10, 64)
		if wn <= 0 || gn > wn || gn < wn-5 {
			return false
		}
	}
	return true
}

// TestRESPDocSession runs the redis-cli session of docs/resp.md as written,
// against a fresh spent serve --resp, and checks every answer it shows. The
// only changes are the ports (free ones for 7070 and 6380) and --no-raw,
// which makes redis-cli print what it prints in a terminal. It then checks
// that the spent_resp_* metrics the server exports are documented.
func TestRESPDocSession(t *testing.T) {
	cli := redisCLIPath(t)
	steps := respDocSession(t)
	const serve = "spent serve --resp 127.0.0.1:6380"
	if steps[0].command != serve {
		t.Fatalf("docs/resp.md:%d: the session starts with %q, want %q (the test starts the server as that line does, on free ports)", steps[0].line, steps[0].command, serve)
	}
	p, raddr := startSpentRESP(t, SpentBinary(t), t.TempDir())
	_, port, err := net.SplitHostPort(raddr)
	if err != nil {
		t.Fatal(err)
	}
	ports := strings.NewReplacer("127.0.0.1:7070", p.addr, "127.0.0.1:6380", raddr)
	var want []string
	for _, w := range steps[0].want {
		want = append(want, ports.Replace(w))
	}
	started := "spent listening on http://" + p.addr + "\nspent RESP listening on redis://" + raddr
	if !respDocMatch(started, want, false) {
		t.Errorf("docs/resp.md:%d: %s\nprinted:\n%s\nthe page shows:\n%s", steps[0].line, serve, started, strings.Join(steps[0].want, "\n"))
	}
	for _, st := range steps[1:] {
		args, err := shellWords(st.command)
		if err != nil {
			t.Fatalf("docs/resp.md:%d: %s: %v", st.line, st.command, err)
		}
		if args[0] != "redis-cli" {
			t.Fatalf("docs/resp.md:%d: %s: the session's commands after the server's start are redis-cli lines", st.line, st.command)
		}
		n := 0
		for i := 1; i+1 < len(args); i++ {
			if args[i] == "-p" && args[i+1] == "6380" {
				args[i+1] = port
				n++
			}
		}
		if n != 1 {
			t.Fatalf("docs/resp.md:%d: %s: want exactly one -p 6380, the port the test replaces", st.line, st.command)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, cli, append([]string{"--no-raw"}, args[1:]...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && len(st.want) > 0 && strings.HasPrefix(st.want[0], "(error) ")) {
			// redis-cli may exit 1 after an error reply; any other failure is one.
			t.Fatalf("docs/resp.md:%d: %s: %v; stdout %q; stderr %q", st.line, st.command, err, out, stderr.String())
		}
		if !respDocMatch(string(out), st.want, redisCommand(args) == "TTL") {
			t.Errorf("docs/resp.md:%d: %s\ngot:\n%s\nwant (… for anything):\n%s\nstderr: %q", st.line, st.command, out, strings.Join(st.want, "\n"), stderr.String())
		}
	}
	checkRESPMetricsDocumented(t, p.url)
}

// checkRESPMetricsDocumented checks that every spent_resp_* family the
// server at url exports is documented in docs/resp.md and
// docs/operations.md, and that every one operations.md names is defined in
// resp/metrics.go.
func checkRESPMetricsDocumented(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`spent_resp_[a-z_]+`)
	exported := map[string]bool{}
	for _, l := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(l, "# TYPE "); ok && strings.HasPrefix(rest, "spent_resp_") {
			exported[strings.Fields(rest)[0]] = true
		}
	}
	// The session made claims and commands on a connection.
	for _, n := range []string{"spent_resp_commands_total", "spent_resp_claims_total", "spent_resp_connections", "spent_resp_rollback_pending"} {
		if !exported[n] {
			t.Errorf("/metrics has no %s after the session", n)
		}
	}
	docs := map[string]string{}
	for _, f := range []string{"docs/resp.md", "docs/operations.md", "resp/metrics.go"} {
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = string(b)
	}
	for n := range exported {
		for _, f := range []string{"docs/resp.md", "docs/operations.md"} {
			if !strings.Contains(docs[f], "`"+n+"`") && !strings.Contains(docs[f], "`"+n+"{") {
				t.Errorf("%s does not document %s, which /metrics exports", f, n)
			}
		}
	}
	for _, n := range name.FindAllString(docs["docs/operations.md"], -1) {
		if !strings.Contains(docs["resp/metrics.go"], `Name: "`+n+`"`) {
			t.Errorf("docs/operations.md names %s, which resp/metrics.go does not define", n)
		}
	}
}

// respClient speaks RESP2 to the listener, one command and reply at a time,
// and shows replies as redis-cli does.
type respClient struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRESP(t *testing.T, addr string) *respClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute))
	return &respClient{t: t, c: c, r: bufio.NewReader(c)}
}

// raw writes bytes as they are.
func (c *respClient) raw(b []byte) {
	c.t.Helper()
	if _, err := c.c.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func encodeCommand(args ...string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// reply reads one reply: "OK", "(error) …", "(integer) n", "(nil)" or a
// quoted bulk string.
func (c *respClient) reply() string {
	c.t.Helper()
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("reading a reply: %v", err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		c.t.Fatal("an empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:]
	case '-':
		return "(error) " + line[1:]
	case ':':
		return "(integer) " + line[1:]
	case '_':
		return "(nil)"
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			c.t.Fatalf("bulk header %q", line)
		}
		if n < 0 {
			return "(nil)"
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, b); err != nil {
			c.t.Fatal(err)
		}
		return strconv.Quote(string(b[:n]))
	}
	c.t.Fatalf("a reply the test does not read: %q", line)
	return ""
}

func (c *respClient) do(args ...string) string {
	c.t.Helper()
	c.raw(encodeCommand(args...))
	return c.reply()
}

// closed checks that the server closed the connection.
func (c *respClient) closed(why string) {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.r.ReadByte()
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		c.t.Fatalf("%s: the connection is still open (read: %v), want it closed", why, err)
	}
}

// startSpentConfig starts spent serve with the configuration file at
// config, which sets resp_listen, and returns the RESP address it prints.
func startSpentConfig(t *testing.T, bin, dir, config string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data", dir, "--config", config)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	r := bufio.NewReader(out)
	line1, err1 := r.ReadString('\n')
	line2, err2 := r.ReadString('\n')
	raddr, ok := strings.CutPrefix(strings.TrimSpace(line2), "spent RESP listening on redis://")
	if err1 != nil || err2 != nil || !ok {
		t.Fatalf("spent serve with resp_listen did not start its RESP listener: %q %q, %v %v; stderr:\n%s", line1, line2, err1, err2, stderr)
	}
	go io.Copy(io.Discard, r)
	return raddr
}

// respSectionKeys returns the keys of the table of the section "## `[resp]`"
// of docs/configuration.md.
func respSectionKeys(t *testing.T, doc string) []string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## `[resp]`\n")
	if !ok {
		t.Fatal("docs/configuration.md has no section \"## `[resp]`\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|")
	var keys []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// TestRESPDocConfigKeys checks that every key documented for [resp] in
// docs/configuration.md, and resp_listen, are accepted by spent serve and do
// what the page says: the file is served with every key set at once, and
// each key's effect is seen through the listener. A misspelt key and a value
// out of range are refused first, so that a key accepted is a key read.
func TestRESPDocConfigKeys(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.Contains(doc, "| `resp_listen` |") || !strings.Contains(doc, "| `SPENT_RESP` | `--resp` | `resp_listen` |") {
		t.Error("docs/configuration.md documents no resp_listen key, or no SPENT_RESP row")
	}
	samples := map[string]string{
		"namespaces":   `{ "tokens:redeemed:" = "relay-tokens", "default:" = "default" }`,
		"rollback":     `["tokens:redeemed:"]`,
		"min_expiry":   `{ "tokens:redeemed:" = "30h" }`,
		"max_args":     `8`,
		"max_bulk":     `4096`,
		"max_pipeline": `16`,
		"max_clients":  `4`,
		// max_reply: a pipeline of GETs whose replies pass it is answered
		// whole and in order (written as it is decided).
		"max_reply": `1024`,
		// max_rollback_bytes: a value past it is refused before it is
		// claimed.
		"max_rollback_bytes": `4096`,
	}
	keys := respSectionKeys(t, doc)
	documented := map[string]bool{}
	for _, k := range keys {
		documented[k] = true
		if samples[k] == "" {
			t.Errorf("docs/configuration.md documents [resp] %s, which this test has no value for: give it one, and check what it does", k)
		}
	}
	for k := range samples {
		if !documented[k] {
			t.Errorf("docs/configuration.md does not document [resp] %s", k)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	bin := SpentBinary(t)
	const head = "resp_listen = \"127.0.0.1:0\"\n\n[namespaces.default]\n\n[namespaces.relay-tokens]\nmode = \"refuse\"\nretention = \"30h\"\non_lease_expiry = \"hold\"\n\n[resp]\n"
	for _, bad := range []struct{ line, says string }{
		{"max_arg = 8", "unknown key resp.max_arg"},
		{"max_pipeline = 20000", "[resp] max_pipeline = 20000"},
		{`rollback = ["default:"]`, "is not mapped"},
	} {
		body := head + bad.line + "\n"
		if strings.HasPrefix(bad.line, "rollback") {
			body = head + `namespaces = { "tokens:redeemed:" = "relay-tokens" }` + "\n" + bad.line + "\n"
		}
		config := WriteConfig(t, body)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--config", config)
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), bad.says) {
			t.Fatalf("[resp] %s: got %v, output %q; want exit status 2 and %q", bad.line, err, out, bad.says)
		}
	}

	body := head
	for _, k := range keys {
		body += k + " = " + samples[k] + "\n"
	}
	raddr := startSpentConfig(t, bin, t.TempDir(), WriteConfig(t, body))

	// max_clients = 4: a fifth connection is refused and closed.
	var conns []*respClient
	for i := range 4 {
		c := dialRESP(t, raddr)
		if got := c.do("PING"); got != "PONG" {
			t.Fatalf("connection %d: PING: got %q, want PONG", i+1, got)
		}
		conns = append(conns, c)
	}
	fifth := dialRESP(t, raddr)
	if got, want := fifth.reply(), "(error) ERR max number of clients reached (4, resp max_clients)"; got != want {
		t.Fatalf("max_clients = 4: a fifth connection: got %q, want %q", got, want)
	}
	fifth.closed("max_clients = 4: a fifth connection")
	c := conns[0]
	for _, o := range conns[1:] {
		o.c.Close()
	}
	// dial connects once the server has let go of the closed connections.
	dial := func() *respClient {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			n := dialRESP(t, raddr)
			if got := n.do("PING"); got == "PONG" {
				return n
			} else if time.Now().After(deadline) {
				t.Fatalf("a new connection: PING: got %q", got)
			}
			n.c.Close()
		}
	}

	// namespaces: the prefixes given, and only those.
	for _, st := range []struct{ args, want []string }{
		{[]string{"SET", "tokens:redeemed:k1:n1", "1", "NX", "EX", "108000"}, []string{"OK"}},
		{[]string{"SET", "tokens:redeemed:k1:n1", "1", "NX", "EX", "108000"}, []string{"(nil)"}},
		{[]string{"SET", "default:a", "v", "NX"}, []string{"OK"}},
		{[]string{"SET", "other:a", "v", "NX"}, []string{`(error) ERR key "other:a" matches no configured prefix`}},
		// rollback: the claim is pending in its window, and DEL releases it.
		{[]string{"GET", "tokens:redeemed:k1:n1"}, []string{"(nil)"}},
		{[]string{"EXISTS", "tokens:redeemed:k1:n1"}, []string{"(integer) 1"}},
		{[]string{"DEL", "tokens:redeemed:k1:n1"}, []string{"(integer) 1"}},
		{[]string{"EXISTS", "tokens:redeemed:k1:n1"}, []string{"(integer) 0"}},
		{[]string{"SET", "tokens:redeemed:k1:n1", "1", "NX", "EX", "108000"}, []string{"OK"}},
		// Outside the rollback prefix a complete record is never deleted.
		{[]string{"DEL", "default:a"}, []string{`(error) NOT_PENDING key "default:a" cannot be deleted: it is a complete record`}},
		// max_args = 8: a command of 8 arguments is served.
		{[]string{"EXISTS", "default:a", "default:b", "default:c", "default:d", "default:e", "default:f", "default:a"}, []string{"(integer) 2"}},
		// max_bulk = 4096: a value under it is served.
		{[]string{"SET", "default:b", strings.Repeat("x", 4000), "NX"}, []string{"OK"}},
	} {
		got := c.do(st.args...)
		if !strings.HasPrefix(got, st.want[0]) {
			t.Fatalf("%.80q: got %q, want %q…", st.args, got, st.want[0])
		}
	}
	// The relay namespace's retention (30h) caps the expiry asked.
	c.do("SET", "tokens:redeemed:k1:n2", "1", "NX", "EX", "999999")
	if got := c.do("TTL", "tokens:redeemed:k1:n2"); !respDocMatch(got, []string{"(integer) 108000"}, true) {
		t.Fatalf("TTL after EX 999999 in a 30h namespace: got %q, want 108000 (or a few seconds less)", got)
	}
	// min_expiry = 30h under tokens:redeemed: raises a shorter EX to it.
	c.do("SET", "tokens:redeemed:k1:n3", "1", "NX", "EX", "10")
	if got := c.do("TTL", "tokens:redeemed:k1:n3"); !respDocMatch(got, []string{"(integer) 108000"}, true) {
		t.Fatalf("TTL after EX 10 under min_expiry 30h: got %q, want 108000 (or a few seconds less)", got)
	}

	// max_rollback_bytes = 4096: a value of 2,000 bytes fits (with its key,
	// the 160 bytes each costs, and the small values still in their
	// window), a second one while the first waits does not, and is not
	// claimed.
	big := strings.Repeat("r", 2000)
	if got := c.do("SET", "tokens:redeemed:k1:big1", big, "NX"); got != "OK" {
		t.Fatalf("max_rollback_bytes = 4096: a value of 2000 bytes: got %q, want OK", got)
	}
	if got := c.do("SET", "tokens:redeemed:k1:big2", big, "NX"); !strings.HasPrefix(got, "(error) UNAVAILABLE server busy: the values of rollback prefixes") || !strings.Contains(got, "max_rollback_bytes") {
		t.Fatalf("max_rollback_bytes = 4096: a second value of 2000 bytes: got %q, want UNAVAILABLE naming max_rollback_bytes", got)
	}
	if got := c.do("EXISTS", "tokens:redeemed:k1:big2"); got != "(integer) 0" {
		t.Fatalf("max_rollback_bytes: the refused value was claimed: EXISTS %q", got)
	}
	if got := c.do("DEL", "tokens:redeemed:k1:big1"); got != "(integer) 1" {
		t.Fatalf("DEL of the first big value in its window: %q", got)
	}

	// max_reply = 1024: 30 pipelined GETs of a 4000-byte value (120 kB of
	// replies) are all answered, in order.
	var gets []byte
	for range 30 {
		gets = append(gets, encodeCommand("GET", "default:b")...)
	}
	c.raw(gets)
	for i := range 30 {
		if got := c.reply(); got != strconv.Quote(strings.Repeat("x", 4000)) {
			t.Fatalf("max_reply = 1024: pipelined GET #%d: got %.40q…, want the 4000-byte value", i, got)
		}
	}

	// max_pipeline = 16: 40 pipelined claims are answered in order.
	var pipe []byte
	for i := range 40 {
		pipe = append(pipe, encodeCommand("SETNX", fmt.Sprintf("default:p-%d", i%20), "v")...)
	}
	c.raw(pipe)
	for i := range 40 {
		want := "(integer) 1"
		if i >= 20 {
			want = "(integer) 0"
		}
		if got := c.reply(); got != want {
			t.Fatalf("pipelined SETNX #%d (key p-%d): got %q, want %q", i, i%20, got, want)
		}
	}

	// max_args = 8: a command of 9 arguments is a protocol error that
	// closes the connection.
	n := dial()
	n.raw([]byte("*9\r\n"))
	if got, want := n.reply(), "(error) ERR Protocol error: command of 9 arguments: at most 8 (resp max_args)"; got != want {
		t.Fatalf("max_args = 8: got %q, want %q", got, want)
	}
	n.closed("max_args = 8")
	n.c.Close()

	// max_bulk = 4096: a longer argument is a protocol error too.
	n = dial()
	n.raw([]byte("*4\r\n$3\r\nSET\r\n$11\r\ndefault:big\r\n$5000\r\n"))
	if got, want := n.reply(), "(error) ERR Protocol error: argument of 5000 bytes: at most 4096 (resp max_bulk)"; got != want {
		t.Fatalf("max_bulk = 4096: got %q, want %q", got, want)
	}
	n.closed("max_bulk = 4096")
}

// TestRESPDocConfigServes serves every TOML block of docs/resp.md, and
// claims a key under each prefix it maps (releasing it again under a
// rollback prefix), so that no example a reader copies is refused.
func TestRESPDocConfigServes(t *testing.T) {
	b, err := os.ReadFile("../../docs/resp.md")
	if err != nil {
		t.Fatal(err)
	}
	bin := SpentBinary(t)
	rest := string(b)
	blocks := 0
	for {
		var block string
		var ok bool
		if _, rest, ok = strings.Cut(rest, "```toml\n"); !ok {
			break
		}
		if block, rest, ok = strings.Cut(rest, "```"); !ok {
			t.Fatal("docs/resp.md: a toml block that is not closed")
		}
		blocks++
		var f struct {
			RESP struct {
				Namespaces map[string]string `toml:"namespaces"`
				Rollback   []string          `toml:"rollback"`
			} `toml:"resp"`
		}
		if _, err := toml.Decode(block, &f); err != nil {
			t.Fatalf("docs/resp.md toml block #%d: %v", blocks, err)
		}
		_, raddr := startSpentRESP(t, bin, t.TempDir(), "--config", WriteConfig(t, block))
		c := dialRESP(t, raddr)
		if got := c.do("PING"); got != "PONG" {
			t.Fatalf("block #%d: PING: got %q", blocks, got)
		}
		for prefix := range f.RESP.Namespaces {
			if got := c.do("SET", prefix+"doc-check", "1", "NX"); got != "OK" {
				t.Errorf("block #%d: SET %sdoc-check 1 NX: got %q, want OK", blocks, prefix, got)
			}
		}
		for _, prefix := range f.RESP.Rollback {
			if got := c.do("DEL", prefix+"doc-check"); got != "(integer) 1" {
				t.Errorf("block #%d: DEL %sdoc-check under a rollback prefix: got %q, want (integer) 1", blocks, prefix, got)
			}
		}
	}
	if blocks == 0 {
		t.Fatal("docs/resp.md has no toml block: the test reads it wrong")
	}
}
