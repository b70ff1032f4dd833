package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metrics"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
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
		if p.sender != nil {
			ds := p.sender.Stats()
			w.Counter("pdc_dtl_pulls_total", "Payloads exposed to a DTL pull or shm mapping and claimed.", float64(ds.Pulls))
			w.Counter("pdc_dtl_pushes_total", "Payloads pushed over the DTL's push connections.", float64(ds.Pushes))
			w.Counter("pdc_dtl_expired_total", "Payloads exposed for a pull and released unclaimed.", float64(ds.Expired))
			w.Gauge("pdc_dtl_exposed", "Payloads exposed for a pull now.", float64(ds.Handles))
			w.Gauge("pdc_dtl_push_connections", "DTL push connections open.", float64(ds.Endpoints))
			w.Counter("pdc_transport_sent_bytes_total", "Bytes sent, by transport.", float64(ds.PullBytes), "transport", "pull")
			w.Counter("pdc_transport_sent_bytes_total", "Bytes sent, by transport.", float64(ds.PushBytes), "transport", "push")
			w.Counter("pdc_transport_sent_bytes_total", "Bytes sent, by transport.", float64(ds.ShmBytes), "transport", "shm")
		}
		if p.data != nil {
			dst := p.data.Stats()
			w.Gauge("pdc_data_transfers_in_flight", "Region transfers registered and not yet ended.", float64(dst.Transfers))
			w.Gauge("pdc_data_transfers_queued", "Region transfers waiting for a worker.", float64(dst.Queued))
			w.Gauge("pdc_data_budget_bytes", "The data budget (--data-budget).", float64(dst.BudgetMax))
			w.Gauge("pdc_data_budget_used_bytes", "Bytes of the data budget taken now.", float64(dst.BudgetHeld))
			w.Gauge("pdc_data_objects", "Objects with data in this data server's stores.", float64(dst.Objects))
			w.Counter("pdc_data_written_bytes_total", "Bytes of regions this data server stored since it started (a region written twice counts twice).", float64(dst.WrittenBytes))
			w.Counter("pdc_transport_received_bytes_total", "Bytes received, by transport.", float64(dst.LaneIn), "transport", "lane")
			w.Counter("pdc_transport_sent_bytes_total", "Bytes sent, by transport.", float64(dst.LaneOut), "transport", "lane")
			var fs unix.Statfs_t
			if err := unix.Statfs(p.cfg.DataDir, &fs); err == nil {
				w.Gauge("pdc_data_fs_size_bytes", "Size of the file system that holds the data dir.", float64(fs.Blocks)*float64(fs.Bsize))
				w.Gauge("pdc_data_fs_free_bytes", "Bytes free to unprivileged users on the file system that holds the data dir.", float64(fs.Bavail)*float64(fs.Bsize))
			}
		}
		if p.meta != nil {
			m := p.meta.Metrics()
			ms := m.Store
			w.Gauge("pdc_metastore_disk_bytes", "Disk the metadata store's pebble files take.", float64(ms.DiskBytes))
			w.Gauge("pdc_metastore_memtable_bytes", "Bytes in the metadata store's memtables.", float64(ms.MemtableBytes))
			w.Gauge("pdc_metastore_tables", "Sstables of the metadata store, by level (L0, or all).", float64(ms.L0Tables), "level", "0")
			w.Gauge("pdc_metastore_tables", "Sstables of the metadata store, by level (L0, or all).", float64(ms.Tables), "level", "all")
			w.Gauge("pdc_metastore_read_amplification", "Sublevels a read of the metadata store may look in.", float64(ms.ReadAmp))
			w.Counter("pdc_metastore_compactions_total", "Compactions of the metadata store since it opened.", float64(ms.Compactions))
			w.Gauge("pdc_metastore_compaction_debt_bytes", "Bytes pebble estimates it must compact to reach a stable shape.", float64(ms.CompactionDebt))
			w.Counter("pdc_metastore_flushes_total", "Memtable flushes of the metadata store since it opened.", float64(ms.Flushes))
			w.Counter("pdc_metastore_cache_hits_total", "Block cache hits of the metadata store.", float64(ms.CacheHits))
			w.Counter("pdc_metastore_cache_misses_total", "Block cache misses of the metadata store.", float64(ms.CacheMisses))
			w.Gauge("pdc_metastore_cache_bytes", "Bytes in the metadata store's block cache.", float64(ms.CacheBytes))
			w.Counter("pdc_metastore_log_written_bytes_total", "Bytes written to the metadata store's log since it opened.", float64(ms.LogBytesWritten))
			w.Counter("pdc_metastore_gets_total", "Point lookups in the metadata store since it opened.", float64(ms.Gets))
			w.Gauge("pdc_dart_outbox_backlog_bytes", "Bytes of tag index changes committed and not yet tried at the servers that index them.", float64(m.OutboxBacklog))
			// By the rank of the destination: an operator sees which
			// server a cut or a dead rank keeps index updates from (and
			// which queries wait for it).
			metaRanks := p.metaRanks()
			for d, n := range m.OutboxQueued {
				to := strconv.Itoa(d)
				if d < len(metaRanks) {
					to = strconv.Itoa(metaRanks[d])
				}
				w.Gauge("pdc_dart_outbox_queued_bytes", "Bytes of tag index changes waiting to be delivered to a metadata server, tried or not, by its rank.", float64(n), "to", to)
				failing := 0.0
				if slices.Contains(m.OutboxFailing, d) {
					failing = 1
				}
				w.Gauge("pdc_dart_outbox_failing", "1 while the last delivery of tag index changes to a metadata server (by rank) failed.", failing, "to", to)
			}
			w.Counter("pdc_stage_produced_files_total", "Files recorded by stage produces on this metadata server since it started.", float64(m.StagedFiles))
			w.Counter("pdc_stage_produced_bytes_total", "Bytes of the files recorded by stage produces on this metadata server since it started.", float64(m.StagedBytes))
			w.Gauge("pdc_meta_tombstones", "Deleted objects whose data a data server may still hold.", float64(m.Tombstones))
			w.Gauge("pdc_meta_dims_cuts", "Objects whose shrink or relayout a data server may not have applied yet.", float64(m.DimsCuts))
		}
	})
}

// metaRanks lists the ranks of the metadata servers, by their index
// among them; nil before the server joined its cluster.
func (p *proc) metaRanks() []int {
	if p.list == nil {
		return nil
	}
	return ranksWith(p.list, wire.RoleMetadata)
}
