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
// longest inline command, in bytes: the reader's buffer.
const maxLine = 64 << 10

// reader reads commands: RESP arrays of bulk strings, or inline commands
// (words separated by spaces, as typed at a telnet prompt). It checks every
// length against its limits before allocating, so a client cannot make it
// hold more than maxArgs × maxBulk bytes for one command.
type reader struct {
	br      *bufio.Reader
	maxArgs int
	maxBulk int
	arena   []byte // where short arguments are carved from
}

// arenaChunk is the size of the chunks short arguments are carved from, and
// maxCarved the longest argument carved rather than allocated on its own.
// A chunk is never reused: an argument kept after its command (a value
// waiting for its rollback window, say) keeps its chunk alive, no more.
const (
	arenaChunk = 16 << 10
	maxCarved  = 1 << 10
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

func newReader(r io.Reader, maxArgs, maxBulk int) *reader {
	return &reader{br: bufio.NewReaderSize(r, maxLine), maxArgs: maxArgs, maxBulk: maxBulk}
}

// buffered reports whether bytes of a further command have already arrived.
func (r *reader) buffered() bool { return r.br.Buffered() > 0 }

// line reads one line without its CRLF (or LF).
func (r *reader) line() ([]byte, error) {
	b, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, protocolErrorf("line longer than %d bytes", maxLine)
	}
	if err != nil {
		return nil, err
	}
	b = b[:len(b)-1]
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b, nil
}

// length parses the length of an array ('*') or bulk ('$') header.
func length(b []byte, kind byte, what string) (int, error) {
	if len(b) == 0 || b[0] != kind {
		got := "end of line"
		if len(b) > 0 {
			got = strconv.QuoteRune(rune(b[0]))
		}
		return 0, protocolErrorf("expected '%c', got %s", kind, got)
	}
	n, err := strconv.Atoi(string(b[1:]))
	if err != nil || n < -1 {
		return 0, protocolErrorf("invalid %s length", what)
	}
	return n, nil
}

// command reads the next command into args (reusing its backing array),
// returning the arguments and the bytes they hold. An empty array or an
// empty inline line yields no arguments.
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
	if n > r.maxArgs {
		return args, 0, protocolErrorf("command of %d arguments: at most %d (resp max_args)", n, r.maxArgs)
	}
	size := 0
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
		if m > r.maxBulk {
			return args, 0, protocolErrorf("argument of %d bytes: at most %d (resp max_bulk)", m, r.maxBulk)
		}
		b := r.alloc(m)
		if _, err := io.ReadFull(r.br, b); err != nil {
			return args, 0, unexpectedEOF(err)
		}
		cr, err1 := r.br.ReadByte()
		lf, err2 := r.br.ReadByte()
		if err := errors.Join(err1, err2); err != nil {
			return args, 0, unexpectedEOF(err)
		}
		if cr != '\r' || lf != '\n' {
			return args, 0, protocolErrorf("bulk of %d bytes not followed by CRLF", m)
		}
		args = append(args, b)
		size += m
	}
	return args, size, nil
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
			if len(args) == r.maxArgs {
				return args, 0, protocolErrorf("command of more than %d arguments (resp max_args)", r.maxArgs)
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
