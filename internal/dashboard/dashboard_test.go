package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/metrics"
)

func serveT(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Dir.Path == "" {
		cfg.Dir = cluster.Dir{Path: t.TempDir()}
	}
	s, err := Serve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if err := s.Close(context.Background()); err != nil { // idempotent
			t.Error(err)
		}
	})
	return s
}

// TestBeyondLoopbackNeedsTheSecret checks that a dashboard refuses to
// listen beyond loopback without the cluster secret, and that with one
// every request needs its token.
func TestBeyondLoopbackNeedsTheSecret(t *testing.T) {
	if _, err := Serve(Config{Dir: cluster.Dir{Path: t.TempDir()}, Addr: "0.0.0.0:0"}); !errors.Is(err, pdc.ErrPermission) {
		t.Fatalf("Serve on 0.0.0.0 without a secret: %v, want pdc.ErrPermission", err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	s := serveT(t, Config{Addr: "0.0.0.0:0", Secret: secret})
	_, port, _ := strings.Cut(s.Addr(), "]:")
	if port == "" {
		_, port, _ = strings.Cut(s.Addr(), ":")
	}
	base := "http://127.0.0.1:" + port + "/"
	if host, _ := os.Hostname(); s.URL() != "http://"+net.JoinHostPort(host, port)+"/?token="+Token(secret) {
		t.Errorf("URL %q does not carry the token", s.URL())
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, hdr ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, path := range []string{"", "api/snapshot", "api/history", "?token=wrong"} {
		if r := get(path); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /%s without the token: %s, want 401", path, r.Status)
		}
	}
	r := get("?token=" + Token(secret))
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" || len(r.Cookies()) != 1 {
		t.Fatalf("GET /?token=TOKEN: %s, location %q, cookies %v: want a redirect to / with the cookie", r.Status, r.Header.Get("Location"), r.Cookies())
	}
	c := r.Cookies()[0]
	if r := get("api/snapshot", "Cookie", c.Name+"="+c.Value); r.StatusCode != http.StatusOK {
		t.Errorf("GET /api/snapshot with the cookie: %s", r.Status)
	}
	if r := get("", "Authorization", "Bearer "+Token(secret)); r.StatusCode != http.StatusOK {
		t.Errorf("GET / with the token as a bearer: %s", r.Status)
	}
	if r := get("", "Authorization", "Bearer "+Token([]byte("another secret"))); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET / with another secret's token: %s, want 401", r.Status)
	}
}

// TestPageIsSelfContained checks that the page and its script name no
// address of elsewhere to fetch from, and that they are served.
func TestPageIsSelfContained(t *testing.T) {
	s := serveT(t, Config{Addr: "127.0.0.1:0", Interval: 100 * time.Millisecond})
	err := fs.WalkDir(web, "web", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := web.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "://") {
			t.Errorf("%s names an address: the page must fetch nothing from elsewhere", path)
		}
		resp, err := http.Get(s.URL() + strings.TrimPrefix(path, "web/"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// No cluster in the tmpdir: the snapshot says so.
	<-s.Next()
	resp, err := http.Get(s.URL() + "api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if snap.Seq < 1 || !strings.Contains(snap.Error, "no cluster") {
		t.Errorf("snapshot of an empty tmpdir: seq %d, error %q: want one taken, saying there is no cluster", snap.Seq, snap.Error)
	}
}

// sample is rank's sample of a scrape whose /metrics text is text, or a
// failed scrape if text is "".
func sample(t *testing.T, rank int, at time.Time, text string) metrics.Sample {
	t.Helper()
	smp := metrics.Sample{Server: cluster.Server{Rank: rank, Roles: "both", Instance: "i"}, MetricsAddr: "x", Time: at}
	if text == "" {
		smp.Err = fmt.Errorf("scrape: %w", pdc.ErrUnavailable)
		return smp
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	smp.Families = metrics.Families(fams)
	return smp
}

func requests(notFound int) string {
	return fmt.Sprintf("# TYPE pdc_rpc_requests_total counter\n"+
		"pdc_rpc_requests_total{method=\"cont_get\",code=\"ok\"} 5\n"+
		"pdc_rpc_requests_total{method=\"cont_get\",code=\"not_found\"} %d\n", notFound)
}

// TestRingsAreBoundedAndErrorsCountedOnce feeds snapshots in which a
// server misses a scrape, and checks that its errors are counted once
// each, the server shows down meanwhile, and that the rings keep only
// the newest points and errors.
func TestRingsAreBoundedAndErrorsCountedOnce(t *testing.T) {
	s := &Server{cfg: Config{Dir: cluster.Dir{Path: "/nowhere"}, Errors: 3}, maxPoints: 4}
	t0 := time.Unix(1e9, 0)
	step := func(i int, text string) Snapshot {
		at := t0.Add(time.Duration(i) * time.Second)
		cur := Snapshot{Seq: uint64(i + 1)}
		s.add(&cur, &metrics.ClusterSnapshot{Time: at, Servers: []metrics.Sample{sample(t, 0, at, text)}})
		return cur
	}
	step(0, requests(1))
	if cur := step(1, ""); cur.Servers[0].State != "down" || cur.Totals.Up != 0 || cur.Error == "" {
		t.Errorf("a server whose scrape failed: %+v, totals %+v, error %q: want it down", cur.Servers, cur.Totals, cur.Error)
	}
	step(2, requests(2))
	var counts []float64
	for _, e := range s.mu.errs {
		counts = append(counts, e.Count)
	}
	if fmt.Sprint(counts) != "[1 1]" {
		t.Fatalf("error outcomes %v after 1, a missed scrape and 2 not_found in all: want [1 1]", counts)
	}
	for i := 3; i < 10; i++ {
		step(i, requests(i))
	}
	if len(s.mu.errs) != 3 || s.mu.errs[2].Time != t0.Add(9*time.Second) {
		t.Errorf("error ring %+v: want the newest 3", s.mu.errs)
	}
	if len(s.mu.points) != 4 || s.mu.points[3].Seq != 10 || s.mu.points[0].Seq != 7 {
		t.Errorf("%d points, from seq %d to %d: want the newest 4, 7 to 10", len(s.mu.points), s.mu.points[0].Seq, s.mu.points[len(s.mu.points)-1].Seq)
	}
}
