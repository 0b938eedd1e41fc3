package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/door"
	sphttp "github.com/spentledger/spent/http"
)

// TestMaxWaitConfig: max_wait defaults to the http package's bound, is set
// by the file, is refused outside (0, spent.MaxWait], and the HTTP server's
// write timeout outlasts it.
func TestMaxWaitConfig(t *testing.T) {
	if got := mustParse(t, "", nil).MaxWait; got != sphttp.DefaultMaxWait {
		t.Fatalf("default max_wait: got %v, want %v", got, sphttp.DefaultMaxWait)
	}
	if got := mustParse(t, "max_wait = \"2m\"\n", nil).MaxWait; got != 2*time.Minute {
		t.Fatalf("max_wait = \"2m\": got %v", got)
	}
	for _, doc := range []string{"max_wait = \"0s\"\n", "max_wait = \"-1s\"\n", "max_wait = \"11m\"\n"} {
		cfg := defaultServeConfig()
		err := cfg.parse(doc, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), "max_wait = ") || !strings.Contains(err.Error(), "at most 10m0s") {
			t.Errorf("parse %q: got error %v, want one naming max_wait and its bound", doc, err)
		}
	}
	dr, err := newDoors(defaultServeConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wt := door.DefaultWriteTimeout
	for _, c := range []struct{ wait, want time.Duration }{{time.Second, wt}, {30 * time.Second, wt}, {10 * time.Minute, 10*time.Minute + writeWaitMargin}} {
		if got := newHTTPServer(nil, c.wait, dr, slog.New(slog.DiscardHandler)).WriteTimeout; got != c.want {
			t.Errorf("max_wait %v: write timeout %v, want %v", c.wait, got, c.want)
		}
	}
}
