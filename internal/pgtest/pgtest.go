// Package pgtest starts throwaway PostgreSQL clusters for tests. It is test
// infrastructure, not for production.
//
// In the common case a test asks for the process's shared server with [DSN]
// and gives each store its own schema:
//
//	dsn := pgtest.DSN(t) // SPENT_TEST_POSTGRES_DSN, or a cluster of this process
//
// DSN uses the server named by SPENT_TEST_POSTGRES_DSN when that variable is
// set. Otherwise it makes a cluster with initdb in a temporary directory,
// starts postgres on a free loopback port with durable settings (fsync=on,
// synchronous_commit=on), publishes its address in SPENT_PGTEST_SHARED_DSN
// so that child processes (the storetest crash test re-executes the test
// binary) connect to the same server instead of starting their own, and
// stops and removes it when the test that started it ends.
//
// A package whose tests call DSN from several top-level tests runs them
// under [Main], so that they share one cluster instead of starting one each.
// A test that needs a server of its own, to kill it or to give it other
// settings, calls [Start] and gets a [Cluster].
//
// # Caveats
//
//   - The binaries initdb, pg_ctl and postgres are looked up in PATH and then
//     in /usr/lib/postgresql/*/bin (where Debian's package `postgresql` puts
//     them). When they are missing, the test is skipped with a message naming
//     the package, unless the environment variable CI is set: then it fails.
//   - initdb refuses to run as root. Under root, the cluster is made and run
//     as the user "postgres" (which Debian's package creates), in a directory
//     under os.TempDir() owned by that user.
//   - The postgres process is a child of the test process and is sent
//     SIGQUIT (immediate shutdown) if the test process dies, so an
//     interrupted run does not leave a server behind; its directory may stay.
//   - The machine's own cluster (port 5432) is never touched.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spentledger/spent/internal/dsn"
)

// EnvDSN names the environment variable that points tests at an existing
// PostgreSQL server (a postgres:// URL) instead of a throwaway cluster.
const EnvDSN = "SPENT_TEST_POSTGRES_DSN"

// EnvShared names the environment variable in which a process publishes the
// address of the cluster [DSN] started, for its child processes.
const EnvShared = "SPENT_PGTEST_SHARED_DSN"

// Package is the Debian package that provides the binaries.
const Package = "postgresql"

// DefaultSettings are the server settings every cluster starts with: durable
// commits, loopback only, and small memory. [Options.Settings] overrides them.
func DefaultSettings() map[string]string {
	return map[string]string{
		"fsync":              "on",
		"synchronous_commit": "on",
		"full_page_writes":   "on",
		"shared_buffers":     "32MB",
		"max_connections":    "300",
		"listen_addresses":   "127.0.0.1",
		"logging_collector":  "off",
		"log_min_messages":   "warning",
		"max_wal_size":       "256MB",
		"max_wal_senders":    "0",
		"wal_level":          "minimal",
	}
}

// Options configures a cluster made by [Start].
type Options struct {
	// Settings are passed to postgres as -c name=value, over
	// [DefaultSettings]; an empty value drops a default, so that the server
	// takes the setting from its configuration files (and ALTER SYSTEM can
	// change it).
	Settings map[string]string
}

// Cluster is a PostgreSQL cluster in a temporary directory, run by this
// process. Its methods are safe for concurrent use.
type Cluster struct {
	bin   string // directory of initdb, pg_ctl and postgres
	base  string // temporary directory holding data, socket and log
	data  string
	sock  string
	log   string
	port  int
	cred  *syscall.Credential // nil unless run as another user
	args  []string
	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd has exited
	ended bool
}

// Start makes and starts a new cluster and stops and removes it when tb ends.
// It skips tb (fails it under CI) when the binaries are missing, and fails tb
// when the cluster does not start.
func Start(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	c, err := start(opts)
	if errors.Is(err, errMissing) {
		missing(tb, err)
	}
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

// errMissing marks a missing binary or user.
var errMissing = errors.New("pgtest: missing")

func missing(tb testing.TB, err error) {
	tb.Helper()
	msg := fmt.Sprintf("%v: install the Debian package %q (or set %s to a server's URL)", err, Package, EnvDSN)
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s; CI is set, so this fails instead of skipping", msg)
	}
	tb.Skip(msg)
}

// Available reports whether Start can make a cluster here, and why not.
func Available() error {
	_, err := binDir()
	if err != nil {
		return err
	}
	_, err = credential()
	return err
}

var (
	sharedMu     sync.Mutex
	shared       *Cluster
	processWide  bool // set by Main: the shared cluster lives until Main returns
	sharedForAll *Cluster
)

// Main runs the tests of a package (call it from TestMain) with one shared
// cluster for the whole test process instead of one per top-level test:
// [DSN] starts it on first use and Main stops and removes it after the
// tests. It returns the exit code of m.Run.
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int {
	sharedMu.Lock()
	processWide = true
	sharedMu.Unlock()
	code := m.Run()
	sharedMu.Lock()
	c := sharedForAll
	sharedForAll, shared = nil, nil
	if c != nil {
		os.Unsetenv(EnvShared)
	}
	sharedMu.Unlock()
	if c != nil {
		c.Close()
	}
	return code
}

// DSN returns the URL of the server the tests of this process share: the one
// named by [EnvDSN], else the one a parent process published in [EnvShared],
// else a cluster it starts now and publishes in [EnvShared]. That cluster is
// stopped when tb ends (a later call then starts another), or, under [Main],
// when the tests end. It logs which server is used.
func DSN(tb testing.TB) string {
	tb.Helper()
	if url := os.Getenv(EnvDSN); url != "" {
		tb.Logf("pgtest: using the server of %s: %s", EnvDSN, dsn.Redact(url))
		return url
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if dsn := os.Getenv(EnvShared); dsn != "" {
		if shared == nil {
			tb.Logf("pgtest: using the cluster of the parent process (%s): %s", EnvShared, dsn)
		}
		return dsn
	}
	c, err := start(Options{})
	if errors.Is(err, errMissing) {
		missing(tb, err)
	}
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	shared = c
	os.Setenv(EnvShared, c.DSN())
	tb.Logf("pgtest: started a throwaway cluster for this process: %s (data in %s)", c.DSN(), c.data)
	if processWide {
		sharedForAll = c
		return c.DSN()
	}
	tb.Cleanup(func() {
		sharedMu.Lock()
		defer sharedMu.Unlock()
		os.Unsetenv(EnvShared)
		shared = nil
		c.Close()
	})
	return c.DSN()
}

// DSN returns the cluster's URL: user postgres, database postgres, over TCP
// on the loopback address, without TLS.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Port returns the TCP port the cluster listens on.
func (c *Cluster) Port() int { return c.port }

// DataDir returns the cluster's data directory.
func (c *Cluster) DataDir() string { return c.data }

// Log returns the server's log so far.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(c.log)
	return string(b)
}

// Kill stops the server the way a crash would: pg_ctl stop -m immediate,
// which quits every server process at once, without a checkpoint, so that
// the next start recovers from the WAL.
func (c *Cluster) Kill() error { return c.stop("immediate") }

// Stop shuts the server down cleanly (pg_ctl stop -m fast).
func (c *Cluster) Stop() error { return c.stop("fast") }

// Restart starts the server again on the same directory and port, after Kill
// or Stop, and waits until it accepts connections.
func (c *Cluster) Restart() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return errors.New("pgtest: restart of a closed cluster")
	}
	if c.cmd != nil {
		return errors.New("pgtest: restart of a running cluster")
	}
	return c.run()
}

// Close stops the server (fast, or immediate when that fails) and removes
// its directory. It is idempotent.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	c.mu.Unlock()
	if err := c.stop("fast"); err != nil {
		_ = c.stop("immediate")
	}
	c.mu.Lock()
	if c.cmd != nil {
		_ = c.cmd.Process.Kill()
		<-c.done
		c.cmd = nil
	}
	c.mu.Unlock()
	os.RemoveAll(c.base)
}

func (c *Cluster) stop(mode string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	out, err := c.command(filepath.Join(c.bin, "pg_ctl"), "stop", "-D", c.data, "-m", mode, "-w", "-t", "60").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop -m %s: %w: %s", mode, err, out)
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.cmd = nil
	return nil
}

func start(opts Options) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "spent-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c := &Cluster{bin: bin, base: base, data: filepath.Join(base, "data"), sock: filepath.Join(base, "sock"),
		log: filepath.Join(base, "postgres.log"), cred: cred}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(base)
		}
	}()
	if err := os.Mkdir(c.sock, 0o700); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if cred != nil {
		for _, p := range []string{base, c.sock} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgtest: %w", err)
			}
		}
	}
	out, err := c.command(filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %w: %s", err, out)
	}
	settings := DefaultSettings()
	for k, v := range opts.Settings {
		settings[k] = v
	}
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if v := settings[k]; v != "" {
			c.args = append(c.args, "-c", k+"="+v)
		}
	}
	// A free port can be taken between the probe and the bind: try again.
	for attempt := 0; ; attempt++ {
		c.port, err = freePort()
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		err = c.run()
		c.mu.Unlock()
		if err == nil || attempt == 4 || !strings.Contains(c.Log(), "could not bind") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// run starts postgres and waits until it accepts connections. c.mu is held.
func (c *Cluster) run() error {
	logf, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logf.Close()
	args := append([]string{"-D", c.data, "-p", strconv.Itoa(c.port), "-k", c.sock}, c.args...)
	cmd := c.command(filepath.Join(c.bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgconn.Connect(ctx, c.DSN()+"&connect_timeout=2")
		cancel()
		if err == nil {
			conn.Close(context.Background())
			c.cmd, c.done = cmd, done
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("pgtest: postgres exited at start; log:\n%s", tail(c.Log(), 3000))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("pgtest: postgres not ready after 60s: %v; log:\n%s", err, tail(c.Log(), 3000))
		}
	}
}

// command returns a command run as the cluster's user.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if c.cred != nil {
		cmd.SysProcAttr.Credential = c.cred
	}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Dir = c.base
	return cmd
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// binDir finds the directory holding initdb, pg_ctl and postgres.
func binDir() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(m) > 0 {
		sort.Slice(m, func(i, j int) bool { return version(m[i]) > version(m[j]) })
		dirs = append(dirs, m...)
	}
	for _, d := range dirs {
		ok := true
		for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(d, b)); err != nil || fi.IsDir() {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: initdb, pg_ctl and postgres not found in PATH or /usr/lib/postgresql/*/bin", errMissing)
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// credential returns the user to run the cluster as: nil (this process's
// user) unless running as root, then "postgres".
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: running as root, and initdb refuses root, but there is no user \"postgres\" to run it as: %v", errMissing, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgtest: user postgres has uid %q, gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}
