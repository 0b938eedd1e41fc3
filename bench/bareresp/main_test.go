package main

import (
	"bufio"
	"crypto/sha256"
	"io"
	"net"
	"testing"
)

// TestServe sends two pipelined SETs and a PING to each mode of the bare
// handler and checks the replies, and, over Pebble, that the keys are in the
// database once the replies have come: the record under the hash of each
// SET's key, and with three keys a SET, as many keys in all.
func TestServe(t *testing.T) {
	for _, mode := range []struct {
		name  string
		keys  int
		group bool
		bare  bool
	}{
		{name: "bare", bare: true},
		{name: "pebble-3", keys: 3},
		{name: "pebble-3-group", keys: 3, group: true},
		{name: "pebble-1-group", keys: 1, group: true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			var st *store
			if !mode.bare {
				var err error
				if st, err = openStore(t.TempDir(), mode.keys, mode.group); err != nil {
					t.Fatal(err)
				}
				defer st.db.Close()
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go serve(c, st)
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const req = "*3\r\n$3\r\nSET\r\n$5\r\nkey:1\r\n$1\r\nv\r\n" +
				"*6\r\n$3\r\nSET\r\n$5\r\nkey:2\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nEX\r\n$1\r\n9\r\n" +
				"PING\r\n"
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			const want = "+OK\r\n+OK\r\n+OK\r\n"
			got := make([]byte, len(want))
			if _, err := io.ReadFull(bufio.NewReader(c), got); err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Fatalf("replies %q, want %q", got, want)
			}
			if st == nil {
				return
			}
			for _, k := range []string{"key:1", "key:2"} {
				sum := sha256.Sum256([]byte(k))
				if _, closer, err := st.db.Get(append([]byte{'r'}, sum[:]...)); err != nil {
					t.Errorf("the record of %s: %v", k, err)
				} else {
					closer.Close()
				}
			}
			it, err := st.db.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for it.First(); it.Valid(); it.Next() {
				n++
			}
			it.Close()
			// The PING, an inline command, writes nothing.
			if want := 2 * mode.keys; n != want {
				t.Errorf("%d keys in the database, want %d", n, want)
			}
		})
	}
}
