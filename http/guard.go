package http

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/door"
	"github.com/spentledger/spent/internal/problem"
)

// DefaultMaxBodies is the default budget of request bodies in flight:
// 128 MiB. A body costs up to about three times its size while it is
// decoded and stored (the body, the decoded results, the store's copy), so
// 128 MiB keeps what bodies in flight can take near 400 MiB.
const DefaultMaxBodies = 128 << 20

// LimitBodies returns h behind a budget of maxBodies bytes of request
// bodies in flight, shared by every request it serves: a request with a
// Content-Length reserves that many bytes, one without (chunked) reserves
// maxBody, the largest body any route accepts, and may send no more. The
// reservation lasts until h returns. A request that does not fit in what is
// left is answered at once with 503, problem code "unavailable" and
// Retry-After, its body unread, instead of being buffered; one whose
// Content-Length is over maxBody gets 413 "too_large". Requests without a
// body reserve nothing, so probes are always answered.
//
// Put it around the whole handler of a server (every route it mounts), as
// `spent serve` does. It needs maxBodies >= maxBody > 0.
func LimitBodies(h http.Handler, maxBodies, maxBody int64) (http.Handler, error) {
	if maxBody <= 0 || maxBodies < maxBody {
		return nil, fmt.Errorf("http: body budget of %d bytes: need at least the largest body, %d", maxBodies, maxBody)
	}
	b, err := door.NewBudget(maxBodies)
	if err != nil {
		return nil, err
	}
	return LimitBodiesIn(h, b, maxBody)
}

// LimitBodiesIn is LimitBodies with a budget shared with the server's
// other doors (the RESP listener's command arguments draw on it too), so
// that what every door holds together stays within it. It needs
// b.Total() >= maxBody > 0.
func LimitBodiesIn(h http.Handler, b *door.Budget, maxBody int64) (http.Handler, error) {
	return LimitBodiesWith(h, BodyLimits{Budget: b, MaxBody: maxBody})
}

// BodyLimits are the bounds of LimitBodiesWith.
type BodyLimits struct {
	// Budget is the budget of bodies in flight (shared with the server's
	// other doors); MaxBody the largest body any route accepts.
	Budget  *door.Budget
	MaxBody int64
	// Unauthenticated, when set, is the part of Budget that requests not
	// Authorized may hold together (a body reserves from both), and
	// bounds each of their bodies too: requests without a valid token
	// (Privacy Pass and e-cash clients, the page's login, wrong tokens)
	// can then never take the budget from those with one.
	Unauthenticated *door.Budget
	// Authorized tells a request that may draw on the whole budget
	// ([Server.Authorized]); nil: every request.
	Authorized func(*http.Request) bool
}

// LimitBodiesWith is LimitBodies with the budget, and the share of it that
// requests without a valid token may hold, of l.
func LimitBodiesWith(h http.Handler, l BodyLimits) (http.Handler, error) {
	b := l.Budget
	if l.MaxBody <= 0 || b == nil || b.Total() < l.MaxBody {
		total := int64(0)
		if b != nil {
			total = b.Total()
		}
		return nil, fmt.Errorf("http: body budget of %d bytes: need at least the largest body, %d", total, l.MaxBody)
	}
	if l.Unauthenticated != nil && (l.Authorized == nil || l.Unauthenticated.Total() > b.Total()) {
		return nil, fmt.Errorf("http: a share for unauthenticated bodies needs Authorized, and at most the budget's %d bytes", b.Total())
	}
	return &bodyBudget{next: h, sem: b, total: b.Total(), maxBody: l.MaxBody, unauth: l.Unauthenticated, authorized: l.Authorized}, nil
}

type bodyBudget struct {
	next           http.Handler
	sem            *door.Budget
	total, maxBody int64
	unauth         *door.Budget
	authorized     func(*http.Request) bool
}

func (b *bodyBudget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := r.ContentLength
	if n == 0 || r.Body == nil || r.Body == http.NoBody {
		b.next.ServeHTTP(w, r)
		return
	}
	var share *door.Budget
	max := b.maxBody
	if b.unauth != nil && !b.authorized(r) {
		share = b.unauth
		max = min(max, share.Total())
	}
	switch {
	case n > max:
		w.Header()["Connection"] = hdrClose
		detail := "body of " + strconv.FormatInt(n, 10) + " bytes: at most " + strconv.FormatInt(max, 10)
		if max < b.maxBody {
			detail += " without a valid bearer token"
		}
		writeProblem(w, spent.ETooLarge, StatusOf(spent.ETooLarge), detail)
		return
	case n < 0:
		n = max
		r.Body = http.MaxBytesReader(w, r.Body, max)
	}
	if share != nil && !share.TryAcquire(n) {
		b.busy(w, "request bodies without a valid bearer token fill their share of the budget, "+strconv.FormatInt(share.Total(), 10)+" bytes")
		return
	}
	if !b.sem.TryAcquire(n) {
		if share != nil {
			share.Release(n)
		}
		b.busy(w, "request bodies in flight fill the budget of "+strconv.FormatInt(b.total, 10)+" bytes")
		return
	}
	defer func() {
		b.sem.Release(n)
		if share != nil {
			share.Release(n)
		}
	}()
	b.next.ServeHTTP(w, r)
}

// busy answers 503 for a body the budget cannot hold. The body stays
// unread: the connection is closed after the answer rather than read it.
func (b *bodyBudget) busy(w http.ResponseWriter, why string) {
	w.Header()["Connection"] = hdrClose
	w.Header()["Retry-After"] = hdrOne
	writeProblem(w, spent.EUnavailable, http.StatusServiceUnavailable, "server busy: "+why+"; retry")
}

// Shared header values of the guards.
var (
	hdrClose = []string{"close"}
	hdrOne   = []string{"1"}
)

// writeProblem writes a problem document outside a Server's exchange.
func writeProblem(w http.ResponseWriter, code string, status int, detail string) {
	problem.Write(w, status, problem.Append(nil, ProblemType, code, titleOf(code), status, detail))
}

// LoopbackOnly returns h behind a check of the Host header: a request whose
// Host is not a loopback name or address is answered 421, problem code
// "host_not_allowed". Loopback means localhost, a name under .localhost,
// an address in 127.0.0.0/8 or ::1, each with or without a port.
//
// A server without authentication listens on loopback only, but a web page
// can still reach it: it rebinds its own DNS name to 127.0.0.1, and the
// browser then sends its requests, with that name as Host, to the local
// server. Checking the Host refuses them. `spent serve` applies it when no
// tokens are configured.
func LoopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsLoopbackHost(r.Host) {
			writeProblem(w, spent.EHostNotAllowed, StatusOf(spent.EHostNotAllowed),
				"Host "+spent.QuoteInput(r.Host)+" is not a loopback name or address: without tokens, the server answers only requests addressed to localhost, 127.0.0.1 or [::1]")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// IsLoopbackHost reports whether the value of a Host header names a
// loopback host: localhost, a name under .localhost, an address in
// 127.0.0.0/8 or ::1, each with or without a port. Names are compared
// without regard to case and one trailing dot.
func IsLoopbackHost(host string) bool {
	if h, port, err := net.SplitHostPort(host); err == nil {
		if !validPort(port) {
			return false
		}
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Zone() == "" && a.Unmap().IsLoopback()
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	return name == "localhost" || (strings.HasSuffix(name, ".localhost") && validName(name))
}

// validPort reports whether p is a port number.
func validPort(p string) bool {
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n > 0 && p[0] != '+'
}

// validName reports whether name is made of DNS labels: letters, digits and
// hyphens, separated by single dots.
func validName(name string) bool {
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
