package storetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// fileStore is a small store that appends every change to a log file, one
// JSON line per change, and replays the log when it opens. Each change is
// written to the file before the call returns, so it survives kill -9 (not
// power loss: it does not fsync). It exists to run the suite, crash test
// included, against a store that lives outside the process. With lossy set,
// it holds changes in memory and writes them 64 at a time: acknowledged
// claims die with the process, which the crash test must notice.
type fileStore struct {
	mu       sync.Mutex
	recs     map[spent.Hash]spent.Record
	seqs     map[uint32]uint64
	counters map[spent.Hash]counter
	f        *os.File
	w        *bufio.Writer
	lossy    bool
	held     int
	closed   bool
}

var _ spent.Store = (*fileStore)(nil)

type logEntry struct {
	Put  *spent.Record `json:"put,omitempty"`
	Del  *spent.Hash   `json:"del,omitempty"`
	Node uint32        `json:"node,omitempty"`
	Last uint64        `json:"last,omitempty"`
	// Counter is a counter's new state; DelCounter forgets one.
	Counter    *counter    `json:"counter,omitempty"`
	DelCounter *spent.Hash `json:"del_counter,omitempty"`
}

type counter struct {
	Key       spent.Hash `json:"key"`
	Value     uint64     `json:"value"`
	ExpiresAt time.Time  `json:"expires_at"`
}

func openFileStore(tb testing.TB, dir string, lossy bool) *fileStore {
	tb.Helper()
	path := filepath.Join(dir, "log.jsonl")
	s := &fileStore{recs: map[spent.Hash]spent.Record{}, seqs: map[uint32]uint64{},
		counters: map[spent.Hash]counter{}, lossy: lossy}
	if b, err := os.ReadFile(path); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			var e logEntry
			if len(line) == 0 || json.Unmarshal(line, &e) != nil {
				continue // a torn last line
			}
			s.apply(e)
		}
	} else if !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	s.f, s.w = f, bufio.NewWriterSize(f, 1<<20)
	return s
}

func (s *fileStore) apply(e logEntry) {
	switch {
	case e.Put != nil:
		s.recs[e.Put.Hash] = *e.Put
	case e.Del != nil:
		delete(s.recs, *e.Del)
	case e.Node != 0:
		s.seqs[e.Node] = e.Last
	case e.Counter != nil:
		s.counters[e.Counter.Key] = *e.Counter
	case e.DelCounter != nil:
		delete(s.counters, *e.DelCounter)
	}
}

// commit applies and logs entries; the caller holds mu.
func (s *fileStore) commit(es ...logEntry) error {
	var buf bytes.Buffer
	for _, e := range es {
		s.apply(e)
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		buf.Write(append(b, '\n'))
	}
	if !s.lossy {
		_, err := s.f.Write(buf.Bytes())
		return err
	}
	s.w.Write(buf.Bytes())
	if s.held += len(es); s.held >= 64 {
		s.held = 0
		return s.w.Flush()
	}
	return nil
}

func (s *fileStore) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return spent.ErrClosed
	}
	return nil
}

func (s *fileStore) claim(op spent.ClaimOp) (spent.ClaimAnswer, logEntry, error) {
	if err := op.Record.Validate(); err != nil {
		return spent.ClaimAnswer{}, logEntry{}, err
	}
	if r, ok := s.recs[op.Record.Hash]; ok && !spent.FreeAt(&r, op.Now, op.Retake) {
		return spent.LimitResult(spent.ClaimAnswer{Record: r}, op.ResultLimit), logEntry{}, nil
	}
	r := op.Record
	return spent.ClaimAnswer{Inserted: true, Record: r}, logEntry{Put: &r}, nil
}

func (s *fileStore) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	res, err := s.ClaimBatch(ctx, []spent.ClaimOp{op})
	if err != nil {
		return spent.ClaimAnswer{}, err
	}
	return res[0], nil
}

func (s *fileStore) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]spent.ClaimAnswer, len(ops))
	for i, op := range ops {
		res, e, err := s.claim(op)
		if err != nil {
			return nil, err
		}
		if res.Inserted {
			if err := s.commit(e); err != nil {
				return nil, err
			}
		}
		out[i] = res
	}
	return out, nil
}

// stored returns the record of key, or nil; the caller holds mu.
func (s *fileStore) stored(key spent.Hash) *spent.Record {
	if r, ok := s.recs[key]; ok {
		return &r
	}
	return nil
}

func (s *fileStore) Complete(ctx context.Context, key spent.Hash, seq spent.Seq, result []byte, now time.Time) (spent.Record, error) {
	if err := s.lock(ctx); err != nil {
		return spent.Record{}, err
	}
	defer s.mu.Unlock()
	r := s.stored(key)
	if done, err := spent.RuleEnd(r, now, spent.Ending{Seq: seq, Result: result}); done || err != nil {
		if err != nil {
			return spent.Record{}, err
		}
		return *r, nil
	}
	r.State, r.Result, r.LeaseUntil = spent.StateComplete, append([]byte{}, result...), time.Time{}
	return *r, s.commit(logEntry{Put: r})
}

func (s *fileStore) Release(ctx context.Context, key spent.Hash, seq spent.Seq, now time.Time) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := spent.RuleEnd(s.stored(key), now, spent.Ending{Seq: seq, Release: true}); err != nil {
		return err
	}
	return s.commit(logEntry{Del: &key})
}

func (s *fileStore) Get(ctx context.Context, key spent.Hash, now time.Time) (spent.Record, error) {
	if err := s.lock(ctx); err != nil {
		return spent.Record{}, err
	}
	defer s.mu.Unlock()
	r, ok := s.recs[key]
	if !ok || !r.LiveAt(now) {
		return spent.Record{}, spent.ErrNotFound
	}
	return r, nil
}

func (s *fileStore) ListPending(ctx context.Context, namespace string, leaseBefore time.Time, limit int) ([]spent.Record, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []spent.Record
	for _, r := range s.recs {
		if r.State == spent.StatePending && r.LiveAt(leaseBefore) && !r.LeaseUntil.After(leaseBefore) &&
			(namespace == "" || r.Namespace == namespace) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LeaseUntil.Before(out[j].LeaseUntil) })
	return out[:min(limit, len(out))], nil
}

func (s *fileStore) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var es []logEntry
	for k, r := range s.recs {
		if len(es) == limit {
			break
		}
		if !r.LiveAt(now) {
			es = append(es, logEntry{Del: &k})
		}
	}
	for k, c := range s.counters {
		if len(es) == limit {
			break
		}
		if !now.Before(c.ExpiresAt) {
			es = append(es, logEntry{DelCounter: &k})
		}
	}
	return len(es), s.commit(es...)
}

func (s *fileStore) Purge(ctx context.Context, namespace string, limit int) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var es []logEntry
	for k, r := range s.recs {
		if len(es) >= limit {
			break
		}
		if r.Namespace == namespace {
			es = append(es, logEntry{Del: &k})
		}
	}
	return len(es), s.commit(es...)
}

func (s *fileStore) ReserveSeq(ctx context.Context, node uint32, n uint64) (uint64, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	first := s.seqs[node] + 1
	return first, s.commit(logEntry{Node: node, Last: first + n - 1})
}

func (s *fileStore) Count(ctx context.Context, op spent.CountOp) (spent.CountAnswer, error) {
	if err := s.lock(ctx); err != nil {
		return spent.CountAnswer{}, err
	}
	defer s.mu.Unlock()
	c, ok := s.counters[op.Key]
	if !ok || !op.Now.Before(c.ExpiresAt) {
		c = counter{Key: op.Key, ExpiresAt: op.ExpiresAt}
	}
	if c.Value >= op.Limit {
		return spent.CountAnswer{Value: c.Value, ExpiresAt: c.ExpiresAt}, nil
	}
	c.Value++
	return spent.CountAnswer{Value: c.Value, Added: true, ExpiresAt: c.ExpiresAt}, s.commit(logEntry{Counter: &c})
}

func (s *fileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.w.Flush(); err != nil {
		return err
	}
	return s.f.Close()
}

func fileHarness(lossy bool) Harness {
	return Harness{Open: func(tb testing.TB, dir string) spent.Store { return openFileStore(tb, dir, lossy) }, NoSeqIndex: true}
}

// TestFileStore runs the whole suite, crash test included, against a store
// that keeps its data in a file.
func TestFileStore(t *testing.T) {
	Run(t, fileHarness(false))
}

// TestCrashTestCatchesLostAcks shows that the crash test can fail: a store
// that acknowledges claims before writing them loses some at each kill.
func TestCrashTestCatchesLostAcks(t *testing.T) {
	h := fileHarness(true)
	if isCrashChild(t) {
		runCrashChild(t, h)
	}
	cr := newCrashRun(t, h, t.Name(), newRand(t))
	cr.run(3)
	v := cr.violations()
	if len(v) == 0 {
		t.Fatalf("crash test of a store that loses acknowledged claims: got no violation, want some")
	}
	t.Logf("found %d violations, first: %s", len(v), v[0])
}
