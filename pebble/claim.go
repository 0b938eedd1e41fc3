package pebble

import "github.com/spentledger/spent"

// claimReq is the part of a kindClaim request: a Claim's one op or a
// ClaimBatch's ops, and their answers.
type claimReq struct {
	ops     []spent.ClaimOp
	results []spent.ClaimAnswer
	// one and oneRes hold a lone Claim's op and answer, so that it
	// allocates no slices (ops and results point into them).
	one    [1]spent.ClaimOp
	oneRes [1]spent.ClaimAnswer
}

// decideClaims decides q's ops in order, stopping at the first error, and reports
// whether the request may be answered early: a lone Early claim that
// inserted a pending record (engine invariant 4).
func (s *Store) decideClaims(rd *round, q *claimReq) (early bool, err error) {
	lone := len(q.ops) == 1
	var claims, inserted uint64
	for i := range q.ops {
		res, err1 := s.claim(rd, &q.ops[i], lone && q.ops[i].Early)
		if err1 != nil {
			err = err1
			break
		}
		q.results[i] = res
		claims++
		if res.Inserted {
			inserted++
		}
	}
	s.stats.claims.Add(claims)
	s.stats.inserted.Add(inserted)
	early = err == nil && lone && q.ops[0].Early && q.results[0].Inserted &&
		q.ops[0].Record.State == spent.StatePending
	return early, err
}

// claim decides one claim. With hold set (a lone Early claim), a fresh
// claim of a key that has no record is held in memory instead of written
// (held.go).
func (s *Store) claim(rd *round, op *spent.ClaimOp, hold bool) (spent.ClaimAnswer, error) {
	h := &op.Record.Hash
	counted := false // the filter counts h already
	if p, ok := s.held[*h]; ok {
		if spent.FreeAt(p, op.Now, op.Retake) {
			// Never written: forgetting it is enough.
			delete(s.held, *h)
			counted = true
		} else {
			// Engine invariant 4: this answer reports the held
			// record, so it must be durable first: write it in this
			// round.
			s.materialize(rd, h, p)
		}
	}
	cur, omitted, found, shared, err := s.lookupLimit(h, op.ResultLimit)
	if err != nil {
		return spent.ClaimAnswer{}, err
	}
	if found && !spent.FreeAt(&cur, op.Now, op.Retake) {
		// A result over op's limit is left out before the clone, so it
		// is never copied.
		res := spent.LimitResult(spent.ClaimAnswer{Record: cur}, op.ResultLimit)
		if shared {
			res.Record = res.Record.Clone()
		}
		if omitted > 0 {
			res.ResultOmitted, res.ResultLen = true, omitted
		}
		return res, nil
	}
	if found {
		// An expired record, or a pending one retaken: replace it.
		s.unindex(rd, &cur)
	} else if !counted {
		// Engine invariant 7: counted from the decision on.
		s.counted(fingerprint(h))
	}
	if hold && !found && op.Record.State == spent.StatePending && len(s.held) < maxHeld {
		c := op.Record.Clone()
		s.held[*h] = &c
		s.stats.held.Add(1)
		return spent.ClaimAnswer{Inserted: true, Record: op.Record}, nil
	}
	rec := &op.Record
	if op.Early {
		// Engine invariant 4: its caller may be answered, and reuse op,
		// before the round is sealed: the overlay keeps a copy.
		c := rec.Clone()
		rec = &c
	}
	s.put(rd, rec, true)
	return spent.ClaimAnswer{Inserted: true, Record: op.Record}, nil
}
