package console

import (
	"context"
	"time"
)

// SetSleep makes c wait with sleep, rather than with a timer, before it
// answers a refused login, so that tests neither wait nor depend on the
// wall clock. It must be called before c serves. For tests only.
func SetSleep(c *Console, sleep func(ctx context.Context, d time.Duration)) { c.sleep = sleep }
