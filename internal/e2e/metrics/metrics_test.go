package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/metrics"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/region"
)

// snap scrapes every server of the cluster of tmpdir, failing the test
// if one cannot be.
func snap(t *testing.T, ctx context.Context, tmpdir string) *metrics.ClusterSnapshot {
	t.Helper()
	s, err := metrics.Snap(ctx, http.DefaultClient, cluster.Dir{Path: tmpdir})
	if err != nil {
		t.Fatal(err)
	}
	for _, smp := range s.Servers {
		if smp.Err != nil {
			t.Fatalf("rank %d: %v", smp.Server.Rank, smp.Err)
		}
	}
	return s
}

// sum adds the value of name (with labels) over the servers.
func sum(s *metrics.ClusterSnapshot, name string, labels ...string) float64 {
	var v float64
	for _, smp := range s.Servers {
		v += smp.Families.Value(name, labels...)
	}
	return v
}

// metricsWork creates objects objects of cellsPer int32 cells and writes
// each whole, on the connection (where the bytes received are counted),
// then makes one request that fails (the outcome label carries its code).
func metricsWork(t *testing.T, ctx context.Context, tmpdir string, objects int, cellsPer uint64) {
	t.Helper()
	c := e2e.Connect(t, tmpdir, client.WithRegionTransport("stream"))
	ct, _, err := c.CreateContainer(ctx, "metrics", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	for i := range objects {
		o, err := ct.CreateObject(ctx, fmt.Sprintf("o%d", i), client.ObjectProps{Dims: []uint64{cellsPer}, Type: region.Int32})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Write(ctx, region.Shape(cellsPer), make([]byte, 4*cellsPer)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.OpenContainer(ctx, "no-such-container"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("open a container that does not exist: %v, want pdc.ErrNotFound", err)
	}
}

// TestMetricsMoveWithWork starts two servers with metrics, does known
// work and checks that the request counts, latency histograms and bytes
// of each scrape moved by what the work did.
func TestMetricsMoveWithWork(t *testing.T) {
	tmpdir := e2e.Up(t, 2, "--metrics-addr", "127.0.0.1:0")
	ctx := e2e.Ctx(t, 2*time.Minute)
	before := snap(t, ctx, tmpdir)
	for _, smp := range before.Servers {
		f := smp.Families
		if got := f.Label("pdc_server_info", "rank"); got != fmt.Sprint(smp.Server.Rank) {
			t.Errorf("rank %d: pdc_server_info has rank %q", smp.Server.Rank, got)
		}
		if f.Value("go_goroutines") == 0 || f.Value("process_resident_memory_bytes") == 0 {
			t.Errorf("rank %d: no Go runtime or process metrics", smp.Server.Rank)
		}
	}
	const objects, cellsPer = 20, 64 << 10 // int32 cells: 256 KiB a write
	metricsWork(t, ctx, tmpdir, objects, cellsPer)
	after := snap(t, ctx, tmpdir)

	delta := func(name string, labels ...string) float64 {
		return sum(after, name, labels...) - sum(before, name, labels...)
	}
	// Each create is one obj_create request (batches of one here).
	if got := delta("pdc_rpc_requests_total", "method", "obj_create", "code", "ok"); got != objects {
		t.Errorf("obj_create ok requests moved by %v, want %d", got, objects)
	}
	if got := delta("pdc_rpc_request_duration_seconds", "method", "obj_create"); got != objects {
		t.Errorf("obj_create latency observations moved by %v, want %d", got, objects)
	}
	if got := delta("pdc_rpc_requests_total", "method", "cont_get", "code", "not_found"); got != 1 {
		t.Errorf("cont_get requests answered not_found moved by %v, want 1", got)
	}
	// Every request counted has a latency observation, or was refused;
	// none was refused here.
	reqs, lat := delta("pdc_rpc_requests_total"), delta("pdc_rpc_request_duration_seconds")
	if reqs < objects*2 || lat != reqs {
		t.Errorf("requests moved by %v, latency observations by %v: want equal, and at least %d", reqs, lat, objects*2)
	}
	written := float64(objects * 4 * cellsPer)
	in := delta("pdc_transport_received_bytes_total")
	if in < written {
		t.Errorf("bytes received moved by %v, less than the %v written", in, written)
	}
	if in > 2*written {
		t.Errorf("bytes received moved by %v, more than twice the %v written", in, written)
	}
	if out := delta("pdc_transport_sent_bytes_total"); out <= 0 || out >= written {
		t.Errorf("bytes sent moved by %v: want some (answers), and less than the %v written", out, written)
	}
	if got := sum(after, "pdc_rpc_clients"); got < 1 {
		t.Errorf("pdc_rpc_clients %v with a client connected", got)
	}
	for _, name := range []string{"pdc_metastore_disk_bytes", "pdc_data_budget_bytes", "pdc_data_fs_size_bytes", "pdc_rpc_payload_budget_bytes"} {
		if got := sum(after, name); got <= 0 {
			t.Errorf("%s is %v, want more than 0", name, got)
		}
	}
	if got := sum(after, "pdc_rpc_requests_in_flight", "method", "obj_create"); got != 0 {
		t.Errorf("obj_create requests in flight %v after every create returned", got)
	}
	// No transfer is left once every write has returned.
	if got := sum(after, "pdc_data_transfers_in_flight") + sum(after, "pdc_data_budget_used_bytes"); got != 0 {
		t.Errorf("transfers in flight and data budget used sum to %v after the writes returned", got)
	}
}

// TestScrapeStaysBoundedWithObjects checks that what a scrape reads and
// sends does not grow with the objects stored: every series is per
// server, method, code or transport, none per object.
func TestScrapeStaysBoundedWithObjects(t *testing.T) {
	tmpdir := e2e.Up(t, 1, "--metrics-addr", "127.0.0.1:0")
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "many", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	create := func(from, n int) {
		specs := make([]client.ObjectSpec, n)
		for i := range specs {
			specs[i] = client.ObjectSpec{Name: fmt.Sprintf("o%d", from+i), Props: client.ObjectProps{Dims: []uint64{16}, Type: region.Int32}}
		}
		if _, err := ct.CreateObjects(ctx, specs); err != nil {
			t.Fatal(err)
		}
	}
	series := func() int {
		n := 0
		for _, smp := range snap(t, ctx, tmpdir).Servers {
			for name, mf := range smp.Families {
				if name[:3] == "go_" {
					continue // the runtime's own, fixed in number too, but not ours to hold
				}
				n += len(mf.GetMetric())
			}
		}
		return n
	}
	create(0, 100)
	few := series()
	create(100, 20000)
	many := series()
	if many != few {
		t.Errorf("a scrape has %d series with 100 objects and %d with 20100: the series must not depend on the objects", few, many)
	}
}

// TestLaneBytes checks that region bytes moved through shared-memory
// lanes are counted under transport="lane", exactly.
func TestLaneBytes(t *testing.T) {
	tmpdir := e2e.Up(t, 1, "--metrics-addr", "127.0.0.1:0")
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir, client.WithRegionTransport("shm"))
	ct, _, err := c.CreateContainer(ctx, "lanes", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	before := snap(t, ctx, tmpdir)
	const objects, cellsPer = 4, 64 << 10
	for i := range objects {
		o, err := ct.CreateObject(ctx, fmt.Sprintf("o%d", i), client.ObjectProps{Dims: []uint64{cellsPer}, Type: region.Int32})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Write(ctx, region.Shape(cellsPer), make([]byte, 4*cellsPer)); err != nil {
			t.Fatal(err)
		}
		if err := o.Read(ctx, region.Shape(cellsPer/2), make([]byte, 4*cellsPer/2)); err != nil {
			t.Fatal(err)
		}
	}
	after := snap(t, ctx, tmpdir)
	delta := func(name string, labels ...string) float64 {
		return sum(after, name, labels...) - sum(before, name, labels...)
	}
	if got, want := delta("pdc_transport_received_bytes_total", "transport", "lane"), float64(objects*4*cellsPer); got != want {
		t.Errorf("lane bytes received moved by %v, want the %v written", got, want)
	}
	if got, want := delta("pdc_transport_sent_bytes_total", "transport", "lane"), float64(objects*2*cellsPer); got != want {
		t.Errorf("lane bytes sent moved by %v, want the %v read", got, want)
	}
}

// TestStagedBytesByTransport checks that a staged file's bytes are counted
// under the transport that moved them, exactly.
func TestStagedBytesByTransport(t *testing.T) {
	base := t.TempDir()
	tmpdir := e2e.Up(t, 2, "--metrics-addr", "127.0.0.1:0", "--hosts", "node-a,node-b",
		"--stage-producer-dir", filepath.Join(base, "prod-{host}"))
	ctx := e2e.Ctx(t, 2*time.Minute)
	const size = 256 << 10
	for _, mode := range []string{"pull", "push"} {
		name := "step-" + mode
		writeFile(t, filepath.Join(base, "prod-node-a", name), make([]byte, size))
		stage(t, tmpdir, "node-a", "produce", "--producer-dir", filepath.Join(base, "prod-node-a"), name)
		sent := func() float64 { return sum(snap(t, ctx, tmpdir), "pdc_transport_sent_bytes_total", "transport", mode) }
		before := sent()
		stage(t, tmpdir, "node-b", "consume", "--mode", mode, "--consumer-dir", filepath.Join(base, "cons-"+mode), name)
		// The sender counts a pull once its last write returned, which
		// can be just after the consumer has the bytes: a moment later.
		tick := time.NewTicker(10 * time.Millisecond)
		got := sent() - before
		for got < size && ctx.Err() == nil {
			<-tick.C
			got = sent() - before
		}
		tick.Stop()
		if got != size {
			t.Errorf("%s: bytes sent by %s moved by %v, want the file's %d", mode, mode, got, size)
		}
	}
}

// TestOutboxShowsWhatWaitsForADeadRank: with a metadata server down, the
// tag index updates waiting for it show on the server that holds them,
// by the rank they wait for (metrics, and pdc status), and are gone once it is back. The backlog
// gauge alone read 0 then: updates whose try failed count as tried.
func TestOutboxShowsWhatWaitsForADeadRank(t *testing.T) {
	tmpdir := e2e.Up(t, 2, "--metrics-addr", "127.0.0.1:0")
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "outbox", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	var obj *client.Object
	for i := 0; obj == nil; i++ {
		o, err := ct.CreateObject(ctx, fmt.Sprintf("o%d", i), client.ObjectProps{Dims: []uint64{1}, Type: region.Int32})
		if err != nil {
			t.Fatal(err)
		}
		if o.Info().Server == 0 {
			obj = o
		}
	}
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	pid := list.Servers[1].PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(ctx, pid); err != nil {
		t.Fatal(err)
	}
	// Tags whose key's entries rank 1 holds.
	part := tagindex.For(2)
	put := 0
	for i := 0; put < 20; i++ {
		key := fmt.Sprintf("%c%c-key", 'a'+i%26, 'a'+i/26%26)
		if part.Owner(key) != 1 {
			continue
		}
		if err := obj.PutTag(ctx, key, client.String("v")); err != nil {
			t.Fatal(err)
		}
		put++
	}
	rank0 := func() metrics.Families {
		t.Helper()
		s, err := metrics.Snap(ctx, http.DefaultClient, cluster.Dir{Path: tmpdir})
		if err != nil {
			t.Fatal(err)
		}
		for _, smp := range s.Servers {
			if smp.Server.Rank == 0 {
				if smp.Err != nil {
					t.Fatal(smp.Err)
				}
				return smp.Families
			}
		}
		t.Fatal("rank 0 not scraped")
		return nil
	}
	// A sync fences rank 0 (which tries its deliveries) and fails at
	// rank 1.
	if err := c.SyncIndex(ctx); !errors.Is(err, pdc.ErrUnavailable) {
		t.Fatalf("index sync with rank 1 down: %v, want pdc.ErrUnavailable", err)
	}
	f := rank0()
	if got := f.Value("pdc_dart_outbox_failing", "to", "1"); got != 1 {
		t.Errorf("rank 1 down: pdc_dart_outbox_failing{to=\"1\"} is %v on rank 0, want 1", got)
	}
	if got := f.Value("pdc_dart_outbox_queued_bytes", "to", "1"); got <= 0 {
		t.Errorf("rank 1 down, %d tags put for it: pdc_dart_outbox_queued_bytes{to=\"1\"} is %v on rank 0", put, got)
	}
	// pdc status says so, under its table.
	const waits = "rank 0 cannot deliver tag index updates to rank 1"
	if r := e2e.Run(t, nil, "status", "--tmpdir", tmpdir); !strings.Contains(r.Stdout, waits) {
		t.Errorf("pdc status with rank 1 down and index updates waiting for it does not say %q:\n%s%s", waits, r.Stdout, r.Stderr)
	}

	e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)
	if err := c.SyncIndex(ctx); err != nil {
		t.Fatal(err)
	}
	f = rank0()
	if got := f.Value("pdc_dart_outbox_failing", "to", "1"); got != 0 {
		t.Errorf("rank 1 back and synced: pdc_dart_outbox_failing{to=\"1\"} is %v", got)
	}
	if got := f.Value("pdc_dart_outbox_queued_bytes", "to", "1"); got != 0 {
		t.Errorf("rank 1 back and synced: pdc_dart_outbox_queued_bytes{to=\"1\"} is %v", got)
	}
	if out := e2e.MustRun(t, "status", "--tmpdir", tmpdir); strings.Contains(out, "cannot deliver") {
		t.Errorf("pdc status with every rank back and synced:\n%s", out)
	}
}
