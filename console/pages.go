package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"html/template"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/internal/grant"
)

// funcs are the templates' functions.
var funcs = template.FuncMap{
	"outcomes": func() []spent.Outcome { return outcomes[:] },
	"time":     formatTime,
	"row": func(r recordView, csrf string) unknownRow {
		return unknownRow{R: r, CSRF: csrf}
	},
}

// unknownRow is an unknown outcome's line, with the CSRF token of its
// forms.
type unknownRow struct {
	R    recordView
	CSRF string
}

// formatTime writes t in UTC, to the millisecond; the zero time as "–".
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// view is what a page shows. Each page uses the fields it needs.
type view struct {
	Title    string
	Label    string
	LoggedIn bool // a logout button: auth is on and the visitor logged in
	CSRF     string
	Flash    string

	// The error page.
	Status  int
	Code    string
	Message string
	WayOut  string

	// The main page.
	Since       string
	Interval    string
	Namespaces  []nsRow
	Rates       []rateRow
	Unknown     []recordView
	UnknownMore bool
	MaxUnknown  int
	Lookup      *recordView
	LookupNS    string
	LookupMiss  string
}

// nsRow is one namespace's line on the main page.
type nsRow struct {
	Name          string
	Mode          spent.Mode
	Retention     time.Duration
	Lease         time.Duration
	OnLeaseExpiry spent.LeaseExpiry
	MaxExpiry     time.Duration
	StoreRawKey   bool
	Counts        []string
	Unknown       string
}

// recordView is a record as the page shows it.
type recordView struct {
	Namespace   string
	Hash        string
	Key         string
	State       string
	UnknownOut  bool // a pending record of a hold namespace whose lease ran out
	FirstSeen   string
	Place       string
	Node        uint32
	Seq         string
	ExpiresAt   string
	LeaseUntil  string
	Fingerprint string
	ResultLen   int
	Preview     string
	PreviewHex  bool
	Truncated   bool
}

// previewLen is how many bytes of a result the lookup shows.
const previewLen = 256

func (c *Console) recordView(r *spent.Record, now time.Time) recordView {
	v := recordView{
		Namespace: r.Namespace, Hash: r.Hash.String(), Key: r.RawKey, State: r.State.String(),
		FirstSeen: formatTime(r.FirstSeen), Place: r.Place, Node: r.Seq.Node, Seq: r.Seq.String(),
		ExpiresAt: formatTime(r.ExpiresAt), LeaseUntil: formatTime(r.LeaseUntil),
		Fingerprint: hex.EncodeToString(r.Fingerprint), ResultLen: len(r.Result),
	}
	if p, ok := c.cfg.Ledger.Policy(r.Namespace); ok && p.OnLeaseExpiry == spent.LeaseExpiryHold {
		v.UnknownOut = r.LeaseExpiredAt(now)
	}
	res := r.Result
	if len(res) > previewLen {
		res, v.Truncated = res[:previewLen], true
	}
	if v.Truncated {
		// Cut before a rune the preview's end splits.
		for cut := 0; cut < utf8.UTFMax-1 && len(res) > 0 && !utf8.Valid(res); cut++ {
			res = res[:len(res)-1]
		}
	}
	if utf8.Valid(res) {
		v.Preview = string(res)
	} else {
		v.Preview, v.PreviewHex = hex.EncodeToString(res), true
	}
	return v
}

// render writes page p with v, with status.
func (c *Console) render(w http.ResponseWriter, status int, p string, v *view) {
	v.Label = c.cfg.Label
	var b bytes.Buffer
	if err := c.pages[p].ExecuteTemplate(&b, "layout", v); err != nil {
		c.log.Error("console: page did not render", "page", p, "err", err)
		http.Error(w, "console: page did not render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// fail renders the error page: the status, a code, the cause and the way
// out.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, code, msg, wayOut string) {
	v := &view{Title: "Error", Status: status, Code: code, Message: msg, WayOut: wayOut}
	if ss := c.sessions.get(r, c.cfg.Now()); ss != nil && ss.grant != nil {
		v.LoggedIn, v.CSRF = !c.authOff(), ss.csrf
	}
	c.render(w, status, "error", v)
}

// wayOut says what to do about a ledger error, by code.
var wayOut = map[string]string{
	spent.ENotFound:         "The record is gone: it was resolved by someone else, released, or it expired. Reload the page.",
	spent.ENotPending:       "The record is complete already: someone resolved it. Reload the page to see it.",
	spent.ESeqMismatch:      "The record is no longer the one the page listed: another claim wrote it. Reload the page and look again.",
	spent.ETooLarge:         "Store a result this large with spent unknown resolve --result-file.",
	spent.EUnavailable:      "The store could not be read or written: retry when it is back (the server's log names the cause).",
	spent.EUnknownNamespace: "Choose a namespace the server is configured with.",
	spent.EKeyTooLong:       "Keys are at most " + strconv.Itoa(spent.MaxKeyLen) + " bytes.",
	spent.EForbidden:        "Log in with an admin token of this namespace.",
}

// failErr renders the error page for a ledger error.
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, err error) {
	code := spent.ErrorCode(err)
	msg := "internal error: the server's log names the cause"
	var e *spent.Error
	if errors.As(err, &e) {
		msg = e.Message
	} else {
		c.log.Error("console: ledger failed", "err", err)
	}
	way, ok := wayOut[code]
	if !ok {
		way = "Go back and try again."
	}
	c.fail(w, r, sphttp.StatusOf(code), code, msg, way)
}

// operator returns the session of a visitor allowed to see the pages: one
// logged in or, with auth off, anyone (a session is started for the CSRF
// token of the forms). Otherwise it redirects to the login page and
// reports false.
func (c *Console) operator(w http.ResponseWriter, r *http.Request) (*session, bool) {
	now := c.cfg.Now()
	ss := c.sessions.get(r, now)
	if ss != nil && ss.grant != nil {
		return ss, true
	}
	if !c.authOff() {
		http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
		return nil, false
	}
	ss, id, err := c.sessions.create(grant.Open, now, c.cfg.SessionLife)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, spent.EInternal, err.Error(), "Retry; the server's log may say more.")
		return nil, false
	}
	c.setCookie(w, id, ss)
	return ss, true
}

// form reads a POST's form, within MaxForm bytes, and returns its session
// once the form's CSRF token matches. login asks for a session that has
// logged in (or any session with auth off). Otherwise it renders the error
// page and reports false.
func (c *Console) form(w http.ResponseWriter, r *http.Request, login bool) (*session, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, c.cfg.MaxForm)
	if err := r.ParseForm(); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			c.fail(w, r, http.StatusRequestEntityTooLarge, spent.ETooLarge, "form of more than "+strconv.FormatInt(c.cfg.MaxForm, 10)+" bytes",
				"Shorten the result, or store it with spent unknown resolve --result-file.")
			return nil, false
		}
		c.fail(w, r, http.StatusBadRequest, spent.EInvalid, "form unreadable: "+err.Error(), "Submit the form from the console's page.")
		return nil, false
	}
	ss := c.sessions.get(r, c.cfg.Now())
	if ss == nil {
		c.fail(w, r, http.StatusForbidden, codeSession, "no session: it expired, the server restarted, or cookies are off",
			"Open the console again (and log in), then repeat.")
		return nil, false
	}
	if !ss.checkCSRF(r.PostForm.Get("csrf")) {
		c.fail(w, r, http.StatusForbidden, codeCSRF, "the form's CSRF token is missing or is not this session's",
			"Reload the page and submit the form from it.")
		return nil, false
	}
	if login && ss.grant == nil {
		c.fail(w, r, http.StatusUnauthorized, spent.EUnauthorized, "not logged in", "Log in with an admin token.")
		return nil, false
	}
	return ss, true
}

// adminNamespaces returns the namespaces where g has the admin scope.
func (c *Console) adminNamespaces(g *grant.Grant) []string {
	var out []string
	for _, ns := range c.cfg.Ledger.Namespaces() {
		if g.Allows(ns, true) {
			out = append(out, ns)
		}
	}
	return out
}

// index serves the main page.
func (c *Console) index(w http.ResponseWriter, r *http.Request) {
	ss, ok := c.operator(w, r)
	if !ok {
		return
	}
	v, err := c.mainView(r.Context(), ss)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, http.StatusOK, "index", v)
}

// mainView gathers the main page: namespaces, counts, rates and unknown
// outcomes.
func (c *Console) mainView(ctx context.Context, ss *session) (*view, error) {
	now := c.cfg.Now()
	v := &view{
		Title: "Console", LoggedIn: !c.authOff(), CSRF: ss.csrf, Flash: c.sessions.takeFlash(ss),
		Since: formatTime(c.started), Interval: c.cfg.SampleInterval.String(), MaxUnknown: MaxUnknown,
		Rates: rateTable(c.sampler.samples()),
	}
	counts, err := claimCounts(c.cfg.Gatherer)
	if err != nil {
		c.log.Warn("console: metrics unreadable", "err", err)
	}
	var unknown []spent.Record
	for _, ns := range c.adminNamespaces(ss.grant) {
		p, _ := c.cfg.Ledger.Policy(ns)
		row := nsRow{Name: ns, Mode: p.Mode, Retention: p.Retention, Lease: p.Lease, OnLeaseExpiry: p.OnLeaseExpiry,
			MaxExpiry: p.ExpiryLimit(), StoreRawKey: p.StoreRawKey, Unknown: "–"}
		cs := counts[ns]
		for i := range outcomes {
			n := 0.0
			if cs != nil {
				n = cs[i]
			}
			row.Counts = append(row.Counts, strconv.FormatFloat(n, 'f', -1, 64))
		}
		if p.OnLeaseExpiry == spent.LeaseExpiryHold {
			recs, err := c.cfg.Ledger.Unknown(ctx, ns, MaxUnknown+1)
			if err != nil {
				return nil, err
			}
			row.Unknown = strconv.Itoa(len(recs))
			if len(recs) > MaxUnknown {
				row.Unknown = strconv.Itoa(MaxUnknown) + "+"
				v.UnknownMore = true
			}
			unknown = append(unknown, recs...)
		}
		v.Namespaces = append(v.Namespaces, row)
	}
	unknown = spent.OldestLeaseFirst(unknown, MaxUnknown)
	if len(unknown) == MaxUnknown {
		v.UnknownMore = true
	}
	for i := range unknown {
		v.Unknown = append(v.Unknown, c.recordView(&unknown[i], now))
	}
	return v, nil
}

// loginPage serves the login form; with auth off, or logged in already,
// it sends the visitor to the main page.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	now := c.cfg.Now()
	ss := c.sessions.get(r, now)
	if c.authOff() || ss != nil && ss.grant != nil {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	if ss == nil {
		var id string
		var err error
		if ss, id, err = c.sessions.create(nil, now, anonLife); err != nil {
			c.fail(w, r, http.StatusInternalServerError, spent.EInternal, err.Error(), "Retry; the server's log may say more.")
			return
		}
		c.setCookie(w, id, ss)
	}
	c.render(w, http.StatusOK, "login", &view{Title: "Log in", CSRF: ss.csrf})
}

// login checks the token of the login form and, for an admin token,
// replaces the visitor's session with a logged-in one.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.authOff() {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	ss, ok := c.form(w, r, false)
	if !ok {
		return
	}
	tok := r.PostForm.Get("token")
	if len(tok) > MaxTokenLen {
		c.refuseLogin(w, r, "token too long")
		return
	}
	g := c.grants.Match(tok)
	if g == nil {
		c.refuseLogin(w, r, "unknown token")
		return
	}
	if len(c.adminNamespaces(g)) == 0 {
		c.refuseLogin(w, r, "token without the admin scope")
		return
	}
	c.sessions.drop(ss)
	ns, id, err := c.sessions.create(g, c.cfg.Now(), c.cfg.SessionLife)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, spent.EInternal, err.Error(), "Retry; the server's log may say more.")
		return
	}
	c.setCookie(w, id, ns)
	c.log.Info("console: operator logged in", "remote", r.RemoteAddr)
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// refuseLogin answers a refused login, after the delay the throttle gives
// its address, with the one answer every refused token gets: the page says
// neither whether the server knows the token nor what it lacks, which would
// let a visitor sort guessed tokens. The throttle logs reason (unknown
// token, token without the admin scope, token too long) for the operator.
func (c *Console) refuseLogin(w http.ResponseWriter, r *http.Request, reason string) {
	c.sleep(r.Context(), c.throttle.Failed("console", r.RemoteAddr, reason))
	c.fail(w, r, http.StatusUnauthorized, spent.EUnauthorized, "login refused: not an admin token of this server",
		"Log in with a token from the server's configuration whose scopes include admin.")
}

// logout ends the session.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	ss, ok := c.form(w, r, true)
	if !ok {
		return
	}
	c.sessions.drop(ss)
	c.clearCookie(w)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// resolve completes or releases an unknown outcome, as `spent unknown
// resolve --seq` does: forced, addressed by hash, only while the record
// carries the seq the page listed.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	ss, ok := c.form(w, r, true)
	if !ok {
		return
	}
	f := r.PostForm
	ns := f.Get("namespace")
	if !ss.grant.Allows(ns, true) {
		c.failErr(w, r, grant.Forbidden(ns, true))
		return
	}
	h, err := spent.ParseHash(f.Get("hash"))
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, spent.EInvalid, "hash: "+err.Error(), "Submit the form from the console's page.")
		return
	}
	seq, err := spent.ParseSeq(f.Get("seq"))
	if err != nil || seq.IsZero() {
		c.fail(w, r, http.StatusBadRequest, spent.EInvalid, "seq "+spent.QuoteInput(f.Get("seq"))+": want node:counter", "Submit the form from the console's page.")
		return
	}
	var did string
	switch f.Get("action") {
	case "complete":
		_, err = c.cfg.Ledger.Complete(r.Context(), spent.Completion{Namespace: ns, Hash: h, Seq: seq, Result: []byte(f.Get("result")), Force: true})
		did = "completed"
	case "release":
		if f.Get("result") != "" {
			c.fail(w, r, http.StatusBadRequest, spent.EInvalid, "a release takes no result", "Clear the result field, or complete instead.")
			return
		}
		err = c.cfg.Ledger.Release(r.Context(), spent.Release{Namespace: ns, Hash: h, Seq: seq, Force: true})
		did = "released"
	default:
		c.fail(w, r, http.StatusBadRequest, spent.EInvalid, "action "+spent.QuoteInput(f.Get("action"))+": want complete or release", "Press Complete or Release on the console's page.")
		return
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.log.Info("console: unknown outcome resolved", "action", did, "namespace", ns, "hash", h.String(), "seq", seq.String(), "remote", r.RemoteAddr)
	c.sessions.setFlash(ss, "Unknown outcome "+h.String()+" (seq "+seq.String()+") in "+ns+": "+did+".")
	http.Redirect(w, r, Prefix+"#unknown", http.StatusSeeOther)
}

// lookup shows the record of one key, hashed as the API hashes it.
func (c *Console) lookup(w http.ResponseWriter, r *http.Request) {
	ss, ok := c.form(w, r, true)
	if !ok {
		return
	}
	ns, key := r.PostForm.Get("namespace"), r.PostForm.Get("key")
	if !ss.grant.Allows(ns, true) {
		c.failErr(w, r, grant.Forbidden(ns, true))
		return
	}
	rec, err := c.cfg.Ledger.Get(r.Context(), ns, key)
	if err != nil && spent.ErrorCode(err) != spent.ENotFound {
		c.failErr(w, r, err)
		return
	}
	v, verr := c.mainView(r.Context(), ss)
	if verr != nil {
		c.failErr(w, r, verr)
		return
	}
	v.LookupNS = ns
	if err != nil {
		v.LookupMiss = "No live record of this key in " + ns + ": it was never claimed, was released, or expired."
	} else {
		rv := c.recordView(&rec, c.cfg.Now())
		rv.Key = key // the operator typed it; no other key is shown unless stored
		v.Lookup = &rv
	}
	c.render(w, http.StatusOK, "index", v)
}
