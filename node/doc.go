// Package node runs a spent ledger safely in a long-lived process: it owns
// the data directory and its secret, checks the store against them, keeps
// the rollback fence, sweeps expired records and closes everything in
// order. The spent server (cmd/spent) is one node; a program that embeds
// the ledger should be another.
//
// In the common case, open a node on the embedded store with
//
//	cfg := node.DefaultConfig()
//	cfg.Dir = "/var/lib/myservice"
//	cfg.EmbeddedDir = filepath.Join(cfg.Dir, "pebble")
//	cfg.Ledger.Namespaces = map[string]spent.Policy{"orders": spent.DefaultPolicy()}
//	cfg.OpenStore = func(context.Context) (node.Opened, error) {
//		s, err := pebble.Open(cfg.EmbeddedDir, pebble.DefaultOptions())
//		return node.Opened{Store: s, Kind: "pebble", Where: cfg.EmbeddedDir}, err
//	}
//	n, err := node.Open(ctx, cfg)
//	...
//	defer n.Close()
//	res, err := n.Ledger().Claim(ctx, spent.Claim{Namespace: "orders", Key: "order-1"})
//
// and call n.Drain when a graceful shutdown begins (n.Ready then fails),
// and n.Close once the requests in flight have finished.
//
// # Embedding the ledger
//
// A *spent.Ledger on a store is all a claim needs, but on its own it has
// no defence against the store going back in time. Open adds what the
// spent server has: examples/payments (an Idempotency-Key service) and
// examples/gate (a ticket gate) run on a Node, and their tests show a
// store put back to an earlier copy being refused. To run several
// processes as one ledger, open each on a shared store (Config.Shared) with
// its own Ledger.Node and a copy of the first one's secret.
//
// # The data directory
//
//	DIR/
//	  lock      held (flock) by the process that uses the directory, holding its pid
//	  secret    the HMAC secret: 32 random bytes, mode 0600, generated at first start
//	  fence     the rollback fence: which canary record the store must hold
//
// plus, usually, the embedded store's directory (Config.EmbeddedDir).
//
// # Guarantees
//
//   - One process at a time uses a data directory: Open takes an exclusive
//     lock before it touches anything, and a second Open is refused with
//     [ErrDirInUse], naming the holder's pid.
//   - Open refuses a secret file that others may read or that has the wrong
//     size, and refuses to generate a new secret beside an embedded store
//     inside the data directory that holds files (that would forget every
//     record).
//   - Open refuses a store set up with another secret ([ErrSecretMismatch]):
//     two secrets over one store would answer one key fresh twice.
//   - The rollback fence: the node writes a canary record to the store, makes
//     it durable, and then names it in DIR/fence, at Open, every
//     FenceInterval and at Close. Open refuses a store that lacks the canary
//     the fence names ([ErrStoreWentBack]): a store restored from an earlier
//     copy, or another store. It refuses a missing fence beside a store that
//     holds records ([ErrFenceMissing]) unless Config.NewFence, and a
//     damaged fence.
//   - On a shared store, the node holds a lease on its node number, renewed
//     at each fence advance; Open refuses a node whose live lease another
//     data directory holds ([ErrNodeInUse]). A running node whose renewal
//     finds another data directory's lease (it was stopped, or cut off,
//     for longer than its lease, and another server took the node) has
//     lost it: [Node.Lost] is closed, [Node.LostErr] says why, Ready fails,
//     and the fence stops advancing. The server must stop.
//   - A crash or a failure at any step of the fence's advance or of [Retire]
//     is finished by the next advance, a plain restart or a rerun: a canary
//     the node wrote but did not record is recognised by its proof (an HMAC
//     under the data directory's id) and adopted.
//   - Close stops the sweeper and the fence's advance, writes a last canary,
//     releases the node lease, closes the store and then the lock, in that
//     order; later calls return what the first returned. A failed Open
//     leaves nothing open.
//
// # Caveats
//
//   - The fence catches a store older than its newest canary. A copy taken
//     less than one FenceInterval before a crash goes unnoticed.
//   - Never restore the data directory or the store from a backup to serve
//     from it: that is what the fence refuses. The way forward after a
//     deliberate loss is [Retire] (spent epoch retire), which accepts the
//     store as it is.
//   - The node lease relies on the clocks of the nodes sharing a store
//     agreeing to well within three FenceIntervals.
//   - The messages name the spent server's flags and docs/operations.md
//     ("--new-fence", "spent epoch retire"): Config.NewFence and Retire are
//     what they mean for an embedding program.
package node
