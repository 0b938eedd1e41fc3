package blindsign_test

import (
	"bytes"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	circl "github.com/cloudflare/circl/blindsign/blindrsa"

	"github.com/spentledger/spent/privacypass/blindsign"
)

// vector is one RFC 9474 Appendix A test vector.
type vector struct {
	Name       string `json:"name"`
	P          string `json:"p"`
	Q          string `json:"q"`
	N          string `json:"n"`
	E          string `json:"e"`
	D          string `json:"d"`
	BlindedMsg string `json:"blinded_msg"`
	BlindSig   string `json:"blind_sig"`
}

// vectorsDir is the package's testdata folder, which holds the public test
// vectors it uses (see testdata/README.md for their sources).
const vectorsDir = "testdata"

func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(vectorsDir, "rfc9474.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(b, &vs); err != nil {
		tb.Fatal(err)
	}
	if len(vs) == 0 {
		tb.Fatal("rfc9474.json holds no vectors")
	}
	return vs
}

func mustInt(tb testing.TB, s string) *big.Int {
	tb.Helper()
	n, ok := new(big.Int).SetString(strings.TrimPrefix(s, "0x"), 16)
	if !ok {
		tb.Fatalf("bad integer %q", s)
	}
	return n
}

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func (v *vector) key(tb testing.TB) *rsa.PrivateKey {
	tb.Helper()
	sk := &rsa.PrivateKey{
		PublicKey: rsa.PublicKey{N: mustInt(tb, v.N), E: int(mustInt(tb, v.E).Int64())},
		D:         mustInt(tb, v.D),
		Primes:    []*big.Int{mustInt(tb, v.P), mustInt(tb, v.Q)},
	}
	sk.Precompute()
	return sk
}

func TestBlindSignVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			s, err := blindsign.New(v.key(t))
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.BlindSign(mustHex(t, v.BlindedMsg))
			if err != nil {
				t.Fatal(err)
			}
			if want := mustHex(t, v.BlindSig); !bytes.Equal(got, want) {
				t.Fatalf("blind_sig:\ngot  %x\nwant %x", got, want)
			}
		})
	}
}

func TestBlindSignMatchesCircl(t *testing.T) {
	sk := testKey(t)
	s, err := blindsign.New(sk)
	if err != nil {
		t.Fatal(err)
	}
	ref := circl.NewSigner(sk)
	for i := range 20 {
		m := make([]byte, s.Size())
		for j := range m {
			m[j] = byte(i*31 + j*7)
		}
		m[0] &= 0x7f // below n, whose top bit is set
		got, err := s.BlindSign(m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.BlindSign(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("message %d: got %x, want %x", i, got, want)
		}
	}
}

func TestBlindSignRefusesBadInput(t *testing.T) {
	sk := testKey(t)
	s, err := blindsign.New(sk)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BlindSign(make([]byte, s.Size()-1)); !errors.Is(err, blindsign.ErrSize) {
		t.Fatalf("short message: got %v, want ErrSize", err)
	}
	if _, err := s.BlindSign(make([]byte, s.Size()+1)); !errors.Is(err, blindsign.ErrSize) {
		t.Fatalf("long message: got %v, want ErrSize", err)
	}
	if _, err := s.BlindSign(sk.N.FillBytes(make([]byte, s.Size()))); !errors.Is(err, blindsign.ErrRange) {
		t.Fatalf("m = n: got %v, want ErrRange", err)
	}
	ff := bytes.Repeat([]byte{0xff}, s.Size())
	if _, err := s.BlindSign(ff); !errors.Is(err, blindsign.ErrRange) {
		t.Fatalf("m > n: got %v, want ErrRange", err)
	}
}

func TestNewRefusesBadKeys(t *testing.T) {
	sk := testKey(t)
	bad := *sk
	bad.D = new(big.Int).Add(sk.D, big.NewInt(2))
	if _, err := blindsign.New(&bad); !errors.Is(err, blindsign.ErrKey) {
		t.Fatalf("wrong d: got %v, want ErrKey", err)
	}
	if _, err := blindsign.New(nil); !errors.Is(err, blindsign.ErrKey) {
		t.Fatalf("nil key: got %v, want ErrKey", err)
	}
}

var (
	keyOnce sync.Once
	key     *rsa.PrivateKey
)

// testKey returns the 2048-bit key of the RFC 9578 A.2 vectors, which the
// package's own testdata holds (see testdata/README.md), so that no test
// waits for key generation.
func testKey(tb testing.TB) *rsa.PrivateKey {
	tb.Helper()
	keyOnce.Do(func() {
		b, err := os.ReadFile(filepath.Join("testdata", "rsa2048.json"))
		if err != nil {
			panic(err)
		}
		var v vector
		if err := json.Unmarshal(b, &v); err != nil {
			panic(err)
		}
		key = v.key(tb)
	})
	return key
}

// BenchmarkBlindSign compares, in one run, circl's BlindSign and this
// package's on the same 2048-bit key and message, sequentially and with one
// signing goroutine per CPU.
func BenchmarkBlindSign(b *testing.B) {
	sk := testKey(b)
	s, err := blindsign.New(sk)
	if err != nil {
		b.Fatal(err)
	}
	ref := circl.NewSigner(sk)
	m := make([]byte, s.Size())
	for i := range m {
		m[i] = byte(i)
	}
	impls := []struct {
		name string
		sign func([]byte) ([]byte, error)
	}{{"circl", ref.BlindSign}, {"crt-bigmod", s.BlindSign}}
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := impl.sign(m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sigs/s")
		})
		b.Run(impl.name+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := impl.sign(m); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sigs/s")
			b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
		})
	}
}
