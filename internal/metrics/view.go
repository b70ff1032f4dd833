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
