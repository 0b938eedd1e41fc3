package privacypass

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cloudflare/circl/oprf"
)

// A key file holds one issuer key, encrypted with AES-256-GCM under the
// key-encryption key. Its header is in the clear and authenticated as the
// GCM additional data, so that a file cannot be renamed or edited into
// another epoch, type or issuer:
//
//	magic "SPENTPPK" | version 1 | token type u16 | epoch start (Unix ns) i64 |
//	epoch length (ns) i64 | grace (ns) i64 | len(issuer) u16 | issuer |
//	nonce [12] | ciphertext of the secret key ‖ tag [16]
//
// The secret is the PKCS #8 DER of the RSA key (type 0x0002) or the
// serialized P-384 scalar (type 0x0001).
const (
	keyFileMagic   = "SPENTPPK"
	keyFileVersion = 1
	keyFileSuffix  = ".key"
)

// keyFileName is the name of the file of (type, epoch start): one name per
// (type, epoch), so that a second key for an epoch cannot be written beside
// the first.
func keyFileName(t TokenType, start time.Time) string {
	return fmt.Sprintf("%04x-%020d%s", uint16(t), start.UnixNano(), keyFileSuffix)
}

// keyHeader is the clear, authenticated part of a key file.
type keyHeader struct {
	tokenType TokenType
	start     time.Time
	epoch     time.Duration
	grace     time.Duration
	issuer    string
}

func (h *keyHeader) append(b []byte) []byte {
	b = append(b, keyFileMagic...)
	b = append(b, keyFileVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(h.tokenType))
	b = binary.BigEndian.AppendUint64(b, uint64(h.start.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(h.epoch))
	b = binary.BigEndian.AppendUint64(b, uint64(h.grace))
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.issuer)))
	return append(b, h.issuer...)
}

func parseKeyHeader(b []byte) (keyHeader, []byte, error) {
	var h keyHeader
	if len(b) < len(keyFileMagic)+1 || string(b[:len(keyFileMagic)]) != keyFileMagic {
		return h, nil, errors.New("not a spent privacypass key file")
	}
	if v := b[len(keyFileMagic)]; v != keyFileVersion {
		return h, nil, fmt.Errorf("key file version %d: this build reads version %d", v, keyFileVersion)
	}
	r := reader{b: b[len(keyFileMagic)+1:]}
	h.tokenType = TokenType(r.u16())
	start := r.bytes(8)
	epoch := r.bytes(8)
	grace := r.bytes(8)
	h.issuer = string(r.bytes(int(r.u16())))
	if r.bad {
		return h, nil, errors.New("key file header truncated")
	}
	h.start = time.Unix(0, int64(binary.BigEndian.Uint64(start))).UTC()
	h.epoch = time.Duration(binary.BigEndian.Uint64(epoch))
	h.grace = time.Duration(binary.BigEndian.Uint64(grace))
	if h.epoch <= 0 || h.grace < 0 {
		return h, nil, errors.New("key file header: bad epoch or grace")
	}
	return h, r.b, nil
}

func newGCM(kek []byte) (cipher.AEAD, error) {
	if len(kek) != KEKSize {
		return nil, fmt.Errorf("privacypass: key-encryption key of %d bytes: want %d", len(kek), KEKSize)
	}
	block, err := aes.NewCipher(kek)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealKey returns the contents of the key file of k.
func sealKey(aead cipher.AEAD, rnd io.Reader, h *keyHeader, secret []byte) ([]byte, error) {
	out := h.append(nil)
	ad := len(out)
	nonce := make([]byte, aead.NonceSize())
	if _, err := io.ReadFull(rnd, nonce); err != nil {
		return nil, fmt.Errorf("privacypass: key file nonce: %w", err)
	}
	out = append(out, nonce...)
	return aead.Seal(out, nonce, secret, out[:ad]), nil
}

// openKey decrypts a key file and rebuilds its key.
func openKey(aead cipher.AEAD, b []byte) (keyHeader, *issuerKey, error) {
	h, rest, err := parseKeyHeader(b)
	if err != nil {
		return h, nil, err
	}
	ad := b[:len(b)-len(rest)]
	ns := aead.NonceSize()
	if len(rest) < ns+aead.Overhead() {
		return h, nil, errors.New("key file truncated")
	}
	secret, err := aead.Open(nil, rest[:ns], rest[ns:], ad)
	if err != nil {
		return h, nil, errors.New("cannot decrypt key file: wrong key-encryption key, or the file was altered")
	}
	k, err := keyFromSecret(h.tokenType, secret)
	if err != nil {
		return h, nil, err
	}
	k.NotBefore = h.start
	k.End = h.start.Add(h.epoch)
	k.Grace = h.grace
	return h, k, nil
}

// keyFromSecret rebuilds an issuer key from its stored secret.
func keyFromSecret(t TokenType, secret []byte) (*issuerKey, error) {
	var k *issuerKey
	switch t {
	case TypeBlindRSA:
		pk, err := x509.ParsePKCS8PrivateKey(secret)
		if err != nil {
			return nil, fmt.Errorf("key file: %w", err)
		}
		sk, ok := pk.(*rsa.PrivateKey)
		if !ok {
			return nil, errors.New("key file: not an RSA key")
		}
		if k, err = newRSAKey(sk); err != nil {
			return nil, err
		}
	case TypeVOPRF:
		sk := new(oprf.PrivateKey)
		if err := sk.UnmarshalBinary(oprf.SuiteP384, secret); err != nil {
			return nil, fmt.Errorf("key file: %w", err)
		}
		var err error
		if k, err = newVOPRFKey(sk); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("key file: %w: %v", ErrTokenType, t)
	}
	k.secret = secret
	return k, nil
}

// dirLock is an exclusive advisory lock (flock) on a file in the key
// directory, held while keys are created, so that two processes sharing a
// directory never generate keys for the same epoch at once.
type dirLock struct{ f *os.File }

func lockDir(ctx context.Context, dir string) (*dirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &dirLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (l *dirLock) unlock() error {
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}
