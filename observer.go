package spent

import "context"

// Observer watches a [Ledger]'s work, for metrics and traces: set it as
// [Config].Observer. Package node adds one that counts claims by namespace
// and outcome (Prometheus), and spent serve one from package opentelemetry
// that starts spans, so that both see every call whichever front end (HTTP,
// Privacy Pass, e-cash, the idempotency middleware) made it. The ledger calls it on the
// caller's goroutine, so it must be safe for concurrent use and quick; it
// never passes it a key, a hash or a result.
type Observer interface {
	// Start is called as an operation begins. op is "claim",
	// "claim_batch", "complete", "release", "get" or "count"; namespace is
	// the operation's namespace, "" for a batch (whose claims may span
	// several) and a count. It returns the context for the work under the
	// operation (the store's calls get it, so a span started here is their
	// parent) and a function the ledger calls exactly once, when the
	// operation ends, with its error (nil on success).
	Start(ctx context.Context, op, namespace string) (context.Context, func(err error))
	// Answered is called once for every claim answered, each claim of a
	// batch included, before the operation's end, with the context Start
	// returned.
	Answered(ctx context.Context, namespace string, outcome Outcome)
}

// Observers returns an Observer that passes every call to each of obs in
// turn (nil ones skipped): the context one returns from Start is given to
// the next, and the end functions run in reverse order. With no observer
// left it returns nil, which costs the ledger nothing.
func Observers(obs ...Observer) Observer {
	var list multiObserver
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

// observe runs do as the operation op of namespace under obs: Start, do,
// answered (when given, and do succeeded), then the end.
func observe[T any](ctx context.Context, obs Observer, op, namespace string,
	do func(context.Context) (T, error), answered func(context.Context, T)) (T, error) {
	ctx, end := obs.Start(ctx, op, namespace)
	v, err := do(ctx)
	if answered != nil && err == nil {
		answered(ctx, v)
	}
	end(err)
	return v, err
}

type multiObserver []Observer

func (m multiObserver) Start(ctx context.Context, op, namespace string) (context.Context, func(error)) {
	ends := make([]func(error), len(m))
	for i, o := range m {
		ctx, ends[i] = o.Start(ctx, op, namespace)
	}
	return ctx, func(err error) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i](err)
		}
	}
}

func (m multiObserver) Answered(ctx context.Context, namespace string, outcome Outcome) {
	for _, o := range m {
		o.Answered(ctx, namespace, outcome)
	}
}
