package resp

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"testing"
)

// fuzzLimits are small limits, so that the fuzzer reaches them.
var fuzzLimits = []limits{
	{args: 8, bulk: 64, frame: 200, line: 128},
	{args: 10, bulk: 16 << 10, frame: 16 << 10, line: 16 << 10, preAuth: true},
	{args: 64, bulk: 1 << 20, frame: 64 << 20, line: maxLine},
}

// FuzzReader: whatever the bytes, the reader never panics, never returns a
// command over its limits, and a grant that refuses makes it drop the
// command whole (errBusy) and go on with the next.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$4\r\nPING\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
		"PING\r\nSET a b NX\r\n",
		"*1\r\n$+4\r\nPING\r\n",
		"*-1\r\n",
		"*2\r\n$-1\r\n",
		"*9\r\n",
		"*1\r\n$1048576\r\n",
		"*1\r\n$4\r\nPIN",
		"\r\n\r\n",
		"*1\r\n$04\r\nPING\r\n",
		"*1\r\n$99999999999\r\n",
	} {
		f.Add([]byte(s), uint8(0), uint16(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8, budget uint16) {
		lim := fuzzLimits[int(which)%len(fuzzLimits)]
		r := newReader(bytes.NewReader(data), lim)
		left := int(budget)
		granted := 0
		r.grant = func(n int) bool {
			if n > left {
				return false
			}
			left -= n
			granted += n
			return true
		}
		var args [][]byte
		for range 1000 {
			var size int
			var err error
			args, size, err = r.command(args)
			if errors.Is(err, errBusy) {
				if len(args) != 0 {
					t.Fatalf("a dropped command returned %d arguments", len(args))
				}
				continue
			}
			if err != nil {
				var pe *protocolError
				if !errors.As(err, &pe) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("error %v: want a protocol error or the end of the input", err)
				}
				return
			}
			if len(args) > lim.args {
				t.Fatalf("%d arguments: over the limit of %d", len(args), lim.args)
			}
			total := 0
			for _, a := range args {
				if len(a) > lim.bulk && len(a) > lim.line {
					t.Fatalf("an argument of %d bytes: over the limits %d and %d", len(a), lim.bulk, lim.line)
				}
				total += len(a)
			}
			if total != size {
				t.Fatalf("size %d, want the arguments' %d", size, total)
			}
			if total > lim.frame && total > lim.line {
				t.Fatalf("a command of %d bytes: over the frame %d", total, lim.frame)
			}
		}
	})
}

// encode writes args as a RESP array of bulk strings.
func encode(args [][]byte) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"...)
		b = append(append(b, a...), "\r\n"...)
	}
	return b
}

// FuzzReaderRoundTrip: a command written as RESP within the limits is read
// back exactly, argument for argument, also when the bytes arrive one at a
// time.
func FuzzReaderRoundTrip(f *testing.F) {
	f.Add([]byte("SET\x00key\x00value\x00NX"), false)
	f.Add([]byte("\x00\x00"), true)
	f.Add([]byte("a\r\nb\x00\r\n"), true)
	f.Fuzz(func(t *testing.T, raw []byte, trickle bool) {
		args := bytes.Split(raw, []byte{0})
		lim := fuzzLimits[2]
		if len(args) > lim.args {
			args = args[:lim.args]
		}
		in := encode(args)
		var src io.Reader = bytes.NewReader(in)
		if trickle {
			src = &oneByte{in}
		}
		r := newReader(src, lim)
		got, size, err := r.command(nil)
		if err != nil {
			t.Fatalf("reading %q: %v", in, err)
		}
		if len(got) != len(args) {
			t.Fatalf("%d arguments, want %d", len(got), len(args))
		}
		n := 0
		for i := range args {
			if !bytes.Equal(got[i], args[i]) {
				t.Fatalf("argument %d: %q, want %q", i, got[i], args[i])
			}
			n += len(args[i])
		}
		if size != n {
			t.Fatalf("size %d, want %d", size, n)
		}
		if _, _, err := r.command(nil); err != io.EOF {
			t.Fatalf("after the command: %v, want EOF", err)
		}
	})
}

// oneByte reads one byte at a time.
type oneByte struct{ b []byte }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(o.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = o.b[0]
	o.b = o.b[1:]
	return 1, nil
}
