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
// the embedded store writes for a claim (--keys, 3 by default: a record
// under a 33-byte hash of the command's key, its expiry index entry and a
// seq index entry). Each connection commits its own batch, and Pebble's
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
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/spentledger/spent/pebble"
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
// embedded store's cache and memtable sizes, format and filters.
func openStore(dir string, keys int, group bool) (*store, error) {
	if keys != 1 && keys != 3 {
		return nil, fmt.Errorf("--keys %d: want 1 or 3", keys)
	}
	so := pebble.DefaultOptions()
	po := &pdb.Options{CacheSize: so.CacheSize, MemTableSize: so.MemTableSize, FormatMajorVersion: pdb.FormatValueSeparation, Logger: quiet{}}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pdb.Open(dir, po)
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

// quiet drops Pebble's informational messages.
type quiet struct{}

func (quiet) Infof(string, ...any) {}

func (quiet) Errorf(format string, args ...any) { log.Printf(format, args...) }

func (quiet) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }

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
func (s *store) add(b *pdb.Batch, key []byte) {
	var h [1 + sha256.Size]byte
	h[0] = 'r'
	sum := sha256.Sum256(key)
	copy(h[1:], sum[:])
	var val [60]byte
	b.Set(h[:], val[:], nil)
	if s.keys == 3 {
		var x [1 + 8 + sha256.Size]byte
		x[0] = 'x'
		binary.BigEndian.PutUint64(x[1:], uint64(time.Now().Add(30*time.Hour).UnixMilli()))
		copy(x[9:], sum[:])
		b.Set(x[:], nil, nil)
		var q [1 + 4 + 8]byte
		q[0] = 's'
		binary.BigEndian.PutUint32(q[1:], 1)
		binary.BigEndian.PutUint64(q[5:], s.seq.Add(1))
		b.Set(q[:], h[1:], nil)
	}
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
			st.add(b, key)
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
