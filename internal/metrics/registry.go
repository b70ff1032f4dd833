package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pdcgo/pdc/internal/rpc"
)

// Registry is one server's metrics.
type Registry struct {
	reg *prometheus.Registry
	rpc *rpcMetrics
}

// New returns a registry with the request metrics (see Observer) and the
// Go runtime and process metrics.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), rpc: newRPCMetrics()}
	r.reg.MustRegister(r.rpc,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Observer returns what counts the rpc server's requests
// (rpc.ServerConfig.Observer).
func (r *Registry) Observer() rpc.Observer { return r.rpc }

// Source adds metrics read at scrape time: read writes them to w. A
// source reads counters and sizes its component keeps anyway, and may
// take the component's locks briefly; it must not do I/O or walk
// anything that grows with the data stored.
func (r *Registry) Source(read func(w *Writer)) {
	r.reg.MustRegister(source(read))
}

// Gatherer is the registry as promhttp and tests take it.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// source is an unchecked collector: what it emits is known only at
// scrape time (Describe sends nothing), and the registry still checks
// the result for duplicates and consistency.
type source func(w *Writer)

func (s source) Describe(chan<- *prometheus.Desc) {}

func (s source) Collect(ch chan<- prometheus.Metric) { s(&Writer{ch: ch}) }

// Writer takes the values of one scrape.
type Writer struct {
	ch chan<- prometheus.Metric
}

// Gauge writes a value that goes up and down. labels are name, value
// pairs.
func (w *Writer) Gauge(name, help string, v float64, labels ...string) {
	w.write(prometheus.GaugeValue, name, help, v, labels)
}

// Counter writes a value that only goes up (its name ends in _total).
func (w *Writer) Counter(name, help string, v float64, labels ...string) {
	w.write(prometheus.CounterValue, name, help, v, labels)
}

func (w *Writer) write(t prometheus.ValueType, name, help string, v float64, labels []string) {
	var names, values []string
	for i := 0; i+1 < len(labels); i += 2 {
		names = append(names, labels[i])
		values = append(values, labels[i+1])
	}
	m, err := prometheus.NewConstMetric(prometheus.NewDesc(name, help, names, nil), t, v, values...)
	if err != nil {
		m = prometheus.NewInvalidMetric(prometheus.NewDesc(name, help, nil, nil), err)
	}
	w.ch <- m
}
