package privacypass

import (
	"cmp"
	"context"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudflare/circl/oprf"
	"github.com/spentledger/spent/internal/atomicfile"
)

// Defaults of the key schedule.
const (
	// DefaultEpoch is the default key epoch: one key per token type per day.
	DefaultEpoch = 24 * time.Hour
	// DefaultGrace is how long, by default, tokens of a key are still
	// accepted after its epoch ends.
	DefaultGrace = 6 * time.Hour
	// DefaultSkew is the default clock-skew allowance: a key is used for
	// issuance from Skew before its epoch to Skew after it.
	DefaultSkew = 5 * time.Minute
)

// KeyringConfig configures a Keyring.
type KeyringConfig struct {
	// Dir is the key directory, created (mode 0700) if missing. Processes
	// that issue for one issuer must share it: it is what guarantees one
	// key per (token type, epoch).
	Dir string
	// KEK is the 32-byte AES-256-GCM key-encryption key.
	KEK []byte
	// IssuerName is the issuer's name; key files of another issuer in Dir
	// are an error.
	IssuerName string
	// TokenTypes are the types to keep keys for.
	TokenTypes []TokenType
	// Epoch is the key epoch, at least one minute; epochs are aligned to
	// multiples of it counted from the Unix epoch (midnight UTC for 24 h).
	Epoch time.Duration
	// Grace is how long after its epoch a key's tokens are accepted. It is
	// stored with each key when the key is created: changing it applies to
	// new keys only, so that a ledger entry never expires before its token.
	Grace time.Duration
	// Skew is the clock-skew allowance (see DefaultSkew).
	Skew time.Duration
	// ReadOnly opens the directory without ever creating or deleting a key:
	// for origins that verify type 0x0001 tokens with the issuer's keys.
	ReadOnly bool
	// Now is the clock; nil means time.Now. The server passes the ledger's.
	Now func() time.Time
	// Rand is the source of randomness for VOPRF keys and key-file nonces;
	// nil means crypto/rand.
	Rand io.Reader
	// GenerateRSAKey makes a 2048-bit RSA key; nil means rsa.GenerateKey.
	// Tests set it to hand out pre-generated keys.
	GenerateRSAKey func() (*rsa.PrivateKey, error)
	// Logger receives key creation, collision and deletion events; nil
	// means slog.Default().
	Logger *slog.Logger
}

// Keyring holds an issuer's keys: it loads them from the key directory,
// creates the keys of the current and the next epoch when they are
// missing, deletes keys whose tokens are no longer accepted, and answers
// key lookups for the issuer and its origins. It is safe for concurrent use.
type Keyring struct {
	cfg  KeyringConfig
	aead cipher.AEAD
	log  *slog.Logger

	rotMu   sync.Mutex // one rotation at a time in this process
	snap    atomic.Pointer[keySnapshot]
	kicking atomic.Bool

	bgMu   sync.Mutex
	bg     sync.WaitGroup // background rotations started by kick
	closed bool
}

// keySnapshot is an immutable view of the keys.
type keySnapshot struct {
	version uint64
	keys    []*issuerKey // by token type, then epoch
	byID    map[[KeyIDSize]byte]*issuerKey
}

// OpenKeyring loads the keys of cfg.Dir and, unless cfg.ReadOnly, creates
// the missing keys of the current and next epochs (see Rotate). A key file
// that cannot be decrypted, belongs to another issuer, or has another epoch
// length while still live is an error: the keyring never replaces a key.
func OpenKeyring(ctx context.Context, cfg KeyringConfig) (*Keyring, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.GenerateRSAKey == nil {
		cfg.GenerateRSAKey = func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 8*rsaNk) }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.Dir == "":
		return nil, errors.New("privacypass: keyring: no key directory")
	case !validName(cfg.IssuerName):
		return nil, fmt.Errorf("privacypass: keyring: issuer name %q: 1 to %d bytes of visible ASCII", cfg.IssuerName, maxNameBytes)
	case len(cfg.TokenTypes) == 0:
		return nil, errors.New("privacypass: keyring: no token types")
	case cfg.Epoch < time.Minute:
		return nil, fmt.Errorf("privacypass: keyring: epoch %v: at least 1m", cfg.Epoch)
	case cfg.Grace < 0 || cfg.Skew < 0:
		return nil, errors.New("privacypass: keyring: negative grace or skew")
	}
	for _, t := range cfg.TokenTypes {
		if !t.Supported() {
			return nil, fmt.Errorf("privacypass: keyring: %w: %v", ErrTokenType, t)
		}
	}
	aead, err := newGCM(cfg.KEK)
	if err != nil {
		return nil, err
	}
	if !cfg.ReadOnly {
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("privacypass: keyring: %w", err)
		}
	}
	k := &Keyring{cfg: cfg, aead: aead, log: cfg.Logger}
	if cfg.ReadOnly {
		err = k.Reload()
	} else {
		err = k.Rotate(ctx)
	}
	if err != nil {
		return nil, err
	}
	return k, nil
}

// epochIndex returns the index of the epoch that holds t.
func (k *Keyring) epochIndex(t time.Time) int64 { return floorDiv(t.UnixNano(), int64(k.cfg.Epoch)) }

// epochStart returns the start of epoch i.
func (k *Keyring) epochStart(i int64) time.Time { return time.Unix(0, i*int64(k.cfg.Epoch)).UTC() }

// EpochEnd returns the end of the epoch that holds t: when the per-client
// issuance quotas of that epoch are forgotten.
func (k *Keyring) EpochEnd(t time.Time) time.Time { return k.epochStart(k.epochIndex(t) + 1) }

// dead reports whether no token of key can be accepted any more at now,
// skew included: its file may be deleted.
func (k *Keyring) dead(key *issuerKey, now time.Time) bool {
	return !now.Before(key.AcceptUntil().Add(k.cfg.Skew))
}

// load reads every key file of the directory; dead ones are skipped and,
// when remove is set, deleted.
func (k *Keyring) load(now time.Time, remove bool) ([]*issuerKey, error) {
	ents, err := os.ReadDir(k.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("privacypass: keyring: %w", err)
	}
	var keys []*issuerKey
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, keyFileSuffix) || strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(k.cfg.Dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("privacypass: keyring: %w", err)
		}
		h, key, err := openKey(k.aead, b)
		if err != nil {
			return nil, fmt.Errorf("privacypass: keyring: %s: %w", path, err)
		}
		if h.issuer != k.cfg.IssuerName {
			return nil, fmt.Errorf("privacypass: keyring: %s belongs to issuer %q, not %q: give each issuer its own key directory", path, h.issuer, k.cfg.IssuerName)
		}
		if name != keyFileName(h.tokenType, h.start) {
			return nil, fmt.Errorf("privacypass: keyring: %s holds the key of %v, epoch %s: file renamed?", path, h.tokenType, h.start.Format(time.RFC3339))
		}
		if k.dead(key, now) {
			if remove {
				if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("privacypass: keyring: %w", err)
				}
				k.log.Info("privacypass: deleted a key whose tokens are no longer accepted", "type", uint16(h.tokenType),
					"epoch_start", h.start, "key_id", hexID(key.ID))
			}
			continue
		}
		if h.epoch != k.cfg.Epoch {
			return nil, fmt.Errorf("privacypass: keyring: %s was made for %v epochs, the config says %v: a live key would overlap the new schedule; keep the old epoch until %s (when its tokens expire), or use a new key directory and issuer name",
				path, h.epoch, k.cfg.Epoch, key.AcceptUntil().Add(k.cfg.Skew).Format(time.RFC3339))
		}
		if h.start.UnixNano()%int64(h.epoch) != 0 {
			return nil, fmt.Errorf("privacypass: keyring: %s: epoch start %s is not aligned to the epoch", path, h.start.Format(time.RFC3339))
		}
		key.epoch = k.epochIndex(h.start)
		keys = append(keys, key)
	}
	return keys, nil
}

// publish makes keys the current snapshot.
func (k *Keyring) publish(keys []*issuerKey) {
	slices.SortFunc(keys, func(a, b *issuerKey) int {
		return cmp.Or(cmp.Compare(a.TokenType, b.TokenType), cmp.Compare(a.epoch, b.epoch))
	})
	s := &keySnapshot{keys: keys, byID: make(map[[KeyIDSize]byte]*issuerKey, len(keys))}
	for _, key := range keys {
		s.byID[key.ID] = key
	}
	if old := k.snap.Load(); old != nil {
		s.version = old.version + 1
	}
	k.snap.Store(s)
}

// Reload rereads the key directory without creating or deleting keys: what
// a read-only keyring does to pick up keys the issuer created.
func (k *Keyring) Reload() error {
	keys, err := k.load(k.cfg.Now(), false)
	if err != nil {
		return err
	}
	k.publish(keys)
	return nil
}

// complete reports whether the snapshot holds a key of every type for the
// current and the next epoch, and no dead key.
func (k *Keyring) complete(s *keySnapshot, now time.Time) bool {
	if s == nil {
		return false
	}
	cur := k.epochIndex(now)
	for _, t := range k.cfg.TokenTypes {
		for _, e := range []int64{cur, cur + 1} {
			if !slices.ContainsFunc(s.keys, func(key *issuerKey) bool { return key.TokenType == t && key.epoch == e }) {
				return false
			}
		}
	}
	for _, key := range s.keys {
		if k.dead(key, now) {
			return false
		}
	}
	return true
}

// Rotate brings the directory up to date at the keyring's now: it creates
// the keys of the current and the next epoch that are missing (so that each
// key is published a full epoch before it is used) and deletes the keys
// whose tokens are no longer accepted. Creation happens under an exclusive
// lock on the directory, after rereading it, so that processes sharing the
// directory never make two keys for one epoch. A new key whose truncated id
// equals that of a live key is discarded and made again before it is
// written. Read-only keyrings only reload.
func (k *Keyring) Rotate(ctx context.Context) error {
	if k.cfg.ReadOnly {
		return k.Reload()
	}
	k.rotMu.Lock()
	defer k.rotMu.Unlock()
	now := k.cfg.Now()
	if k.complete(k.snap.Load(), now) {
		return nil
	}
	lock, err := lockDir(ctx, k.cfg.Dir)
	if err != nil {
		return fmt.Errorf("privacypass: keyring: %w", err)
	}
	defer lock.unlock()
	keys, err := k.load(now, true)
	if err != nil {
		return err
	}
	cur := k.epochIndex(now)
	for _, t := range k.cfg.TokenTypes {
		for _, e := range []int64{cur, cur + 1} {
			if slices.ContainsFunc(keys, func(key *issuerKey) bool { return key.TokenType == t && key.epoch == e }) {
				continue
			}
			key, err := k.create(t, e, keys)
			if err != nil {
				return err
			}
			keys = append(keys, key)
		}
	}
	k.publish(keys)
	return nil
}

// maxCollisions bounds the attempts at a key whose truncated id is free.
const maxCollisions = 64

// create makes, stores and returns the key of (t, epoch e), whose truncated
// id differs from every key of live.
func (k *Keyring) create(t TokenType, e int64, live []*issuerKey) (*issuerKey, error) {
	start := k.epochStart(e)
	for range maxCollisions {
		key, err := k.generate(t)
		if err != nil {
			return nil, err
		}
		trunc := TruncatedKeyID(key.ID)
		if i := slices.IndexFunc(live, func(o *issuerKey) bool { return TruncatedKeyID(o.ID) == trunc }); i >= 0 {
			k.log.Info("privacypass: new key shares its truncated key id with a live key; making another",
				"type", uint16(t), "epoch_start", start, "truncated_key_id", trunc, "other", hexID(live[i].ID))
			continue
		}
		key.NotBefore, key.End, key.Grace, key.epoch = start, k.epochStart(e+1), k.cfg.Grace, e
		h := keyHeader{tokenType: t, start: start, epoch: k.cfg.Epoch, grace: k.cfg.Grace, issuer: k.cfg.IssuerName}
		data, err := sealKey(k.aead, k.cfg.Rand, &h, key.secret)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(k.cfg.Dir, keyFileName(t, start))
		if err := atomicfile.WriteNew(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("privacypass: keyring: write %s: %w", path, err)
		}
		k.log.Info("privacypass: created key", "type", uint16(t), "epoch_start", start, "key_id", hexID(key.ID))
		return key, nil
	}
	return nil, fmt.Errorf("privacypass: keyring: %d keys in a row collided with a live truncated key id", maxCollisions)
}

// generate makes a fresh key of type t (without its epoch).
func (k *Keyring) generate(t TokenType) (*issuerKey, error) {
	switch t {
	case TypeBlindRSA:
		sk, err := k.cfg.GenerateRSAKey()
		if err != nil {
			return nil, fmt.Errorf("privacypass: generate RSA key: %w", err)
		}
		if sk.N.BitLen() != 8*rsaNk {
			return nil, fmt.Errorf("privacypass: generated RSA key of %d bits: want %d", sk.N.BitLen(), 8*rsaNk)
		}
		key, err := newRSAKey(sk)
		if err != nil {
			return nil, err
		}
		if key.secret, err = x509.MarshalPKCS8PrivateKey(sk); err != nil {
			return nil, fmt.Errorf("privacypass: marshal RSA key: %w", err)
		}
		return key, nil
	case TypeVOPRF:
		sk, err := oprf.GenerateKey(oprf.SuiteP384, k.cfg.Rand)
		if err != nil {
			return nil, fmt.Errorf("privacypass: generate VOPRF key: %w", err)
		}
		key, err := newVOPRFKey(sk)
		if err != nil {
			return nil, err
		}
		if key.secret, err = sk.MarshalBinary(); err != nil {
			return nil, fmt.Errorf("privacypass: marshal VOPRF key: %w", err)
		}
		return key, nil
	}
	return nil, fmt.Errorf("privacypass: %w: %v", ErrTokenType, t)
}

// kick starts a rotation in the background when the snapshot is not
// complete at now and none is running: a safety net for a keyring whose
// Run loop is not running.
func (k *Keyring) kick(now time.Time) {
	if k.complete(k.snap.Load(), now) || !k.kicking.CompareAndSwap(false, true) {
		return
	}
	k.bgMu.Lock()
	defer k.bgMu.Unlock()
	if k.closed {
		k.kicking.Store(false)
		return
	}
	k.bg.Add(1)
	go func() {
		defer k.bg.Done()
		defer k.kicking.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := k.Rotate(ctx); err != nil {
			k.log.Error("privacypass: key rotation failed", "err", err)
		}
	}()
}

// Close waits for a background rotation that is under way and stops
// starting new ones. Lookups keep working on the keys loaded.
func (k *Keyring) Close() error {
	k.bgMu.Lock()
	k.closed = true
	k.bgMu.Unlock()
	k.bg.Wait()
	return nil
}

// Run rotates (or, read-only, reloads) the keys every interval until ctx
// ends; interval 0 means a minute, or a sixtieth of the epoch if that is
// shorter. Errors are logged and retried at the next tick.
func (k *Keyring) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = min(time.Minute, k.cfg.Epoch/60)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := k.Rotate(ctx); err != nil && ctx.Err() == nil {
				k.log.Error("privacypass: key rotation failed", "err", err)
			}
		}
	}
}

// Lookup returns the verification key with token_key_id id, if the
// keyring holds a live one of type t.
func (k *Keyring) Lookup(t TokenType, id [KeyIDSize]byte) (*VerificationKey, bool) {
	key, ok := k.snap.Load().byID[id]
	if !ok || key.TokenType != t {
		return nil, false
	}
	return &key.VerificationKey, true
}

// Current returns the key of type t whose epoch holds now.
func (k *Keyring) Current(t TokenType, now time.Time) (*VerificationKey, bool) {
	key := k.issuing(t, now)
	if key == nil {
		return nil, false
	}
	return &key.VerificationKey, true
}

// issuing returns the key of type t whose epoch holds now, or nil.
func (k *Keyring) issuing(t TokenType, now time.Time) *issuerKey {
	e := k.epochIndex(now)
	for _, key := range k.snap.Load().keys {
		if key.TokenType == t && key.epoch == e {
			return key
		}
	}
	return nil
}

// forRequest returns the key a token request of type t with truncated id
// trunc is for: a key whose epoch, widened by the skew allowance, holds
// now.
func (k *Keyring) forRequest(t TokenType, trunc uint8, now time.Time) *issuerKey {
	for _, key := range k.snap.Load().keys {
		if key.TokenType != t || TruncatedKeyID(key.ID) != trunc {
			continue
		}
		if !now.Before(key.NotBefore.Add(-k.cfg.Skew)) && now.Before(key.End.Add(k.cfg.Skew)) {
			return key
		}
	}
	return nil
}

// Directory returns the issuer directory at now: every key whose tokens
// are still accepted, including the next epoch's, which clients must not
// use before its not-before.
func (k *Keyring) Directory(requestURI string, now time.Time) *Directory {
	d := &Directory{IssuerRequestURI: requestURI}
	for _, key := range k.snap.Load().keys {
		if now.Before(key.AcceptUntil()) {
			d.TokenKeys = append(d.TokenKeys, DirectoryKey{TokenType: key.TokenType, TokenKey: key.TokenKey, NotBefore: key.NotBefore})
		}
	}
	return d
}
