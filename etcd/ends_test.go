package etcd_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/etcd"
	"github.com/spentledger/spent/internal/etcdtest"
	"github.com/spentledger/spent/internal/syncbuf"
	"github.com/spentledger/spent/internal/waittest"
)

// TestWaitAcrossServers runs the waiting-claim tests with the claim on one
// store and the waiter on another over the same cluster and prefix, as two
// spent servers would: the waiter learns of the end from its watch of the
// pending index.
func TestWaitAcrossServers(t *testing.T) {
	waittest.Run(t, func(t *testing.T) (a, b spent.Store) {
		prefix := prefixFor(t.Name() + time.Now().String())
		return MustOpen(t, testOptions(t, prefix)), MustOpen(t, testOptions(t, prefix))
	})
}

// TestWaitEndsWatchAgain: when the member under the ends watch loses its
// leader (two of three members killed), the watch ends; once the members
// are back the store watches again and calls lost, and the ends written
// afterwards reach it.
func TestWaitEndsWatchAgain(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx := context.Background()
	opts := etcd.DefaultOptions()
	opts.Endpoints = c.Endpoints()
	opts.Prefix = "/ends-test/"
	opts.Logger = quietLogger()
	a := MustOpen(t, opts)
	one := opts
	one.Endpoints = []string{c.Members()[0].Endpoint()}
	var logged syncbuf.Buffer
	one.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	b := MustOpen(t, one)
	ended, lost := make(chan spent.Hash, 16), make(chan struct{}, 16)
	stop, err := b.WatchEnds(ctx, func(h spent.Hash) { ended <- h }, func() { lost <- struct{}{} })
	if err != nil {
		t.Fatalf("WatchEnds: %v", err)
	}
	defer stop()
	for _, i := range []int{1, 2} {
		if err := c.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	// Member 0 notices that it has no leader and cancels the watch.
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(logged.String(), "ends watch ended"); {
		if time.Now().After(deadline) {
			t.Fatalf("the watch did not end without a leader; log:\n%s", logged.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, i := range []int{1, 2} {
		if err := c.Restart(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(60 * time.Second):
		t.Fatal("lost not called after the watch's member lost and regained its leader")
	}
	la, _ := waittest.Ledgers(t, a, a)
	first, err := la.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := la.Complete(ctx, spent.Completion{Namespace: waittest.NSRetake, Key: "k", Seq: first.Record.Seq, Result: []byte("r")}); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case h := <-ended:
			if h == first.Record.Hash {
				return
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no end told after watching again")
		}
	}
}
