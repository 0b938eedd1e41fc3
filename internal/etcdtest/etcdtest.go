// Package etcdtest runs etcd clusters for tests, one process per member, so
// that a test can kill a member (the leader, say) with SIGKILL and restart it
// on its data directory.
//
// In the common case the tests of a package share one 3-member cluster:
//
//	func TestMain(m *testing.M) { etcdtest.Main(m) } // stops the shared cluster at the end
//
//	func TestSomething(t *testing.T) {
//		endpoints := etcdtest.Shared(t) // host:port of each member
//		...
//	}
//
// Shared starts the cluster on first use and publishes its endpoints in the
// environment variable SPENT_ETCDTEST_ENDPOINTS, so that a test binary
// re-executed as a child process (as the storetest crash test does) connects
// to the same cluster instead of starting another; a cluster started by
// other means (bench/etcd.sh) is used the same way. A test that kills
// members starts a cluster of its own with [Start] and uses
// [Cluster.Leader], [Cluster.Kill] and [Cluster.Restart].
//
// The members are etcd itself: the command internal/etcdtest/member, which
// calls etcdmain from go.etcd.io/etcd/server/v3 at the version go.mod pins,
// built with `go build` when a cluster starts (once for all the clusters of
// a process that run at the same time; the Go build cache makes later builds
// quick). Set
// SPENT_ETCD_BINARY to run another etcd binary instead (Debian's etcd-server
// package installs /usr/bin/etcd). Each member listens on free loopback
// ports and keeps its data in a temporary directory; the members are killed
// when the cluster stops, and die with the test process if it is killed
// (they exit when their standard input ends).
//
// It is test-only code, exported so that the tests of several packages (the
// etcd store, cmd/spent) can share it.
//
// # Caveats
//
// The members run etcd's default, durable settings: every write is fsynced
// to the WAL of a majority before etcd answers. They also enable lease
// checkpoints (the LeaseCheckpoint and LeaseCheckpointPersist feature
// gates), so that a leader change does not restart every lease's TTL; an
// external binary given by SPENT_ETCD_BINARY gets no feature gates, since
// older versions reject the flag.
//
// Ports are found free by binding port 0 and closing it; another process can
// take one before the member binds it, so StartCluster retries a cluster that
// fails to come up, up to three times.
package etcdtest

import (
	"bytes"
	"context"
	"crypto/tls"
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
	root    string // temporary directory: each member's data and log
	opts    Options
	bin     string
	builtin bool // bin is the member command, held until Stop
	gates   bool // bin takes feature gates
	members []*Member
	mu      sync.Mutex
	stopped bool
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
func (m *Member) Endpoint() string {
	return strings.TrimPrefix(strings.TrimPrefix(m.ClientURL, "http://"), "https://")
}

// ErrNoEtcd is returned by [StartCluster] when no etcd can be run: there is
// no Go toolchain to build the member command, and SPENT_ETCD_BINARY is not
// set.
var ErrNoEtcd = errors.New("etcdtest: no Go toolchain to build the etcd member command, and " + EnvBinary + " is not set; " +
	"install Debian's etcd-server package and set " + EnvBinary + "=/usr/bin/etcd")

// shared is the cluster of [Shared].
var shared struct {
	mu      sync.Mutex
	cluster *Cluster
	err     error
}

// Shared returns the client endpoints (host:port) of the 3-member cluster
// the tests of this process share: the cluster $SPENT_ETCDTEST_ENDPOINTS
// names, when set, or else one started on first use, whose endpoints Shared
// then puts in that variable for child processes to inherit. Stop it with
// [StopShared], or run the tests with [Main], which does. When no etcd can
// be run, Shared skips tb, or fails it when the environment variable CI is
// set; when the cluster fails to start, it fails tb (and every later caller).
func Shared(tb testing.TB) []string {
	tb.Helper()
	eps, err := SharedEndpoints()
	if err != nil {
		fail(tb, err)
	}
	return eps
}

// SharedEndpoints is [Shared] for code that has no testing.TB, such as an
// Example: it returns the error for which Shared would skip or fail.
func SharedEndpoints() ([]string, error) {
	if v := os.Getenv(EnvEndpoints); v != "" {
		return strings.Split(v, ","), nil
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster == nil && shared.err == nil {
		shared.cluster, shared.err = StartCluster(3)
		if shared.err == nil {
			os.Setenv(EnvEndpoints, strings.Join(shared.cluster.Endpoints(), ","))
		}
	}
	if shared.err != nil {
		return nil, shared.err
	}
	return shared.cluster.Endpoints(), nil
}

// StopShared stops the cluster [Shared] started, if any, and removes its
// directory. It leaves alone a cluster that $SPENT_ETCDTEST_ENDPOINTS named
// when this process started.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster != nil {
		shared.cluster.Stop()
		os.Unsetenv(EnvEndpoints)
		shared.cluster = nil
	}
}

// Main runs the tests, stops the shared cluster and exits. Call it from
// TestMain:
//
//	func TestMain(m *testing.M) { etcdtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// Options are the settings of a cluster that [StartWith] starts.
type Options struct {
	// CertFile and KeyFile, when both set, name the PEM certificate and
	// key the members serve client connections with: the client URLs are
	// then https. Peers still talk plaintext.
	CertFile, KeyFile string
}

// Start starts a cluster of n members for tb alone, and stops it when tb
// ends. Errors are reported as [Shared] reports them.
func Start(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return StartWith(tb, n, Options{})
}

// StartWith is [Start] with options.
func StartWith(tb testing.TB, n int, o Options) *Cluster {
	tb.Helper()
	c, err := StartClusterWith(n, o)
	if err != nil {
		fail(tb, err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// fail skips tb for ErrNoEtcd (fails it under CI) and fails it otherwise.
func fail(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNoEtcd) && os.Getenv("CI") == "" {
		tb.Skip(err)
	}
	tb.Fatal(err)
}

// StartCluster starts a cluster of n members in a new temporary directory,
// and waits until it has a leader and every member answers. [Cluster.Stop]
// kills the members and removes the directory.
func StartCluster(n int) (*Cluster, error) { return StartClusterWith(n, Options{}) }

// StartClusterWith is [StartCluster] with options.
func StartClusterWith(n int, o Options) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("etcdtest: %d members: want at least 1", n)
	}
	var lastErr error
	for attempt := range 3 {
		root, err := os.MkdirTemp("", "spent-etcdtest-")
		if err != nil {
			return nil, err
		}
		c := &Cluster{root: root, opts: o}
		if err := c.binary(); err != nil {
			os.RemoveAll(root)
			return nil, err
		}
		c.gates = c.builtin
		err = c.start(n, attempt)
		if err == nil {
			return c, nil
		}
		logs := c.logTails()
		c.Stop()
		lastErr = fmt.Errorf("%w\n%s", err, logs)
	}
	return nil, fmt.Errorf("etcdtest: starting %d members: %w", n, lastErr)
}

// member is the member command, built once for the clusters of a process
// that run at the same time, and removed when the last of them stops.
var member struct {
	mu   sync.Mutex
	dir  string
	refs int
}

// binary sets the etcd binary to run: $SPENT_ETCD_BINARY, or the member
// command, built unless a running cluster of this process already built it.
func (c *Cluster) binary() error {
	if p := os.Getenv(EnvBinary); p != "" {
		c.bin = p
		return nil
	}
	member.mu.Lock()
	defer member.mu.Unlock()
	if member.refs == 0 {
		// go test puts its own toolchain first in the PATH of the tests
		// it runs.
		goBin, err := exec.LookPath("go")
		if err != nil {
			return ErrNoEtcd
		}
		dir, err := os.MkdirTemp("", "spent-etcdtest-bin-")
		if err != nil {
			return err
		}
		cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, "etcd-member"), memberPackage)
		if b, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("etcdtest: go build %s: %w\n%s", memberPackage, err, b)
		}
		member.dir = dir
	}
	member.refs++
	c.bin, c.builtin = filepath.Join(member.dir, "etcd-member"), true
	return nil
}

// releaseBinary drops the cluster's hold on the member command.
func (c *Cluster) releaseBinary() {
	if !c.builtin {
		return
	}
	c.builtin = false
	member.mu.Lock()
	defer member.mu.Unlock()
	if member.refs--; member.refs == 0 {
		os.RemoveAll(member.dir)
		member.dir = ""
	}
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
	root := c.root
	var initial []string
	for i := range n {
		m := &Member{
			Name:      "m" + strconv.Itoa(i),
			ClientURL: c.clientScheme() + "://127.0.0.1:" + strconv.Itoa(ports[2*i]),
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
		if c.tls() {
			m.args = append(m.args, "--cert-file", c.opts.CertFile, "--key-file", c.opts.KeyFile)
		}
		if c.gates {
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

func (c *Cluster) tls() bool { return c.opts.CertFile != "" && c.opts.KeyFile != "" }

func (c *Cluster) clientScheme() string {
	if c.tls() {
		return "https"
	}
	return "http"
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

// Client returns a client connected to every member, closed when tb ends.
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := c.newClient()
	if err != nil {
		tb.Fatalf("etcdtest: client: %v", err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// newClient returns a client of every member. Over TLS it does not verify
// the members' certificates: it only checks their health.
func (c *Cluster) newClient() (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
	if c.tls() {
		cfg.TLS = &tls.Config{InsecureSkipVerify: true}
	}
	return clientv3.New(cfg)
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
	cli, err := c.newClient()
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
	cli, err := c.newClient()
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

// Stop kills every member and removes the cluster's directory. Start
// registers it as a cleanup of the test; it may be called earlier, and more
// than once.
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
	os.RemoveAll(c.root)
	c.releaseBinary()
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
