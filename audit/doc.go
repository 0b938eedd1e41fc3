// Package audit keeps the acceptance audit: an append-only log, one per
// node and apart from the ledger's store, of every fresh answer the ledger
// gave and of every completion and release, so that a key accepted fresh
// twice (a claim lost in a store's failover, then claimed again) is found
// afterwards, with both acceptances.
//
// In the common case a server opens a [Log] and hands it to the ledger:
//
//	log, err := audit.Open(audit.Config{Dir: "/var/lib/spent/audit", Node: 1})
//	cfg.Audit = log // spent.Config
//
// and an operator merges the logs of all nodes and lists the doubles with
// [Read] and [Doubles] (the command "spent audit DIR..." does both), or
// looks one key up with [Find]: which node and place processed it.
//
// A log is a directory of JSON-lines files named node-N.SEQUENCE.jsonl, one
// event a line. A [Log] appends to its node's newest file, starts a new file
// at every [Open] and when a file would pass [Config].MaxFileSize, and never
// rewrites or deletes a file: removing old files is the operator's, once
// every record they name has expired.
//
// # Guarantees
//
//   - Durable before the answer: [Log.Append] returns only once its events
//     are written and fsynced. A ledger calls it after the store wrote the
//     record and before it answers fresh, and an append that fails turns the
//     fresh answer into an error (the client does not know the outcome; its
//     retry is answered from the stored record as a repeat). So every fresh
//     answer a client received is in the log.
//   - Group commit: appends that arrive while a write is in flight go
//     together in the next write, under one fsync; each caller waits for the
//     fsync that covers its events.
//   - After a failed write or fsync the file is closed and never written
//     again (its end is unknown); the next append starts a new file.
//   - [Read] tolerates a torn last line of a file (a crash during a write:
//     those events were never acknowledged) with a [Warning] naming the file
//     and offset, and refuses a damaged line anywhere else with an error
//     wrapping [ErrDamaged]: skipping it could hide a double.
//   - Bounded: a line is at most [MaxLine] bytes, a file about MaxFileSize,
//     a read at most [ReadOptions].MaxEvents events.
//
// # Caveats
//
//   - The log lives on the node's own disk, not in the ledger's store: a
//     stream in a shared Redis would be lost in the very failover it must
//     reveal. A node whose disk is lost takes its acceptances with it; copy
//     the logs off the machines as the records' retention requires.
//   - [Doubles] judges by the nodes' clocks (expiry, lease end): the nodes'
//     clocks must agree to well within a lease.
//   - An acceptance is logged after the store wrote it: a record written
//     whose audit append failed, and never answered fresh, is in the store
//     but not in the log. It was never acknowledged, so it is no double.
//   - A completion or release whose append failed is not in the log, though
//     it happened (the caller got an error): a later acceptance of a released
//     key is then reported as a double. Check such a report against the
//     record's seq before acting on it.
//   - Keys purged by an epoch retirement or forgotten by a new secret are
//     not logged as ended; re-acceptances after a retirement are reported.
//   - Two processes writing one node's files in one directory are refused
//     only when they collide on a file name: give each node its own node
//     number, as a shared store requires anyway.
package audit
