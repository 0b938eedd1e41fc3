package resp

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/door"
	"github.com/spentledger/spent/internal/grant"
)

// conn is one client connection. Its goroutine reads a batch of commands
// (the first, then every further one already received, up to MaxPipeline),
// decides them in order, and writes their replies in order.
type conn struct {
	s        *Server
	nc       net.Conn
	entry    *door.Conn // its admission (package door)
	r        *reader
	w        writer
	id       int64
	name     string       // CLIENT SETNAME, the claims' place
	g        *grant.Grant // nil until AUTH when tokens are configured
	stopping atomic.Bool
	batch    [][][]byte
	items    []pendingClaim // claims, reused from run to run
	batchOf  []spent.Claim
	at       []int

	// Deadlines (see deadlineReader): the sign-in's, the batch's start,
	// whether a batch is being read, and the read and write deadlines set
	// last.
	authDeadline time.Time
	batchStart   time.Time
	midBatch     bool
	readDL       time.Time
	readKind     deadlineKind
	writeDL      time.Time

	// held is what the batch's arguments reserved of the server's budget of
	// bytes in flight, and batchBytes what they take in all; replyHeld what
	// the values in the replies not written yet reserved of it.
	held, batchBytes, replyHeld int64

	// fitAfter and fitting are the reply's length before a reserved read
	// and what the read reserved (see fitReply).
	fitAfter int
	fitting  int64

	broken     bool // a write failed: replies are dropped, commands still decided
	closeAfter bool // too many refused sign-ins: close once the replies are written
}

// deadlineKind says which deadline a connection's read is under.
type deadlineKind uint8

const (
	deadlineNone deadlineKind = iota
	deadlineIdle              // waiting for the next command (idle_timeout)
	deadlineAuth              // not signed in (auth_timeout from the connection's start)
	deadlineRead              // reading a batch (read_timeout from its first byte)
)

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, id: s.ids.Add(1)}
	c.r = newReader(deadlineReader{c}, s.preAuth)
	return c
}

// deadlineReader reads the connection under the deadline its state calls
// for: the sign-in's while it has not signed in, read_timeout from the
// first byte of a batch while the batch is read, idle_timeout while it
// waits for the next command. It sets the deadline only when it changes
// (the idle one once it is half spent), so a busy connection does not pay
// for it on every read.
type deadlineReader struct{ c *conn }

func (d deadlineReader) Read(p []byte) (int, error) {
	c := d.c
	now := time.Now()
	lim := &c.s.lim
	var dl time.Time
	var kind deadlineKind
	switch {
	case c.midBatch:
		dl, kind = c.batchStart.Add(lim.ReadTimeout), deadlineRead
		if c.g == nil && c.authDeadline.Before(dl) {
			dl, kind = c.authDeadline, deadlineAuth
		}
	case c.g == nil:
		dl, kind = c.authDeadline, deadlineAuth
	default:
		dl, kind = now.Add(lim.IdleTimeout), deadlineIdle
	}
	if kind != c.readKind || (kind == deadlineIdle && c.readDL.Sub(now) < lim.IdleTimeout/2) || (kind != deadlineIdle && !dl.Equal(c.readDL)) {
		c.nc.SetReadDeadline(dl)
		c.readDL, c.readKind = dl, kind
		if c.stopping.Load() {
			// stop raced with this deadline: keep stop's.
			c.nc.SetReadDeadline(now)
		}
	}
	return c.nc.Read(p)
}

// stop asks the connection to end after the batch it is deciding: a read
// blocked waiting for a command returns at once.
func (c *conn) stop() {
	c.stopping.Store(true)
	c.nc.SetReadDeadline(time.Now())
}

// flush writes the replies built so far, within write_timeout: a client
// that does not read its replies is cut off when it passes. After a failed
// write the connection is broken: its replies are dropped, while the
// commands it sent are still decided.
func (c *conn) flush() error {
	if len(c.w.b) == 0 {
		return nil
	}
	var err error
	if c.broken {
		err = net.ErrClosed
	} else {
		now := time.Now()
		if wt := c.s.lim.WriteTimeout; c.writeDL.Sub(now) < wt/2 {
			c.writeDL = now.Add(wt)
			c.nc.SetWriteDeadline(c.writeDL)
		}
		_, err = c.nc.Write(c.w.b)
		if err != nil {
			c.broken = true
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.s.m.refused.WithLabelValues("write_timeout").Inc()
				c.s.log.Debug("resp: a client did not read its replies within write_timeout: closing it", "client", c.nc.RemoteAddr().String())
			}
		}
	}
	if cap(c.w.b) > maxKeptReply {
		c.w.b = nil
	} else {
		c.w.b = c.w.b[:0]
	}
	c.s.budget.Release(c.replyHeld)
	c.replyHeld = 0
	return err
}

// readReserved reserves, of the server's budget of bytes in flight, room
// for the value a read may return (max_bulk) before it reads it, and writes
// -UNAVAILABLE when there is none: the values in the replies of every
// connection, which a client that does not read keeps in memory until
// write_timeout, then hold at most the budget together. Once the reply is
// built, the reservation shrinks to the bytes it added (see fitReply);
// flush gives it back.
func (c *conn) readReserved() bool {
	n := int64(c.s.cfg.MaxBulk)
	if !c.s.budget.TryAcquire(n) {
		c.s.m.refused.WithLabelValues("busy").Inc()
		c.w.fail("UNAVAILABLE", fmt.Sprintf("server busy: the requests and replies in flight fill the budget of %d bytes (max_bodies); nothing was read; retry", c.s.budget.Total()))
		return false
	}
	c.replyHeld += n
	c.fitAfter = len(c.w.b)
	c.fitting = n
	return true
}

// fitReply shrinks the reservation of the read just answered to the bytes
// its reply took.
func (c *conn) fitReply() {
	if c.fitting == 0 {
		return
	}
	used := min(int64(len(c.w.b)-c.fitAfter), c.fitting)
	if used < 0 {
		used = 0
	}
	c.s.budget.Release(c.fitting - used)
	c.replyHeld -= c.fitting - used
	c.fitting = 0
}

// maxKeptReply is the largest reply buffer a connection keeps for its next
// batch: an idle connection holds no more.
const maxKeptReply = 64 << 10

// spill writes the replies built so far once they pass max_reply, so that
// a batch whose replies are large (reads of large values) is written as it
// is decided rather than held.
func (c *conn) spill() {
	if len(c.w.b) >= c.s.cfg.MaxReply {
		c.flush()
	}
}

func (c *conn) serve() {
	c.s.m.conns.Inc()
	defer func() {
		c.s.m.conns.Dec()
		c.nc.Close()
		c.s.forget(c)
	}()
	if len(c.s.grants) == 0 {
		c.g = grant.Open
		c.entry.SignIn()
	} else {
		c.authDeadline = time.Now().Add(c.s.lim.AuthTimeout)
	}
	for !c.stopping.Load() {
		err := c.read()
		quit := len(c.batch) > 0 && c.exec()
		c.endBatch()
		if quit {
			c.flush()
			return
		}
		if err != nil {
			c.readFailed(err)
			if c.flush() == nil && !ioErr(err) {
				c.linger()
			}
			return
		}
		if err := c.flush(); err != nil {
			return
		}
		if c.closeAfter {
			c.linger()
			return
		}
	}
}

// lingerTime and lingerBytes bound what linger reads of a client's
// unread commands before it closes.
const (
	lingerTime  = 500 * time.Millisecond
	lingerBytes = 64 << 10
)

// linger ends a connection that the server closes while its client may
// still be sending (after a protocol error, or max_auth_failures): it
// closes the writing side, so that the client reads the last reply and
// then the end, and discards what the client still sends for a moment,
// since closing a socket with unread bytes resets it, and a reset can make
// the client lose the last reply it had not read yet.
func (c *conn) linger() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	c.nc.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, c.nc, lingerBytes)
}

// readFailed answers the error that ended the connection's reading, when
// it calls for an answer.
func (c *conn) readFailed(err error) {
	var pe *protocolError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		c.s.m.refused.WithLabelValues("protocol").Inc()
		c.w.fail("ERR", pe.Error())
	case c.stopping.Load():
	case errors.As(err, &ne) && ne.Timeout():
		switch c.readKind {
		case deadlineAuth:
			c.s.m.refused.WithLabelValues("auth_timeout").Inc()
			c.w.fail("NOAUTH", fmt.Sprintf("Authentication required: no AUTH within %v of connecting (auth_timeout): closing the connection", c.s.lim.AuthTimeout))
		case deadlineRead:
			c.s.m.refused.WithLabelValues("read_timeout").Inc()
			c.w.fail("ERR", fmt.Sprintf("a command took more than %v to arrive (read_timeout): closing the connection", c.s.lim.ReadTimeout))
		default:
			c.s.m.refused.WithLabelValues("idle").Inc()
		}
	case !ioErr(err):
		c.s.log.Debug("resp: read", "client", c.nc.RemoteAddr().String(), "err", err)
	}
}

// read reads the next batch: one command, waiting for it, then those that
// have already arrived, up to MaxPipeline commands or 4 × MaxBulk bytes.
// Before the connection signs in, a batch is one command, under the
// limits of an unauthenticated client (door.PreAuthArgs and
// door.PreAuthFrame), so that what follows AUTH is read under the token's.
// A command whose arguments the budget of bytes in flight cannot hold is
// read, dropped, and answered -UNAVAILABLE (a nil entry of the batch); it
// ends the batch.
func (c *conn) read() error {
	c.batch = c.batch[:0]
	if _, err := c.r.br.Peek(1); err != nil {
		return err
	}
	c.midBatch, c.batchStart = true, time.Now()
	defer func() { c.midBatch = false }()
	preAuth := c.g == nil
	if preAuth {
		c.r.lim, c.r.grant = c.s.preAuth, nil
	} else {
		c.r.lim, c.r.grant = c.s.full, c.reserve
	}
	size := 0
	for len(c.batch) < c.s.cfg.MaxPipeline && size <= 4*c.s.cfg.MaxBulk {
		if len(c.batch) > 0 && (preAuth || !c.r.buffered()) {
			break
		}
		var args [][]byte
		if n := len(c.batch); n < cap(c.batch) {
			args = c.batch[:n+1][n]
		}
		args, n, err := c.r.command(args)
		if errors.Is(err, errBusy) {
			c.batch = append(c.batch, nil)
			break
		}
		if err != nil {
			return err
		}
		size += n
		if len(args) > 0 {
			c.batch = append(c.batch, args)
		}
	}
	return nil
}

// freeBytes are the bytes of a batch's arguments a connection holds without
// drawing on the server's budget of bytes in flight: claims and reads of
// short keys never touch it.
const freeBytes = 16 << 10

// reserve accounts for an argument of n bytes, drawing on the server's
// budget past freeBytes a batch; it reports whether the argument fits.
func (c *conn) reserve(n int) bool {
	if c.batchBytes+int64(n) <= freeBytes {
		c.batchBytes += int64(n)
		return true
	}
	if !c.s.budget.TryAcquire(int64(n)) {
		c.s.m.refused.WithLabelValues("busy").Inc()
		return false
	}
	c.held += int64(n)
	c.batchBytes += int64(n)
	return true
}

// endBatch gives back what the batch's arguments reserved, and lets go of
// the arguments themselves: the batch's slices are kept for the next one,
// and must not keep a large argument alive while the connection is idle.
func (c *conn) endBatch() {
	c.s.budget.Release(c.held)
	c.held, c.batchBytes = 0, 0
	for _, args := range c.batch {
		clear(args)
	}
}

// exec decides the batch in order. A run of claims (SET … NX, SETNX,
// SPENT.CLAIM) goes to the ledger as one batch, written by one store
// write. It reports whether the client asked to quit.
func (c *conn) exec() bool {
	for i := 0; i < len(c.batch); {
		if c.batch[i] == nil {
			c.s.m.command("other", false)
			c.w.fail("UNAVAILABLE", fmt.Sprintf("server busy: the commands in flight fill the budget of %d bytes (max_bodies); this command was dropped unread; retry", c.s.budget.Total()))
			i++
			continue
		}
		name := upper(c.batch[i][0])
		if isClaim(name) {
			j := i + 1
			for j < len(c.batch) && isClaim(upper(c.batch[j][0])) {
				j++
			}
			c.claims(c.batch[i:j])
			i = j
			continue
		}
		if c.one(name, c.batch[i]) {
			return true
		}
		c.fitReply()
		c.spill()
		i++
	}
	return false
}

func isClaim(name string) bool { return name == "SET" || name == "SETNX" || name == "SPENT.CLAIM" }

// one decides a command other than a claim. It reports whether the client
// asked to quit (or must be disconnected).
func (c *conn) one(name string, args [][]byte) (quit bool) {
	label := commandLabel(name)
	before := len(c.w.b)
	defer func() {
		c.s.m.command(label, len(c.w.b) == before || c.w.b[before] != '-')
	}()
	switch name {
	case "POST", "HOST:":
		// A browser tricked into posting to this port (cross-protocol
		// scripting): end the connection before reading further.
		c.s.log.Warn("resp: a client sent an HTTP request to the RESP listener: closing it", "client", c.nc.RemoteAddr().String())
		c.s.m.refused.WithLabelValues("http").Inc()
		return true
	case "QUIT":
		c.w.simple("OK")
		return true
	case "AUTH":
		c.auth(args)
		return false
	case "HELLO":
		c.hello(args)
		return false
	}
	if c.g == nil {
		c.noauth()
		return false
	}
	if c.broken && readOnly[name] {
		// Its client is gone (a write failed): a read has nothing left to
		// do. Writes are still decided, so that none is left half-done.
		return false
	}
	switch name {
	case "PING":
		switch len(args) {
		case 1:
			c.w.simple("PONG")
		case 2:
			c.w.bulk(args[1])
		default:
			c.arity(name)
		}
	case "ECHO":
		if len(args) != 2 {
			c.arity(name)
			return false
		}
		c.w.bulk(args[1])
	case "SELECT":
		if len(args) != 2 {
			c.arity(name)
		} else if string(args[1]) != "0" {
			c.w.fail("ERR", "DB index is out of range: spent serves database 0 only; map keys to namespaces with prefixes instead")
		} else {
			c.w.simple("OK")
		}
	case "CLIENT":
		c.client(args)
	case "COMMAND":
		if len(args) > 1 && strings.EqualFold(string(args[1]), "COUNT") {
			c.w.integer(0)
		} else {
			c.w.array(0)
		}
	case "INFO":
		c.w.bulkString(c.info())
	case "CONFIG":
		// Clients and redis-benchmark read settings at start; spent has
		// none to give over RESP, and none to set.
		if len(args) > 1 && strings.EqualFold(string(args[1]), "GET") {
			c.w.mapOf(0)
		} else {
			c.w.fail("ERR", "spent refuses CONFIG "+spent.QuoteInput(string(args[len(args)-1]))+": its settings are in its config file (docs/configuration.md)")
		}
	case "RESET":
		c.w.resp3, c.name = false, ""
		if len(c.s.grants) > 0 {
			// Signed out: the connection must sign in again, within
			// auth_timeout, and counts as unauthenticated meanwhile.
			c.g = nil
			c.entry.SignOut()
			c.authDeadline = time.Now().Add(c.s.lim.AuthTimeout)
		}
		c.w.simple("RESET")
	case "GET":
		if c.readReserved() {
			c.get(args)
		}
	case "EXISTS":
		c.exists(args)
	case "TTL", "PTTL":
		c.ttl(name, args)
	case "DEL", "UNLINK":
		c.del(args)
	case "SPENT.GET":
		if c.readReserved() {
			c.nativeGet(args)
		}
	case "SPENT.COMPLETE", "SPENT.RELEASE":
		c.end(args, name == "SPENT.RELEASE")
	default:
		if why, ok := refusedWrites[name]; ok {
			c.w.fail("ERR", "spent refuses "+name+": "+why)
			return false
		}
		if name == "MULTI" || name == "EXEC" || name == "WATCH" || name == "DISCARD" {
			c.w.fail("ERR", "spent does not run transactions: each command is atomic on its own; pipeline claims instead, and they share one durable write")
			return false
		}
		c.w.fail("ERR", "unknown command "+spent.QuoteInput(string(args[0]))+": see docs/resp.md for the commands spent answers")
	}
	return false
}

// readOnly are the commands a connection whose client is gone skips.
var readOnly = map[string]bool{"PING": true, "ECHO": true, "GET": true, "EXISTS": true, "TTL": true, "PTTL": true,
	"SPENT.GET": true, "INFO": true, "COMMAND": true, "CLIENT": true, "CONFIG": true, "SELECT": true}

// refusedWrites are the Redis writes that would overwrite, shorten or
// delete a record, with the reason each is refused.
var refusedWrites = func() map[string]string {
	overwrite := "a record is never overwritten; claim with SET key value NX or SETNX"
	expiry := "a record's expiry is fixed when it is claimed, so that it cannot be forgotten early"
	m := map[string]string{}
	for _, c := range []string{"GETSET", "SETEX", "PSETEX", "MSET", "MSETNX", "APPEND", "SETRANGE", "INCR", "INCRBY", "INCRBYFLOAT", "DECR", "DECRBY", "RENAME", "RENAMENX", "COPY", "MOVE", "RESTORE", "HSET", "HSETNX", "LPUSH", "RPUSH", "SADD", "ZADD"} {
		m[c] = overwrite
	}
	for _, c := range []string{"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "PERSIST", "GETEX"} {
		m[c] = expiry
	}
	m["GETDEL"] = "a complete record is never deleted before it expires (forgetting a spent key early lets it be spent twice)"
	m["FLUSHDB"] = "the ledger is never flushed by a client; records are forgotten at their expiry"
	m["FLUSHALL"] = m["FLUSHDB"]
	m["SWAPDB"] = "spent serves database 0 only"
	return m
}()

// noauth refuses a command sent before AUTH when tokens are configured.
func (c *conn) noauth() {
	c.w.fail("NOAUTH", "Authentication required: send AUTH with one of the server's tokens")
}

func (c *conn) arity(name string) {
	c.w.fail("ERR", "wrong number of arguments for '"+strings.ToLower(name)+"' command")
}

// allowed checks that the connection's token may act in ns (with the admin
// scope when admin), writing the error reply when not.
func (c *conn) allowed(ns string, admin bool) bool {
	if c.g.Allows(ns, admin) {
		return true
	}
	var e *spent.Error
	errors.As(grant.Forbidden(ns, admin), &e)
	c.w.fail("NOPERM", e.Message)
	return false
}

// key maps a Redis key to its prefix and claim key, writing the error reply
// when no prefix matches or the token may not act there.
func (c *conn) key(k []byte) (*Prefix, string, bool) {
	p, key, ok := c.s.route(k)
	if !ok {
		c.w.fail("ERR", "key "+spent.QuoteInput(string(k))+" matches no configured prefix: spent claims only keys under a prefix mapped to a namespace ([resp.namespaces] in the config file)")
		return nil, "", false
	}
	if !c.allowed(p.Namespace, false) {
		return nil, "", false
	}
	return p, key, true
}

func (c *conn) auth(args [][]byte) {
	if len(args) != 2 && len(args) != 3 {
		c.arity("AUTH")
		return
	}
	if len(c.s.grants) == 0 {
		if len(args) == 2 {
			c.w.fail("ERR", "AUTH <password> called without any password configured for the default user: this server has no tokens")
			return
		}
		c.w.simple("OK")
		return
	}
	if c.login(args[len(args)-1]) {
		c.w.simple("OK")
	}
}

// login checks a token, writing WRONGPASS when it is unknown. A refusal is
// answered after the delay of the server's sign-in throttle (package door),
// and the connection is closed after max_auth_failures of them.
func (c *conn) login(tok []byte) bool {
	if len(c.s.grants) == 0 {
		return true
	}
	g := c.s.grants.Match(string(tok))
	if g == nil {
		c.s.m.refused.WithLabelValues("auth").Inc()
		delay := c.s.throttle.Failed("resp", c.nc.RemoteAddr().String(), "unknown token")
		n := c.entry.Failed()
		if !c.stopping.Load() {
			// The wait ends early when the connection is closed to make
			// room, so that refused sign-ins hold nothing past it.
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-c.entry.Closed():
			}
			t.Stop()
		}
		if n >= c.s.lim.MaxAuthFailures {
			c.closeAfter = true
			c.w.fail("WRONGPASS", fmt.Sprintf("invalid username-password pair or user is disabled: unknown token; closing the connection after %d refused sign-ins (max_auth_failures)", n))
			return false
		}
		c.w.fail("WRONGPASS", "invalid username-password pair or user is disabled: unknown token")
		return false
	}
	c.g = g
	c.entry.SignIn()
	return true
}

func (c *conn) hello(args [][]byte) {
	proto := 0
	if len(args) > 1 {
		v, err := strconv.Atoi(string(args[1]))
		if err != nil || v < 2 || v > 3 {
			c.w.fail("NOPROTO", "unsupported protocol version: spent speaks RESP2 and RESP3")
			return
		}
		proto = v
	}
	name := c.name
	for i := 2; i < len(args); i++ {
		switch strings.ToUpper(string(args[i])) {
		case "AUTH":
			if i+2 >= len(args) {
				c.w.fail("ERR", "syntax error in HELLO option 'AUTH'")
				return
			}
			if !c.login(args[i+2]) {
				return
			}
			i += 2
		case "SETNAME":
			if i+1 >= len(args) {
				c.w.fail("ERR", "syntax error in HELLO option 'SETNAME'")
				return
			}
			if !validName(args[i+1]) {
				c.badName()
				return
			}
			name = string(args[i+1])
			i++
		default:
			c.w.fail("ERR", "syntax error in HELLO option "+spent.QuoteInput(string(args[i])))
			return
		}
	}
	if c.g == nil {
		c.w.fail("NOAUTH", "HELLO must be called with the client's token (HELLO 3 AUTH default <token>) when tokens are configured")
		return
	}
	if proto != 0 {
		c.w.resp3 = proto == 3
	}
	c.name = name
	c.w.mapOf(7)
	c.w.bulkString("server")
	c.w.bulkString("spent")
	c.w.bulkString("version")
	c.w.bulkString(redisVersion)
	c.w.bulkString("proto")
	c.w.integer(int64(c.w.proto()))
	c.w.bulkString("id")
	c.w.integer(c.id)
	c.w.bulkString("mode")
	c.w.bulkString("standalone")
	c.w.bulkString("role")
	c.w.bulkString("master")
	c.w.bulkString("modules")
	c.w.array(0)
}

// redisVersion is the Redis version whose commands the listener answers,
// as HELLO and INFO report it: clients check it before using a command.
const redisVersion = "7.2.0"

func validName(b []byte) bool {
	if len(b) > spent.MaxPlaceLen {
		return false
	}
	for _, ch := range b {
		if ch <= ' ' || ch > '~' {
			return false
		}
	}
	return true
}

func (c *conn) badName() {
	c.w.fail("ERR", fmt.Sprintf("Client names cannot contain spaces, newlines or special characters, and spent's are at most %d bytes (the name is the claims' place)", spent.MaxPlaceLen))
}

func (c *conn) client(args [][]byte) {
	if len(args) < 2 {
		c.arity("CLIENT")
		return
	}
	switch strings.ToUpper(string(args[1])) {
	case "SETNAME":
		if len(args) != 3 {
			c.arity("CLIENT|SETNAME")
		} else if !validName(args[2]) {
			c.badName()
		} else {
			c.name = string(args[2])
			c.w.simple("OK")
		}
	case "GETNAME":
		if c.name == "" {
			c.w.null()
		} else {
			c.w.bulkString(c.name)
		}
	case "ID":
		c.w.integer(c.id)
	case "SETINFO":
		c.w.simple("OK")
	case "INFO":
		c.w.bulkString(fmt.Sprintf("id=%d addr=%s name=%s db=0 resp=%d\n", c.id, c.nc.RemoteAddr(), c.name, c.w.proto()))
	default:
		c.w.fail("ERR", "unknown subcommand "+spent.QuoteInput(string(args[1]))+" of CLIENT: spent answers SETNAME, GETNAME, ID, SETINFO and INFO")
	}
}

func (c *conn) info() string {
	return "# Server\r\nredis_version:" + redisVersion + "\r\nredis_mode:standalone\r\nspent_version:" + c.s.cfg.Version +
		"\r\n# Persistence\r\nloading:0\r\n# Replication\r\nrole:master\r\n"
}

// ctx is the context of one command's ledger calls: commands are not
// cancelled when their client goes, so that what is decided is written.
func (c *conn) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// lookup reads the record of the one key of a GET, TTL or PTTL, writing
// the error reply when it cannot (ok false); found is false for a key
// without a live record.
func (c *conn) lookup(name string, args [][]byte) (rec spent.Record, found, ok bool) {
	if len(args) != 2 {
		c.arity(name)
		return rec, false, false
	}
	p, key, ok := c.key(args[1])
	if !ok {
		return rec, false, false
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rec, err := c.s.ledger.Get(ctx, p.Namespace, key)
	switch {
	case spent.ErrorCode(err) == spent.ENotFound:
		return rec, false, true
	case err != nil:
		c.fail(err)
		return rec, false, false
	}
	return rec, true, true
}

func (c *conn) get(args [][]byte) {
	rec, found, ok := c.lookup("GET", args)
	switch {
	case !ok:
	case !found || rec.State != spent.StateComplete:
		c.w.null()
	default:
		c.w.bulk(rec.Result)
	}
}

func (c *conn) fail(err error) {
	if isStoreError(err) {
		c.s.log.Error("resp: store", "err", err)
	}
	c.w.errorReply(err)
}

func (c *conn) exists(args [][]byte) {
	if len(args) < 2 {
		c.arity("EXISTS")
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	n := int64(0)
	for _, k := range args[1:] {
		p, key, ok := c.key(k)
		if !ok {
			return
		}
		_, err := c.s.ledger.Get(ctx, p.Namespace, key)
		switch {
		case err == nil:
			n++
		case spent.ErrorCode(err) != spent.ENotFound:
			c.fail(err)
			return
		}
	}
	c.w.integer(n)
}

func (c *conn) ttl(name string, args [][]byte) {
	rec, found, ok := c.lookup(name, args)
	switch {
	case !ok:
	case !found:
		c.w.integer(-2)
	default:
		left := max(rec.ExpiresAt.Sub(c.s.ledger.Now()), 0)
		if name == "PTTL" {
			c.w.integer(left.Milliseconds())
		} else {
			c.w.integer(int64((left + 500*time.Millisecond) / time.Second))
		}
	}
}

// del releases pending claims. A key with a complete record, or whose
// claim's rollback window has closed (both read from the record), refuses
// the whole command before anything is released, so that the client learns
// nothing was; keys without a record count 0, as in Redis. Each release
// names the seq of the record read, so that a DEL racing with a new claim
// of the key can never release that other claim.
func (c *conn) del(args [][]byte) {
	if len(args) < 2 {
		c.arity("DEL")
		return
	}
	type target struct {
		p   *Prefix
		key string
		seq spent.Seq // zero: no record
	}
	targets := make([]target, 0, len(args)-1)
	for _, k := range args[1:] {
		p, key, ok := c.key(k)
		if !ok {
			return
		}
		targets = append(targets, target{p: p, key: key})
	}
	ctx, cancel := c.ctx()
	defer cancel()
	refuse := func(i int, why, before string) {
		c.w.fail("NOT_PENDING", "key "+spent.QuoteInput(string(args[i+1]))+" cannot be deleted: "+why+"; spent never forgets a spent key before it expires, since that would let it be spent twice (only a pending claim can be released); "+before)
	}
	now := c.s.ledger.Now()
	for i := range targets {
		t := &targets[i]
		rec, err := c.s.ledger.Get(ctx, t.p.Namespace, t.key)
		switch {
		case spent.ErrorCode(err) == spent.ENotFound:
			continue
		case err != nil:
			c.fail(err)
			return
		case rec.State == spent.StateComplete && t.p.Rollback:
			refuse(i, "its rollback window (half the namespace's lease) has closed, and it is a complete record now", "no key of this DEL was released")
			return
		case rec.State == spent.StateComplete:
			refuse(i, "it is a complete record", "no key of this DEL was released")
			return
		case t.p.Rollback && rec.LeaseExpiredAt(now) && c.s.rollback.due(t.p.Namespace, t.key, rec.Seq):
			refuse(i, "its rollback window (half the namespace's lease) closed at "+rec.LeaseUntil.UTC().Format(time.RFC3339Nano)+", and its completion is due", "no key of this DEL was released")
			return
		case rec.LeaseExpiredAt(now):
			c.w.errorReply(spent.Errorf(spent.ELeaseExpired, "key %s: lease ran out at %s; an operator must resolve this outcome (spent unknown); no key of this DEL was released",
				spent.QuoteInput(string(args[i+1])), rec.LeaseUntil.UTC().Format(time.RFC3339Nano)))
			return
		}
		t.seq = rec.Seq
	}
	n := int64(0)
	for i, t := range targets {
		if t.seq.IsZero() {
			continue
		}
		err := c.s.ledger.Release(ctx, spent.Release{Namespace: t.p.Namespace, Key: t.key, Seq: t.seq})
		switch spent.ErrorCode(err) {
		case "":
			n++
			if t.p.Rollback {
				c.s.rollback.forget(t.p.Namespace, t.key, t.seq, "released")
			}
		case spent.ENotFound, spent.ESeqMismatch:
			// Released by another command meanwhile (and perhaps claimed
			// again by another client, whose claim stays).
		case spent.ENotPending:
			// Completed since the check (its window closed): the keys
			// before it are released.
			refuse(i, "it was completed meanwhile (its rollback window closed)", "the keys before it were released")
			return
		default:
			c.fail(err)
			return
		}
	}
	c.w.integer(n)
}

// millis is t in Unix milliseconds, 0 for the zero time.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// record writes a record as a map; outcome, when not empty, comes first
// with the answer's retry_after and unknown.
func (c *conn) record(r *spent.Record, a *spent.Answer) {
	n := 9
	if a != nil {
		n += 3
	}
	c.w.mapOf(n)
	if a != nil {
		c.w.bulkString("outcome")
		c.w.bulkString(string(a.Outcome))
		c.w.bulkString("retry_after")
		c.w.integer(a.RetryAfter.Milliseconds())
		c.w.bulkString("unknown")
		unknown := int64(0)
		if a.Unknown {
			unknown = 1
		}
		c.w.integer(unknown)
	}
	c.w.bulkString("namespace")
	c.w.bulkString(r.Namespace)
	c.w.bulkString("hash")
	c.w.bulkString(r.Hash.String())
	c.w.bulkString("state")
	c.w.bulkString(r.State.String())
	c.w.bulkString("seq")
	c.w.bulkString(r.Seq.String())
	c.w.bulkString("first_seen")
	c.w.integer(millis(r.FirstSeen))
	c.w.bulkString("place")
	c.w.bulkString(r.Place)
	c.w.bulkString("expires_at")
	c.w.integer(millis(r.ExpiresAt))
	c.w.bulkString("lease_until")
	c.w.integer(millis(r.LeaseUntil))
	c.w.bulkString("result")
	if r.State == spent.StateComplete && r.Result != nil {
		c.w.bulk(r.Result)
	} else {
		c.w.null()
	}
}

func (c *conn) nativeGet(args [][]byte) {
	if len(args) != 3 {
		c.arity("SPENT.GET")
		return
	}
	ns := string(args[1])
	if !c.allowed(ns, false) {
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rec, err := c.s.ledger.Get(ctx, ns, string(args[2]))
	switch {
	case spent.ErrorCode(err) == spent.ENotFound:
		c.w.null()
	case err != nil:
		c.fail(err)
	default:
		c.record(&rec, nil)
	}
}

// end is SPENT.COMPLETE ns key seq result [FORCE] and SPENT.RELEASE ns key
// seq [FORCE]; seq "*" addresses whichever claim holds the key, read from
// its record first so that the release names that claim's seq. In a
// namespace of a rollback prefix, a release after the record's rollback
// window is refused unless forced, as DEL refuses it.
func (c *conn) end(args [][]byte, release bool) {
	want := 5
	name := "SPENT.COMPLETE"
	if release {
		want, name = 4, "SPENT.RELEASE"
	}
	force := false
	if len(args) == want+1 && strings.EqualFold(string(args[want]), "FORCE") {
		force = true
		args = args[:want]
	}
	if len(args) != want {
		c.arity(name)
		return
	}
	ns, key := string(args[1]), string(args[2])
	if !c.allowed(ns, force) {
		return
	}
	var seq spent.Seq
	if s := string(args[3]); s != "*" {
		var err error
		if seq, err = spent.ParseSeq(s); err != nil {
			c.w.fail("INVALID", err.Error()+" (or * for whichever claim holds the key)")
			return
		}
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if release {
		if seq.IsZero() {
			// "*": the release names the seq of the claim read, so that it
			// can never release a claim made since.
			rec, err := c.s.ledger.Get(ctx, ns, key)
			if err != nil {
				c.fail(err)
				return
			}
			if rec.State == spent.StatePending {
				if rec.LeaseExpiredAt(c.s.ledger.Now()) && !force {
					c.fail(spent.Errorf(spent.ELeaseExpired, "lease ran out at %s; an operator must resolve this outcome", rec.LeaseUntil.UTC().Format(time.RFC3339Nano)))
					return
				}
				seq = rec.Seq
			}
		}
		if err := c.s.ledger.Release(ctx, spent.Release{Namespace: ns, Key: key, Seq: seq, Force: force}); err != nil {
			c.fail(err)
			return
		}
		c.s.rollback.forget(ns, key, seq, "released")
		c.w.simple("OK")
		return
	}
	rec, err := c.s.ledger.Complete(ctx, spent.Completion{Namespace: ns, Key: key, Seq: seq, Result: args[4], Force: force})
	if err != nil {
		c.fail(err)
		return
	}
	c.s.rollback.forget(ns, key, rec.Seq, "completed")
	c.record(&rec, nil)
}

// hexFingerprint decodes SPENT.CLAIM's FP argument.
func hexFingerprint(b []byte) ([]byte, error) {
	fp := make([]byte, hex.DecodedLen(len(b)))
	if _, err := hex.Decode(fp, b); err != nil {
		return nil, spent.Errorf(spent.EInvalid, "FP: %v: want 64 hex digits (SHA-256)", err)
	}
	return fp, nil
}

// commandNames are the commands spent answers, each its own metrics label.
var commandNames = []string{"SET", "SETNX", "SPENT.CLAIM", "GET", "EXISTS", "TTL", "PTTL", "DEL", "UNLINK", "SPENT.GET", "SPENT.COMPLETE", "SPENT.RELEASE",
	"AUTH", "HELLO", "PING", "ECHO", "QUIT", "SELECT", "CLIENT", "COMMAND", "INFO", "RESET", "CONFIG"}

// labels maps each of commandNames to its label.
var labels = func() map[string]string {
	m := make(map[string]string, len(commandNames))
	for _, n := range commandNames {
		m[n] = strings.ToLower(n)
	}
	return m
}()

// commandLabel is a command's metrics label: its name in lower case for the
// commands spent answers, "other" for the rest.
func commandLabel(name string) string {
	if l, ok := labels[name]; ok {
		return l
	}
	return "other"
}

// known interns the upper-case names that upper looks up: the commands and
// the options of SET and SPENT.CLAIM.
var known = func() map[string]string {
	m := map[string]string{}
	for _, n := range append(commandNames, "NX", "XX", "GET", "EX", "PX", "EXAT", "PXAT", "KEEPTTL", "RESULT", "FP", "PLACE", "EXPIRESAT", "FORCE") {
		m[n] = n
	}
	return m
}()

// upper returns b in upper case (ASCII), without allocating for the names
// in known.
func upper(b []byte) string {
	var buf [16]byte
	if len(b) > len(buf) {
		return strings.ToUpper(string(b))
	}
	u := buf[:len(b)]
	for i, ch := range b {
		if 'a' <= ch && ch <= 'z' {
			ch -= 'a' - 'A'
		}
		u[i] = ch
	}
	if s, ok := known[string(u)]; ok {
		return s
	}
	return string(u)
}
