package wallet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/internal/atomicfile"
	"github.com/spentledger/spent/internal/strictjson"
)

// Steps at which Options.Hook is called, in the order they happen for one
// request.
const (
	// StepJournaled: the request and its secrets are saved, nothing sent.
	StepJournaled = "journaled"
	// StepSent: the request is written to the connection.
	StepSent = "sent"
	// StepAnswered: the answer arrived and is not yet saved.
	StepAnswered = "answered"
	// StepSaved: the answer's outcome is saved.
	StepSaved = "saved"
)

// DefaultMinAge is the default minimum age of a token before it is spent.
const DefaultMinAge = 60 * time.Second

// Version is the wallet file format version.
const Version = 1

// ErrInUse is returned by Open when another process has the wallet open.
var ErrInUse = errors.New("wallet: in use by another process")

// ErrNoToken is returned by Spend when no token old enough and worth
// enough is spendable; the error returned is a *NoTokenError that says which,
// and errors.Is(err, ErrNoToken) holds for it.
var ErrNoToken = errors.New("wallet: no spendable token worth enough (or old enough)")

// ErrNoWallet is wrapped by the error of Open when no wallet file exists at
// the path: create one with Create.
var ErrNoWallet = errors.New("wallet: no wallet file")

// NoTokenError is the error of a Spend that found no token to pay with. It
// says why: no token is worth the amount (tokens are never combined), or
// those worth it are younger than the minimum age, and then when the oldest
// of them will be old enough.
type NoTokenError struct {
	// Amount is what the spend needed: the amount asked, or the issuer's
	// price if that is more.
	Amount uint64
	// Largest is the value of the largest spendable token (0: none).
	Largest uint64
	// MinAge is the minimum age the wallet was opened with.
	MinAge time.Duration
	// ReadyAt is when the oldest token worth Amount will be old enough; zero
	// when no token is worth Amount.
	ReadyAt time.Time
	// Now is when the spend looked.
	Now time.Time
}

// Error says why no token could pay: none held, none worth the amount, or
// none old enough yet (and when one will be).
func (e *NoTokenError) Error() string {
	switch {
	case e.Largest == 0:
		return fmt.Sprintf("wallet: no spendable token to pay %d: the wallet holds none; issue some first", e.Amount)
	case e.ReadyAt.IsZero():
		return fmt.Sprintf("wallet: no token worth %d: the largest spendable token is worth %d, and tokens are spent one at a time, never combined", e.Amount, e.Largest)
	}
	wait := e.ReadyAt.Sub(e.Now).Round(time.Second)
	return fmt.Sprintf("wallet: no token worth %d is old enough yet: the oldest of them can be spent in %s, at %s (tokens are spent at least %s after they were obtained)",
		e.Amount, max(wait, time.Second), e.ReadyAt.Local().Format(time.TimeOnly), e.MinAge)
}

// Is reports whether target is ErrNoToken.
func (e *NoTokenError) Is(target error) bool { return target == ErrNoToken }

// ErrSave is wrapped by the errors of a failed save of the wallet file;
// the state on disk is then the last one saved.
var ErrSave = errors.New("wallet: save")

// Options configures an open wallet.
type Options struct {
	// HTTPClient sends requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// MinAge is the least age of a token spent; default 60 s.
	MinAge time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand supplies seeds; nil means crypto/rand.
	Rand io.Reader
	// Hook, when set, is called at each step of a request (the Step*
	// constants): for crash tests.
	Hook func(step string)
}

// DefaultOptions returns the defaults: a 60 s minimum age.
func DefaultOptions() Options { return Options{MinAge: DefaultMinAge} }

// Coin is a token in the wallet.
type Coin struct {
	ecash.Coin
	// Obtained is when the wallet saved the token.
	Obtained time.Time `json:"obtained"`
}

// KeyRef is an output key as the journal keeps it, so that a resume needs
// no key list.
type KeyRef struct {
	Denomination uint64    `json:"denomination"`
	TokenKey     []byte    `json:"token_key"`
	NotBefore    time.Time `json:"not_before"`
	End          time.Time `json:"end"`
	Grace        int64     `json:"grace_seconds"`
}

// Entry is a journaled request.
type Entry struct {
	// ID names the entry (random hex).
	ID string `json:"id"`
	// Path is the issuer endpoint (ecash.IssuePath or ecash.SpendPath).
	Path string `json:"path"`
	// Request is the exact body sent, and resent.
	Request []byte `json:"request"`
	// Seed derives the outputs' nonces and blinds.
	Seed []byte `json:"seed"`
	// TokenChallenge is the TokenChallenge the outputs answer.
	TokenChallenge []byte `json:"token_challenge"`
	// Keys are the outputs' keys, in order.
	Keys []KeyRef `json:"keys"`
	// Input is the token being spent (spends only); it is no longer in the
	// spendable set.
	Input *Coin `json:"input,omitempty"`
	// Created is when the entry was journaled.
	Created time.Time `json:"created"`
}

// File is the wallet file.
type File struct {
	Version int     `json:"version"`
	Issuer  string  `json:"issuer"`
	Coins   []Coin  `json:"coins"`
	Journal []Entry `json:"journal"`
}

// Wallet is an open wallet file. It is not safe for concurrent use.
type Wallet struct {
	path   string
	opts   Options
	f      File
	lock   *os.File
	client *ecash.Client
}

// Create writes a new, empty wallet for the issuer at issuerURL. It fails
// when path exists.
func Create(path, issuerURL string) error {
	b, err := encode(&File{Version: Version, Issuer: issuerURL})
	if err != nil {
		return err
	}
	err = atomicfile.WriteNew(path, b, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("wallet: %s exists: open it, or choose another path", path)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSave, err)
	}
	return nil
}

// Open locks and reads the wallet at path.
func Open(path string, opts Options) (*Wallet, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	if opts.MinAge < 0 {
		return nil, errors.New("wallet: negative minimum age")
	}
	// Before the lock file is made, so that a wrong path leaves nothing.
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s: %w", ErrNoWallet, path, err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("wallet: lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrInUse
		}
		return nil, fmt.Errorf("wallet: lock: %w", err)
	}
	w := &Wallet{path: path, opts: opts, lock: lock}
	b, err := os.ReadFile(path)
	if err == nil {
		// No size limit: the file holds only what this package wrote,
		// and a limit could only lock its owner out of their coins.
		err = (strictjson.Rules{MaxSize: -1}).Unmarshal(b, &w.f)
	}
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("wallet: read %s: %w", path, err)
	}
	if w.f.Version != Version {
		lock.Close()
		return nil, fmt.Errorf("wallet: %s: version %d, want %d", path, w.f.Version, Version)
	}
	w.client = &ecash.Client{URL: w.f.Issuer, HTTPClient: opts.HTTPClient}
	return w, nil
}

// Close releases the lock.
func (w *Wallet) Close() error { return w.lock.Close() }

// Issuer returns the issuer URL.
func (w *Wallet) Issuer() string { return w.f.Issuer }

// Coins returns the spendable tokens, oldest first.
func (w *Wallet) Coins() []Coin { return slices.Clone(w.f.Coins) }

// Journal returns the journaled requests.
func (w *Wallet) Journal() []Entry { return slices.Clone(w.f.Journal) }

// Balance returns the value of the spendable tokens and the value held by
// journaled spends (the inputs in flight).
func (w *Wallet) Balance() (spendable, inFlight uint64) {
	for _, c := range w.f.Coins {
		spendable += c.Denomination
	}
	for _, e := range w.f.Journal {
		if e.Input != nil {
			inFlight += e.Input.Denomination
		}
	}
	return spendable, inFlight
}

func (w *Wallet) hook(step string) {
	if w.opts.Hook != nil {
		w.opts.Hook(step)
	}
}

// save writes f to path atomically (package atomicfile): a temporary file
// in the same directory, synced, renamed into place, and the directory
// synced.
func save(path string, f *File) error {
	b, err := encode(f)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("%w: %w", ErrSave, err)
	}
	return nil
}

// encode returns the wallet file's bytes.
func encode(f *File) ([]byte, error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%w: encode: %w", ErrSave, err)
	}
	return append(b, '\n'), nil
}

// commit saves the wallet's state; on failure the in-memory state is
// rolled back to what is on disk.
func (w *Wallet) commit(next File) error {
	if err := save(w.path, &next); err != nil {
		return err
	}
	w.f = next
	return nil
}

func (w *Wallet) clone() File {
	f := w.f
	f.Coins = slices.Clone(f.Coins)
	f.Journal = slices.Clone(f.Journal)
	return f
}

func (w *Wallet) seed() ([]byte, string, error) {
	b := make([]byte, ecash.SeedSize+8)
	if _, err := io.ReadFull(w.opts.Rand, b); err != nil {
		return nil, "", fmt.Errorf("wallet: seed: %w", err)
	}
	return b[:ecash.SeedSize], hex.EncodeToString(b[ecash.SeedSize:]), nil
}

// prepare builds the outputs of an entry from its keys and seed.
func (e *Entry) pending() (*ecash.Pending, error) {
	keys := make([]*ecash.Key, len(e.Keys))
	for i, r := range e.Keys {
		if r.Grace < 0 || r.Grace > math.MaxInt64/int64(time.Second) {
			// A journal written by hand, or damaged: a grace past what a
			// time.Duration holds would wrap, as the issuer's key list
			// refuses it.
			return nil, fmt.Errorf("wallet: entry: key grace of %d seconds: want 0 to %d", r.Grace, math.MaxInt64/int64(time.Second))
		}
		k, err := ecash.ParseKey(r.Denomination, r.TokenKey, r.NotBefore, r.End, time.Duration(r.Grace)*time.Second)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return ecash.NewOutputs(e.TokenChallenge, keys, e.Seed)
}

func refs(keys []*ecash.Key) []KeyRef {
	out := make([]KeyRef, len(keys))
	for i, k := range keys {
		out[i] = KeyRef{Denomination: k.Denomination, TokenKey: k.TokenKey, NotBefore: k.NotBefore, End: k.End, Grace: int64(k.Grace / time.Second)}
	}
	return out
}

// Issue solves a proof-of-work challenge and obtains tokens worth the
// issuer's issue value, journaling the request before it is sent. It
// returns the new tokens.
func (w *Wallet) Issue(ctx context.Context) ([]Coin, error) {
	l, err := w.client.Keys(ctx)
	if err != nil {
		return nil, err
	}
	cur, err := l.Current(w.opts.Now())
	if err != nil {
		return nil, err
	}
	keys, err := ecash.Decompose(l.IssueValue, cur)
	if err != nil {
		return nil, err
	}
	ch, err := w.client.Challenge(ctx)
	if err != nil {
		return nil, err
	}
	sol, err := ecash.Solve(ctx, ch)
	if err != nil {
		return nil, err
	}
	seed, id, err := w.seed()
	if err != nil {
		return nil, err
	}
	p, err := ecash.NewOutputs(l.TokenChallenge, keys, seed)
	if err != nil {
		return nil, err
	}
	body, err := (&ecash.Issue{Challenge: ch.Raw, Solution: sol, Outputs: p.Outputs}).MarshalBinary()
	if err != nil {
		return nil, err
	}
	e := Entry{ID: id, Path: ecash.IssuePath, Request: body, Seed: seed, TokenChallenge: l.TokenChallenge, Keys: refs(keys), Created: w.opts.Now()}
	next := w.clone()
	next.Journal = append(next.Journal, e)
	if err := w.commit(next); err != nil {
		return nil, err
	}
	w.hook(StepJournaled)
	coins, _, err := w.send(ctx, e.ID)
	return coins, err
}

// Spend pays amount (at least the issuer's price) with the oldest token
// that is at least MinAge old and worth at least that, asking the rest back
// as change. The token leaves the spendable set in the save that journals the
// request. It returns the issuer's response (the charge) and the change.
func (w *Wallet) Spend(ctx context.Context, amount uint64) (*ecash.Response, []Coin, error) {
	l, err := w.client.Keys(ctx)
	if err != nil {
		return nil, nil, err
	}
	now := w.opts.Now()
	cur, err := l.Current(now)
	if err != nil {
		return nil, nil, err
	}
	if amount < l.Price {
		amount = l.Price
	}
	idx := -1
	none := &NoTokenError{Amount: amount, MinAge: w.opts.MinAge, Now: now}
	for i, c := range w.f.Coins { // oldest first
		none.Largest = max(none.Largest, c.Denomination)
		if c.Denomination < amount {
			continue
		}
		if ready := c.Obtained.Add(w.opts.MinAge); ready.After(now) {
			if none.ReadyAt.IsZero() || ready.Before(none.ReadyAt) {
				none.ReadyAt = ready
			}
			continue
		}
		if idx < 0 || c.Obtained.Before(w.f.Coins[idx].Obtained) {
			idx = i
		}
	}
	if idx < 0 {
		return nil, nil, none
	}
	in := w.f.Coins[idx]
	keys, err := ecash.Decompose(in.Denomination-amount, cur)
	if err != nil {
		return nil, nil, err
	}
	seed, id, err := w.seed()
	if err != nil {
		return nil, nil, err
	}
	p, err := ecash.NewOutputs(l.TokenChallenge, keys, seed)
	if err != nil {
		return nil, nil, err
	}
	body, err := (&ecash.Spend{Token: in.Token, Return: in.Denomination - amount, Outputs: p.Outputs}).MarshalBinary()
	if err != nil {
		return nil, nil, err
	}
	e := Entry{ID: id, Path: ecash.SpendPath, Request: body, Seed: seed, TokenChallenge: l.TokenChallenge, Keys: refs(keys), Input: &in, Created: now}
	next := w.clone()
	next.Coins = slices.Delete(next.Coins, idx, idx+1)
	next.Journal = append(next.Journal, e)
	if err := w.commit(next); err != nil {
		return nil, nil, err
	}
	w.hook(StepJournaled)
	coins, resp, err := w.send(ctx, e.ID)
	return resp, coins, err
}

// send sends the journaled entry id (its exact bytes) and settles it:
// a response is finished into coins and the entry cleared in one save; a
// final error clears the entry (restoring the input after proof_invalid or
// bad_request); anything else keeps it.
func (w *Wallet) send(ctx context.Context, id string) ([]Coin, *ecash.Response, error) {
	i := slices.IndexFunc(w.f.Journal, func(e Entry) bool { return e.ID == id })
	if i < 0 {
		return nil, nil, fmt.Errorf("wallet: no journal entry %s", id)
	}
	e := w.f.Journal[i]
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { w.hook(StepSent) }})
	a, err := w.client.Send(tctx, e.Path, e.Request)
	if err != nil {
		var ee *ecash.Error
		if !errors.As(err, &ee) || !ee.Final() {
			return nil, nil, err // retryable: the entry stays
		}
		w.hook(StepAnswered)
		next := w.clone()
		next.Journal = slices.Delete(next.Journal, i, i+1)
		if ee.Untouched() && e.Input != nil {
			next.Coins = append(next.Coins, *e.Input)
			sortCoins(next.Coins)
		}
		if serr := w.commit(next); serr != nil {
			return nil, nil, serr
		}
		w.hook(StepSaved)
		return nil, nil, err
	}
	w.hook(StepAnswered)
	p, err := e.pending()
	if err != nil {
		return nil, nil, err
	}
	cs, resp, err := p.Finish(a.Response)
	if err != nil {
		return nil, nil, fmt.Errorf("wallet: the issuer's response does not finish (entry %s kept): %w", e.ID, err)
	}
	now := w.opts.Now()
	coins := make([]Coin, len(cs))
	for j, c := range cs {
		coins[j] = Coin{Coin: c, Obtained: now}
	}
	next := w.clone()
	next.Journal = slices.Delete(next.Journal, i, i+1)
	next.Coins = append(next.Coins, coins...)
	if err := w.commit(next); err != nil {
		return nil, nil, err
	}
	w.hook(StepSaved)
	return coins, resp, nil
}

func sortCoins(cs []Coin) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Obtained.Before(cs[j].Obtained) })
}

// Report says what a Resume did.
type Report struct {
	// Finished counts entries answered with a response (fresh or replayed).
	Finished int
	// Cleared counts entries cleared by a final error.
	Cleared int
	// Restored counts inputs returned to the spendable set.
	Restored int
	// Kept counts entries left for the next resume (network errors, 5xx).
	Kept int
	// Errors are the errors met, one per entry not finished.
	Errors []error
}

// Resume resends every journaled request byte for byte and settles it (see
// the package guarantees). It returns an error only when the wallet could
// not be saved; the report lists the rest.
func (w *Wallet) Resume(ctx context.Context) (Report, error) {
	var r Report
	ids := make([]string, len(w.f.Journal))
	for i, e := range w.f.Journal {
		ids[i] = e.ID
	}
	for _, id := range ids {
		i := slices.IndexFunc(w.f.Journal, func(e Entry) bool { return e.ID == id })
		hadInput := w.f.Journal[i].Input != nil
		before := len(w.f.Coins)
		_, _, err := w.send(ctx, id)
		var ee *ecash.Error
		switch {
		case err == nil:
			r.Finished++
		case errors.As(err, &ee) && ee.Final():
			r.Cleared++
			if hadInput && len(w.f.Coins) > before {
				r.Restored++
			}
			r.Errors = append(r.Errors, err)
		default:
			if slices.ContainsFunc(w.f.Journal, func(e Entry) bool { return e.ID == id }) {
				r.Kept++
			}
			r.Errors = append(r.Errors, err)
			if errors.Is(err, ErrSave) {
				return r, err
			}
		}
	}
	return r, nil
}
