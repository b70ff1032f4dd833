package server

import (
	"context"
	"fmt"
	"strconv"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metrics"
	"github.com/pdcgo/pdc/internal/rpc"
)

// observer makes the metrics registry, if the server serves metrics,
// and returns what counts its requests.
func (p *proc) observer() rpc.Observer {
	if p.cfg.MetricsAddr == "" {
		return nil
	}
	p.reg = metrics.New()
	return p.reg.Observer()
}

// serveMetrics serves the registry on Config.MetricsAddr and records
// the address bound in the tmpdir, where pdc top finds it.
func (p *proc) serveMetrics() error {
	if p.reg == nil {
		return nil
	}
	s := p.s
	p.addSources()
	ep, err := metrics.Serve(p.cfg.MetricsAddr, p.reg, p.log)
	if err != nil {
		return err
	}
	p.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout)
		defer cancel()
		_ = ep.Close(ctx)
	})
	dir := s.tmpDir()
	if err := dir.WriteMetricsAddr(cluster.MetricsAddr{Rank: p.cfg.Rank, Instance: s.self.Instance, Addr: ep.Addr()}); err != nil {
		return fmt.Errorf("record the metrics address: %w", err)
	}
	p.onClose(func() {
		// Only this run's record: a newer server of the same rank may
		// have written its own.
		if m, err := dir.ReadMetricsAddr(p.cfg.Rank); err == nil && m.Instance == s.self.Instance {
			_ = dir.RemoveMetricsAddr(p.cfg.Rank)
		}
	})
	p.log.Info("serving metrics", "addr", "http://"+ep.Addr()+metrics.Path)
	return nil
}

// addSources adds what the registry reads at scrape time.
func (p *proc) addSources() {
	s := p.s
	p.reg.Source(func(w *metrics.Writer) {
		w.Gauge("pdc_server_info", "This server: its rank, roles and build (the value is 1).", 1,
			"rank", strconv.Itoa(p.cfg.Rank), "roles", s.self.Roles, "version", p.cfg.Version, "instance", s.self.Instance)
		w.Gauge("pdc_server_start_time_seconds", "When this server started, in seconds since the Unix epoch.", float64(s.start.UnixNano())/1e9)
		st := s.rpc.Stats()
		w.Counter("pdc_transport_received_bytes_total", "Bytes received, by transport.", float64(st.BytesIn), "transport", "connection")
		w.Counter("pdc_transport_sent_bytes_total", "Bytes sent, by transport.", float64(st.BytesOut), "transport", "connection")
		w.Gauge("pdc_rpc_connections", "Connections open, authenticated or not.", float64(st.Conns))
		w.Gauge("pdc_rpc_clients", "Authenticated connections open.", float64(st.Clients))
		w.Counter("pdc_rpc_connections_refused_total", "Connections refused at a bound (--max-conns, --max-conns-per-peer).", float64(st.Refused))
		w.Counter("pdc_rpc_connections_evicted_total", "Connections closed in their handshake to make room for new ones.", float64(st.Evicted))
		w.Counter("pdc_rpc_connections_slow_total", "Connections closed for a frame that stalled or crawled.", float64(st.Slow))
		w.Gauge("pdc_rpc_payload_budget_bytes", "The payload budget (--payload-budget).", float64(st.PayloadMax))
		w.Gauge("pdc_rpc_payload_held_bytes", "Bytes of request payloads held now, of the payload budget.", float64(st.PayloadHeld))
		w.Counter("pdc_rpc_payload_budget_waits_total", "Payloads that waited for room in the payload budget.", float64(st.BudgetWaits))
	})
}
