package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// protocolError is a request the listener cannot parse: it is answered with
// "-ERR Protocol error: …" and the connection is closed, as Redis does,
// since the stream cannot be resynchronised.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "Protocol error: " + e.msg }

func protocolErrorf(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

// maxLine is the longest header line (an array or bulk length) and the
// longest inline command, in bytes, once the connection has signed in.
const maxLine = 64 << 10

// readBuffer is the size of a connection's read buffer: small, since an
// idle connection keeps it; a longer line is gathered beside it, and a long
// argument is read past it, straight into its own bytes.
const readBuffer = 4 << 10

// bigBulk is the size past which an argument's bytes are allocated as they
// arrive rather than all at once, so that declaring a length costs nothing
// until the bytes come.
const bigBulk = 64 << 10

// limits bound one command: its arguments, the bytes of each, the bytes of
// all of them, and the longest header or inline line.
type limits struct {
	args, bulk, frame, line int
	preAuth                 bool // the connection has not signed in: the messages say so
}

// errBusy is returned by command when the server's budget of bytes in
// flight could not hold one of the command's arguments: the command was read
// to its end and dropped, and is answered -UNAVAILABLE; the connection
// goes on.
var errBusy = errors.New("resp: bytes in flight fill the budget")

// reader reads commands: RESP arrays of bulk strings, or inline commands
// (words separated by spaces, as typed at a telnet prompt). It checks every
// length against its limits before allocating, so a client cannot make it
// hold more than its limits allow for one command, and asks grant for the
// bytes of each argument before it holds them.
type reader struct {
	br    *bufio.Reader
	lim   limits
	grant func(n int) bool // nil: every argument fits
	arena []byte           // where short arguments are carved from
	long  []byte           // a line longer than the buffer, while it is gathered
}

// arenaChunk is the size of the chunks short arguments are carved from, and
// maxCarved the longest argument carved rather than allocated on its own.
// A chunk is never reused: an argument kept after its command keeps its
// chunk alive, no more.
const (
	arenaChunk = 4 << 10
	maxCarved  = 512
)

// alloc returns n bytes for an argument.
func (r *reader) alloc(n int) []byte {
	if n > maxCarved {
		return make([]byte, n)
	}
	if len(r.arena)+n > cap(r.arena) {
		r.arena = make([]byte, 0, arenaChunk)
	}
	i := len(r.arena)
	r.arena = r.arena[:i+n]
	return r.arena[i : i+n : i+n]
}

func newReader(r io.Reader, lim limits) *reader {
	return &reader{br: bufio.NewReaderSize(r, readBuffer), lim: lim}
}

// buffered reports whether bytes of a further command have already arrived.
func (r *reader) buffered() bool { return r.br.Buffered() > 0 }

// line reads one line without its CRLF (or LF), of at most lim.line bytes.
// The line is valid until the next read.
func (r *reader) line() ([]byte, error) {
	b, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) && len(r.long) <= r.lim.line {
			b, err = r.br.ReadSlice('\n')
			r.long = append(r.long, b...)
		}
		if len(r.long) > r.lim.line+2 || errors.Is(err, bufio.ErrBufferFull) {
			r.long = nil
			return nil, r.tooLong()
		}
		// The line stays valid until the next read: it is not kept after.
		b, r.long = r.long, nil
	}
	if err != nil {
		return nil, err
	}
	b = b[:len(b)-1]
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	if len(b) > r.lim.line {
		return nil, r.tooLong()
	}
	return b, nil
}

func (r *reader) tooLong() error {
	if r.lim.preAuth {
		return protocolErrorf("line longer than %d bytes before AUTH", r.lim.line)
	}
	return protocolErrorf("line longer than %d bytes", r.lim.line)
}

// length parses the length of an array ('*') or bulk ('$') header: the
// kind, then decimal digits, or -1. A sign, spaces or leading zeros beyond
// one are refused, as Redis refuses them.
func length(b []byte, kind byte, what string) (int, error) {
	if len(b) == 0 || b[0] != kind {
		got := "end of line"
		if len(b) > 0 {
			got = strconv.QuoteRune(rune(b[0]))
		}
		return 0, protocolErrorf("expected '%c', got %s", kind, got)
	}
	d := b[1:]
	if string(d) == "-1" {
		return -1, nil
	}
	if len(d) == 0 || len(d) > 10 || (d[0] == '0' && len(d) > 1) {
		return 0, protocolErrorf("invalid %s length", what)
	}
	n := 0
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, protocolErrorf("invalid %s length", what)
		}
		n = 10*n + int(c-'0')
	}
	return n, nil
}

// command reads the next command into args (reusing its backing array),
// returning the arguments and the bytes they hold. An empty array or an
// empty inline line yields no arguments. errBusy means the command was read
// and dropped because grant refused one of its arguments.
func (r *reader) command(args [][]byte) ([][]byte, int, error) {
	args = args[:0]
	first, err := r.br.Peek(1)
	if err != nil {
		return args, 0, err
	}
	if first[0] != '*' {
		return r.inline(args)
	}
	hdr, err := r.line()
	if err != nil {
		return args, 0, err
	}
	n, err := length(hdr, '*', "multibulk")
	if err != nil {
		return args, 0, err
	}
	if n > r.lim.args {
		if r.lim.preAuth {
			return args, 0, protocolErrorf("command of %d arguments before AUTH: at most %d", n, r.lim.args)
		}
		return args, 0, protocolErrorf("command of %d arguments: at most %d (resp max_args)", n, r.lim.args)
	}
	size := 0
	busy := false
	for range n {
		hdr, err := r.line()
		if err != nil {
			return args, 0, unexpectedEOF(err)
		}
		m, err := length(hdr, '$', "bulk")
		if err != nil {
			return args, 0, err
		}
		if m < 0 {
			return args, 0, protocolErrorf("invalid bulk length")
		}
		if m > r.lim.bulk {
			if r.lim.preAuth {
				return args, 0, protocolErrorf("argument of %d bytes before AUTH: at most %d", m, r.lim.bulk)
			}
			return args, 0, protocolErrorf("argument of %d bytes: at most %d (resp max_bulk)", m, r.lim.bulk)
		}
		if size+m > r.lim.frame {
			if r.lim.preAuth {
				return args, 0, protocolErrorf("command of more than %d bytes before AUTH", r.lim.frame)
			}
			return args, 0, protocolErrorf("command of more than %d bytes", r.lim.frame)
		}
		size += m
		if !busy && r.grant != nil && !r.grant(m) {
			busy = true
		}
		if busy {
			if _, err := r.br.Discard(m); err != nil {
				return args, 0, unexpectedEOF(err)
			}
		} else {
			b, err := r.bulk(m)
			if err != nil {
				return args, 0, unexpectedEOF(err)
			}
			args = append(args, b)
		}
		cr, err1 := r.br.ReadByte()
		lf, err2 := r.br.ReadByte()
		if err := errors.Join(err1, err2); err != nil {
			return args, 0, unexpectedEOF(err)
		}
		if cr != '\r' || lf != '\n' {
			return args, 0, protocolErrorf("bulk of %d bytes not followed by CRLF", m)
		}
	}
	if busy {
		return args[:0], size, errBusy
	}
	return args, size, nil
}

// bulk reads an argument of m bytes. Up to bigBulk they are allocated at
// once; a longer one grows as its bytes arrive.
func (r *reader) bulk(m int) ([]byte, error) {
	if m <= bigBulk {
		b := r.alloc(m)
		_, err := io.ReadFull(r.br, b)
		return b, err
	}
	b := make([]byte, 0, bigBulk)
	for len(b) < m {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(2*cap(b), m))
			copy(nb, b)
			b = nb
		}
		n, err := r.br.Read(b[len(b):min(cap(b), m)])
		b = b[:len(b)+n]
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// inline reads a command typed as one line of words.
func (r *reader) inline(args [][]byte) ([][]byte, int, error) {
	b, err := r.line()
	if err != nil {
		return args, 0, err
	}
	size := 0
	for i := 0; i < len(b); {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
			i++
		}
		j := i
		for j < len(b) && b[j] != ' ' && b[j] != '\t' {
			j++
		}
		if j > i {
			if len(args) == r.lim.args {
				if r.lim.preAuth {
					return args, 0, protocolErrorf("command of more than %d arguments before AUTH", r.lim.args)
				}
				return args, 0, protocolErrorf("command of more than %d arguments (resp max_args)", r.lim.args)
			}
			args = append(args, append([]byte(nil), b[i:j]...))
			size += j - i
		}
		i = j
	}
	return args, size, nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// writer builds replies in RESP2 or RESP3, as the connection's HELLO chose.
type writer struct {
	b     []byte
	resp3 bool
}

// proto is the protocol version the replies are written in: 2 or 3.
func (w *writer) proto() int {
	if w.resp3 {
		return 3
	}
	return 2
}

func (w *writer) simple(s string) { w.b = append(append(append(w.b, '+'), s...), "\r\n"...) }

// fail writes an error reply: code is its first word ("ERR", "NOAUTH", or a
// spent problem code in capitals), msg the rest, on one line.
func (w *writer) fail(code, msg string) {
	w.b = append(append(append(w.b, '-'), code...), ' ')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		w.b = append(w.b, c)
	}
	w.b = append(w.b, "\r\n"...)
}

func (w *writer) integer(n int64) {
	w.b = append(strconv.AppendInt(append(w.b, ':'), n, 10), "\r\n"...)
}

func (w *writer) bulk(p []byte) {
	w.b = append(strconv.AppendInt(append(w.b, '$'), int64(len(p)), 10), "\r\n"...)
	w.b = append(append(w.b, p...), "\r\n"...)
}

func (w *writer) bulkString(s string) {
	w.b = append(strconv.AppendInt(append(w.b, '$'), int64(len(s)), 10), "\r\n"...)
	w.b = append(append(w.b, s...), "\r\n"...)
}

// null writes RESP3's null, or RESP2's null bulk string.
func (w *writer) null() {
	if w.resp3 {
		w.b = append(w.b, "_\r\n"...)
		return
	}
	w.b = append(w.b, "$-1\r\n"...)
}

func (w *writer) array(n int) {
	w.b = append(strconv.AppendInt(append(w.b, '*'), int64(n), 10), "\r\n"...)
}

// mapOf writes the header of a map of n pairs: a RESP3 map, or in RESP2 a
// flat array of 2n elements (field, value, …), as HGETALL answers.
func (w *writer) mapOf(n int) {
	if w.resp3 {
		w.b = append(strconv.AppendInt(append(w.b, '%'), int64(n), 10), "\r\n"...)
		return
	}
	w.array(2 * n)
}
