package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metrics"
)

//go:embed web
var web embed.FS

// Config is a dashboard's.
type Config struct {
	// Dir is the cluster's tmpdir, where the server list and the
	// servers' metrics addresses are. Required.
	Dir cluster.Dir
	// Addr is where to listen: HOST:PORT, or :PORT for loopback.
	Addr string
	// Secret is the cluster secret. Listening beyond loopback requires
	// one (requests then carry Token(Secret)) unless Insecure.
	Secret   []byte
	Insecure bool
	// Interval is the time between snapshots (default 2s); History how
	// far back the ring of views goes (default 5m); Errors how many
	// error outcomes are kept (default 50).
	Interval time.Duration
	History  time.Duration
	Errors   int
	// Logger takes the dashboard's own warnings (default: discarded).
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Interval <= 0 {
		c.Interval = 2 * time.Second
	}
	if c.History <= 0 {
		c.History = 5 * time.Minute
	}
	if c.Errors <= 0 {
		c.Errors = 50
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// ServerState is one server's line of a Snapshot: the view pdc top
// shows, and whether the server answers.
type ServerState struct {
	metrics.ServerView
	// State is "up" (its metrics answered), "down" (they did not) or
	// "no metrics" (it serves none: started without --metrics-addr).
	State string `json:"state"`
}

// Totals are a Snapshot's numbers summed over the servers.
type Totals struct {
	Servers           int     `json:"servers"`
	Up                int     `json:"up"`
	Requests          float64 `json:"requests"`
	RequestsPerSec    float64 `json:"requests_per_sec"`
	Errors            float64 `json:"errors"`
	Objects           float64 `json:"objects"`
	WrittenBytes      float64 `json:"written_bytes"`
	TransfersInFlight float64 `json:"transfers_in_flight"`
	TransfersQueued   float64 `json:"transfers_queued"`
	StageProduces     float64 `json:"stage_produces"`
	StageBytes        float64 `json:"stage_bytes"`
	StageConsumes     float64 `json:"stage_consumes"`
	StageWaiters      float64 `json:"stage_waiters"`
}

// Snapshot is what /api/snapshot answers: the latest view of the
// cluster.
type Snapshot struct {
	// Seq numbers the snapshots from 1; 0: none taken yet.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Interval is what the rates are over; Poll the time between
	// snapshots.
	Interval time.Duration `json:"interval_ns"`
	Poll     time.Duration `json:"poll_ns"`
	TmpDir   string        `json:"tmpdir"`
	// Error says why the cluster could not be read (no server list, no
	// server serving metrics).
	Error   string        `json:"error,omitempty"`
	Servers []ServerState `json:"servers"`
	Totals  Totals        `json:"totals"`
	// RecentErrors are the last error outcomes, newest first.
	RecentErrors []metrics.ErrorCount `json:"recent_errors"`
}

// Point is one snapshot's load of each server, for the plots.
type Point struct {
	Seq     uint64      `json:"seq"`
	Time    time.Time   `json:"time"`
	Servers []PointLoad `json:"servers"`
}

// PointLoad is one server's load at a Point.
type PointLoad struct {
	Rank           int     `json:"rank"`
	RequestsPerSec float64 `json:"requests_per_sec"`
	InBytesPerSec  float64 `json:"in_bytes_per_sec"`
	OutBytesPerSec float64 `json:"out_bytes_per_sec"`
	P99Seconds     float64 `json:"p99_seconds"`
}

// History is what /api/history answers: the ring of points, oldest
// first.
type History struct {
	Poll   time.Duration `json:"poll_ns"`
	Points []Point       `json:"points"`
}

// Server is a running dashboard.
type Server struct {
	cfg    Config
	token  string
	ln     net.Listener
	srv    *http.Server
	hc     *http.Client
	cancel context.CancelFunc
	polled chan struct{} // closed when the poller has returned
	served chan error

	closeOnce sync.Once
	closeErr  error

	mu struct {
		sync.Mutex
		last    *metrics.ClusterSnapshot // each rank's last good sample
		cur     Snapshot
		points  []Point              // oldest first, at most maxPoints
		errs    []metrics.ErrorCount // oldest first, at most cfg.Errors
		updated chan struct{}        // closed at the next snapshot
	}
	maxPoints int
}

// Serve starts a dashboard: it listens on cfg.Addr and takes a snapshot
// of the cluster every cfg.Interval until Close.
func Serve(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if cfg.Dir.Path == "" {
		return nil, fmt.Errorf("dashboard: no cluster tmpdir given: %w", pdc.ErrInvalid)
	}
	addr, err := metrics.ListenAddr(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	s := &Server{cfg: cfg, hc: &http.Client{Timeout: max(cfg.Interval, 5*time.Second)},
		polled: make(chan struct{}), served: make(chan error, 1),
		maxPoints: max(int(cfg.History/cfg.Interval), 2)}
	if !cluster.IsLoopback(addr) {
		switch {
		case len(cfg.Secret) > 0:
			s.token = Token(cfg.Secret)
		case !cfg.Insecure:
			return nil, fmt.Errorf("dashboard: listening on %s, beyond this host, without the cluster secret would show the cluster to anyone who reaches it: "+
				"run the cluster with a secret, or give --insecure: %w", addr, pdc.ErrPermission)
		default:
			cfg.Logger.Warn("dashboard serving beyond this host without a token (--insecure): anyone who reaches " + addr + " sees the cluster")
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: listen on %s: %w", addr, err)
	}
	s.ln = ln
	s.mu.updated = make(chan struct{})
	s.mu.cur = Snapshot{Poll: cfg.Interval, TmpDir: cfg.Dir.Path, Error: "no snapshot taken yet", Servers: []ServerState{}, RecentErrors: []metrics.ErrorCount{}}
	h := authorize(s.token, s.routes())
	if cluster.IsLoopback(addr) {
		h = loopbackOnly(h)
	}
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.polled)
		s.poll(ctx)
	}()
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address the dashboard listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the dashboard's address to open, with its token if it needs
// one.
func (s *Server) URL() string {
	u := "http://" + OpenAddr(s.Addr()) + "/"
	if s.token != "" {
		u += "?token=" + s.token
	}
	return u
}

// Close stops the dashboard and waits for it, within ctx for requests
// under way. Idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.cancel()
		err := s.srv.Shutdown(ctx)
		if serr := <-s.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		<-s.polled
		s.hc.CloseIdleConnections()
		s.closeErr = err
	})
	return s.closeErr
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(web, "web") // a literal directory of the embed
	files := http.FileServerFS(static)
	mux.Handle("GET /", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Nothing is fetched from elsewhere, and the page says so.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET /api/snapshot", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.Snapshot())
	})
	mux.HandleFunc("GET /api/history", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.History())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// Snapshot returns the latest snapshot.
func (s *Server) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.cur
}

// History returns the ring of points, oldest first.
func (s *Server) History() History {
	s.mu.Lock()
	defer s.mu.Unlock()
	return History{Poll: s.cfg.Interval, Points: append([]Point{}, s.mu.points...)}
}

// Next returns a channel closed once the snapshot after the current one
// is taken.
func (s *Server) Next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.updated
}

// poll takes a snapshot now and every cfg.Interval until ctx ends.
func (s *Server) poll(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.take(ctx)
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// take takes one snapshot of the cluster and adds it to the rings.
func (s *Server) take(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.hc.Timeout)
	defer cancel()
	snap, err := metrics.Snap(ctx, s.hc, s.cfg.Dir)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // closing
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := Snapshot{Seq: s.mu.cur.Seq + 1, Time: time.Now(), Poll: s.cfg.Interval, TmpDir: s.cfg.Dir.Path, Servers: []ServerState{}}
	if err != nil {
		cur.Error = fmt.Sprintf("no cluster to show in %s: %v", s.cfg.Dir.Path, err)
	} else {
		s.add(&cur, snap)
	}
	cur.RecentErrors = make([]metrics.ErrorCount, 0, len(s.mu.errs))
	for i := len(s.mu.errs) - 1; i >= 0; i-- {
		cur.RecentErrors = append(cur.RecentErrors, s.mu.errs[i])
	}
	s.mu.cur = cur
	close(s.mu.updated)
	s.mu.updated = make(chan struct{})
}

// add makes cur of snap: the view since each server's last good sample,
// its totals, a point and the error outcomes since. Requires s.mu.
func (s *Server) add(cur *Snapshot, snap *metrics.ClusterSnapshot) {
	last := s.mu.last
	v := metrics.View(last, snap)
	cur.Time, cur.Interval = v.Time, v.Interval
	pt := Point{Seq: cur.Seq, Time: v.Time}
	up := 0
	for i, sv := range v.Servers {
		st := ServerState{ServerView: sv, State: "up"}
		switch err := snap.Servers[i].Err; {
		case err == nil:
			up++
			pt.Servers = append(pt.Servers, PointLoad{Rank: sv.Rank, RequestsPerSec: sv.RequestsPerSec,
				InBytesPerSec: sv.InBytesPerSec, OutBytesPerSec: sv.OutBytesPerSec, P99Seconds: sv.P99Seconds})
		case errors.Is(err, pdc.ErrNotFound):
			st.State = "no metrics"
		default:
			st.State = "down"
		}
		cur.Servers = append(cur.Servers, st)
		t := &cur.Totals
		t.Requests += sv.Requests
		t.RequestsPerSec += sv.RequestsPerSec
		t.Errors += sv.Errors
		t.Objects += sv.Objects
		t.WrittenBytes += sv.WrittenBytes
		t.TransfersInFlight += sv.TransfersInFlight
		t.TransfersQueued += sv.TransfersQueued
		t.StageProduces += sv.StageProduces
		t.StageBytes += sv.StageBytes
		t.StageConsumes += sv.StageConsumes
		t.StageWaiters += sv.StageWaiters
	}
	cur.Totals.Servers, cur.Totals.Up = len(v.Servers), up
	if up == 0 && len(v.Servers) > 0 {
		cur.Error = fmt.Sprintf("no server of the cluster in %s serves metrics that answer: start it with pdc up --metrics-addr 127.0.0.1:0 (or pdc up --dashboard)", s.cfg.Dir.Path)
	}
	s.mu.points = append(s.mu.points, pt)
	if n := len(s.mu.points) - s.maxPoints; n > 0 {
		s.mu.points = append(s.mu.points[:0], s.mu.points[n:]...)
	}
	s.mu.errs = append(s.mu.errs, metrics.Errors(last, snap)...)
	if n := len(s.mu.errs) - s.cfg.Errors; n > 0 {
		s.mu.errs = append(s.mu.errs[:0], s.mu.errs[n:]...)
	}
	s.mu.last = merge(last, snap)
}

// merge is last with each sample of snap that was scraped replacing
// that of its rank: a server that missed one scrape is compared with
// its last good sample, and its errors are not counted twice.
func merge(last, snap *metrics.ClusterSnapshot) *metrics.ClusterSnapshot {
	out := &metrics.ClusterSnapshot{Time: snap.Time}
	byRank := map[int]metrics.Sample{}
	if last != nil {
		for _, smp := range last.Servers {
			byRank[smp.Server.Rank] = smp
		}
	}
	for _, smp := range snap.Servers {
		if smp.Err == nil {
			byRank[smp.Server.Rank] = smp
		}
	}
	for _, smp := range snap.Servers {
		if old, ok := byRank[smp.Server.Rank]; ok {
			out.Servers = append(out.Servers, old)
		}
	}
	return out
}

// OpenAddr is addr as a browser elsewhere reaches it: a wildcard host
// (0.0.0.0, ::) is replaced by this host's name.
func OpenAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil && name != "" {
			return net.JoinHostPort(name, port)
		}
	}
	return addr
}
