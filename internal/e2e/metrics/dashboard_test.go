package metrics_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dashboard"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/metrics"
	"github.com/pdcgo/pdc/region"
)

// TestDashboard starts a two-server cluster with pdc up --dashboard,
// does known work (creates, region writes, a failed request, a staged
// file produced and consumed, a consumer left waiting), loads the page
// in headless Chromium and checks that the numbers in its DOM are those
// of pdc status and of a scrape of the servers' metrics. The screenshot
// is kept in $PDC_ARTIFACTS (else the test's temporary dir). pdc
// dashboard, run on its own, serves the same numbers.
func TestDashboard(t *testing.T) {
	chromium := findChromium(t)
	base := t.TempDir()
	tmpdir := e2e.Up(t, 2, "--dashboard", "127.0.0.1:0", "--hosts", "node-a,node-b",
		"--stage-producer-dir", filepath.Join(base, "prod-{host}"))
	url := dashboardURL(t, tmpdir)
	ctx := e2e.Ctx(t, 3*time.Minute)

	const objects, cells = 6, 4096 // int32 cells: 16 KiB a write
	dashboardWork(t, ctx, tmpdir, base, objects, cells)
	// A consumer waits for a file not produced yet.
	waiter := exec.Command(e2e.CommandBin(t, "stage"), "stage", "consume", "--consumer-dir", filepath.Join(base, "cons-b"), "late")
	waiter.Env = append(os.Environ(), stageEnv(tmpdir, "node-b")...)
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = waiter.Process.Kill(); _ = waiter.Wait() })
	status := parseStatus(t, e2e.MustRun(t, "status", "--tmpdir", tmpdir))

	// The next snapshot after the waiter waits is the one the page shows:
	// nothing makes requests until the page is loaded.
	snap := awaitSnapshot(t, url, func(s dashboard.Snapshot) bool { return s.Totals.StageWaiters == 1 })
	scraped := metrics.View(nil, snapTmpdir(t, ctx, tmpdir))
	if snap.Totals.Objects != objects || snap.Totals.WrittenBytes != objects*4*cells || snap.Totals.StageProduces != 1 ||
		snap.Totals.StageConsumes < 1 || snap.Totals.Up != 2 {
		t.Errorf("dashboard totals %+v: want %d objects, %d bytes written, 1 produce, a consume and 2 servers up", snap.Totals, objects, objects*4*cells)
	}

	dom := loadPage(t, chromium, url)
	if seq := attrOf(t, dom, "updated", "data-seq"); seq == "" || seq == "0" {
		t.Fatalf("the page shows no snapshot (data-seq %q)", seq)
	}
	for _, sv := range scraped.Servers {
		p := fmt.Sprintf("srv-%d-", sv.Rank)
		st := status[sv.Rank]
		for id, want := range map[string]string{"addr": st.addr, "roles": st.roles, "state": "up"} {
			if got := textOf(t, dom, p+id); got != want {
				t.Errorf("#%s%s shows %q; pdc status says %q", p, id, got, want)
			}
		}
		for id, want := range map[string]float64{"objects": sv.Objects, "written": sv.WrittenBytes, "errors": sv.Errors,
			"xfers": sv.TransfersInFlight, "queued": sv.TransfersQueued} {
			if got := valueOf(t, dom, p+id); got != want {
				t.Errorf("#%s%s is %v; the servers' metrics say %v", p, id, got, want)
			}
		}
		if got := valueOf(t, dom, p+"requests"); got < sv.Requests || got < float64(st.requests) {
			t.Errorf("#%srequests is %v; pdc status said %d, the metrics %v, before the page loaded", p, got, st.requests, sv.Requests)
		}
	}
	for id, want := range map[string]float64{"total-objects": objects, "total-written": objects * 4 * cells,
		"stage-produces": 1, "stage-bytes": float64(len(stepOne)), "stage-consumes": snap.Totals.StageConsumes, "stage-waiters": 1, "total-up": 2} {
		if got := valueOf(t, dom, id); got != want {
			t.Errorf("#%s is %v, want %v", id, got, want)
		}
	}
	if !regexp.MustCompile(`<tr class="err" data-rank="\d" data-method="cont_get" data-code="not_found" data-count="1">`).MatchString(dom) {
		t.Errorf("the page's recent errors do not list the cont_get answered not_found:\n%s", elementOf(dom, "errors"))
	}

	// The waiter gets its file, and pdc dashboard on its own serves
	// what rank 0's does.
	writeFile(t, filepath.Join(base, "prod-node-a", "late"), []byte("late"))
	stage(t, tmpdir, "node-a", "produce", "--producer-dir", filepath.Join(base, "prod-node-a"), "late")
	if err := waiter.Wait(); err != nil {
		t.Errorf("the waiting consumer: %v", err)
	}
	alone := startDashboard(t, tmpdir)
	got := awaitSnapshot(t, alone, func(s dashboard.Snapshot) bool { return s.Totals.StageProduces == 2 })
	if got.Totals.StageBytes != float64(len(stepOne)+len("late")) {
		t.Errorf("pdc dashboard: %v bytes staged, want %d", got.Totals.StageBytes, len(stepOne)+len("late"))
	}
	if got.Totals.Objects != objects || got.Totals.WrittenBytes != objects*4*cells || got.Totals.StageWaiters != 0 || !hasError(got, "cont_get", "not_found") {
		t.Errorf("pdc dashboard: totals %+v, errors %+v: want %d objects, %d bytes, no waiter and the cont_get not found", got.Totals, got.RecentErrors, objects, objects*4*cells)
	}
}

func hasError(s dashboard.Snapshot, method, code string) bool {
	for _, e := range s.RecentErrors {
		if e.Method == method && e.Code == code && e.Count == 1 {
			return true
		}
	}
	return false
}

// findChromium is Debian's chromium; without it the test skips, except
// in CI, which installs it.
func findChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium in $PATH: CI installs Debian's chromium for this test (.ci/run)")
	}
	t.Skip("no chromium in $PATH: apt-get install chromium to run the dashboard's test")
	return ""
}

// stageEnv is the environment of a staging pdc process on host.
func stageEnv(tmpdir, host string) []string {
	return []string{"PDC_TMPDIR=" + tmpdir, "PDC_HOST=" + host, "PDC_STAGE_PRODUCER_DIR=", "PDC_STAGE_CONSUMER_DIR=",
		"PDC_STAGE_SHARED=", "PDC_DTL=", "PDC_STAGE_NAMESPACE=", "DYAD_KVS_NAMESPACE="}
}

func stage(t *testing.T, tmpdir, host string, args ...string) {
	t.Helper()
	if r := e2e.Run(t, stageEnv(tmpdir, host), append([]string{"stage"}, args...)...); r.Err != nil {
		t.Fatalf("pdc stage %s: %v\n%s%s", strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// stepOne is the staged file dashboardWork produces.
const stepOne = "staged bytes"

// dashboardWork creates objects objects of cells int32 cells and writes
// each whole, makes one request that fails, and stages a file produced
// on node-a and consumed on node-b.
func dashboardWork(t *testing.T, ctx context.Context, tmpdir, base string, objects int, cells uint64) {
	t.Helper()
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "dash", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	for i := range objects {
		o, err := ct.CreateObject(ctx, fmt.Sprintf("o%d", i), client.ObjectProps{Dims: []uint64{cells}, Type: region.Int32})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Write(ctx, region.Shape(cells), make([]byte, 4*cells)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.OpenContainer(ctx, "no-such-container"); err == nil {
		t.Fatal("opened a container that does not exist")
	}
	writeFile(t, filepath.Join(base, "prod-node-a", "step-1"), []byte(stepOne))
	stage(t, tmpdir, "node-a", "produce", "--producer-dir", filepath.Join(base, "prod-node-a"), "step-1")
	stage(t, tmpdir, "node-b", "consume", "--consumer-dir", filepath.Join(base, "cons-b"), "step-1")
}

// statusLine is a server's line of pdc status.
type statusLine struct {
	addr, roles string
	requests    int
}

func parseStatus(t *testing.T, out string) map[int]statusLine {
	t.Helper()
	st := map[int]statusLine{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 7 || f[0] == "RANK" {
			continue
		}
		rank, err1 := strconv.Atoi(f[0])
		reqs, err2 := strconv.Atoi(f[6])
		if err1 != nil || err2 != nil {
			t.Fatalf("pdc status line %q", l)
		}
		st[rank] = statusLine{addr: f[1], roles: f[2], requests: reqs}
	}
	if len(st) != 2 {
		t.Fatalf("pdc status printed %d server lines, want 2:\n%s", len(st), out)
	}
	return st
}

func snapTmpdir(t *testing.T, ctx context.Context, tmpdir string) *metrics.ClusterSnapshot {
	t.Helper()
	s, err := metrics.Snap(ctx, http.DefaultClient, cluster.Dir{Path: tmpdir})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dashboardURL is the address of the dashboard rank 0 serves, from its
// log.
func dashboardURL(t *testing.T, tmpdir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tmpdir, "logs", "server-0.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg="serving the dashboard" url="?([^"\s]+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("rank 0's log does not say where it serves the dashboard:\n%s", b)
	}
	return string(m[1])
}

// startDashboard runs pdc dashboard for the cluster of tmpdir and
// returns its address; it is interrupted, and must exit cleanly, when
// the test ends.
func startDashboard(t *testing.T, tmpdir string) string {
	t.Helper()
	cmd := exec.Command(e2e.CommandBin(t, "dashboard"), "dashboard", "--tmpdir", tmpdir, "--addr", "127.0.0.1:0", "--interval", "200ms")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err != nil {
			t.Errorf("pdc dashboard, interrupted: %v\n%s", err, stderr.String())
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`^pdc dashboard: (http://\S+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("pdc dashboard printed %q (%v), want its address\n%s", line, err, stderr.String())
	}
	return m[1]
}

// awaitSnapshot polls the dashboard at url until its snapshot satisfies
// ok, and returns it.
func awaitSnapshot(t *testing.T, url string, ok func(dashboard.Snapshot) bool) dashboard.Snapshot {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(time.Minute)
	var s dashboard.Snapshot
	for {
		resp, err := http.Get(url + "api/snapshot")
		if err != nil {
			t.Fatal(err)
		}
		s = dashboard.Snapshot{}
		err = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%sapi/snapshot: %v", url, err)
		}
		if s.Seq > 0 && s.Error == "" && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%sapi/snapshot never showed what the test waits for; the last: %+v", url, s)
		}
		<-tick.C
	}
}

// loadPage loads url in headless Chromium, long enough in virtual time
// for the page's script to have fetched and drawn, keeps a screenshot
// and returns the DOM.
func loadPage(t *testing.T, chromium, url string) string {
	t.Helper()
	dir := os.Getenv("PDC_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "dashboard.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-extensions", "--window-size=1400,1000", "--virtual-time-budget=3000",
		"--screenshot="+shot, "--dump-dom", url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	t.Logf("chromium loaded the page in %v", time.Since(start))
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Errorf("chromium made no screenshot at %s: %v", shot, err)
	} else {
		t.Logf("the dashboard's screenshot: %s", shot)
	}
	return string(out)
}

// tagOf is the start tag of the element with id in dom.
func tagOf(t *testing.T, dom, id string) string {
	t.Helper()
	m := regexp.MustCompile(`<[a-z]+ [^>]*\bid="` + regexp.QuoteMeta(id) + `"[^>]*>`).FindString(dom)
	if m == "" {
		t.Fatalf("the page has no element #%s:\n%s", id, dom)
	}
	return m
}

func attrOf(t *testing.T, dom, id, attr string) string {
	t.Helper()
	m := regexp.MustCompile(`\b` + attr + `="([^"]*)"`).FindStringSubmatch(tagOf(t, dom, id))
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// valueOf is the number an element shows, from its data-value.
func valueOf(t *testing.T, dom, id string) float64 {
	t.Helper()
	s := attrOf(t, dom, id, "data-value")
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("#%s has data-value %q: %v", id, s, err)
	}
	return v
}

// textOf is the text of an element with no child elements.
func textOf(t *testing.T, dom, id string) string {
	t.Helper()
	tag := tagOf(t, dom, id)
	rest := dom[strings.Index(dom, tag)+len(tag):]
	end := strings.IndexByte(rest, '<')
	if end < 0 {
		t.Fatalf("#%s: no end tag", id)
	}
	return html.UnescapeString(rest[:end])
}

// elementOf is the DOM from the element with id on, for a message.
func elementOf(dom, id string) string {
	i := strings.Index(dom, `id="`+id+`"`)
	if i < 0 {
		return "(no #" + id + ")"
	}
	return dom[i:min(len(dom), i+2000)]
}
