package http

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/grant"
	"github.com/spentledger/spent/internal/strictjson"
)

// seqNames are the members of a POST /v1/seq body, in bit order.
var seqNames = []string{"node", "last", "around", "from", "to", "limit"}

// decodeSeq reads the body of POST /v1/seq: node, then one of last,
// around (with limit) or from/to (with limit). The ledger checks how they
// combine; the decoder checks each number.
func decodeSeq(d *strictjson.Decoder, req *spent.SeqRequest) error {
	_, err := fields(d, -1, seqNames, func(d *strictjson.Decoder, name string) error {
		b, err := d.Number()
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(string(b), 10, 64)
		if err != nil {
			return errors.New("want a whole number, 0 or more")
		}
		small := func(max uint64) (int, error) {
			if n > max {
				return 0, errors.New("want 0 to " + strconv.FormatUint(max, 10))
			}
			return int(n), nil
		}
		switch name {
		case "node":
			v, err := small(1<<32 - 1)
			req.Node = uint32(v)
			return err
		case "last":
			req.Last, err = small(spent.MaxSeqList)
		case "limit":
			req.Limit, err = small(spent.MaxSeqList)
		case "around":
			req.Around = n
		case "from":
			req.From = n
		case "to":
			req.To = n
		}
		return err
	})
	return err
}

// seq answers POST /v1/seq: the records a node wrote, by seq. It needs the
// admin scope over every namespace, as its records span them all.
func (s *Server) seq(w http.ResponseWriter, r *http.Request, x *exchange, g *grant.Grant) int {
	var req spent.SeqRequest
	if err := decodeSeq(&x.d, &req); err != nil {
		return s.fail(w, x, routeSeq, err)
	}
	if err := x.d.End(); err != nil {
		return s.fail(w, x, routeSeq, malformed(-1, err))
	}
	if !g.Allows("", true) {
		return s.fail(w, x, routeSeq, forbidden("", true))
	}
	a, err := s.ledger.Seq(r.Context(), req)
	s.answered(err)
	if err != nil {
		return s.fail(w, x, routeSeq, err)
	}
	b := append(x.out[:0], `{"node":`...)
	b = strconv.AppendUint(b, uint64(a.Node), 10)
	b = append(b, `,"records":[`...)
	for i := range a.Records {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendRecordMembers(b, &a.Records[i].Record, false)
		b = append(b, `,"result_len":`...)
		b = strconv.AppendInt(b, int64(a.Records[i].ResultLen), 10)
		b = append(b, '}')
	}
	x.out = append(b, "]}\n"...)
	return s.reply(w, x.out)
}

// Seq asks the server's ledger for records by seq (see [spent.Ledger.Seq]):
// the last n a node wrote, those around a counter, or a range. It needs a
// token with the admin scope over all namespaces. Records come without
// their result bytes (ResultLen gives the length) and without raw keys.
func (c *Client) Seq(ctx context.Context, req spent.SeqRequest) (spent.SeqAnswer, error) {
	body := append(make([]byte, 0, 96), `{"node":`...)
	body = strconv.AppendUint(body, uint64(req.Node), 10)
	num := func(name string, v uint64) {
		if v != 0 {
			body = append(body, `,"`...)
			body = append(body, name...)
			body = append(body, `":`...)
			body = strconv.AppendUint(body, v, 10)
		}
	}
	if req.Last < 0 || req.Limit < 0 {
		return spent.SeqAnswer{}, spent.Errorf(spent.EInvalid, "seq: last and limit must not be negative")
	}
	num("last", uint64(req.Last))
	num("around", req.Around)
	num("from", req.From)
	num("to", req.To)
	num("limit", uint64(req.Limit))
	body = append(body, '}')
	a := spent.SeqAnswer{Records: []spent.SeqRecord{}}
	err := c.do(ctx, routeSeq, body, func(d *strictjson.Decoder) error {
		return d.Object(func(name []byte) error {
			switch string(name) {
			case "node":
				n, err := d.Int()
				if err == nil && (n < 0 || n > 1<<32-1) {
					err = errors.New("node out of range")
				}
				a.Node = uint32(n)
				return err
			case "records":
				return d.Array(func(int) error {
					a.Records = append(a.Records, spent.SeqRecord{})
					sr := &a.Records[len(a.Records)-1]
					return d.Object(func(name []byte) error {
						if string(name) == "result_len" {
							n, err := d.Int()
							if err == nil && n < 0 {
								err = errors.New("negative result_len")
							}
							sr.ResultLen = int(n)
							return err
						}
						ok, err := recordMember(d, name, &sr.Record, &noHint)
						if !ok {
							return d.Skip(1)
						}
						return err
					})
				})
			}
			return d.Skip(1)
		})
	})
	if err != nil {
		return spent.SeqAnswer{}, err
	}
	return a, nil
}
