package door

import (
	"context"
	"net"
	"net/http"
	"sync"
)

type connKey struct{}

// FromContext returns the admitted connection a request arrived on, as
// [Conns.Serve] puts it in the request's context, or nil.
func FromContext(ctx context.Context) *Conn {
	c, _ := ctx.Value(connKey{}).(*Conn)
	return c
}

// Serve sets the hooks of srv (ConnContext and ConnState, which must be
// unset) so that its connections are admitted by cs: a connection that
// finds the listener full, and no idle unauthenticated connection to close
// in its place, is closed before its first request is read; a connection is
// busy while it serves requests; a handler signs its connection in with
// FromContext(r.Context()).SignIn() once a request carried a valid token
// (the HTTP API does), so that a connection which never does counts against
// the unauthenticated share. It also bounds the header block of a request
// (MaxHeaderBytes), which every request sends before its token is checked.
//
// Serve wraps srv.Handler (set it first): a connection that has not signed
// in counts as busy only while a handler serves its request. Once the
// handler has returned, net/http may still wait for the rest of a body the
// handler left unread (up to ReadTimeout) before it answers, or hold a
// closing connection open for half a second; it serves the client nothing
// more, so from then on the connection may be closed to make room (an
// answer that closes the connection is flushed first, so that it is not
// cut off). Otherwise a burst of requests refused before their bodies
// were read would fill the unauthenticated share with connections that no
// newcomer could replace, and keep every newcomer out meanwhile.
func (cs *Conns) Serve(srv *http.Server) {
	var mu sync.Mutex
	byConn := map[net.Conn]*Conn{}
	srv.MaxHeaderBytes = MaxHeaderBytes
	h := srv.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		c := FromContext(r.Context())
		if c == nil || c.signed.Load() || r.ProtoMajor != 1 {
			// (Signed-in connections are never closed to make room;
			// an HTTP/2 connection may serve other requests still.)
			return
		}
		if w.Header().Get("Connection") == "close" {
			http.NewResponseController(w).Flush()
		}
		c.setBusy(false)
	})
	srv.ConnContext = func(ctx context.Context, nc net.Conn) context.Context {
		c, err := cs.Admit(nc)
		if err != nil {
			cs.mu.Lock()
			cs.refused++
			cs.mu.Unlock()
			nc.Close()
			return ctx
		}
		mu.Lock()
		byConn[nc] = c
		mu.Unlock()
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.ConnState = func(nc net.Conn, st http.ConnState) {
		mu.Lock()
		c := byConn[nc]
		if st == http.StateClosed || st == http.StateHijacked {
			delete(byConn, nc)
		}
		mu.Unlock()
		if c == nil {
			return
		}
		switch st {
		case http.StateActive:
			c.setBusy(true)
		case http.StateIdle:
			c.setBusy(false)
		case http.StateClosed, http.StateHijacked:
			c.Done()
		}
	}
}

// setBusy sets the busy state (HTTP's connection states, which do not nest).
func (c *Conn) setBusy(b bool) {
	c.cs.mu.Lock()
	if b {
		c.busy = 1
	} else {
		c.busy = 0
	}
	c.cs.mu.Unlock()
}

// Refused returns how many connections were closed at once because the
// listener was full (by Serve's hook; a server with its own accept loop
// counts its own).
func (cs *Conns) Refused() int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.refused
}
