package metrics

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
)

// maxScrape bounds the bytes read of one scrape.
const maxScrape = 64 << 20

// Families are one scrape's metrics by name.
type Families map[string]*dto.MetricFamily

// Scrape reads the metrics of the server whose metrics address is addr
// (HOST:PORT).
func Scrape(ctx context.Context, hc *http.Client, addr string) (Families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+Path, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w: %w", addr, pdc.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s: %w", addr, resp.Status, pdc.ErrUnavailable)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, maxScrape))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %v: %w", addr, err, pdc.ErrProtocol)
	}
	return Families(fams), nil
}

// matches reports whether m has every label of want (name, value pairs).
func matches(m *dto.Metric, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Value is the sum of the series of name that have the labels given
// (name, value pairs): counters, gauges and untyped, and a histogram's
// count. 0 if there are none.
func (f Families) Value(name string, labels ...string) float64 {
	mf := f[name]
	if mf == nil {
		return 0
	}
	var v float64
	for _, m := range mf.GetMetric() {
		if !matches(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Untyped != nil:
			v += m.Untyped.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v
}

// Label is the value of label on the first series of name.
func (f Families) Label(name, label string) string {
	mf := f[name]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return ""
	}
	for _, l := range mf.GetMetric()[0].GetLabel() {
		if l.GetName() == label {
			return l.GetValue()
		}
	}
	return ""
}

// Buckets is a histogram merged over series: cumulative counts by upper
// bound, in seconds or bytes, ascending; the last bound is +Inf.
type Buckets struct {
	Bounds []float64
	Counts []float64
}

// Histogram merges the series of histogram name that have the labels
// given.
func (f Families) Histogram(name string, labels ...string) Buckets {
	mf := f[name]
	byBound := map[float64]float64{}
	var total float64
	if mf != nil {
		for _, m := range mf.GetMetric() {
			if m.Histogram == nil || !matches(m, labels) {
				continue
			}
			for _, b := range m.Histogram.GetBucket() {
				byBound[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	byBound[math.Inf(1)] = total
	var h Buckets
	for b := range byBound {
		h.Bounds = append(h.Bounds, b)
	}
	sort.Float64s(h.Bounds)
	for _, b := range h.Bounds {
		h.Counts = append(h.Counts, byBound[b])
	}
	return h
}

// Sub is the histogram of what was observed since old.
func (h Buckets) Sub(old Buckets) Buckets {
	prev := map[float64]float64{}
	for i, b := range old.Bounds {
		prev[b] = old.Counts[i]
	}
	out := Buckets{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts))}
	for i, b := range h.Bounds {
		out.Counts[i] = max(h.Counts[i]-prev[b], 0)
	}
	return out
}

// Quantile estimates the q-quantile (0 < q < 1) by interpolating in its
// bucket, as Prometheus's histogram_quantile does; NaN with no
// observations. One in the +Inf bucket is the highest finite bound.
func (h Buckets) Quantile(q float64) float64 {
	n := len(h.Counts)
	if n == 0 || h.Counts[n-1] == 0 {
		return math.NaN()
	}
	rank := q * h.Counts[n-1]
	lower, below := 0.0, 0.0
	for i, c := range h.Counts {
		if c >= rank {
			if math.IsInf(h.Bounds[i], 1) {
				return lower
			}
			if c == below {
				return h.Bounds[i]
			}
			return lower + (h.Bounds[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = h.Bounds[i], c
	}
	return lower
}

// Sample is one server's metrics at one moment.
type Sample struct {
	Server      cluster.Server
	MetricsAddr string // "": the server serves no metrics
	Time        time.Time
	Err         error // of the scrape
	Families    Families
}

// ClusterSnapshot is a scrape of every server of a cluster, at about
// one time: what pdc top shows, two at a time.
type ClusterSnapshot struct {
	Time    time.Time
	Servers []Sample // by rank
}

// Snap scrapes every server of the cluster of dir that serves metrics,
// at once, each within ctx.
func Snap(ctx context.Context, hc *http.Client, dir cluster.Dir) (*ClusterSnapshot, error) {
	list, err := dir.ReadList()
	if err != nil {
		return nil, err
	}
	addrs, err := dir.MetricsAddrs(list)
	if err != nil {
		return nil, err
	}
	snap := &ClusterSnapshot{Time: time.Now(), Servers: make([]Sample, len(list.Servers))}
	var wg sync.WaitGroup
	for i, s := range list.Servers {
		smp := &snap.Servers[i]
		smp.Server, smp.MetricsAddr = s, addrs[s.Rank]
		if smp.MetricsAddr == "" {
			smp.Err = fmt.Errorf("%s serves no metrics (start it with --metrics-addr): %w", s.Label(), pdc.ErrNotFound)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			smp.Families, smp.Err = Scrape(ctx, hc, smp.MetricsAddr)
			smp.Time = time.Now()
		}()
	}
	wg.Wait()
	sort.Slice(snap.Servers, func(i, j int) bool { return snap.Servers[i].Server.Rank < snap.Servers[j].Server.Rank })
	return snap, nil
}
