package privacypass_test

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent/privacypass"
)

func keyringConfig(dir string, c *clock, gen func() (*rsa.PrivateKey, error)) privacypass.KeyringConfig {
	return privacypass.KeyringConfig{
		Dir: dir, KEK: bytes.Repeat([]byte{7}, 32), IssuerName: "issuer.example",
		TokenTypes: []privacypass.TokenType{privacypass.TypeBlindRSA, privacypass.TypeVOPRF},
		Epoch:      24 * time.Hour, Grace: 6 * time.Hour, Skew: 5 * time.Minute,
		Now: c.Now, GenerateRSAKey: gen, Logger: quietLogger(),
	}
}

func openKeyring(t *testing.T, cfg privacypass.KeyringConfig) *privacypass.Keyring {
	t.Helper()
	k, err := privacypass.OpenKeyring(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// ids returns the token_key_ids of a directory, in order.
func ids(d *privacypass.Directory) [][32]byte {
	var out [][32]byte
	for _, k := range d.TokenKeys {
		out = append(out, k.ID())
	}
	return out
}

func TestKeyringRestartKeepsKeys(t *testing.T) {
	c := &clock{t: t0}
	dir := t.TempDir()
	var made []*rsa.PrivateKey
	gen := keyGen()
	first := openKeyring(t, keyringConfig(dir, c, func() (*rsa.PrivateKey, error) {
		k, err := gen()
		made = append(made, k)
		return k, err
	}))
	before := first.Directory("/token-request", t0)
	if len(before.TokenKeys) != 4 {
		t.Fatalf("directory of a new keyring: %d keys, want 4 (two types, this epoch and the next)", len(before.TokenKeys))
	}
	first.Close()

	// A restart with a generator that would make other keys loads the
	// stored ones instead.
	again := openKeyring(t, keyringConfig(dir, c, keyGen()))
	after := again.Directory("/token-request", t0)
	if !slices.Equal(ids(before), ids(after)) {
		t.Fatalf("keys changed across a restart:\nbefore %x\nafter  %x", ids(before), ids(after))
	}

	// The files are encrypted and private.
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	der, _ := x509.MarshalPKCS8PrivateKey(made[0])
	for _, ent := range ents {
		if !strings.HasSuffix(ent.Name(), ".key") {
			continue
		}
		files++
		info, _ := ent.Info()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", ent.Name(), info.Mode().Perm())
		}
		b, _ := os.ReadFile(filepath.Join(dir, ent.Name()))
		if !bytes.Contains(b, []byte("issuer.example")) {
			t.Errorf("%s: no issuer name in the header", ent.Name())
		}
		if bytes.Contains(b, der[len(der)-64:]) {
			t.Errorf("%s holds the private key in the clear", ent.Name())
		}
	}
	if files != 4 {
		t.Fatalf("%d key files, want 4", files)
	}

	// The wrong key-encryption key is an error, never a reason to make new keys.
	bad := keyringConfig(dir, c, keyGen())
	bad.KEK = bytes.Repeat([]byte{8}, 32)
	if _, err := privacypass.OpenKeyring(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "cannot decrypt") {
		t.Fatalf("wrong KEK: got %v, want a decryption error", err)
	}
	// So is another issuer's directory, and another epoch length.
	other := keyringConfig(dir, c, keyGen())
	other.IssuerName = "other.example"
	if _, err := privacypass.OpenKeyring(context.Background(), other); err == nil || !strings.Contains(err.Error(), "belongs to issuer") {
		t.Fatalf("other issuer: got %v", err)
	}
	hourly := keyringConfig(dir, c, keyGen())
	hourly.Epoch = time.Hour
	if _, err := privacypass.OpenKeyring(context.Background(), hourly); err == nil || !strings.Contains(err.Error(), "epochs") {
		t.Fatalf("other epoch length: got %v", err)
	}
}

func TestServerRestartKeepsKey(t *testing.T) {
	e := newEnv(t, nil)
	before, err := e.client.Directory(context.Background(), e.issuer.URL)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Close()
	cfg := e.cfg
	cfg.GenerateRSAKey = keyGen()
	srv, err := privacypass.New(context.Background(), cfg, e.ledger, e.keyDir, e.kek, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	mux := http.NewServeMux()
	srv.Register(mux)
	hs := httptest.NewServer(mux)
	defer hs.Close()
	after, err := e.client.Directory(context.Background(), hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(before), ids(after)) {
		t.Fatalf("issuer keys changed across a restart:\nbefore %x\nafter  %x", ids(before), ids(after))
	}
}

// TestKeyringRace opens keyrings on one empty directory at once, with
// generators that make different keys: they must all end up with the same
// keys, one per (type, epoch).
func TestKeyringRace(t *testing.T) {
	c := &clock{t: t0}
	dir := t.TempDir()
	const n = 4
	dirs := make([]*privacypass.Directory, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k, err := privacypass.OpenKeyring(context.Background(), keyringConfig(dir, c, keyGen()))
			if err != nil {
				t.Error(err)
				return
			}
			defer k.Close()
			dirs[i] = k.Directory("/r", t0)
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i := 1; i < n; i++ {
		if !slices.Equal(ids(dirs[0]), ids(dirs[i])) {
			t.Fatalf("keyrings disagree:\n%x\n%x", ids(dirs[0]), ids(dirs[i]))
		}
	}
	if len(dirs[0].TokenKeys) != 4 {
		t.Fatalf("%d keys, want 4", len(dirs[0].TokenKeys))
	}
}

// TestKeyringTruncatedIDCollision hands the keyring the same RSA key twice
// in a row: the second, whose truncated key id equals the first's, must be
// discarded and replaced before it is published. The replacement is chosen
// beforehand with a truncated id other than the first key's, so that exactly
// one key is discarded (a random one would collide once in 256 runs).
func TestKeyringTruncatedIDCollision(t *testing.T) {
	base := keyGen()
	k0, err := base()
	if err != nil {
		t.Fatal(err)
	}
	trunc0 := truncatedID(t, k0)
	var k1 *rsa.PrivateKey
	for k1 == nil || truncatedID(t, k1) == trunc0 {
		if k1, err = base(); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	gen := func() (*rsa.PrivateKey, error) {
		calls++
		switch calls {
		case 1, 2:
			return k0, nil
		case 3:
			return k1, nil
		}
		return base()
	}
	cfg := keyringConfig(t.TempDir(), &clock{t: t0}, gen)
	cfg.TokenTypes = []privacypass.TokenType{privacypass.TypeBlindRSA}
	k := openKeyring(t, cfg)
	d := k.Directory("/r", t0)
	if len(d.TokenKeys) != 2 {
		t.Fatalf("%d keys, want 2", len(d.TokenKeys))
	}
	a, b := privacypass.TruncatedKeyID(d.TokenKeys[0].ID()), privacypass.TruncatedKeyID(d.TokenKeys[1].ID())
	if a == b {
		t.Fatalf("live keys share truncated key id %d", a)
	}
	if calls != 3 {
		t.Fatalf("generator called %d times, want 3 (one key discarded)", calls)
	}
}

// truncatedID is the truncated token key id the keyring gives key.
func truncatedID(t *testing.T, key *rsa.PrivateKey) uint8 {
	t.Helper()
	spki, err := privacypass.MarshalPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return privacypass.TruncatedKeyID(privacypass.KeyID(spki))
}

// TestKeyringRotation walks the keyring through epochs: each directory
// holds the keys still accepted (the previous epoch's in its grace, the
// current, the next), passes the client's check, and dead keys are deleted.
func TestKeyringRotation(t *testing.T) {
	c := &clock{t: t0}
	dir := t.TempDir()
	cfg := keyringConfig(dir, c, keyGen())
	cfg.TokenTypes = []privacypass.TokenType{privacypass.TypeVOPRF}
	k := openKeyring(t, cfg)
	day := 24 * time.Hour
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	check := func(now time.Time, wantStarts ...time.Time) {
		t.Helper()
		c.Set(now)
		if err := k.Rotate(context.Background()); err != nil {
			t.Fatal(err)
		}
		d := k.Directory("/r", now)
		if err := d.Check(day); err != nil {
			t.Fatal(err)
		}
		var got []time.Time
		for _, dk := range d.TokenKeys {
			got = append(got, dk.NotBefore)
		}
		if !slices.EqualFunc(got, wantStarts, time.Time.Equal) {
			t.Fatalf("at %v: not-before %v, want %v", now, got, wantStarts)
		}
		cur, ok := k.Current(privacypass.TypeVOPRF, now)
		if !ok || !cur.NotBefore.Equal(start.Add(now.Sub(start).Truncate(day))) {
			t.Fatalf("at %v: current key %v", now, cur)
		}
	}
	check(t0, start, start.Add(day))
	check(start.Add(day+time.Hour), start, start.Add(day), start.Add(2*day))
	// After the first key's grace (6h) and skew (5m) it is gone, file and all.
	check(start.Add(day+6*time.Hour+5*time.Minute), start.Add(day), start.Add(2*day))
	matches, _ := filepath.Glob(filepath.Join(dir, "*.key"))
	if len(matches) != 2 {
		t.Fatalf("%d key files, want 2: %v", len(matches), matches)
	}
}

func TestClientRefusesTwoKeysForOneEpoch(t *testing.T) {
	gen := keyGen()
	k1, _ := gen()
	k2, _ := gen()
	pk1, _ := privacypass.MarshalPublicKey(&k1.PublicKey)
	pk2, _ := privacypass.MarshalPublicKey(&k2.PublicKey)
	day := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		keys []privacypass.DirectoryKey
		ok   bool
	}{
		{"OneKeyPerEpoch", []privacypass.DirectoryKey{{TokenType: 2, TokenKey: pk1, NotBefore: day}, {TokenType: 2, TokenKey: pk2, NotBefore: day.Add(24 * time.Hour)}}, true},
		{"TwoKeysOneEpoch", []privacypass.DirectoryKey{{TokenType: 2, TokenKey: pk1, NotBefore: day}, {TokenType: 2, TokenKey: pk2, NotBefore: day.Add(time.Hour)}}, false},
		{"SameKeyTwice", []privacypass.DirectoryKey{{TokenType: 2, TokenKey: pk1, NotBefore: day}, {TokenType: 2, TokenKey: pk1, NotBefore: day}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, err := json.Marshal(&privacypass.Directory{IssuerRequestURI: "/token-request", TokenKeys: tc.keys})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", privacypass.DirectoryMediaType)
				w.Write(body)
			}))
			defer hs.Close()
			c := &privacypass.Client{Epoch: 24 * time.Hour}
			_, err = c.Directory(context.Background(), hs.URL)
			if tc.ok && err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if !tc.ok && !errors.Is(err, privacypass.ErrDirectoryConflict) {
				t.Fatalf("got %v, want ErrDirectoryConflict", err)
			}
		})
	}
}

// TestClientReadsStrictly serves directories and problem documents that
// break the rules of strict JSON: the client refuses the directory with
// ErrMalformed and reads no code from the problem document, instead of
// repairing either.
func TestClientReadsStrictly(t *testing.T) {
	k, _ := keyGen()()
	pk, _ := privacypass.MarshalPublicKey(&k.PublicKey)
	good, err := json.Marshal(&privacypass.Directory{IssuerRequestURI: "/token-request",
		TokenKeys: []privacypass.DirectoryKey{{TokenType: 2, TokenKey: pk, NotBefore: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}}})
	if err != nil {
		t.Fatal(err)
	}
	doc := string(good)
	serve := func(t *testing.T, status int, ctype, body string) string {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.WriteHeader(status)
			io.WriteString(w, body)
		}))
		t.Cleanup(hs.Close)
		return hs.URL
	}
	c := &privacypass.Client{Epoch: 24 * time.Hour}
	t.Run("Directory", func(t *testing.T) {
		for name, body := range map[string]string{
			"CaseDiffers": strings.Replace(doc, `"token-keys"`, `"Token-Keys"`, 1),
			"Duplicate":   strings.Replace(doc, `{"issuer-request-uri":"/token-request"`, `{"issuer-request-uri":"/a","issuer-request-uri":"/token-request"`, 1),
			"InvalidUTF8": strings.Replace(doc, `/token-request`, "/token-\xff", 1),
			"Trailing":    doc + ` {}`,
		} {
			t.Run(name, func(t *testing.T) {
				if _, err := c.Directory(context.Background(), serve(t, 200, privacypass.DirectoryMediaType, body)); !errors.Is(err, privacypass.ErrMalformed) {
					t.Fatalf("got %v, want ErrMalformed", err)
				}
			})
		}
		ext := strings.Replace(doc, `{"issuer-request-uri"`, `{"x-extension":{"a":[1]},"issuer-request-uri"`, 1)
		if _, err := c.Directory(context.Background(), serve(t, 200, privacypass.DirectoryMediaType, ext)); err != nil {
			t.Fatalf("an unknown member: got %v, want it ignored (RFC 9578)", err)
		}
	})
	t.Run("Problem", func(t *testing.T) {
		// The rules' cases are in internal/problem; here, that the
		// client reads problems through it.
		var p *privacypass.Problem
		_, err := c.Directory(context.Background(), serve(t, 429, "application/problem+json", `{"Code":"quota_exceeded","status":429}`))
		if err == nil || errors.As(err, &p) {
			t.Fatalf("a code whose name differs in case: got %v, want an error that is not a *Problem", err)
		}
		_, err = c.Directory(context.Background(), serve(t, 429, "application/problem+json", `{"code":"quota_exceeded","status":429}`))
		if !errors.As(err, &p) || p.Code != privacypass.CodeQuota || p.Status != 429 {
			t.Fatalf("a well-formed problem: got %v, want a *Problem with %s", err, privacypass.CodeQuota)
		}
	})
}

func TestDirectoryKeysSource(t *testing.T) {
	e := newEnv(t, nil)
	dk, err := privacypass.NewDirectoryKeys(context.Background(), e.client, e.issuer.URL, e.cfg.Epoch, e.cfg.Grace)
	if err != nil {
		t.Fatal(err)
	}
	o, err := privacypass.NewOrigin(e.ledger, privacypass.OriginConfig{
		IssuerName: e.cfg.IssuerName, TokenTypes: []privacypass.TokenType{privacypass.TypeBlindRSA},
		Keys: dk, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(o.Middleware(okHandler))
	defer hs.Close()
	tok := e.issue(t, hs.URL, privacypass.TypeBlindRSA)
	if a := send(t, http.MethodGet, hs.URL, tok); a.status != http.StatusOK {
		t.Fatalf("got %d %q, want 200", a.status, a.problem.Code)
	}
	wantRefused(t, send(t, http.MethodGet, hs.URL, tok), privacypass.CodeDoubleSpend)
	want, _ := e.srv.Keyring().Current(privacypass.TypeBlindRSA, t0)
	got, ok := dk.Current(privacypass.TypeBlindRSA, t0)
	if !ok || got.ID != want.ID || !got.AcceptUntil().Equal(want.AcceptUntil()) {
		t.Fatalf("directory key %+v, want id %x until %v", got, want.ID, want.AcceptUntil())
	}
}

func TestLoadOrCreateKEK(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "kek")
	k1, created, err := privacypass.LoadOrCreateKEK(path)
	if err != nil || !created || len(k1) != 32 {
		t.Fatalf("create: %x %v %v", k1, created, err)
	}
	k2, created, err := privacypass.LoadOrCreateKEK(path)
	if err != nil || created || !bytes.Equal(k1, k2) {
		t.Fatalf("load: got %x %v %v, want the same key", k2, created, err)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", info.Mode().Perm())
	}
	if _, err := privacypass.ParseKEK("c2hvcnQ="); err == nil {
		t.Fatal("ParseKEK accepted 5 bytes")
	}
}
