// Command spent is the one binary of the spent double-spend ledger: the
// server, its command-line client and a load generator. The server's
// safety (the data directory's lock and secret, the secret check, the
// rollback fence, the node lease, the sweeper, the orderly close) is
// package github.com/spentledger/spent/node's; this command only parses
// flags and configuration and wires the node to the HTTP server.
//
// In the common case, run the server on the embedded store with
//
//	spent serve
//
// which listens on 127.0.0.1:7070, keeps its data in ./spent-data and serves
// one namespace, "default" (echo mode, 24 h retention). Then claim keys with
//
//	spent claim order-1 --result '{"status":"paid"}'
//
// # Commands
//
// Each entry begins with the command's full name; a test checks this list
// against the command tree, so that it names every command and no other.
//
//   - serve [--config FILE] [--listen ADDR] [--data DIR] [--store DSN]
//     [--new-fence]: run the HTTP server
//     (package github.com/spentledger/spent/http) over a ledger on the
//     embedded pebble store. The configuration file (TOML, one table per
//     namespace; see docs/configuration.md) sets namespaces, tokens, limits
//     and the sweep interval. Every flag but --new-fence may be set from the
//     environment instead: SPENT_ + the flag's name in upper case with - as
//     _ (SPENT_LISTEN, SPENT_DATA, SPENT_STORE, ...); flags win over the
//     environment, the environment over the file. The HMAC secret is
//     generated on first start and kept in DIR/secret, mode 0600. Expired
//     records are swept periodically. SIGINT or SIGTERM shuts down
//     gracefully. The rollback fence (DIR/fence) names the newest canary
//     record the server wrote to the store; --new-fence is for the
//     deliberate first start of a data directory on a store that already
//     holds records (a new server joining a shared store, or a fence known
//     to be lost). --tls-cert and --tls-key serve HTTPS, reloaded on SIGHUP
//     and when the files change; --tls-client-ca requires a client
//     certificate of every client; --allow-plaintext permits a non-loopback
//     address without TLS.
//   - epoch: the operators' commands of a data directory's epoch.
//   - epoch retire --yes [--accept-damage] [--config FILE] [--data DIR]
//     [--store DSN]: with the server stopped, rotate the issuing keys, empty
//     the token namespaces and start a new fence generation, accepting the
//     store as it is; --accept-damage opens an embedded store refused as
//     damaged with what survived.
//   - claim KEY... [--result S | --result-file F] [--fingerprint HEX]
//     [--place P] [--expires-at T]: claim keys and print each outcome.
//   - complete KEY... [--result S | --result-file F] [--seq N:C]: end a
//     fresh two-step claim with its result.
//   - release KEY... [--seq N:C]: roll back a fresh two-step claim.
//   - get KEY...: print the live record of keys.
//   - unknown: the operators' commands of unknown outcomes.
//   - unknown list: list unknown outcomes, with an admin token.
//   - unknown resolve HASH (--complete [--result S] | --release): resolve
//     one, with an admin token.
//   - seq --node N (--last N | --around C [--limit L] | --from A [--to B]
//     [--limit L]): list the records a node wrote, by seq, from the
//     stores' index (at most 10,000 a call, without results or raw keys),
//     with an admin token; see "Introspection by seq" in
//     docs/operations.md.
//   - audit PATH... [--json] [--namespace NS --key KEY | --hash HEX]: merge
//     the acceptance audit logs of all nodes and list every key accepted
//     fresh twice, with both seqs, nodes and times; or print the events of
//     one key (which node processed it). Reads files, not a server.
//   - bench [--embedded | --addr URL] [--concurrency N] [--duration D]
//     [--batch N] [--keys N] [--repeat R] [--rate R] [--json]: generate
//     claim load and report claims/s, latency percentiles and outcome counts;
//     --rate sends on a fixed schedule (open loop) to measure latency at a
//     given load.
//   - size --rate R --retention D [--store S] [--mem B] [--disk B] [--json]:
//     print a capacity plan (records held, disk, memory, restart time, write
//     rate, a verdict per limit) from the cost-curve benchmark's figures.
//   - token: a Privacy Pass client (RFC 9577, 9578); see docs/privacypass.md.
//   - token directory --issuer URL: print an issuer's keys.
//   - token fetch --issuer URL --origin URL: obtain tokens and print them.
//   - token redeem --origin URL [--token T | --token-file F]: present one.
//   - token get --issuer URL --origin URL: fetch a token and present it.
//   - wallet: a wallet of ecash value tokens in one file; see docs/ecash.md.
//   - wallet init --issuer URL: create the wallet file.
//   - wallet issue [--count N]: obtain tokens against proof of work.
//   - wallet balance: print the spendable value.
//   - wallet spend AMOUNT: spend value, with change.
//   - wallet resume: finish the requests a crash left in flight.
//   - version: print the module version, the commit and the Go version
//     (also spent --version).
//   - completion bash|zsh|fish|powershell: print a shell completion script
//     (for bash: source <(spent completion bash)).
//   - help [COMMAND]: help on any command.
//   - help environment: every environment variable spent reads, made from
//     the flags of serve.
//   - help exit-status: the exit statuses, one per error code.
//
// The client commands take --addr (default $SPENT_ADDR, else
// http://127.0.0.1:7070), --token (default $SPENT_TOKEN), --namespace (-n,
// default "default"), --timeout and --json (one JSON object per line, with
// the members of the HTTP API's answers plus "key"). For an https:// server
// they, spent token and spent wallet take --cacert, --cert and --key
// (default $SPENT_CACERT, $SPENT_CERT, $SPENT_KEY).
//
// # Exit status
//
// 0 when the command did its work: every claim outcome (fresh, replayed,
// in_progress, refused, mismatch) is a success. 2 for bad flags, arguments or
// configuration. An error with a spent error code exits with that code's
// status: 1 internal, 3 invalid, 4 unknown_namespace, 5 key_too_long,
// 6 too_large, 7 not_found, 8 not_pending, 9 seq_mismatch, 10 lease_expired,
// 11 unauthorized, 12 forbidden, 13 unavailable (retryable; a server that
// cannot be reached counts as unavailable), 14 expiry_too_long,
// 15 no_seq_index. The message on stderr names the code.
//
// spent audit has statuses of its own: 0 no double found (or the key's
// events printed), 1 doubles found, 2 bad flags, 3 a log unreadable or
// damaged (the message names the file and offset), 7 no event of the key
// looked up.
//
// # Guarantees
//
//   - serve answers no claim before its record is durable in the store: the
//     HTTP server replies only after the ledger returns.
//   - With an [audit] dir, serve answers no claim fresh before its
//     acceptance is fsynced in this node's audit log; a failed append is
//     answered unavailable, never fresh.
//   - serve refuses to start with a secret file that others may read or
//     that has the wrong size, and refuses to generate a new secret beside an
//     existing store (that would forget every record).
//   - serve refuses a store that lacks the canary its fence names (a store
//     restored from a snapshot), a missing fence beside a store that holds
//     records (unless --new-fence), and a damaged fence.
//   - A crash or a failure at any step of the fence's advance or of epoch
//     retire is finished by the next advance, a plain restart or a rerun of
//     retire: a canary the server wrote but did not record is recognised by
//     its proof (an HMAC under the data directory's id) and adopted.
//   - serve refuses an embedded store that holds less than it acknowledged
//     (a damaged MANIFEST or WAL tail, checked against its witness), naming
//     the file; when a write fails it answers 503 until the store has
//     reopened itself, then serves again without a restart.
//   - On a shared store, serve refuses a node whose lease another server
//     holds; one process at a time uses a data directory (DIR/lock, an
//     flock; the refusal names the holder's pid).
//   - serve refuses a non-loopback listen address while no tokens are
//     configured, and one without TLS unless --allow-plaintext. It loads
//     its certificates and opens its port before it writes the data
//     directory.
//   - On SIGINT or SIGTERM, in-flight requests finish (within
//     shutdown_timeout) before the store closes.
//
// # Caveats
//
//   - The embedded store is one process on one machine: no failover.
//   - Never restore the data directory from a backup to serve from it: a
//     store that went back in time accepts spent keys again. Backups are for
//     forensics (docs/operations.md).
//   - bench --embedded measures the ledger and store only, without HTTP; its
//     figures depend on the disk under --data (a temporary directory may be
//     in memory).
package main
