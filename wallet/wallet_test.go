package wallet_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/wallet"
)

func TestIssueAndSpend(t *testing.T) {
	ctx := context.Background()
	is := newIssuer(t)
	w, path := newWallet(t, is.url, wallet.Options{})
	coins, err := w.Issue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := w.Balance(); s != 15 || len(coins) != 4 {
		t.Fatalf("balance %d with %d coins, want 15 with 4", s, len(coins))
	}
	resp, change, err := w.Spend(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Charge != 3 || value(w) != 12 {
		t.Fatalf("charge %d, value %d; want 3, 12", resp.Charge, value(w))
	}
	// All four are equally old; the first worth 3 is the 8 (issued in
	// denomination order 8, 4, 2, 1), whose change is 4 + 1.
	if len(change) != 2 || change[0].Denomination != 4 || change[1].Denomination != 1 {
		t.Fatalf("change %+v, want tokens of 4 and 1", change)
	}
	w.Close()
	w2, err := wallet.Open(path, wallet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if value(w2) != 12 || len(w2.Journal()) != 0 {
		t.Fatalf("reopened: value %d, %d entries; want 12, 0", value(w2), len(w2.Journal()))
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v (%v), want 0600", fi.Mode(), err)
	}
}

func TestNoTokenSaysWhich(t *testing.T) {
	ctx := context.Background()
	is := newIssuer(t)
	w, _ := newWallet(t, is.url, wallet.Options{MinAge: 0})
	var nt *wallet.NoTokenError
	_, _, err := w.Spend(ctx, 3)
	if !errors.As(err, &nt) || nt.Largest != 0 || !strings.Contains(err.Error(), "holds none") {
		t.Fatalf("empty wallet: got %v, want a NoTokenError saying it holds none", err)
	}
	if _, err := w.Issue(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, err = w.Spend(ctx, 9) // tokens of 8, 4, 2, 1: none worth 9
	if !errors.Is(err, wallet.ErrNoToken) || !errors.As(err, &nt) || nt.Largest != 8 || !nt.ReadyAt.IsZero() {
		t.Fatalf("spend 9 with tokens of at most 8: got %#v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "no token worth 9") || !strings.Contains(msg, "largest spendable token is worth 8") {
		t.Fatalf("spend 9: got %q, want it to name the largest token", msg)
	}
}

func TestOpenMissingLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "wallet.json")
	if _, err := wallet.Open(path, wallet.Options{}); !errors.Is(err, wallet.ErrNoWallet) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open of a missing wallet: got %v, want ErrNoWallet", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("open of a missing wallet left %d files, want none", len(ents))
	}
}

func TestOpenLocks(t *testing.T) {
	is := newIssuer(t)
	_, path := newWallet(t, is.url, wallet.Options{})
	if _, err := wallet.Open(path, wallet.Options{}); !errors.Is(err, wallet.ErrInUse) {
		t.Fatalf("got %v, want ErrInUse", err)
	}
}

func TestMinAge(t *testing.T) {
	ctx := context.Background()
	is := newIssuer(t)
	clk := &fakeNow{}
	clk.ns.Store(time.Now().UnixNano())
	w, _ := newWallet(t, is.url, wallet.Options{MinAge: time.Minute, Now: clk.Now})
	if _, err := w.Issue(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, err := w.Spend(ctx, 1)
	if !errors.Is(err, wallet.ErrNoToken) {
		t.Fatalf("young tokens: got %v, want ErrNoToken", err)
	}
	// The error says the tokens are too young, and when one will do.
	var nt *wallet.NoTokenError
	if !errors.As(err, &nt) || !nt.ReadyAt.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("young tokens: got %#v, want a NoTokenError ready in a minute", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "old enough yet") || !strings.Contains(msg, "can be spent in 1m0s") {
		t.Fatalf("young tokens: got %q, want it to say when a token will be old enough", msg)
	}
	clk.ns.Add(int64(time.Minute))
	if _, _, err := w.Spend(ctx, 1); err != nil {
		t.Fatalf("after a minute: %v", err)
	}
}

func TestLostResponseIsResumed(t *testing.T) {
	ctx := context.Background()
	is := newIssuer(t)
	tr := &dropping{}
	w, _ := newWallet(t, is.url, wallet.Options{HTTPClient: &http.Client{Transport: tr}})
	if _, err := w.Issue(ctx); err != nil {
		t.Fatal(err)
	}
	tr.drop.Store(true)
	if _, _, err := w.Spend(ctx, 1); err == nil {
		t.Fatal("spend with a lost response succeeded")
	}
	if _, err := w.Issue(ctx); err == nil {
		t.Fatal("issue with a lost response succeeded")
	}
	if n := len(w.Journal()); n != 2 {
		t.Fatalf("%d journal entries, want 2", n)
	}
	if v := value(w); v != 15 {
		t.Fatalf("value %d while in flight, want 15 (7 spendable, the input of 8 in flight)", v)
	}
	r, err := w.Resume(ctx)
	if err != nil || r.Kept != 2 {
		t.Fatalf("resume while answers are lost: %+v, %v; want 2 kept", r, err)
	}
	tr.drop.Store(false)
	signed := is.Stats().Signatures
	r, err = w.Resume(ctx)
	if err != nil || r.Finished != 2 {
		t.Fatalf("resume: %+v, %v; want 2 finished", r, err)
	}
	if is.Stats().Signatures != signed {
		t.Fatal("the resume made the issuer sign again: it must replay")
	}
	if s, f := w.Balance(); s+is.Stats().Charged != is.Stats().Issued || f != 0 {
		t.Fatalf("spendable %d + charged %d != issued %d (in flight %d)", s, is.Stats().Charged, is.Stats().Issued, f)
	}
}

func TestUntouchedErrorsRestoreTheToken(t *testing.T) {
	ctx := context.Background()
	is := newIssuer(t)
	w, path := newWallet(t, is.url, wallet.Options{})
	if _, err := w.Issue(ctx); err != nil {
		t.Fatal(err)
	}
	// A spend journaled but never delivered, whose journal entry is then
	// corrupted: the issuer answers proof_invalid to the resend, and the
	// token comes back.
	tr := &dropping{}
	tr.refuse.Store(true)
	w.Close()
	w, err := wallet.Open(path, wallet.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, _, err := w.Spend(ctx, 1); err == nil {
		t.Fatal("want a refused connection")
	}
	w.Close()
	corruptJournal(t, path)
	w, err = wallet.Open(path, wallet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := w.Resume(ctx)
	if err != nil || r.Cleared != 1 || r.Restored != 1 {
		t.Fatalf("resume: %+v, %v; want 1 cleared, 1 restored", r, err)
	}
	var ee *ecash.Error
	if !errors.As(r.Errors[0], &ee) || ee.Code != ecash.CodeProofInvalid {
		t.Fatalf("got %v, want proof_invalid", r.Errors[0])
	}
	if s, f := w.Balance(); s != 15 || f != 0 {
		t.Fatalf("balance %d (+%d in flight), want 15", s, f)
	}
}

func TestCreateOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.json")
	if err := wallet.Create(path, "https://issuer.example"); err != nil {
		t.Fatal(err)
	}
	err := wallet.Create(path, "https://other.example")
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second Create: got %v, want an error saying the file exists", err)
	}
	w, err := wallet.Open(path, wallet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Issuer() != "https://issuer.example" {
		t.Fatalf("issuer %q: want the first Create's", w.Issuer())
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v (%v), want 0600", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 2 {
		t.Fatalf("directory holds %d entries, want the wallet and its lock", len(ents))
	}
}

// TestOpenReadsStrictly edits a wallet file so that it breaks a rule of
// strict JSON: Open refuses it rather than guess (a member read
// case-insensitively, or the last of two, could lose coins on the next
// save).
func TestOpenReadsStrictly(t *testing.T) {
	good := `{"version":1,"issuer":"https://issuer.example","coins":[],"journal":[]}`
	for name, doc := range map[string]string{
		"Good":        good,
		"CaseDiffers": strings.Replace(good, `"coins"`, `"Coins"`, 1),
		"Duplicate":   strings.Replace(good, `"coins":[]`, `"coins":[],"coins":[]`, 1),
		"Unknown":     strings.Replace(good, `"coins"`, `"coin"`, 1),
		"InvalidUTF8": strings.Replace(good, `example`, "ex\xffample", 1),
		"Trailing":    good + "{}",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.json")
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			w, err := wallet.Open(path, wallet.Options{})
			if name == "Good" {
				if err != nil {
					t.Fatal(err)
				}
				w.Close()
				return
			}
			if err == nil {
				w.Close()
				t.Fatal("got it opened, want an error")
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("got %v, want the error to name the file", err)
			}
		})
	}
}
