package console

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/node"
)

// outcomes are the claim outcomes, in the order the page shows them.
var outcomes = [...]spent.Outcome{spent.Fresh, spent.Replayed, spent.InProgress, spent.Refused, spent.Mismatch}

// colors are the chart's line colors, by outcome.
var colors = [len(outcomes)]string{"#1b7f3b", "#1f5fbf", "#c77c00", "#b3261e", "#7b3fa0"}

// byOutcome holds one number per outcome, in the order of outcomes.
type byOutcome [len(outcomes)]float64

// claimCounts reads the ledger's claim counter (node.MetricLedgerClaims)
// from g: per namespace, the claims this server answered by outcome since
// it started, whichever front end (the HTTP API, the RESP listener,
// Privacy Pass, e-cash, the middlewares) asked. A nil g reads nothing.
func claimCounts(g prometheus.Gatherer) (map[string]*byOutcome, error) {
	out := map[string]*byOutcome{}
	if g == nil {
		return out, nil
	}
	mfs, err := g.Gather()
	if err != nil {
		return out, fmt.Errorf("console: metrics: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != node.MetricLedgerClaims {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ns, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "namespace":
					ns = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			for i, o := range outcomes {
				if string(o) == outcome {
					c := out[ns]
					if c == nil {
						c = new(byOutcome)
						out[ns] = c
					}
					c[i] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out, nil
}

// sample is the claim counters, summed over namespaces, at one instant.
type sample struct {
	at     time.Time
	totals byOutcome
}

// sampler keeps the last samples of the claim counters in a ring.
type sampler struct {
	g    prometheus.Gatherer
	mu   sync.Mutex
	ring []sample
	next int // where the next sample goes
	n    int // samples kept
}

func newSampler(g prometheus.Gatherer, size int) *sampler {
	return &sampler{g: g, ring: make([]sample, size)}
}

// sample reads the counters at now into the ring. A failed read is
// skipped: the chart shows a gap rather than a made-up rate.
func (s *sampler) sample(now time.Time) {
	counts, err := claimCounts(s.g)
	if err != nil {
		return
	}
	var tot byOutcome
	for _, c := range counts {
		for i := range tot {
			tot[i] += c[i]
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring[s.next] = sample{at: now, totals: tot}
	s.next = (s.next + 1) % len(s.ring)
	s.n = min(s.n+1, len(s.ring))
}

// samples returns the samples kept, oldest first.
func (s *sampler) samples() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]sample, 0, s.n)
	start := (s.next - s.n + len(s.ring)) % len(s.ring)
	for i := range s.n {
		out = append(out, s.ring[(start+i)%len(s.ring)])
	}
	return out
}

// point is the claims per second by outcome between two samples, at the
// later one's time.
type point struct {
	at    time.Time
	rates byOutcome
}

// rates returns the claims per second between consecutive samples.
func rates(ss []sample) []point {
	var out []point
	for i := 1; i < len(ss); i++ {
		dt := ss[i].at.Sub(ss[i-1].at).Seconds()
		if dt <= 0 {
			continue
		}
		var p point
		p.at = ss[i].at
		for j := range p.rates {
			p.rates[j] = max(0, ss[i].totals[j]-ss[i-1].totals[j]) / dt
		}
		out = append(out, p)
	}
	return out
}

// rateRow is one outcome's line of the rates table.
type rateRow struct {
	Outcome     string
	Color       string
	Last, Whole string // claims/s over the last interval and the window
}

// rateTable returns the rates table of samples ss.
func rateTable(ss []sample) []rateRow {
	rows := make([]rateRow, len(outcomes))
	ps := rates(ss)
	for i, o := range outcomes {
		rows[i] = rateRow{Outcome: string(o), Color: colors[i], Last: "–", Whole: "–"}
		if len(ps) > 0 {
			rows[i].Last = formatRate(ps[len(ps)-1].rates[i])
			first, last := ss[0], ss[len(ss)-1]
			rows[i].Whole = formatRate(max(0, last.totals[i]-first.totals[i]) / last.at.Sub(first.at).Seconds())
		}
	}
	return rows
}

func formatRate(r float64) string { return strconv.FormatFloat(r, 'f', 2, 64) }

// Geometry of the chart, in SVG user units.
const (
	chartW, chartH            = 720, 240
	padLeft, padRight         = 56, 12
	padTop, padBottom         = 12, 48
	plotW, plotH      float64 = chartW - padLeft - padRight, chartH - padTop - padBottom
)

// niceCeil returns the smallest of 1, 2 and 5 times a power of ten that is
// at least v (and at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// drawChart draws the claims per second by outcome over the window ending
// at now as an SVG image. Its text is only numbers and outcome names.
func drawChart(ss []sample, now time.Time, window time.Duration) []byte {
	ps := rates(ss)
	top := 0.0
	for _, p := range ps {
		for _, r := range p.rates {
			top = max(top, r)
		}
	}
	top = niceCeil(top)
	x := func(t time.Time) float64 {
		return padLeft + plotW*(1-now.Sub(t).Seconds()/window.Seconds())
	}
	y := func(r float64) float64 { return padTop + plotH*(1-r/top) }
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`, chartW, chartH, chartW, chartH)
	b.WriteString(`<title>Claims per second by outcome, answered by this server</title>`)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`, chartW, chartH)
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`, padLeft, padLeft+plotW, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#444444">%s</text>`, padLeft-6, y(v)+4, strconv.FormatFloat(v, 'g', 4, 64))
	}
	minutes := int(window / time.Minute)
	step := max(1, minutes/6)
	for m := 0; m <= minutes; m += step {
		xv := x(now.Add(-time.Duration(m) * time.Minute))
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#eeeeee"/>`, xv, xv, padTop, padTop+plotH)
		label := "now"
		if m > 0 {
			label = "-" + strconv.Itoa(m) + " min"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444444">%s</text>`, xv, padTop+plotH+14, label)
	}
	fmt.Fprintf(&b, `<text x="14" y="%.1f" fill="#444444" transform="rotate(-90 14 %.1f)" text-anchor="middle">claims/s</text>`, padTop+plotH/2, padTop+plotH/2)
	for i := range outcomes {
		var pts bytes.Buffer
		for _, p := range ps {
			if now.Sub(p.at) > window {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(p.at), y(p.rates[i]))
		}
		if pts.Len() > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, colors[i], bytes.TrimSpace(pts.Bytes()))
		}
	}
	for i, o := range outcomes {
		lx := padLeft + float64(i)*120
		ly := float64(chartH) - 12
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="14" height="4" fill="%s"/>`, lx, ly-4, colors[i])
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#222222">%s</text>`, lx+18, ly, o)
	}
	b.WriteString(`</svg>`)
	return b.Bytes()
}

// chart serves the chart as image/svg+xml, to an operator logged in.
func (c *Console) chart(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.operator(w, r); !ok {
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Write(drawChart(c.sampler.samples(), c.cfg.Now(), c.cfg.Window))
}
