// Command bareresp is the baseline of bench/resp.sh: a RESP server in Go,
// one goroutine a connection as spent's listener has, that answers every
// command +OK after reading it, writing the replies of the commands it has
// read together, as spent does. It keeps nothing and writes nothing to disk,
// so redis-benchmark's figure against it is the ceiling of a Go RESP server
// on the machine, measured in the same run as spent and redis-server.
//
//	go run ./bench/bareresp --listen 127.0.0.1:7079
package main

import (
	"bufio"
	"flag"
	"io"
	"log"
	"net"
	"strconv"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:7079", "address to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go serve(c)
	}
}

// serve answers +OK to each command of c: arrays of bulk strings, or inline
// lines.
func serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 64<<10)
	var out []byte
	for {
		if err := skipCommand(r); err != nil {
			return
		}
		out = append(out, "+OK\r\n"...)
		if r.Buffered() > 0 {
			continue
		}
		if _, err := c.Write(out); err != nil {
			return
		}
		out = out[:0]
	}
}

// skipCommand reads one command and drops it.
func skipCommand(r *bufio.Reader) error {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	if line[0] != '*' {
		return nil
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil {
		return err
	}
	for range n {
		hdr, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		m, err := strconv.Atoi(string(hdr[1 : len(hdr)-2]))
		if err != nil || m < 0 {
			return io.ErrUnexpectedEOF
		}
		if _, err := r.Discard(m + 2); err != nil {
			return err
		}
	}
	return nil
}
