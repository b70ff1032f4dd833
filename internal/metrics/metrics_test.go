package metrics

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pdcgo/pdc/internal/wire"
)

func gather(t *testing.T, r *Registry) Families {
	t.Helper()
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	f := Families{}
	for _, mf := range mfs {
		f[mf.GetName()] = mf
	}
	return f
}

func TestRequestsByMethodAndCode(t *testing.T) {
	r := New()
	o := r.Observer()
	for range 3 {
		o.Served(wire.MethodObjCreate, wire.CodeOK, 300*time.Microsecond)
	}
	o.Served(wire.MethodObjCreate, wire.CodeExists, 2*time.Second)
	o.Refused(wire.MethodPing, wire.CodeUnavailable)
	// Numbers past the tables' bounds, and one the wire does not name.
	o.Served(wire.Method(100000), wire.Code(1000), time.Millisecond)
	o.Served(wire.Method(120), wire.CodeOK, time.Millisecond)
	f := gather(t, r)
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"method", "obj_create", "code", "ok"}, 3},
		{[]string{"method", "obj_create", "code", "exists"}, 1},
		{[]string{"method", "ping", "code", "unavailable"}, 1},
		{[]string{"method", "other"}, 2},
		{[]string{"method", "other", "code", "other"}, 1},
	} {
		if got := f.Value("pdc_rpc_requests_total", c.labels...); got != c.want {
			t.Errorf("pdc_rpc_requests_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if got := f.Value("pdc_rpc_request_duration_seconds", "method", "obj_create"); got != 4 {
		t.Errorf("obj_create latency count %v, want 4", got)
	}
	if got := f.Value("pdc_rpc_request_duration_seconds", "method", "ping"); got != 0 {
		t.Errorf("a refused ping has a latency: count %v", got)
	}
	h := f.Histogram("pdc_rpc_request_duration_seconds", "method", "obj_create")
	if q := h.Quantile(0.5); q <= 250e-6 || q > 500e-6 {
		t.Errorf("median %v, want in the 250-500us bucket", q)
	}
	if q := h.Quantile(0.99); q <= 1 || q > 2.5 {
		t.Errorf("p99 %v, want in the 1-2.5s bucket", q)
	}
	if n, err := testutil.GatherAndCount(r.Gatherer(), "pdc_rpc_requests_total"); err != nil || n != 5 {
		t.Errorf("GatherAndCount: %d series, %v; want 5", n, err)
	}
}

func TestSourceWritesAtScrape(t *testing.T) {
	r := New()
	n := 0.0
	r.Source(func(w *Writer) {
		n++
		w.Counter("pdc_test_reads_total", "Reads.", n)
		w.Gauge("pdc_test_bytes", "Bytes.", 7, "transport", "lane")
		w.Gauge("pdc_test_bytes", "Bytes.", 9, "transport", "shm")
	})
	f := gather(t, r)
	if got := f.Value("pdc_test_reads_total"); got != 1 {
		t.Errorf("first scrape: %v", got)
	}
	if got := f.Value("pdc_test_bytes", "transport", "shm"); got != 9 {
		t.Errorf("shm: %v", got)
	}
	if got := gather(t, r).Value("pdc_test_reads_total"); got != 2 {
		t.Errorf("second scrape: %v", got)
	}
}

func TestQuantile(t *testing.T) {
	h := Buckets{Bounds: []float64{1, 2, 4, math.Inf(1)}, Counts: []float64{0, 50, 100, 100}}
	if q := h.Quantile(0.5); q != 2 {
		t.Errorf("median %v, want 2", q)
	}
	if q := h.Quantile(0.75); q != 3 {
		t.Errorf("p75 %v, want 3", q)
	}
	if q := (Buckets{Bounds: []float64{1, math.Inf(1)}, Counts: []float64{0, 0}}).Quantile(0.9); !math.IsNaN(q) {
		t.Errorf("empty: %v, want NaN", q)
	}
	old := Buckets{Bounds: []float64{1, 2, 4, math.Inf(1)}, Counts: []float64{0, 50, 50, 50}}
	if q := h.Sub(old).Quantile(0.5); q != 3 {
		t.Errorf("median of the difference %v, want 3", q)
	}
}

func TestListenAddrIsLoopbackByDefault(t *testing.T) {
	for in, want := range map[string]string{":9100": "127.0.0.1:9100", "0.0.0.0:1": "0.0.0.0:1", "[::1]:0": "[::1]:0"} {
		got, err := ListenAddr(in)
		if err != nil || got != want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ListenAddr("9100"); err == nil || !strings.Contains(err.Error(), "9100") {
		t.Errorf("ListenAddr(9100): %v", err)
	}
}

// BenchmarkServed is the cost of counting one request.
func BenchmarkServed(b *testing.B) {
	o := New().Observer()
	b.ReportAllocs()
	for b.Loop() {
		o.Served(wire.MethodObjCreate, wire.CodeOK, 40*time.Microsecond)
	}
}

func TestRequestsInFlight(t *testing.T) {
	r := New()
	o := r.Observer()
	for range 3 {
		o.Started(wire.MethodStageWait)
	}
	o.Served(wire.MethodStageWait, wire.CodeOK, time.Millisecond)
	o.Refused(wire.MethodStageWait, wire.CodeUnavailable) // never started
	o.Started(wire.Method(9999))
	f := gather(t, r)
	if got := f.Value("pdc_rpc_requests_in_flight", "method", "stage_wait"); got != 2 {
		t.Errorf("stage_wait in flight %v, want 2", got)
	}
	if got := f.Value("pdc_rpc_requests_in_flight", "method", "other"); got != 1 {
		t.Errorf("other in flight %v, want 1", got)
	}
}
