package wallet_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/privacypass"
	"github.com/spentledger/spent/wallet"
)

// The crash test re-executes the test binary as a child that opens the
// wallet, resumes it and issues or spends once, and kills itself with
// SIGKILL at its n-th step (wallet.Options.Hook): after a journal save,
// after a send, after an answer arrives and before it is saved, after a
// save, in a resume or in the operation that follows.
const (
	envWallet = "SPENT_WALLET_CRASH_FILE"
	envURL    = "SPENT_WALLET_CRASH_URL"
	envKillAt = "SPENT_WALLET_CRASH_KILL_AT"
	envOp     = "SPENT_WALLET_CRASH_OP"
)

func TestCrash(t *testing.T) {
	if path := os.Getenv(envWallet); path != "" {
		crashChild(t, path)
		return
	}
	// Each run ends in a kill. On an idle machine a run takes a few tens of
	// milliseconds; starting a -race binary on a loaded one takes a second,
	// so the default is scaled to keep the package within a few minutes.
	// SPENT_WALLET_CRASH_KILLS asks for more.
	kills := 200
	if testing.Short() {
		kills = 40
	}
	if n, err := strconv.Atoi(os.Getenv("SPENT_WALLET_CRASH_KILLS")); err == nil && n > 0 {
		kills = n
	}
	is := newIssuer(t)
	w, path := newWallet(t, is.url, wallet.Options{})
	w.Close()

	killed, steps := 0, map[int]int{}
	rng := rand.New(rand.NewPCG(6, 6))
	for i := 0; killed < kills; i++ {
		if i > 3*kills {
			t.Fatalf("only %d kills in %d runs", killed, i)
		}
		f := readFile(t, path)
		op := "issue"
		if len(f.Coins) > 0 && i%3 != 0 {
			op = "spend"
		}
		// Every request calls the hook four times (journaled, sent,
		// answered, saved): the resume of each journaled entry, then the
		// operation. Pick the kill among all of those steps.
		killAt := 1 + rng.IntN(4*(len(f.Journal)+1))
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$", "-test.count=1")
		cmd.Env = append(os.Environ(), envWallet+"="+path, envURL+"="+is.url, envKillAt+"="+strconv.Itoa(killAt), envOp+"="+op)
		out, err := cmd.CombinedOutput()
		var xe *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &xe) && xe.Sys().(syscall.WaitStatus).Signaled() && xe.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
			killed++
			steps[killAt]++
		default:
			t.Fatalf("run %d (%s, kill at step %d): %v\n%s", i, op, killAt, err, out)
		}
		// Whatever the moment of death, no saved state counts a burned
		// token as spendable.
		checkUnspent(t, is, readFile(t, path).Coins)
	}
	t.Logf("%d kills; by step number: %v", killed, steps)

	w, err := wallet.Open(path, wallet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if r, err := w.Resume(context.Background()); err != nil || r.Kept != 0 || len(w.Journal()) != 0 {
		t.Fatalf("final resume: %+v, %v; %d entries left", r, err, len(w.Journal()))
	}
	s, f := w.Balance()
	st := is.Stats()
	if s+st.Charged != st.Issued || f != 0 {
		t.Fatalf("wallet %d + charged %d = %d, want issued %d", s, st.Charged, s+st.Charged, st.Issued)
	}
	if d := is.duplicates(); len(d) != 0 {
		t.Fatalf("recorded fresh more than once: %v", d)
	}
	checkUnspent(t, is, w.Coins())
	t.Logf("issued %d, charged %d, wallet %d in %d tokens, %d spends", st.Issued, st.Charged, s, len(w.Coins()), st.Spends)
	if st.Spends == 0 || st.Issued == 0 {
		t.Fatal("the runs neither issued nor spent")
	}
}

// crashChild is the child's side: it dies at step envKillAt.
func crashChild(t *testing.T, path string) {
	killAt, _ := strconv.Atoi(os.Getenv(envKillAt))
	n := 0
	w, err := wallet.Open(path, wallet.Options{Hook: func(step string) {
		if n++; n == killAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	if r, err := w.Resume(ctx); err != nil || r.Kept != 0 {
		t.Fatalf("resume: %+v, %v", r, err)
	}
	switch os.Getenv(envOp) {
	case "issue":
		_, err = w.Issue(ctx)
	case "spend":
		_, _, err = w.Spend(ctx, 1)
	}
	if err != nil {
		t.Fatalf("%s: %v", os.Getenv(envOp), err)
	}
}

func readFile(t *testing.T, path string) wallet.File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f wallet.File
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("wallet file does not parse: %v", err)
	}
	return f
}

// checkUnspent fails when a coin is spent in the issuer's ledger, or when
// two coins are one token.
func checkUnspent(t *testing.T, is *issuer, coins []wallet.Coin) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range coins {
		tok, err := privacypass.ParseToken(c.Token)
		if err != nil {
			t.Fatal(err)
		}
		null := ecash.Nullifier(&tok)
		if seen[null] {
			t.Fatalf("token %s twice in the wallet", null[:16])
		}
		seen[null] = true
		_, err = is.ledger.Get(context.Background(), is.cfg.SpendNamespace, null)
		if spent.ErrorCode(err) != spent.ENotFound {
			t.Fatalf("spendable token %s is spent in the ledger (%v)", null[:16], err)
		}
	}
}
