package metrics

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pdcgo/pdc/internal/wire"
)

// Bounds of the per-method tables: wire methods are numbered below
// maxMethods, and codes below maxCodes. A number at or past the bound (a
// hostile or newer client's) is counted in the last slot, "other".
const (
	maxMethods = 128
	maxCodes   = 32
)

// codeNames are the outcome labels, by wire code.
var codeNames = [...]string{
	wire.CodeOK:            "ok",
	wire.CodeInternal:      "internal",
	wire.CodeNotFound:      "not_found",
	wire.CodeExists:        "exists",
	wire.CodeInvalid:       "invalid",
	wire.CodeOutOfRange:    "out_of_range",
	wire.CodeUnavailable:   "unavailable",
	wire.CodeTimeout:       "timeout",
	wire.CodeCanceled:      "canceled",
	wire.CodePermission:    "permission",
	wire.CodeUnimplemented: "unimplemented",
	wire.CodeVersion:       "version",
	wire.CodeTooLarge:      "too_large",
	wire.CodeProtocol:      "protocol",
	wire.CodeClosed:        "closed",
	wire.CodeChecksum:      "checksum",
	wire.CodeStale:         "stale",
	wire.CodeCorrupt:       "corrupt",
	wire.CodeNoSpace:       "no_space",
	wire.CodeIO:            "io",
}

func codeName(c int) string {
	if c < len(codeNames) && codeNames[c] != "" {
		return codeNames[c]
	}
	return "other"
}

// methodName is m's label: its name in the wire table, or "other" for a
// number the table does not have.
func methodName(m int) string {
	s := wire.Method(m).String()
	if m >= maxMethods-1 || strings.HasPrefix(s, "method(") {
		return "other"
	}
	return s
}

// latencyBounds are the upper bounds of the latency buckets, from a
// round trip on an idle loopback (tens of microseconds) to a region
// write waiting for the disk (seconds).
var latencyBounds = [...]time.Duration{
	25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// histogram is a latency histogram of fixed buckets, observed with two
// atomic adds and no lock: prometheus.Histogram would do as well, but a
// method with no requests would still print all its buckets on every
// scrape, and this one is left out until it has one.
type histogram struct {
	buckets [len(latencyBounds) + 1]atomic.Uint64 // the last: over every bound
	sum     atomic.Uint64                         // nanoseconds
}

func (h *histogram) observe(d time.Duration) {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sum.Add(uint64(max(d, 0)))
}

// rpcMetrics counts requests by method and outcome: an rpc.Observer.
type rpcMetrics struct {
	requests [maxMethods][maxCodes]atomic.Uint64
	latency  [maxMethods]histogram
	// started counts requests admitted: those of a method in flight are
	// its started less its served (the requests less the refused).
	started [maxMethods]atomic.Uint64
	refused [maxMethods]atomic.Uint64

	descRequests, descLatency, descInFlight *prometheus.Desc
}

func newRPCMetrics() *rpcMetrics {
	return &rpcMetrics{
		descRequests: prometheus.NewDesc("pdc_rpc_requests_total",
			"Requests answered, by method and outcome (the wire code of the answer; refused requests included).",
			[]string{"method", "code"}, nil),
		descLatency: prometheus.NewDesc("pdc_rpc_request_duration_seconds",
			"Time from a request's arrival to its handler's return, by method (refused requests not included).",
			[]string{"method"}, nil),
		descInFlight: prometheus.NewDesc("pdc_rpc_requests_in_flight",
			"Requests admitted and not yet answered, by method (stage_wait: consumers waiting for a produce).",
			[]string{"method"}, nil),
	}
}

// Started implements rpc.Observer.
func (r *rpcMetrics) Started(m wire.Method) {
	r.started[slot(int(min(m, maxMethods)), maxMethods)].Add(1)
}

func slot(n, bound int) int { return min(n, bound-1) }

// Served implements rpc.Observer.
func (r *rpcMetrics) Served(m wire.Method, code wire.Code, elapsed time.Duration) {
	mi := slot(int(min(m, maxMethods)), maxMethods)
	r.requests[mi][slot(int(min(code, maxCodes)), maxCodes)].Add(1)
	r.latency[mi].observe(elapsed)
}

// Refused implements rpc.Observer.
func (r *rpcMetrics) Refused(m wire.Method, code wire.Code) {
	mi := slot(int(min(m, maxMethods)), maxMethods)
	r.refused[mi].Add(1)
	r.requests[mi][slot(int(min(code, maxCodes)), maxCodes)].Add(1)
}

func (r *rpcMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.descRequests
	ch <- r.descLatency
	ch <- r.descInFlight
}

// Collect emits the methods and outcomes seen so far; numbers the wire
// table does not name are summed under "other".
func (r *rpcMetrics) Collect(ch chan<- prometheus.Metric) {
	type key struct{ method, code string }
	var other map[key]uint64
	var otherHist *histSnapshot
	var otherInFlight float64
	for m := range maxMethods {
		name := methodName(m)
		// Started first, then refused, then the answers: a request
		// counted between the loads shows as one fewer in flight, never
		// as a negative number.
		started, refused := r.started[m].Load(), r.refused[m].Load()
		var answered uint64
		for c := range maxCodes {
			answered += r.requests[m][c].Load()
		}
		if started > 0 {
			n := float64(started) - float64(answered-refused)
			n = max(n, 0)
			if name == "other" {
				otherInFlight += n
			} else {
				ch <- prometheus.MustNewConstMetric(r.descInFlight, prometheus.GaugeValue, n, name)
			}
		}
		for c := range maxCodes {
			n := r.requests[m][c].Load()
			if n == 0 {
				continue
			}
			if name == "other" || codeName(c) == "other" {
				if other == nil {
					other = map[key]uint64{}
				}
				other[key{name, codeName(c)}] += n
				continue
			}
			ch <- prometheus.MustNewConstMetric(r.descRequests, prometheus.CounterValue, float64(n), name, codeName(c))
		}
		hs := r.latency[m].snapshot()
		if hs.count == 0 {
			continue
		}
		if name == "other" {
			if otherHist == nil {
				otherHist = &histSnapshot{}
			}
			otherHist.add(hs)
			continue
		}
		ch <- hs.metric(r.descLatency, name)
	}
	for k, n := range other {
		ch <- prometheus.MustNewConstMetric(r.descRequests, prometheus.CounterValue, float64(n), k.method, k.code)
	}
	if otherHist != nil {
		ch <- otherHist.metric(r.descLatency, "other")
	}
	if otherInFlight > 0 {
		ch <- prometheus.MustNewConstMetric(r.descInFlight, prometheus.GaugeValue, otherInFlight, "other")
	}
}

type histSnapshot struct {
	buckets [len(latencyBounds) + 1]uint64
	count   uint64
	sum     time.Duration
}

// snapshot reads h. Its buckets and sum are read one by one while
// requests go on: a scrape may see an observation in a bucket and not
// yet in the sum, which the next scrape puts right.
func (h *histogram) snapshot() histSnapshot {
	var s histSnapshot
	for i := range h.buckets {
		s.buckets[i] = h.buckets[i].Load()
		s.count += s.buckets[i]
	}
	s.sum = time.Duration(h.sum.Load())
	return s
}

func (s *histSnapshot) add(o histSnapshot) {
	for i := range s.buckets {
		s.buckets[i] += o.buckets[i]
	}
	s.count += o.count
	s.sum += o.sum
}

func (s *histSnapshot) metric(d *prometheus.Desc, method string) prometheus.Metric {
	cum := make(map[float64]uint64, len(latencyBounds))
	var n uint64
	for i, b := range latencyBounds {
		n += s.buckets[i]
		cum[b.Seconds()] = n
	}
	return prometheus.MustNewConstHistogram(d, s.count, s.sum.Seconds(), cum, method)
}
