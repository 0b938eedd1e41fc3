package ecash

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/spentledger/spent/internal/atomicfile"
	"github.com/spentledger/spent/internal/strictjson"
	"github.com/spentledger/spent/privacypass"
	"github.com/spentledger/spent/privacypass/blindsign"
)

// Key is one issuing key: a blind-RSA key of one denomination for one epoch.
// Tokens signed with it are worth Denomination.
type Key struct {
	// Denomination is the value of every token signed with the key.
	Denomination uint64
	// ID is the token_key_id: SHA-256 of TokenKey.
	ID [privacypass.KeyIDSize]byte
	// TokenKey is the RSASSA-PSS SubjectPublicKeyInfo, as privacypass
	// publishes it.
	TokenKey []byte
	// NotBefore is the start of the key's epoch.
	NotBefore time.Time
	// End is the end of its epoch: no token is issued under it after End
	// (plus the clock-skew allowance).
	End time.Time
	// Grace is how long after End its tokens are still accepted.
	Grace time.Duration

	pub    *rsa.PublicKey
	signer *blindsign.Signer // nil on a client
}

// AcceptUntil is the key's last acceptance instant, End + Grace: its tokens
// are accepted strictly before it, and a spend's ledger entry expires then.
func (k *Key) AcceptUntil() time.Time { return k.End.Add(k.Grace) }

// Verify reports whether tok carries a valid signature of k over its
// authenticator input (RSABSSA-SHA384-PSS-Deterministic, RFC 9474, as
// privacypass token type 0x0002 uses it). It checks the cryptography only.
func (k *Key) Verify(tok *privacypass.Token) bool {
	if tok.TokenType != privacypass.TypeBlindRSA || tok.KeyID != k.ID || k.pub == nil {
		return false
	}
	h := sha512.Sum384(tok.AuthenticatorInput())
	return rsa.VerifyPSS(k.pub, crypto.SHA384, h[:], tok.Authenticator, &rsa.PSSOptions{SaltLength: 48, Hash: crypto.SHA384}) == nil
}

// inRange reports whether b, read big-endian, is a valid blinded message for
// k: exactly the modulus length and less than the modulus.
func (k *Key) inRange(b []byte) bool {
	return len(b) == (k.pub.N.BitLen()+7)/8 && new(big.Int).SetBytes(b).Cmp(k.pub.N) < 0
}

// ParseKey builds the public half of a key from what the key list
// publishes: a client verifies and blinds with it.
func ParseKey(denomination uint64, tokenKey []byte, notBefore, end time.Time, grace time.Duration) (*Key, error) {
	pub, err := privacypass.ParsePublicKey(tokenKey)
	if err != nil {
		return nil, fmt.Errorf("ecash: key: %w", err)
	}
	if denomination == 0 {
		return nil, errors.New("ecash: key: denomination 0")
	}
	return &Key{Denomination: denomination, ID: privacypass.KeyID(tokenKey), TokenKey: tokenKey,
		NotBefore: notBefore, End: end, Grace: grace, pub: pub}, nil
}

func newSecretKey(sk *rsa.PrivateKey, denom uint64, notBefore time.Time, epoch, grace time.Duration) (*Key, error) {
	tk, err := privacypass.MarshalPublicKey(&sk.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("ecash: key: %w", err)
	}
	k, err := ParseKey(denom, tk, notBefore, notBefore.Add(epoch), grace)
	if err != nil {
		return nil, err
	}
	if k.signer, err = blindsign.New(sk); err != nil {
		return nil, fmt.Errorf("ecash: key: %w", err)
	}
	return k, nil
}

// KeysConfig configures a key set.
type KeysConfig struct {
	// Dir is the key directory, created (mode 0700) when missing.
	Dir string
	// KEK is the 32-byte AES-256-GCM key that encrypts the key files.
	KEK []byte
	// IssuerName is bound into every key file: a file of another issuer
	// does not decrypt.
	IssuerName string
	// Denominations are the values issued, one key each per epoch.
	Denominations []uint64
	// Epoch is the key epoch; epochs are aligned to multiples of it from the
	// Unix epoch.
	Epoch time.Duration
	// Grace is how long after its epoch a key's tokens are accepted; it is
	// stored in the key file, so changing it applies to new keys only.
	Grace time.Duration
	// GenerateRSAKey makes a 2048-bit key; nil means rsa.GenerateKey.
	GenerateRSAKey func() (*rsa.PrivateKey, error)
	// Rand supplies key-file nonces; nil means crypto/rand.
	Rand io.Reader
}

// Keys is an issuer's set of keys: one per (denomination, epoch), created on
// demand for the current and the next epoch, persisted encrypted, and
// reloaded (never replaced) after a restart. It is safe for concurrent use.
type Keys struct {
	cfg  KeysConfig
	aead cipher.AEAD

	mu       sync.RWMutex
	byID     map[[privacypass.KeyIDSize]byte]*Key
	by       map[keySlot]*Key
	reloaded time.Time // last Find that read the directory
}

type keySlot struct {
	denom uint64
	epoch int64
}

// OpenKeys opens the key directory of cfg, loading the keys it holds.
func OpenKeys(cfg KeysConfig) (*Keys, error) {
	if len(cfg.KEK) != privacypass.KEKSize {
		return nil, fmt.Errorf("ecash: KEK of %d bytes: want %d", len(cfg.KEK), privacypass.KEKSize)
	}
	if cfg.Epoch < time.Minute || cfg.Grace < 0 {
		return nil, fmt.Errorf("ecash: epoch %v (at least 1m) or grace %v (not negative)", cfg.Epoch, cfg.Grace)
	}
	if len(cfg.Denominations) == 0 {
		return nil, errors.New("ecash: no denominations")
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.GenerateRSAKey == nil {
		cfg.GenerateRSAKey = func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) }
	}
	blk, err := aes.NewCipher(cfg.KEK)
	if err != nil {
		return nil, fmt.Errorf("ecash: KEK: %w", err)
	}
	aead, _ := cipher.NewGCM(blk)
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("ecash: key directory: %w", err)
	}
	return &Keys{cfg: cfg, aead: aead, byID: map[[privacypass.KeyIDSize]byte]*Key{}, by: map[keySlot]*Key{}}, nil
}

func (ks *Keys) epochIndex(t time.Time) int64 {
	n, e := t.UnixNano(), int64(ks.cfg.Epoch)
	q := n / e
	if n%e < 0 {
		q--
	}
	return q
}

// Current returns the key of denomination d for the epoch that holds now,
// loading or creating it.
func (ks *Keys) Current(d uint64, now time.Time) (*Key, error) {
	return ks.slot(keySlot{d, ks.epochIndex(now)})
}

// Lookup returns the key with token_key_id id, if it has been loaded.
func (ks *Keys) Lookup(id [privacypass.KeyIDSize]byte) (*Key, bool) {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	k, ok := ks.byID[id]
	return k, ok
}

// Find returns the key with token_key_id id like Lookup; when it is not
// loaded, it first loads the key files of the epochs around now that another
// process sharing the directory may have created (at most once a second).
func (ks *Keys) Find(id [privacypass.KeyIDSize]byte, now time.Time) (*Key, bool) {
	if k, ok := ks.Lookup(id); ok {
		return k, true
	}
	ks.mu.Lock()
	wait := time.Since(ks.reloaded) < time.Second
	if !wait {
		ks.reloaded = time.Now()
	}
	ks.mu.Unlock()
	if wait {
		return nil, false
	}
	e := ks.epochIndex(now)
	for _, d := range ks.cfg.Denominations {
		for _, i := range []int64{e - 1, e, e + 1} {
			ks.mu.RLock()
			_, ok := ks.by[keySlot{d, i}]
			ks.mu.RUnlock()
			if !ok {
				ks.load(keySlot{d, i}) // a missing or unreadable file stays unloaded
			}
		}
	}
	return ks.Lookup(id)
}

// Prepare loads or creates the keys of every denomination for the epochs
// of now and the next one, and loads the previous epoch's if it exists (its
// tokens are still accepted during the grace period), so that the list
// published at now is complete.
func (ks *Keys) Prepare(now time.Time) error {
	e := ks.epochIndex(now)
	for _, d := range ks.cfg.Denominations {
		if _, err := ks.load(keySlot{d, e - 1}); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, i := range []int64{e, e + 1} {
			if _, err := ks.slot(keySlot{d, i}); err != nil {
				return err
			}
		}
	}
	return nil
}

// List returns the loaded keys whose tokens are still accepted at now,
// sorted by denomination then epoch.
func (ks *Keys) List(now time.Time) []*Key {
	ks.mu.RLock()
	out := make([]*Key, 0, len(ks.by))
	for _, k := range ks.by {
		if now.Before(k.AcceptUntil()) {
			out = append(out, k)
		}
	}
	ks.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Denomination != out[j].Denomination {
			return out[i].Denomination < out[j].Denomination
		}
		return out[i].NotBefore.Before(out[j].NotBefore)
	})
	return out
}

func (ks *Keys) slot(s keySlot) (*Key, error) {
	ks.mu.RLock()
	k, ok := ks.by[s]
	ks.mu.RUnlock()
	if ok {
		return k, nil
	}
	k, err := ks.load(s)
	if errors.Is(err, os.ErrNotExist) {
		k, err = ks.create(s)
	}
	return k, err
}

// keyFile is the stored form of a key. The sealed PKCS #8 DER is bound to
// every other field through the AEAD's additional data.
type keyFile struct {
	Issuer       string `json:"issuer"`
	Denomination uint64 `json:"denomination"`
	NotBefore    int64  `json:"not_before_ns"`
	Epoch        int64  `json:"epoch_ns"`
	Grace        int64  `json:"grace_ns"`
	Nonce        []byte `json:"nonce"`
	Sealed       []byte `json:"sealed"`
}

func (f *keyFile) aad() []byte {
	return []byte("spent ecash key v1|" + f.Issuer + "|" + strconv.FormatUint(f.Denomination, 10) + "|" +
		strconv.FormatInt(f.NotBefore, 10) + "|" + strconv.FormatInt(f.Epoch, 10) + "|" + strconv.FormatInt(f.Grace, 10))
}

func (ks *Keys) path(s keySlot) string {
	return filepath.Join(ks.cfg.Dir, fmt.Sprintf("d%d-e%d.key", s.denom, s.epoch))
}

func (ks *Keys) publish(s keySlot, k *Key) *Key {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if old, ok := ks.by[s]; ok {
		return old
	}
	ks.by[s], ks.byID[k.ID] = k, k
	return k
}

func (ks *Keys) load(s keySlot) (*Key, error) {
	b, err := os.ReadFile(ks.path(s))
	if err != nil {
		return nil, err
	}
	var f keyFile
	if err := strictjson.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("ecash: key file %s: %w", ks.path(s), err)
	}
	der, err := ks.aead.Open(nil, f.Nonce, f.Sealed, f.aad())
	if err != nil || f.Issuer != ks.cfg.IssuerName || f.Denomination != s.denom || f.Epoch != int64(ks.cfg.Epoch) {
		return nil, fmt.Errorf("ecash: key file %s does not belong to this issuer, denomination and epoch length (or the KEK is wrong)", ks.path(s))
	}
	sk, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("ecash: key file %s: %w", ks.path(s), err)
	}
	rk, ok := sk.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("ecash: key file %s: not an RSA key", ks.path(s))
	}
	k, err := newSecretKey(rk, s.denom, time.Unix(0, f.NotBefore).UTC(), time.Duration(f.Epoch), time.Duration(f.Grace))
	if err != nil {
		return nil, err
	}
	return ks.publish(s, k), nil
}

// create makes the key of slot s and links it into place; when another
// process linked one first, that one is loaded instead, so that one
// directory never holds two keys for one slot.
func (ks *Keys) create(s keySlot) (*Key, error) {
	sk, err := ks.cfg.GenerateRSAKey()
	if err != nil {
		return nil, fmt.Errorf("ecash: generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(sk)
	if err != nil {
		return nil, fmt.Errorf("ecash: key: %w", err)
	}
	f := keyFile{Issuer: ks.cfg.IssuerName, Denomination: s.denom, NotBefore: s.epoch * int64(ks.cfg.Epoch),
		Epoch: int64(ks.cfg.Epoch), Grace: int64(ks.cfg.Grace), Nonce: make([]byte, ks.aead.NonceSize())}
	if _, err := io.ReadFull(ks.cfg.Rand, f.Nonce); err != nil {
		return nil, fmt.Errorf("ecash: key nonce: %w", err)
	}
	f.Sealed = ks.aead.Seal(nil, f.Nonce, der, f.aad())
	b, err := json.Marshal(&f)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteNew(ks.path(s), b, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ks.load(s)
		}
		return nil, fmt.Errorf("ecash: key file: %w", err)
	}
	k, err := newSecretKey(sk, s.denom, time.Unix(0, f.NotBefore).UTC(), ks.cfg.Epoch, ks.cfg.Grace)
	if err != nil {
		return nil, err
	}
	return ks.publish(s, k), nil
}
