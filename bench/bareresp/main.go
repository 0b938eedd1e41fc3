// Command bareresp is the baseline of bench/resp.sh: a RESP server in Go,
// one goroutine a connection as spent's listener has, that answers every
// command +OK after reading it, writing the replies of the commands it has
// read together, as spent does.
//
// By default it keeps nothing and writes nothing to disk, so
// redis-benchmark's figure against it is the ceiling of a Go RESP server on
// the machine, measured in the same run as spent and redis-server:
//
//	go run ./bench/bareresp --listen 127.0.0.1:7079
//
// With --pebble DIR it is the floor of a Go RESP server over Pebble instead:
// the commands read together become one Pebble batch, committed with a
// synced write before their replies, each command writing as many keys as
// the embedded store writes for a claim (--keys, 3 by default: the record
// under the SHA-256 of the command's key, its expiry index entry and a seq
// index entry, as barepebble.SetClaim writes them). Each connection commits its own batch, and Pebble's
// commit pipeline groups the connections' syncs; with --group, connections
// hand their batches to one goroutine instead, which commits every batch
// queued as one synced Pebble batch, as Redis writes and syncs the commands
// of an event loop's turn together. No spent code runs: no decision, no
// filter, no policy, no metrics; the database has the embedded store's
// cache and memtable sizes.
//
//	go run ./bench/bareresp --listen 127.0.0.1:7079 --pebble /var/tmp/bare [--group]
package main

import (
	"bufio"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent/internal/barepebble"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:7079", "address to listen on")
	dir := flag.String("pebble", "", "a new directory: commit each batch of commands to a Pebble database there, synced, before answering")
	keys := flag.Int("keys", 3, "with --pebble, the keys each command writes: 1 (the record) or 3 (the record, its expiry index entry, a seq index entry)")
	group := flag.Bool("group", false, "with --pebble, commit the connections' batches together from one goroutine")
	flag.Parse()
	var st *store
	if *dir != "" {
		var err error
		if st, err = openStore(*dir, *keys, *group); err != nil {
			log.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go serve(c, st)
	}
}

// openStore opens the Pebble database of --pebble in dir, with the
// options of barepebble.ClaimOptions.
func openStore(dir string, keys int, group bool) (*store, error) {
	if keys != 1 && keys != 3 {
		return nil, fmt.Errorf("--keys %d: want 1 or 3", keys)
	}
	db, err := pdb.Open(dir, barepebble.ClaimOptions())
	if err != nil {
		return nil, err
	}
	st := &store{db: db, keys: keys}
	if group {
		st.queue = make(chan *pending, 1024)
		go st.commit()
	}
	return st, nil
}

// store is the Pebble database of --pebble.
type store struct {
	db   *pdb.DB
	keys int
	seq  atomic.Uint64

	queue chan *pending // with --group: batches for commit
}

// pending is a connection's batch, queued for the committing goroutine,
// which sends on done once it is durable.
type pending struct {
	b    *pdb.Batch
	done chan error
}

// commit is the committing goroutine of --group: it takes every batch
// queued, writes them as one synced batch and answers them.
func (s *store) commit() {
	var all []*pending
	for p := range s.queue {
		all = append(all[:0], p)
	drain:
		for {
			select {
			case q := <-s.queue:
				all = append(all, q)
			default:
				break drain
			}
		}
		b := s.db.NewBatch()
		for _, q := range all {
			if err := b.Apply(q.b, nil); err != nil {
				log.Fatal(err)
			}
		}
		err := b.Commit(pdb.Sync)
		b.Close()
		for _, q := range all {
			q.done <- err
		}
	}
}

// write makes b durable: committed by the caller, or by the committing
// goroutine with --group.
func (s *store) write(b *pdb.Batch, p *pending) error {
	if s.queue == nil {
		return b.Commit(pdb.Sync)
	}
	p.b = b
	s.queue <- p
	return <-p.done
}

// add stages the writes of one command whose key is key in b.
func (s *store) add(b *pdb.Batch, key []byte) error {
	h := sha256.Sum256(key)
	return barepebble.SetClaim(b, &h, time.Now().Add(30*time.Hour), s.seq.Add(1), s.keys == 3)
}

// serve answers +OK to each command of c: arrays of bulk strings, or inline
// lines. With a store, the commands read together are committed first.
func serve(c net.Conn, st *store) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 64<<10)
	var out []byte
	var b *pdb.Batch
	p := &pending{done: make(chan error, 1)}
	for {
		key, err := command(r)
		if err != nil {
			return
		}
		if st != nil && key != nil {
			if b == nil {
				b = st.db.NewBatch()
			}
			if err := st.add(b, key); err != nil {
				log.Fatal(err)
			}
		}
		out = append(out, "+OK\r\n"...)
		if r.Buffered() > 0 {
			continue
		}
		if b != nil {
			if err := st.write(b, p); err != nil {
				log.Fatal(err)
			}
			b.Close()
			b = nil
		}
		if _, err := c.Write(out); err != nil {
			return
		}
		out = out[:0]
	}
}

// command reads one command and returns its second argument (a SET's key),
// or nil: an inline command, or one with no second argument. The key is valid until the next read.
func command(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if line[0] != '*' {
		return nil, nil
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil {
		return nil, err
	}
	var key []byte
	for i := range n {
		hdr, err := r.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		m, err := strconv.Atoi(string(hdr[1 : len(hdr)-2]))
		if err != nil || m < 0 {
			return nil, io.ErrUnexpectedEOF
		}
		if i == 1 {
			// The key is copied: a later ReadSlice may overwrite it.
			p, err := r.Peek(m)
			if err != nil {
				return nil, err
			}
			key = append(key[:0], p...)
		}
		if _, err := r.Discard(m + 2); err != nil {
			return nil, err
		}
	}
	return key, nil
}
