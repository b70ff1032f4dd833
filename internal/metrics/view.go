package metrics

import (
	"math"
	"time"
)

// ServerView is one server's line of a view of the cluster: what pdc top
// shows, in numbers a dashboard or a script can take as they are. Rates
// are over the interval between two snapshots.
type ServerView struct {
	Rank        int    `json:"rank"`
	Roles       string `json:"roles"`
	Addr        string `json:"addr"`
	MetricsAddr string `json:"metrics_addr,omitempty"`
	// Error says why the server could not be scraped; the numbers are
	// zero then.
	Error string `json:"error,omitempty"`

	RequestsPerSec float64 `json:"requests_per_sec"`
	// P99Seconds is the 99th percentile of the latency of the requests
	// of the interval (of all methods); 0 if there were none.
	P99Seconds        float64 `json:"p99_seconds"`
	InBytesPerSec     float64 `json:"in_bytes_per_sec"`
	OutBytesPerSec    float64 `json:"out_bytes_per_sec"`
	TransfersInFlight float64 `json:"transfers_in_flight"`
	TransfersQueued   float64 `json:"transfers_queued"`
	// StoreBytes is the disk the server's stores take: its metadata
	// store's and its data's.
	StoreBytes float64 `json:"store_bytes"`
	Clients    float64 `json:"clients"`
	// Errors is the requests answered with an error since the server
	// started; ErrorsPerSec those of the interval.
	Errors       float64 `json:"errors"`
	ErrorsPerSec float64 `json:"errors_per_sec"`
	Requests     float64 `json:"requests"`

	// Objects is the objects with data on a data server; WrittenBytes
	// the bytes of regions it stored since it started.
	Objects      float64 `json:"objects"`
	WrittenBytes float64 `json:"written_bytes"`
	// StageProduces is the files produced and StageBytes their sizes,
	// StageConsumes the records consumers found (stage_lookup and
	// stage_wait answered ok), StageWaiters the consumers waiting now
	// for a file not produced yet (stage_wait in flight): on the
	// metadata servers that keep the staging records.
	StageProduces float64 `json:"stage_produces"`
	StageBytes    float64 `json:"stage_bytes"`
	StageConsumes float64 `json:"stage_consumes"`
	StageWaiters  float64 `json:"stage_waiters"`
}

// ClusterView is a view of the cluster between two snapshots.
type ClusterView struct {
	Time     time.Time     `json:"time"`
	Interval time.Duration `json:"interval_ns"`
	Servers  []ServerView  `json:"servers"`
}

// View computes the view of cur, with rates since prev (nil: since each
// server started).
func View(prev, cur *ClusterSnapshot) ClusterView {
	v := ClusterView{Time: cur.Time}
	if prev != nil {
		v.Interval = cur.Time.Sub(prev.Time)
	}
	for _, s := range cur.Servers {
		sv := ServerView{Rank: s.Server.Rank, Roles: s.Server.Roles, Addr: s.Server.Addr, MetricsAddr: s.MetricsAddr}
		if s.Err != nil {
			sv.Error = s.Err.Error()
			v.Servers = append(v.Servers, sv)
			continue
		}
		f := s.Families
		var old Families
		var secs float64
		if p := prev.sample(s.Server.Rank, s.Server.Instance); p != nil {
			old, secs = p.Families, s.Time.Sub(p.Time).Seconds()
		} else if start := f.Value("pdc_server_start_time_seconds"); start > 0 {
			secs = float64(s.Time.UnixNano())/1e9 - start
		}
		rate := func(name string, labels ...string) float64 {
			if secs <= 0 {
				return 0
			}
			return max(f.Value(name, labels...)-old.Value(name, labels...), 0) / secs
		}
		sv.Requests = f.Value("pdc_rpc_requests_total")
		sv.Errors = sv.Requests - f.Value("pdc_rpc_requests_total", "code", "ok")
		sv.RequestsPerSec = rate("pdc_rpc_requests_total")
		sv.ErrorsPerSec = max(sv.RequestsPerSec-rate("pdc_rpc_requests_total", "code", "ok"), 0)
		lat := f.Histogram("pdc_rpc_request_duration_seconds")
		if old != nil {
			lat = lat.Sub(old.Histogram("pdc_rpc_request_duration_seconds"))
		}
		if q := lat.Quantile(0.99); !math.IsNaN(q) {
			sv.P99Seconds = q
		}
		sv.InBytesPerSec = rate("pdc_transport_received_bytes_total")
		sv.OutBytesPerSec = rate("pdc_transport_sent_bytes_total")
		sv.TransfersInFlight = f.Value("pdc_data_transfers_in_flight")
		sv.TransfersQueued = f.Value("pdc_data_transfers_queued")
		sv.StoreBytes = f.Value("pdc_metastore_disk_bytes") + f.Value("pdc_data_stored_bytes")
		sv.Clients = f.Value("pdc_rpc_clients")
		sv.Objects = f.Value("pdc_data_objects")
		sv.WrittenBytes = f.Value("pdc_data_written_bytes_total")
		sv.StageProduces = f.Value("pdc_stage_produced_files_total")
		sv.StageBytes = f.Value("pdc_stage_produced_bytes_total")
		sv.StageConsumes = f.Value("pdc_rpc_requests_total", "method", "stage_lookup", "code", "ok") +
			f.Value("pdc_rpc_requests_total", "method", "stage_wait", "code", "ok")
		sv.StageWaiters = f.Value("pdc_rpc_requests_in_flight", "method", "stage_wait")
		v.Servers = append(v.Servers, sv)
	}
	return v
}

// sample is the sample of the server of rank in this run (instance) in
// s, if s has one.
func (s *ClusterSnapshot) sample(rank int, instance string) *Sample {
	if s == nil {
		return nil
	}
	for i := range s.Servers {
		p := &s.Servers[i]
		if p.Server.Rank == rank && p.Server.Instance == instance && p.Err == nil {
			return p
		}
	}
	return nil
}

// ErrorCount is requests of one method that one server answered with
// one error code between two snapshots.
type ErrorCount struct {
	Time   time.Time `json:"time"` // of the later snapshot
	Rank   int       `json:"rank"`
	Method string    `json:"method"`
	Code   string    `json:"code"`
	Count  float64   `json:"count"`
}

// Errors are the requests answered with an error between prev and cur,
// by server, method and code (from pdc_rpc_requests_total); with prev
// nil, those since each server started. A server restarted between the
// two counts from its start.
func Errors(prev, cur *ClusterSnapshot) []ErrorCount {
	var out []ErrorCount
	for _, s := range cur.Servers {
		if s.Err != nil {
			continue
		}
		var old Families
		if p := prev.sample(s.Server.Rank, s.Server.Instance); p != nil {
			old = p.Families
		}
		mf := s.Families["pdc_rpc_requests_total"]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			var method, code string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "method":
					method = l.GetValue()
				case "code":
					code = l.GetValue()
				}
			}
			if code == "ok" || m.Counter == nil {
				continue
			}
			n := m.Counter.GetValue() - old.Value("pdc_rpc_requests_total", "method", method, "code", code)
			if n > 0 {
				out = append(out, ErrorCount{Time: s.Time, Rank: s.Server.Rank, Method: method, Code: code, Count: n})
			}
		}
	}
	return out
}
