// Package webhooks receives Standard Webhooks (https://www.standardwebhooks.com)
// on top of a spent ledger: it verifies each message's signature and
// timestamp, then hands each message id to the handler once within the
// window in which its signature is accepted.
//
// In the common case, add the namespace [Options.Policy] returns to the
// ledger, build a [Receiver] with [New] for each sender, and wrap the
// handler:
//
//	opts := webhooks.DefaultOptions()
//	opts.Source = "billing"                       // who sends: scopes the ids
//	opts.Secrets = []string{"whsec_..."}          // v1 (HMAC-SHA256)
//	opts.PublicKeys = []string{"whpk_..."}        // v1a (ed25519), optional
//	cfg.Namespaces[opts.Namespace] = opts.Policy(30 * time.Second)
//	ledger, err := spent.NewLedger(ctx, store, cfg)
//	rc, err := webhooks.New(ledger, opts)
//	mux.Handle("POST /webhooks/billing", rc.Handler(http.HandlerFunc(onEvent)))
//
// The handler reads the body as sent and the message's id and timestamp
// with [MessageOf]; it answers 2xx when it has handled the message.
//
// # What the receiver answers
//
// In this order, each check before the next:
//
//	not a POST                              405, code method_not_allowed
//	a webhook header missing                401, code headers_missing
//	a header repeated, too long, malformed  400, code headers_invalid
//	body over Options.MaxBody               413, code too_large
//	timestamp further than Tolerance        401, code timestamp_out_of_tolerance
//	  from now, either way                    (the ledger is not consulted)
//	no signature verifies                   401, code signature_invalid
//	ledger unavailable                      503, code unavailable, Retry-After
//	                                          (the handler does not run)
//	id being handled by another delivery    409, code in_progress, Retry-After
//	id already handled                      200, empty body, Spent-Duplicate: true
//	                                          (the handler does not run)
//	otherwise                               the handler's answer
//
// A handler answer of 2xx completes the id's claim; any other answer, a
// panic or a response over Options.MaxResponse releases it, so that the
// sender's next attempt runs the handler again. Errors are RFC 9457
// problem documents with a stable "code" member (the Code constants).
//
// # The window
//
// A message's signature covers its id, its timestamp and its body, and the
// timestamp is accepted only within Tolerance of the receiver's clock. A
// replay of a captured message is therefore refused by the timestamp check
// once Tolerance has passed, and the ledger need remember the id only
// until then: each claim expires at the message's timestamp + Tolerance +
// Skew. Webhook receivers sit in this cell: they refuse repeats,
// but only within the window the signature's timestamp allows, because
// outside it the signature check takes over. The namespace's retention
// must cover the longest such expiry counted from a claim, 2 × Tolerance +
// 2 × Skew ([Options.MinRetention]); see docs/webhooks.md.
//
// # Guarantees
//
//   - Verified before remembered: nothing reaches the ledger, and nothing
//     is written, for a message whose headers, timestamp or signature
//     fail.
//   - Once per window: of any number of deliveries of one (Source, id),
//     concurrent or not, at most one runs the handler at a time, and once
//     one has answered 2xx no other runs it while the message's timestamp
//     could still be accepted.
//   - Senders never collide: ids are claimed under Options.Source, and the
//     ledger stores only an HMAC of the pair.
//   - Fail closed: when the ledger cannot be written or read, the answer is
//     503 and the handler does not run.
//   - Bounded: the body, the headers, the number of signatures and the
//     response are limited, so one request costs at most MaxSignatures ×
//     (secrets + keys) verifications and MaxBody + MaxResponse bytes.
//   - Secrets are compared in constant time (crypto/hmac.Equal); ed25519
//     signatures are checked by crypto/ed25519.
//
// # Caveats
//
//   - Senders re-sign every retry with a new timestamp and the same id.
//     A retry that arrives after the first delivery's id has expired (the
//     specification's schedule retries for days) is a fresh message and
//     runs the handler again: the receiver stops replays of one signed
//     message, not a sender that retries a delivery it believes failed
//     hours later. A handler whose effect must happen once per event for
//     longer keeps its own record of the event, or claims the id in a
//     namespace of its own with a longer retention.
//   - At least once: a handler still running when the namespace's lease
//     ends, or a process that dies while a handler runs, lets the next
//     delivery run it again (the lease policy is retake; hold would only
//     keep retries waiting until the id expired, minutes later, and then
//     run them anyway).
//   - When the ledger fails to record a completion after the handler
//     answered 2xx, the 2xx is sent (a failure would make the sender
//     deliver again) and the id stays pending until its lease ends.
//   - Over a remote spent server, New cannot read the namespace's policy:
//     the retention check is then the operator's ([Options.Policy]).
//   - The receiver's clock must stay within Skew of the ledger's; a clock
//     further off shortens the window in which replays are remembered.
//   - Responses are held whole until the claim is settled (no streaming,
//     Flush or Hijack).
package webhooks
