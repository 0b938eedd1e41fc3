package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/atomicfile"
	"github.com/spentledger/spent/internal/problem"
	"github.com/spentledger/spent/privacypass"
)

// tokenFlags are the flags the token commands share.
type tokenFlags struct {
	issuer   string
	origin   string
	method   string
	attester string
	typ      uint16
	epoch    time.Duration
	timeout  time.Duration
	json     bool
	tls      clientTLS
}

func addTokenFlags(f *pflag.FlagSet, tf *tokenFlags, issuer, origin bool) {
	if issuer {
		f.StringVar(&tf.issuer, "issuer", "", "issuer `URL` (scheme and host; the directory is at /.well-known/private-token-issuer-directory)")
		f.StringVar(&tf.attester, "attester-token", "", "bearer `token` that identifies this client to the issuer (default $SPENT_ATTESTER_TOKEN)")
		f.DurationVar(&tf.epoch, "epoch", privacypass.DefaultEpoch, "the issuer's key `epoch`: a directory with two keys of one type in one epoch is refused (0: refuse only equal not-before times)")
	}
	if origin {
		f.StringVar(&tf.origin, "origin", "", "origin `URL` that answers 401 with a PrivateToken challenge")
		f.StringVarP(&tf.method, "request", "X", "", "HTTP `method` for the origin (default GET, or POST for a URL ending in /v1/redeem)")
	}
	f.BoolVar(&tf.json, "json", false, "print JSON instead of text")
	f.DurationVar(&tf.timeout, "timeout", 30*time.Second, "give up after this `duration`")
	addClientTLSFlags(f, &tf.tls)
}

// originMethod is the method the commands use for the origin URL.
func (tf *tokenFlags) originMethod() string {
	if tf.method != "" {
		return strings.ToUpper(tf.method)
	}
	if strings.HasSuffix(strings.TrimRight(tf.origin, "/"), privacypass.RedeemPath) {
		return http.MethodPost
	}
	return http.MethodGet
}

func (tf *tokenFlags) client() (*privacypass.Client, error) {
	token := tf.attester
	if token == "" {
		token = os.Getenv("SPENT_ATTESTER_TOKEN")
	}
	hc, err := tf.tls.httpClient(os.Getenv, tf.timeout)
	if err != nil {
		return nil, err
	}
	return &privacypass.Client{HTTPClient: hc, AttesterToken: token, Epoch: tf.epoch}, nil
}

func tokenRequireURL(name, v string) error {
	if v == "" {
		return usagef("--%s is required", name)
	}
	if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
		return usagef("--%s %q: want an http:// or https:// URL", name, v)
	}
	return nil
}

// tokenError turns an HTTP failure of the token commands into a spent error
// whose code says whether a retry can help: 503 and transport errors are
// unavailable (retryable), the issuer's 429 too (after Retry-After), 401 is
// unauthorized, other 4xx are invalid.
func tokenError(err error) error {
	var p *privacypass.Problem
	if errors.As(err, &p) {
		code := spent.EInvalid
		switch {
		case p.Status == http.StatusUnauthorized:
			code = spent.EUnauthorized
		case p.Status == http.StatusTooManyRequests || p.Status >= 500:
			code = spent.EUnavailable
		}
		return &spent.Error{Code: code, Message: fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail)}
	}
	var se *spent.Error
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, privacypass.ErrDirectoryConflict) || errors.Is(err, privacypass.ErrMalformed) ||
		errors.Is(err, privacypass.ErrTokenType) || errors.Is(err, privacypass.ErrSize) {
		return &spent.Error{Code: spent.EInvalid, Message: "refused", Err: err}
	}
	return &spent.Error{Code: spent.EUnavailable, Message: "request failed", Err: err}
}

// newTokenCmd returns the "spent token" command tree: a Privacy Pass client
// (RFC 9577, 9578) that obtains tokens from an issuer and presents them to
// an origin, such as spent serve's [privacypass] issuer and POST /v1/redeem.
func newTokenCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "token",
		Short: "Obtain Privacy Pass tokens from an issuer and present them to an origin",
		Long: `Obtain Privacy Pass tokens (RFC 9578, token types 2 and 1) from an issuer and
present them to an origin (RFC 9577: "Authorization: PrivateToken token=...").

"spent token get" does it all: it asks the origin, answers its PrivateToken
challenge with a token from the issuer, and asks again. "fetch" and "redeem"
do the two halves, so that a token can be obtained ahead and presented later;
tokens are printed and read as padded base64url, one per line. "directory"
prints an issuer's keys after checking that it shows one key per type and
epoch.

The attester token that identifies this client to the issuer comes from
--attester-token or $SPENT_ATTESTER_TOKEN (prefer the variable: command lines
are visible to other users).`,
		Args: exactArgs(0, "a subcommand"),
	}
	root.AddCommand(tokenDirectoryCmd(), tokenFetchCmd(), tokenRedeemCmd(), tokenGetCmd())
	return root
}

func tokenDirectoryCmd() *cobra.Command {
	var tf tokenFlags
	c := &cobra.Command{
		Use:     "directory --issuer URL",
		Short:   "Fetch, check and print an issuer directory",
		Example: `  spent token directory --issuer https://issuer.example`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := tokenRequireURL("issuer", tf.issuer); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context(), tf.timeout)
			defer cancel()
			cl, err := tf.client()
			if err != nil {
				return err
			}
			d, err := cl.Directory(ctx, tf.issuer)
			if err != nil {
				return tokenError(err)
			}
			out := c.OutOrStdout()
			if tf.json {
				b, err := d.MarshalJSON()
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "%s\n", b)
				return err
			}
			fmt.Fprintf(out, "issuer-request-uri: %s\n", d.IssuerRequestURI)
			for _, k := range d.TokenKeys {
				id := k.ID()
				nb := "-"
				if !k.NotBefore.IsZero() {
					nb = k.NotBefore.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(out, "type %d  not-before %s  key id %s (truncated %d)\n", k.TokenType, nb, hex.EncodeToString(id[:]), id[31])
			}
			return nil
		},
	}
	addTokenFlags(c.Flags(), &tf, true, false)
	return c
}

// tokenChallengeFrom asks the origin and returns its PrivateToken challenge of
// type typ (0: the first supported one).
func tokenChallengeFrom(ctx context.Context, hc *http.Client, method, origin string, typ uint16) (*privacypass.Challenge, error) {
	req, err := http.NewRequestWithContext(ctx, method, origin, nil)
	if err != nil {
		return nil, usagef("--origin: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, tokenError(err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return nil, &spent.Error{Code: spent.EInvalid, Message: fmt.Sprintf("%s %s answered %s, not 401 with a PrivateToken challenge", method, origin, resp.Status)}
	}
	chs, err := privacypass.ParseChallenges(resp.Header)
	if err != nil {
		return nil, tokenError(err)
	}
	for i := range chs {
		t := chs[i].TokenChallenge.TokenType
		if t.Supported() && (typ == 0 || uint16(t) == typ) {
			return &chs[i], nil
		}
	}
	return nil, &spent.Error{Code: spent.EInvalid, Message: fmt.Sprintf("the origin sent %d PrivateToken challenges, none of a type this client answers (--type %d)", len(chs), typ)}
}

// tokenJSON is the --json form of a token.
type tokenJSON struct {
	Token     string `json:"token"`
	TokenType uint16 `json:"token_type"`
	KeyID     string `json:"token_key_id"`
}

func tokenPrint(out io.Writer, asJSON bool, raw []byte) error {
	s := base64.URLEncoding.EncodeToString(raw)
	if !asJSON {
		_, err := fmt.Fprintln(out, s)
		return err
	}
	tok, err := privacypass.ParseToken(raw)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(tokenJSON{Token: s, TokenType: uint16(tok.TokenType), KeyID: hex.EncodeToString(tok.KeyID[:])})
}

func tokenFetchCmd() *cobra.Command {
	var tf tokenFlags
	var count int
	c := &cobra.Command{
		Use:   "fetch --issuer URL --origin URL",
		Short: "Obtain tokens for an origin's challenge and print them",
		Long: `Ask the origin, take its PrivateToken challenge, obtain tokens for it from the
issuer, and print them (padded base64url, one per line). A challenge with a
fresh redemption context is good for one token; --count asks for more tokens
for as many fresh challenges.`,
		Example: `  SPENT_ATTESTER_TOKEN=s3cret-1 spent token fetch --issuer https://issuer.example --origin https://origin.example/ > tokens
  spent token fetch --issuer http://127.0.0.1:7070 --origin http://127.0.0.1:7070/v1/redeem --type 1`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := tokenRequireURL("issuer", tf.issuer); err != nil {
				return err
			}
			if err := tokenRequireURL("origin", tf.origin); err != nil {
				return err
			}
			if count < 1 {
				return usagef("--count %d: at least 1", count)
			}
			cl, err := tf.client()
			if err != nil {
				return err
			}
			for range count {
				ctx, cancel := context.WithTimeout(c.Context(), tf.timeout)
				ch, err := tokenChallengeFrom(ctx, cl.HTTPClient, tf.originMethod(), tf.origin, tf.typ)
				if err != nil {
					cancel()
					return err
				}
				raw, err := cl.Issue(ctx, tf.issuer, ch)
				cancel()
				if err != nil {
					return tokenError(err)
				}
				if err := tokenPrint(c.OutOrStdout(), tf.json, raw); err != nil {
					return err
				}
			}
			return nil
		},
	}
	addTokenFlags(c.Flags(), &tf, true, true)
	c.Flags().Uint16Var(&tf.typ, "type", 0, "token `type` to ask for: 2 (Blind RSA) or 1 (VOPRF); default the origin's first")
	c.Flags().IntVar(&count, "count", 1, "how many tokens")
	return c
}

// tokenPresentJSON is the --json form of an origin's answer.
type tokenPresentJSON struct {
	Status int             `json:"status"`
	Code   string          `json:"code,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
	Text   string          `json:"text,omitempty"`
}

// tokenPresent sends req and prints the answer. A 2xx answer is success;
// anything else is an error with the problem's code.
func tokenPresent(out io.Writer, hc *http.Client, req *http.Request, asJSON bool) error {
	_, err := tokenPresentCode(out, hc, req, asJSON)
	return err
}

// tokenPresentCode is tokenPresent that also returns the problem code of a
// refusal ("" for success, a transport failure or an answer without one).
func tokenPresentCode(out io.Writer, hc *http.Client, req *http.Request, asJSON bool) (code string, err error) {
	resp, err := hc.Do(req)
	if err != nil {
		return "", tokenError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", tokenError(err)
	}
	var p privacypass.Problem
	doc, isProblem := problem.Read(resp.Header, body)
	if isProblem {
		p = privacypass.Problem{Type: doc.Type, Title: doc.Title, Detail: doc.Detail, Code: doc.Code}
	}
	if asJSON {
		v := tokenPresentJSON{Status: resp.StatusCode, Code: p.Code}
		if json.Valid(body) {
			v.Body = body
		} else {
			v.Text = string(body)
		}
		if err := json.NewEncoder(out).Encode(v); err != nil {
			return "", err
		}
	} else if resp.StatusCode/100 == 2 {
		fmt.Fprintf(out, "%s\n%s", resp.Status, body)
		if len(body) > 0 && body[len(body)-1] != '\n' {
			fmt.Fprintln(out)
		}
	}
	if resp.StatusCode/100 == 2 {
		return "", nil
	}
	p.Status = resp.StatusCode
	if !isProblem {
		p.Code, p.Detail = "", strings.TrimSpace(string(body[:min(len(body), 200)]))
	}
	return p.Code, tokenError(&p)
}

// tokenConsume removes the line that holds raw, the first token of the
// token file, from the file, written back atomically. It reads the file
// again rather than reusing what it read before the token was presented, so
// that tokens appended meanwhile ("spent token fetch >> FILE") are kept. It
// returns how many tokens are left.
func tokenConsume(file string, raw []byte) (left int, err error) {
	fi, err := os.Stat(file)
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	lines := strings.SplitAfter(string(b), "\n")
	found := false
	var kept strings.Builder
	for _, line := range lines {
		if t := strings.TrimSpace(line); !found && (t == base64.URLEncoding.EncodeToString(raw) || t == base64.RawURLEncoding.EncodeToString(raw)) {
			found = true
			continue
		}
		kept.WriteString(line)
		left += len(strings.Fields(line))
	}
	if !found {
		return 0, fmt.Errorf("the token presented is no longer on a line of its own in %s", file)
	}
	if err := atomicfile.WriteFile(file, []byte(kept.String()), fi.Mode().Perm()); err != nil {
		return 0, err
	}
	return left, nil
}

func tokenRead(c *cobra.Command, token, file string) ([][]byte, error) {
	var text string
	switch {
	case token != "" && file != "":
		return nil, usagef("--token and --token-file: give one, not both")
	case token != "":
		text = token
	default:
		var b []byte
		var err error
		if file == "" || file == "-" {
			b, err = io.ReadAll(io.LimitReader(c.InOrStdin(), 1<<24))
		} else {
			b, err = os.ReadFile(file)
		}
		if err != nil {
			return nil, usagef("--token-file: %w", err)
		}
		text = string(b)
	}
	var out [][]byte
	for _, line := range strings.Fields(text) {
		raw, err := base64.URLEncoding.DecodeString(line)
		if err != nil {
			if raw, err = base64.RawURLEncoding.DecodeString(line); err != nil {
				return nil, usagef("token %.16q…: not base64url", line)
			}
		}
		if _, err := privacypass.ParseToken(raw); err != nil {
			return nil, usagef("token %.16q…: %w", line, err)
		}
		out = append(out, raw)
	}
	if len(out) == 0 && file != "" && file != "-" {
		return nil, usagef("--token-file %s: no token left (a redeem removes each token it spent); get more with spent token fetch ... >> %s", file, file)
	}
	if len(out) == 0 {
		return nil, usagef("no token given (--token, --token-file or standard input)")
	}
	return out, nil
}

func tokenRedeemCmd() *cobra.Command {
	var tf tokenFlags
	var token, file string
	c := &cobra.Command{
		Use:   "redeem --origin URL [--token TOKEN | --token-file FILE]",
		Short: "Present a token to an origin and print its answer",
		Long: `Present the first token (from --token, --token-file, or standard input, as
"spent token fetch" prints them) to the origin in an Authorization header and
print the answer. A 2xx answer exits 0. A refusal (401: double_spend,
key_expired, challenge_mismatch, ...) exits with the unauthorized status; a 503
(the ledger is down, the token is not spent) with the unavailable status.

With --token-file FILE the token file is consumed: once the origin has
accepted the token, or refused it as already spent (double_spend), its line
is removed from FILE (the file is written anew atomically), so that the next
redeem presents the next token; the command says which happened and how many
tokens are left. A token refused for any other reason, or not answered at all,
stays in FILE. Tokens read from standard input or --token are not consumed.
Run one redeem at a time per token file.`,
		Example: `  spent token fetch --issuer http://127.0.0.1:7070 --origin http://127.0.0.1:7070/v1/redeem --count 3 > t
  spent token redeem --origin http://127.0.0.1:7070/v1/redeem --token-file t   # presents and removes the first
  spent token redeem --origin http://127.0.0.1:7070/v1/redeem --token-file t   # then the second`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := tokenRequireURL("origin", tf.origin); err != nil {
				return err
			}
			toks, err := tokenRead(c, token, file)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context(), tf.timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, tf.originMethod(), tf.origin, nil)
			if err != nil {
				return usagef("--origin: %w", err)
			}
			req.Header.Set("Authorization", privacypass.AuthorizationValue(toks[0]))
			hc, err := tf.tls.httpClient(os.Getenv, tf.timeout)
			if err != nil {
				return err
			}
			code, err := tokenPresentCode(c.OutOrStdout(), hc, req, tf.json)
			if file == "" || file == "-" {
				return err
			}
			return tokenConsumed(c.ErrOrStderr(), file, toks[0], code, err)
		},
	}
	addTokenFlags(c.Flags(), &tf, false, true)
	c.Flags().StringVar(&token, "token", "", "the `token` (padded base64url)")
	c.Flags().StringVar(&file, "token-file", "", "read the token from a `file` (- for standard input, the default)")
	return c
}

// tokenConsumed removes the token just presented from the token file when
// the origin accepted it (err nil) or refused it as spent, says so on w, and
// returns the command's error: err, or the failure to rewrite the file.
func tokenConsumed(w io.Writer, file string, raw []byte, code string, err error) error {
	var why string
	switch {
	case err == nil:
		why = "accepted"
	case code == privacypass.CodeDoubleSpend:
		why = "refused as already spent"
	default:
		fmt.Fprintf(w, "spent token redeem: the token stays first in %s (not accepted, not known to be spent); remove its line by hand if it can never be accepted\n", file)
		return err
	}
	left, cerr := tokenConsume(file, raw)
	if cerr != nil {
		cerr = fmt.Errorf("token redeem: the token was %s but could not be removed from %s: %w; remove its first line by hand", why, file, cerr)
		return errors.Join(err, cerr)
	}
	fmt.Fprintf(w, "spent token redeem: the token was %s: removed from %s, %d left\n", why, file, left)
	return err
}

func tokenGetCmd() *cobra.Command {
	var tf tokenFlags
	c := &cobra.Command{
		Use:   "get --issuer URL --origin URL",
		Short: "Ask an origin, answer its challenge with a fresh token, and print the answer",
		Example: `  SPENT_ATTESTER_TOKEN=s3cret-1 spent token get --issuer https://issuer.example --origin https://origin.example/page
  spent token get --issuer http://127.0.0.1:7070 --origin http://127.0.0.1:7070/v1/redeem --attester-token s3cret-1`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := tokenRequireURL("issuer", tf.issuer); err != nil {
				return err
			}
			if err := tokenRequireURL("origin", tf.origin); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context(), tf.timeout)
			defer cancel()
			cl, err := tf.client()
			if err != nil {
				return err
			}
			ch, err := tokenChallengeFrom(ctx, cl.HTTPClient, tf.originMethod(), tf.origin, tf.typ)
			if err != nil {
				return err
			}
			raw, err := cl.Issue(ctx, tf.issuer, ch)
			if err != nil {
				return tokenError(err)
			}
			req, err := http.NewRequestWithContext(ctx, tf.originMethod(), tf.origin, nil)
			if err != nil {
				return usagef("--origin: %w", err)
			}
			req.Header.Set("Authorization", privacypass.AuthorizationValue(raw))
			return tokenPresent(c.OutOrStdout(), cl.HTTPClient, req, tf.json)
		},
	}
	addTokenFlags(c.Flags(), &tf, true, true)
	c.Flags().Uint16Var(&tf.typ, "type", 0, "token `type` to ask for: 2 (Blind RSA) or 1 (VOPRF); default the origin's first")
	return c
}
