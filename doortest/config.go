package doortest

import (
	"time"

	"github.com/spentledger/spent/door"
)

// The namespaces of the suite's configuration.
const (
	// NSClaims is an echo namespace with the default policy.
	NSClaims = "claims"
	// NSBounded is an echo namespace whose claims' own expiries are
	// bounded: at least MinExpiry, at most MaxExpiry.
	NSBounded = "bounded"
	// NSRollback is an echo namespace with a short lease (RollbackLease)
	// and on_lease_expiry = "hold", for rollback prefixes.
	NSRollback = "rollback"
)

// The policy of NSBounded and NSRollback.
const (
	MinExpiry     = time.Hour
	Retention     = 24 * time.Hour
	MaxExpiry     = 48 * time.Hour
	RollbackLease = 10 * time.Second
)

// The tokens of the suite's configuration (test values, not secrets).
const (
	// ClaimToken has the claim scope in every namespace.
	ClaimToken = "doortest-claim-token-0123456789abcdef"
	// AdminToken has the admin scope in every namespace.
	AdminToken = "doortest-admin-token-0123456789abcdef"
)

// baseTables are the tables of the suite's configuration file: its
// namespaces and tokens. The top-level keys come before them (each test's
// own, else the defaults), the door's tables after.
const baseTables = `[namespaces.claims]
mode = "echo"

[namespaces.bounded]
mode = "echo"
retention = "24h"
min_expiry = "1h"
max_expiry = "48h"

[namespaces.rollback]
mode = "echo"
lease = "10s"
on_lease_expiry = "hold"

[[tokens]]
token = "` + ClaimToken + `"
scopes = ["claim"]

[[tokens]]
token = "` + AdminToken + `"
scopes = ["admin"]
`

// defaults are the door limits of a server started without top-level
// keys: what the attacks run against.
func defaults() door.Limits { return door.DefaultLimits() }
