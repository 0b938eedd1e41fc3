// Package redistest starts redis-server processes for tests: a durable single
// server ([Start]) and a Redis Cluster of primaries ([StartCluster]), each on
// free loopback ports in temporary directories, stopped when the test ends.
// It is for tests only.
//
// In the common case, a test starts what it needs and connects to its URL:
//
//	srv := redistest.Start(t)
//	opts, _ := redis.ParseURL(srv.URL())
//
// A test whose binary is re-executed as a child process (storetest's crash
// test) uses [Shared] or [SharedCluster] instead: the first call in a process
// starts the server and publishes its address in an environment variable,
// which child processes inherit, so that they connect to the same server.
//
// Servers run with appendonly yes, appendfsync always and no RDB snapshots,
// the durable settings the redis store requires; [Args] overrides them. When
// redis-server or redis-cli is missing, the test is skipped with a message
// naming the Debian packages to install, or fails when the environment
// variable CI is set.
package redistest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The binaries and the Debian packages that hold them.
const (
	ServerBinary  = "redis-server"
	CLIBinary     = "redis-cli"
	ServerPackage = "redis-server"
	CLIPackage    = "redis-tools"
)

// startTimeout bounds the wait for a server (or a cluster) to answer.
const startTimeout = 20 * time.Second

// Require skips tb when redis-server or redis-cli is not installed, naming
// the Debian package to install; when the environment variable CI is set it
// fails tb instead, so that CI never passes by skipping.
func Require(tb testing.TB) {
	tb.Helper()
	for _, b := range []struct{ bin, pkg string }{{ServerBinary, ServerPackage}, {CLIBinary, CLIPackage}} {
		if _, err := exec.LookPath(b.bin); err != nil {
			msg := fmt.Sprintf("redistest: %s not found (install the Debian package %s: apt-get install %s)", b.bin, b.pkg, b.pkg)
			if os.Getenv("CI") != "" {
				tb.Fatal(msg + "; CI is set, so this is a failure, not a skip")
			}
			tb.Skip(msg)
		}
	}
}

// Option changes how a server starts.
type Option func(*config)

type config struct {
	args []string
}

// Args appends arguments to redis-server's command line, after the defaults
// (a later argument wins): Args("--appendfsync", "everysec") starts a server
// that is not durable.
func Args(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// Server is one redis-server process.
type Server struct {
	// Addr is the server's address, 127.0.0.1:Port.
	Addr string
	// Port is the server's TCP port.
	Port int
	// Dir is the server's working directory: its append-only file and log.
	Dir string

	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start starts a durable redis-server on a free loopback port, in a new
// temporary directory, and stops it when tb ends. It calls Require first.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	Require(tb)
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	s := startServer(tb, tb.TempDir(), false, cfg.args)
	tb.Cleanup(s.stop)
	return s
}

// startServer starts a server in dir, retrying on other ports when the
// chosen one was taken in the meantime. With cluster, it is a cluster node,
// and its bus port (port+10000) must be free too.
func startServer(tb testing.TB, dir string, cluster bool, extra []string) *Server {
	tb.Helper()
	var lastErr error
	for range 8 {
		port, err := freePort(cluster)
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, Dir: dir}
		s.args = []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--appendonly", "yes", "--appendfsync", "always", "--save", "",
			"--daemonize", "no", "--logfile", "redis.log", "--protected-mode", "no",
		}
		if cluster {
			s.args = append(s.args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "5000")
		}
		s.args = append(s.args, extra...)
		if lastErr = s.start(); lastErr == nil {
			return s
		}
		if !strings.Contains(lastErr.Error(), "in use") {
			break
		}
	}
	tb.Fatalf("redistest: %v", lastErr)
	return nil
}

// freePort finds a loopback port that is free now (and, for a cluster node,
// whose bus port is free too).
func freePort(cluster bool) (int, error) {
	for range 100 {
		port := 20000 + rand.IntN(25000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		if cluster {
			bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
			if err != nil {
				l.Close()
				continue
			}
			bus.Close()
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port found")
}

// start runs the process and waits until it answers PING.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("redis-server on %s is already running", s.Addr)
	}
	cmd := exec.Command(ServerBinary, s.args...)
	cmd.Dir = s.Dir
	// The server dies with the test process, even when that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", ServerBinary, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done

	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, DisableIdentity: true})
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("redis-server on %s exited: %s\n%s", s.Addr, bytes.TrimSpace(out.Bytes()), s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			s.cmd = nil
			return fmt.Errorf("redis-server on %s not ready after %v: %v\n%s", s.Addr, startTimeout, err, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTail returns the end of the server's log, for failure messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if err != nil {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "redis.log:\n" + string(b)
}

// URL returns the server's DSN for the redis store: redis://127.0.0.1:port.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Kill kills the server with SIGKILL, as a crash would, and waits until it
// has exited. Its directory stays, for Restart.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		tb.Fatalf("redistest: Kill: redis-server on %s is not running", s.Addr)
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// Restart starts the server again after Kill, on the same port and in the
// same directory, so that it loads its append-only file, and waits until it
// answers.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.start(); err != nil {
		tb.Fatalf("redistest: Restart: %v", err)
	}
}

// stop kills the server if it runs.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
		s.cmd = nil
	}
}

// Cluster is a Redis Cluster of primaries without replicas.
type Cluster struct {
	// Nodes are the primaries.
	Nodes []*Server
}

// StartCluster starts a Redis Cluster of n primaries (at least 3, without
// replicas) on free loopback ports, each in its own temporary directory,
// creates it with redis-cli --cluster create, waits until every node reports
// cluster_state:ok, and stops it when tb ends. It calls Require first.
func StartCluster(tb testing.TB, n int, opts ...Option) *Cluster {
	tb.Helper()
	Require(tb)
	if n < 3 {
		tb.Fatalf("redistest: a cluster needs at least 3 primaries, got %d", n)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	c := &Cluster{}
	for range n {
		s := startServer(tb, tb.TempDir(), true, cfg.args)
		tb.Cleanup(s.stop)
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command(CLIBinary, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitOK(); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return c
}

// waitOK waits until every node reports cluster_state:ok with every slot
// assigned and knows every other node.
func (c *Cluster) waitOK() error {
	deadline := time.Now().Add(startTimeout)
	for _, s := range c.Nodes {
		cl := goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1, DisableIdentity: true})
		var last string
		for {
			info, err := cl.ClusterInfo(context.Background()).Result()
			if err == nil && infoField(info, "cluster_state") == "ok" &&
				infoField(info, "cluster_slots_ok") == "16384" &&
				infoField(info, "cluster_known_nodes") == strconv.Itoa(len(c.Nodes)) {
				break
			}
			last = fmt.Sprint(info, err)
			if time.Now().After(deadline) {
				cl.Close()
				return fmt.Errorf("cluster node %s not ok after %v: %s", s.Addr, startTimeout, last)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cl.Close()
	}
	return nil
}

// infoField returns the value of name in an INFO-style reply.
func infoField(info, name string) string {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok && k == name {
			return v
		}
	}
	return ""
}

// Addrs returns the addresses of the nodes.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr
	}
	return out
}

// URL returns the cluster's DSN for the redis store:
// redis-cluster://host:port,host:port,...
func (c *Cluster) URL() string { return "redis-cluster://" + strings.Join(c.Addrs(), ",") }

// Shared returns the address of a durable server shared by this test process
// and its children. When the environment variable env is set, it returns its
// value: a parent process started the server. Otherwise it starts a server
// (stopped when tb ends), sets env to its address for child processes, and
// unsets it when tb ends. Call it at the top of a top-level test, before
// storetest.Run.
func Shared(tb testing.TB, env string, opts ...Option) string {
	tb.Helper()
	if addr := os.Getenv(env); addr != "" {
		return addr
	}
	s := Start(tb, opts...)
	publish(tb, env, s.Addr)
	return s.Addr
}

// SharedCluster is Shared for a cluster of n primaries: it returns the node
// addresses, published in env separated by commas.
func SharedCluster(tb testing.TB, env string, n int, opts ...Option) []string {
	tb.Helper()
	if addrs := os.Getenv(env); addrs != "" {
		return strings.Split(addrs, ",")
	}
	c := StartCluster(tb, n, opts...)
	publish(tb, env, strings.Join(c.Addrs(), ","))
	return c.Addrs()
}

func publish(tb testing.TB, env, value string) {
	tb.Helper()
	if err := os.Setenv(env, value); err != nil {
		tb.Fatalf("redistest: setting %s: %v", env, err)
	}
	tb.Cleanup(func() { os.Unsetenv(env) })
}
