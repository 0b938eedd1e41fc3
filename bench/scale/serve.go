package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spentledger/spent"
	spenthttp "github.com/spentledger/spent/http"
)

// server is one `spent serve` process on a data directory.
type server struct {
	cmd  *exec.Cmd
	url  string
	done chan error
}

// startServe starts `spent serve` on data and returns once /readyz answers
// 200, with the time from exec to then.
func startServe(bin, data, logPath string) (*server, time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, err
	}
	defer logf.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "serve", "--data", data, "--listen", addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	s := &server{cmd: cmd, url: "http://" + addr, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case err := <-s.done:
			return nil, 0, fmt.Errorf("spent serve exited before it was ready (%v): see %s", err, logPath)
		default:
		}
		if resp, err := hc.Get(s.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, time.Since(start), nil
			}
		}
		if time.Since(start) > 2*time.Hour {
			s.kill()
			return nil, 0, fmt.Errorf("spent serve not ready after 2 hours: see %s", logPath)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("spent serve: clean stop: %w", err)
		}
		return nil
	case <-time.After(5 * time.Minute):
		s.kill()
		return errors.New("spent serve did not stop within 5 minutes of SIGTERM")
	}
}

// kill sends SIGKILL and waits for the process to end.
func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.done
}

func (s *server) rss() int64 { return procRSS(s.cmd.Process.Pid) }

// checkServe claims through the server sample live loaded keys (below n)
// and every key of acked, and fails if one is answered fresh.
func checkServe(ctx context.Context, url string, n int64, sample int, acked []string) error {
	c := spenthttp.NewClient(url, spenthttp.ClientConfig{})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	keys := append([]string(nil), acked...)
	for range sample {
		keys = append(keys, keyName(liveKey(rng, n)))
	}
	for _, key := range keys {
		a, err := c.Claim(ctx, spent.Claim{Namespace: namespace, Key: key, Result: []byte{}, ExpiresAt: time.Now().Add(expireLate)})
		if err != nil {
			return fmt.Errorf("check through spent serve, key %s: %w", key, err)
		}
		if a.Outcome == spent.Fresh {
			return fmt.Errorf("check through spent serve: key %s, loaded or acknowledged before the restart, was answered fresh", key)
		}
	}
	return nil
}

// claimUntilKilled claims fresh keys through the server from workers
// goroutines, kills the server with SIGKILL after d, and returns the keys
// whose fresh answer arrived before the kill.
func claimUntilKilled(ctx context.Context, s *server, workers int, d time.Duration) []string {
	c := spenthttp.NewClient(s.url, spenthttp.ClientConfig{})
	var mu sync.Mutex
	var acked []string
	var stop atomic.Bool
	var wg sync.WaitGroup
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	for w := range workers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("x%s-%d-%d", tag, w, i)
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				a, err := c.Claim(cctx, spent.Claim{Namespace: namespace, Key: key, Result: []byte{}, ExpiresAt: time.Now().Add(expireLate)})
				cancel()
				if err != nil {
					return // the kill: this claim's outcome is unknown
				}
				if a.Outcome == spent.Fresh {
					mu.Lock()
					acked = append(acked, key)
					mu.Unlock()
				}
			}
		})
	}
	time.Sleep(d)
	s.kill()
	stop.Store(true)
	wg.Wait()
	log.Printf("  killed spent serve (SIGKILL) with claims in flight; %d claims were acknowledged fresh before", len(acked))
	return acked
}
