package main_test

import (
	"bytes"
	"context"
	"image/png"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium, the browser TestConsoleBrowser drives.
const chromiumPath = "/usr/bin/chromium"

// screenshotPath is the screenshot docs/operations.md shows, rewritten only
// when SPENT_UPDATE_SCREENSHOT=1.
const screenshotPath = "../../docs/img/ui-unknown.png"

// mustChromium skips the test when Debian's chromium is missing, or fails
// it under CI.
func mustChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cmd/spent: %s is missing (%v): install Debian's chromium and chromium-driver (.ci/run does)", chromiumPath, err)
		}
		t.Skipf("cmd/spent: %s is missing: apt-get install chromium chromium-driver to run the browser test of /ui/", chromiumPath)
	}
}

// newBrowser starts a headless chromium with a fresh profile, closed at
// cleanup, and returns its context, bounded by timeout.
func newBrowser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	tctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelT(); cancelB(); cancelA() })
	return tctx
}

// TestConsoleBrowser drives /ui/ in a real browser: it logs in with an
// admin token, resolves one unknown outcome by completing it with a result
// and another by releasing it, and checks through the API that the records
// changed. It takes the screenshot of the docs.
func TestConsoleBrowser(t *testing.T) {
	mustChromium(t)
	s, claim, admin := serveWithTokens(t, `
node = 7

[namespaces.payments]
lease = "300ms"
on_lease_expiry = "hold"

[namespaces.tickets]
mode = "refuse"
retention = "1h"`)

	// Two two-step claims whose 300ms lease runs out: unknown outcomes.
	p1 := parseOne(t, MustRun(t, claim, "claim", "--json", "-n", "payments", "pay-1", "--place", "checkout-eu"))
	p2 := parseOne(t, MustRun(t, claim, "claim", "--json", "-n", "payments", "pay-2", "--place", "checkout-us"))
	MustRun(t, claim, "claim", "-n", "tickets", "ticket-1", "--result", "seat 14F", "--place", "gate-2")
	MustRun(t, claim, "claim", "-n", "tickets", "ticket-1", "--result", "seat 14F", "--place", "gate-3")
	time.Sleep(400 * time.Millisecond)
	if l := parseOne(t, MustRun(t, claim, "claim", "--json", "-n", "payments", "pay-1")); l.Outcome != "in_progress" || !l.Unknown {
		t.Fatalf("claim of pay-1 after its lease: got %+v, want in_progress, unknown", l)
	}

	ctx := newBrowser(t, 2*time.Minute)
	row := func(hash string) string { return `tr[data-hash="` + hash + `"]` }
	text := func(t *testing.T, id string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("text of #%s: %v", id, err)
		}
		return v
	}
	t.Run("LogsIn", func(t *testing.T) {
		err := chromedp.Do(ctx,
			chromedp.Navigate(s.Addr+"/ui/"),
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), "admin-token-0123456789"),
			chromedp.Click(chromedp.ID("login-submit")),
			chromedp.WaitVisible(chromedp.CSS(row(p1.Hash))),
			chromedp.WaitVisible(chromedp.CSS(row(p2.Hash))),
		)
		if err != nil {
			t.Fatalf("log in and list unknown outcomes: %v", err)
		}
		// The script and the style sheet are the page's own files, which the
		// CSP allows: both took effect.
		js, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("html"), "data-js"))
		if err != nil {
			t.Fatal(err)
		}
		bg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("header")).backgroundColor`))
		if err != nil {
			t.Fatal(err)
		}
		if js.Value != "on" || bg != "rgb(32, 48, 63)" {
			t.Fatalf("page under its CSP: got data-js %q and header background %q, want \"on\" and rgb(32, 48, 63)", js.Value, bg)
		}
	})

	t.Run("Screenshot", func(t *testing.T) {
		if os.Getenv("SPENT_UPDATE_SCREENSHOT") == "1" {
			// For the docs, a chart with lines: claims for three sampling
			// intervals (10s each), then the page again.
			traffic(t, s.Addr, testClaimToken, 32*time.Second)
			err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(row(p1.Hash))))
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(row(p1.Hash)+` input[name=result]`), `{"status":"paid"}`)); err != nil {
			t.Fatal(err)
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(shot))
		if err != nil || cfg.Width < 800 || cfg.Height < 400 {
			t.Fatalf("screenshot: got %d bytes, %dx%d, %v; want a PNG of at least 800x400", len(shot), cfg.Width, cfg.Height, err)
		}
		path := filepath.Join(t.TempDir(), "ui-unknown.png")
		if os.Getenv("SPENT_UPDATE_SCREENSHOT") == "1" {
			path = screenshotPath
		}
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%dx%d)", path, cfg.Width, cfg.Height)
	})

	t.Run("CompleteByClicking", func(t *testing.T) {
		err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(row(p1.Hash)+` input[name=result]`), `{"status":"paid"}`),
			chromedp.Click(chromedp.CSS(row(p1.Hash)+` form.complete button`)),
			chromedp.WaitVisible(chromedp.ID("flash")),
			chromedp.WaitNotPresent(chromedp.CSS(row(p1.Hash))),
		)
		if err != nil {
			t.Fatalf("complete pay-1: %v", err)
		}
		contains(t, "flash after complete", text(t, "flash"), p1.Hash, "completed")
		l := parseOne(t, MustRun(t, admin, "get", "--json", "-n", "payments", "pay-1"))
		if l.State != "complete" || l.Result == nil || *l.Result != b64(`{"status":"paid"}`) || l.Seq != p1.Seq {
			t.Fatalf("pay-1 after the click: got %+v, want complete with {\"status\":\"paid\"} and seq %s", l, p1.Seq)
		}
		contains(t, "claim after complete", MustRun(t, claim, "claim", "-n", "payments", "pay-1"), "pay-1: replayed", `\"paid\"`)
	})

	t.Run("ReleaseByClicking", func(t *testing.T) {
		err := chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS(row(p2.Hash)+` form.release button`)),
			chromedp.WaitVisible(chromedp.ID("no-unknown")),
		)
		if err != nil {
			t.Fatalf("release pay-2: %v", err)
		}
		contains(t, "flash after release", text(t, "flash"), p2.Hash, "released")
		if r := Run(t, admin, "get", "-n", "payments", "pay-2"); r.Code != 7 {
			t.Fatalf("get pay-2 after release: exit %d, stderr %q; want 7 (not_found)", r.Code, r.Stderr)
		}
		contains(t, "claim after release", MustRun(t, claim, "claim", "-n", "payments", "pay-2", "--result", "x"), "pay-2: fresh")
	})

	t.Run("LookUpByTyping", func(t *testing.T) {
		err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.ID("lookup-namespace"), "tickets"),
			chromedp.SendKeys(chromedp.ID("lookup-key"), "ticket-1"),
			chromedp.Click(chromedp.ID("lookup-submit")),
			chromedp.WaitVisible(chromedp.ID("record")),
		)
		if err != nil {
			t.Fatalf("look up ticket-1: %v", err)
		}
		if state, result := text(t, "record-state"), text(t, "record-result"); state != "complete" || !strings.Contains(result, "seat 14F") {
			t.Fatalf("ticket-1 looked up: got state %q, result %q; want complete, seat 14F", state, result)
		}
	})

	t.Run("CSPHeader", func(t *testing.T) {
		resp, err := http.Get(s.Addr + "/ui/login")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
		if got := resp.Header.Get("Content-Security-Policy"); got != want {
			t.Fatalf("Content-Security-Policy: got %q, want %q", got, want)
		}
	})

	t.Run("PostWithoutCSRFRefused", func(t *testing.T) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		body := func(resp *http.Response, err error) (int, string) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		_, login := body(c.Get(s.Addr + "/ui/login"))
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(login)
		if m == nil {
			t.Fatalf("login page without a CSRF token:\n%s", login)
		}
		if code, _ := body(c.PostForm(s.Addr+"/ui/login", url.Values{"csrf": {m[1]}, "token": {"admin-token-0123456789"}})); code != http.StatusOK {
			t.Fatalf("login: got %d, want 200 (after the redirect)", code)
		}
		p3 := parseOne(t, MustRun(t, claim, "claim", "--json", "-n", "payments", "pay-3"))
		time.Sleep(400 * time.Millisecond)
		code, page := body(c.PostForm(s.Addr+"/ui/resolve", url.Values{"namespace": {"payments"}, "hash": {p3.Hash}, "seq": {p3.Seq}, "action": {"release"}}))
		if code != http.StatusForbidden || !strings.Contains(page, "csrf_failed") {
			t.Fatalf("resolve without the CSRF token: got %d\n%s\nwant 403 csrf_failed", code, page)
		}
		if l := parseOne(t, MustRun(t, admin, "get", "--json", "-n", "payments", "pay-3")); l.State != "pending" {
			t.Fatalf("pay-3 after a refused resolve: got %s, want pending", l.State)
		}
	})
}

// traffic sends claims to the tickets namespace for d, some fresh and most
// of them refused repeats, at about 40 a second.
func traffic(t *testing.T, addr, token string, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		body := `{"namespace":"tickets","key":"load-` + strconv.Itoa(i%(1+i/40)) + `","result_text":"seat"}`
		req, _ := http.NewRequest("POST", addr+"/v1/claim", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("claim: got %d, want 200", resp.StatusCode)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestConsoleLoopbackOnly checks that without tokens the page, like the
// API, answers only requests addressed to a loopback name, and that
// spent serve sends /ui to /ui/.
func TestConsoleLoopbackOnly(t *testing.T) {
	s := MustServe(t, t.TempDir(), nil, nil)
	get := func(host, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", s.Addr+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name, host, path string
		status           int
	}{
		{"Loopback", "", "/ui/", http.StatusOK},
		{"ReboundName", "attacker.example", "/ui/", http.StatusMisdirectedRequest},
		{"ReboundNameLogin", "attacker.example:7070", "/ui/login", http.StatusMisdirectedRequest},
		{"NoSlash", "", "/ui", http.StatusMovedPermanently},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := get(tc.host, tc.path).StatusCode; got != tc.status {
				t.Fatalf("GET %s with Host %q: got %d, want %d", tc.path, tc.host, got, tc.status)
			}
		})
	}
}
