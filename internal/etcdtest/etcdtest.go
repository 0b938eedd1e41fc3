// Package etcdtest runs etcd clusters for tests, one process per member, so
// that a test can kill a member (the leader, say) with SIGKILL and restart it
// on its data directory.
//
// In the common case a test needs a cluster and nothing else:
//
//	endpoints := etcdtest.Shared(t) // a 3-member cluster, or the one $SPENT_ETCDTEST_ENDPOINTS names
//
// A test that kills members starts a cluster of its own with [Start] and uses
// [Cluster.Leader], [Cluster.Kill] and [Cluster.Restart].
//
// The members are etcd itself: the command internal/etcdtest/member, which
// calls etcdmain from go.etcd.io/etcd/server/v3 at the version go.mod pins,
// built with `go build` on first use (the Go build cache makes later builds
// a relink of under a second). Set SPENT_ETCD_BINARY to run another etcd
// binary instead (Debian's etcd-server package installs /usr/bin/etcd). Each
// member listens on free loopback ports and keeps its data in a temporary
// directory; the members are killed when the test ends, and die with the
// test process if it is killed (they exit when their standard input ends).
//
// It is test-only code, exported so that the tests of several packages (the
// etcd store, cmd/spent) can share it.
//
// # Caveats
//
// The members run etcd's default, durable settings: every write is fsynced
// to the WAL of a majority before etcd answers. They also enable lease
// checkpoints (LeaseCheckpoint and LeaseCheckpointPersist), so that a leader
// change does not restart every lease's TTL; an external binary given by
// SPENT_ETCD_BINARY gets no feature flags, since older versions reject them.
//
// Ports are found free by binding port 0 and closing it; another process can
// take one before the member binds it, so Start retries a cluster that fails
// to come up, up to three times.
package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Environment variables read by this package.
const (
	// EnvEndpoints holds the comma-separated client endpoints of a running
	// cluster. [Shared] connects to it when set, and sets it when it starts
	// a cluster, so that child processes a test re-executes (the storetest
	// crash test does) use the same cluster.
	EnvEndpoints = "SPENT_ETCDTEST_ENDPOINTS"
	// EnvBinary names an etcd binary to run instead of building the member
	// command.
	EnvBinary = "SPENT_ETCD_BINARY"
	// envWatchStdin tells the member command to exit when its standard
	// input ends.
	envWatchStdin = "SPENT_ETCDTEST_WATCH_STDIN"
)

// memberPackage is the import path of the member command.
const memberPackage = "github.com/spentledger/spent/internal/etcdtest/member"

// startTimeout bounds the wait for a cluster or a restarted member to serve.
const startTimeout = 60 * time.Second

// Cluster is a running etcd cluster whose members are child processes.
type Cluster struct {
	tb      testing.TB
	bin     string
	builtin bool // bin is the member command, which takes feature gates
	members []*Member
	stopped bool
	mu      sync.Mutex
}

// Member is one member of a Cluster.
type Member struct {
	// Name is the member's name: m0, m1, ...
	Name string
	// ClientURL is the URL clients connect to (http://127.0.0.1:port).
	ClientURL string
	// PeerURL is the URL the other members connect to.
	PeerURL string
	// Dir is the member's data directory; its log is Dir + ".log".
	Dir string

	args   []string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	done   chan struct{} // closed when the process has exited
	killed bool          // by Kill, on purpose
}

// Endpoint returns the member's client endpoint as host:port.
func (m *Member) Endpoint() string { return strings.TrimPrefix(m.ClientURL, "http://") }

// Shared returns the client endpoints (host:port) of a 3-member cluster for
// tb: the cluster $SPENT_ETCDTEST_ENDPOINTS names, when set, or a new one
// that is stopped when tb ends, whose endpoints Shared then puts in that
// variable (with tb.Setenv) for child processes to inherit.
func Shared(tb testing.TB) []string {
	tb.Helper()
	if v := os.Getenv(EnvEndpoints); v != "" {
		return strings.Split(v, ",")
	}
	c := Start(tb, 3)
	eps := c.Endpoints()
	tb.Setenv(EnvEndpoints, strings.Join(eps, ","))
	return eps
}

// Start starts a cluster of n members for tb, waits until it has a leader
// and every member answers, and stops it when tb ends. When no etcd can be
// run (no Go toolchain to build the member, and no SPENT_ETCD_BINARY), it
// skips tb, or fails it when the environment variable CI is set.
func Start(tb testing.TB, n int) *Cluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("etcdtest: %d members: want at least 1", n)
	}
	bin, builtin := binary(tb)
	var lastErr error
	for attempt := range 3 {
		c := &Cluster{tb: tb, bin: bin, builtin: builtin}
		err := c.start(n, attempt)
		if err == nil {
			tb.Cleanup(c.Stop)
			return c
		}
		logs := c.logTails()
		c.Stop()
		lastErr = fmt.Errorf("%w\n%s", err, logs)
	}
	tb.Fatalf("etcdtest: starting %d members: %v", n, lastErr)
	return nil
}

// binary returns the etcd binary to run, building the member command when
// SPENT_ETCD_BINARY is not set, and whether it is the member command.
func binary(tb testing.TB) (string, bool) {
	tb.Helper()
	if p := os.Getenv(EnvBinary); p != "" {
		return p, false
	}
	// go test puts its own toolchain first in the PATH of the tests it runs.
	goBin, err := exec.LookPath("go")
	if err != nil {
		missing(tb, "no Go toolchain to build the etcd member command, and "+EnvBinary+" is not set")
	}
	out := filepath.Join(tb.TempDir(), "etcd-member")
	cmd := exec.Command(goBin, "build", "-o", out, memberPackage)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("etcdtest: go build %s: %v\n%s", memberPackage, err, b)
	}
	return out, true
}

// missing skips tb (fails it under CI) because etcd cannot be run.
func missing(tb testing.TB, why string) {
	tb.Helper()
	msg := "etcdtest: " + why + "; install Debian's etcd-server package and set " + EnvBinary + "=/usr/bin/etcd"
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (c *Cluster) start(n, attempt int) error {
	ports, err := freePorts(2 * n)
	if err != nil {
		return err
	}
	root := c.tb.TempDir()
	var initial []string
	for i := range n {
		m := &Member{
			Name:      "m" + strconv.Itoa(i),
			ClientURL: "http://127.0.0.1:" + strconv.Itoa(ports[2*i]),
			PeerURL:   "http://127.0.0.1:" + strconv.Itoa(ports[2*i+1]),
		}
		m.Dir = filepath.Join(root, m.Name)
		c.members = append(c.members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	token := fmt.Sprintf("spent-etcdtest-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), attempt)
	for _, m := range c.members {
		m.args = []string{
			"--name", m.Name,
			"--data-dir", m.Dir,
			"--listen-client-urls", m.ClientURL,
			"--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL,
			"--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--log-level", "warn",
		}
		if c.builtin {
			m.args = append(m.args, "--feature-gates", "LeaseCheckpoint=true,LeaseCheckpointPersist=true")
		}
		if err := c.launch(m); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return c.WaitHealthy(ctx)
}

// launch starts m's process with its arguments.
func (c *Cluster) launch(m *Member) error {
	logf, err := os.OpenFile(m.Dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(c.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), envWatchStdin+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdtest: starting %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	m.cmd, m.stdin, m.done, m.killed = cmd, stdin, done, false
	return nil
}

// Members returns the cluster's members, in the order of their names.
func (c *Cluster) Members() []*Member { return c.members }

// Endpoints returns every member's client endpoint as host:port, whether the
// member runs or not.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.Endpoint()
	}
	return eps
}

// Running reports whether member i's process runs.
func (c *Cluster) Running(i int) bool {
	m := c.members[i]
	if m.done == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Client returns a client connected to every member, closed when the test
// ends. Its requests time out with ctx.
func (c *Cluster) Client() *clientv3.Client {
	c.tb.Helper()
	cli, err := newClient(c.Endpoints())
	if err != nil {
		c.tb.Fatalf("etcdtest: client: %v", err)
	}
	c.tb.Cleanup(func() { cli.Close() })
	return cli
}

func newClient(eps []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// status asks member i for its status.
func (c *Cluster) status(ctx context.Context, cli *clientv3.Client, i int) (*clientv3.StatusResponse, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return cli.Status(sctx, c.members[i].Endpoint())
}

// WaitHealthy waits until every running member answers and reports the same
// leader, itself a running member. It fails early when a member's process
// exits without Kill.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	cli, err := newClient(c.Endpoints())
	if err != nil {
		return err
	}
	defer cli.Close()
	var last error
	for {
		for _, m := range c.members {
			if m.done == nil {
				continue
			}
			select {
			case <-m.done:
				if !m.killed {
					return fmt.Errorf("etcdtest: member %s exited", m.Name)
				}
			default:
			}
		}
		last = c.healthy(ctx, cli)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: cluster not healthy: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(ctx context.Context, cli *clientv3.Client) error {
	var leader uint64
	running := map[uint64]bool{}
	for i, m := range c.members {
		if !c.Running(i) {
			continue
		}
		st, err := c.status(ctx, cli, i)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if st.Leader == 0 {
			return fmt.Errorf("%s: no leader", m.Name)
		}
		if leader != 0 && st.Leader != leader {
			return fmt.Errorf("%s: leader %x, another member says %x", m.Name, st.Leader, leader)
		}
		leader = st.Leader
		running[st.Header.MemberId] = true
	}
	if !running[leader] {
		return fmt.Errorf("leader %x is not running", leader)
	}
	return nil
}

// Leader returns the index of the member that is leader now, as the running
// members report it.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	cli, err := newClient(c.Endpoints())
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	ids := map[uint64]int{}
	var leader uint64
	for i := range c.members {
		if !c.Running(i) {
			continue
		}
		st, err := c.status(ctx, cli, i)
		if err != nil {
			continue
		}
		ids[st.Header.MemberId] = i
		if st.Leader != 0 {
			leader = st.Leader
		}
	}
	if i, ok := ids[leader]; ok && leader != 0 {
		return i, nil
	}
	return -1, errors.New("etcdtest: no running member is leader")
}

// Kill kills member i with SIGKILL and waits until its process is gone.
func (c *Cluster) Kill(i int) error {
	m := c.members[i]
	if m.cmd == nil {
		return fmt.Errorf("etcdtest: member %s never started", m.Name)
	}
	m.killed = true
	if err := m.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("etcdtest: killing %s: %w", m.Name, err)
	}
	<-m.done
	m.stdin.Close()
	return nil
}

// Restart starts member i again, on its data directory and ports, after
// Kill, and waits until the cluster is healthy with it.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	m := c.members[i]
	if c.Running(i) {
		return fmt.Errorf("etcdtest: member %s is running", m.Name)
	}
	if err := c.launch(m); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return c.WaitHealthy(ctx)
}

// Stop kills every member. Start registers it as a cleanup of the test; it
// may be called earlier, and more than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.stopped = true
	for i := range c.members {
		if c.Running(i) {
			_ = c.Kill(i)
		}
	}
}

// logTails returns the end of every member's log, for a failure message.
func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, m := range c.members {
		data, err := os.ReadFile(m.Dir + ".log")
		if err != nil {
			continue
		}
		lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
		if len(lines) > 10 {
			lines = lines[len(lines)-10:]
		}
		fmt.Fprintf(&b, "--- %s.log (end)\n%s\n", m.Name, bytes.Join(lines, []byte("\n")))
	}
	return b.String()
}
