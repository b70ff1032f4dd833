package bench

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/client/clienttest"
)

// startCluster runs one in-process server with both roles, and the raw
// byte source for the ceiling.
func startCluster(tb testing.TB) IOConfig {
	tb.Helper()
	tc := clienttest.Start(tb, clienttest.Options{})
	dir := tc.Dir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	src := NewSourceServer(ln)
	tb.Cleanup(func() { src.Close() })
	shmPath := dir + "/raw-shm.sock"
	sl, err := net.Listen("unix", shmPath)
	if err != nil {
		tb.Fatal(err)
	}
	shm := NewShmSourceServer(sl)
	tb.Cleanup(func() { shm.Close() })
	return IOConfig{TmpDir: dir + "/tmp", RawTCP: ln.Addr().String(), RawShm: shmPath, Transport: "stream"}
}

func BenchmarkIO(b *testing.B) { benchIO(b, "stream") }

// BenchmarkIOShm is BenchmarkIO through shared-memory lanes, next to a
// raw transfer through shared memory.
func BenchmarkIOShm(b *testing.B) { benchIO(b, "shm") }

func benchIO(b *testing.B, transport string) {
	cfg := startCluster(b)
	cfg.Transport = transport
	cfg.ObjectSize = 64 << 20
	cfg.Regions = []int64{1 << 20}
	cfg.Partitions = []client.Partition{client.ObjectStatic}
	cfg.Small = 16384
	if transport == "shm" {
		cfg.Small = -1 // 4 KiB regions do not use the lane
	}
	var rs []Result
	for b.Loop() {
		var err error
		if rs, err = IO(context.Background(), cfg); err != nil {
			b.Fatal(err)
		}
	}
	report(b, rs)
}

// The benchmark runs every partition and storage mode, on the connection
// and through lanes, checks what it reads back, and reports figures with
// their ceilings.
func TestIOBenchRuns(t *testing.T) {
	for _, tr := range []string{"stream", "shm"} {
		t.Run(tr, func(t *testing.T) {
			cfg := startCluster(t)
			cfg.Transport = tr
			cfg.ObjectSize = 2 << 20
			cfg.Regions = []int64{64 << 10, 1 << 20}
			cfg.Rounds = 1
			cfg.Small = 512
			cfg.FloorDir = t.TempDir()
			rs, err := IO(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Every case and size written and read, the two regions one at
			// a time (first partition and storage, 1 MiB), the store floor
			// and the 4 KiB start_all case.
			if want := len(Partitions)*len(Storages)*2*2 + 2 + 2 + 2; len(rs) != want {
				t.Fatalf("got %d results, want %d", len(rs), want)
			}
			floors, each := 0, 0
			for _, r := range rs {
				if strings.HasPrefix(r.Case, "store floor: ") {
					floors++
				}
				if strings.Contains(r.Case, "one region at a time") {
					each++
				}
			}
			if each != 2 {
				t.Fatalf("%d one-region-at-a-time rows, want 2 (write and read)", each)
			}
			if floors != 2 {
				t.Fatalf("%d store floor rows, want 2 (write and read)", floors)
			}
			if left, _ := os.ReadDir(cfg.FloorDir); len(left) != 0 {
				t.Fatalf("the store floor left %d files behind", len(left))
			}
			ceiling := map[string]string{"stream": "raw tcp", "shm": "raw shm"}[tr]
			for _, r := range rs {
				if r.Value <= 0 || r.CeilingValue <= 0 {
					t.Errorf("%s: empty figure %+v", r.Case, r)
				}
				if r.Unit == "GB/s" && r.Ceiling != ceiling && r.Ceiling != ceiling+", a request per region" {
					t.Errorf("%s: ceiling %q, want %q", r.Case, r.Ceiling, ceiling)
				}
			}
		})
	}
}

func TestVPICRoundTrip(t *testing.T) {
	cfg := startCluster(t)
	ctx := context.Background()
	c, err := client.Connect(ctx, client.WithTmpDir(cfg.TmpDir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ct, _, err := c.CreateContainer(ctx, "vpic", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const ranks, n = 3, 1000
	if err := VPICCreate(ctx, ct, "t", ranks*n, client.RegionStatic); err != nil {
		t.Fatal(err)
	}
	for r := range uint64(ranks) {
		w, err := OpenVPICRank(ctx, c, "t", r, n)
		if err != nil {
			t.Fatal(err)
		}
		w.Fill()
		if err := w.Write(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for r := range uint64(ranks) {
		rd, err := OpenVPICRank(ctx, c, "t", (r+1)%ranks, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := rd.Read(ctx, c); err != nil {
			t.Fatal(err)
		}
		_ = rd.Close(ctx)
	}
	// A rank that reads particles nobody wrote finds the check failing.
	if err := VPICCreate(ctx, ct, "empty", n, client.ObjectStatic); err != nil {
		t.Fatal(err)
	}
	rd, err := OpenVPICRank(ctx, c, "empty", 0, n)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close(ctx)
	if err := rd.Read(ctx, c); err == nil {
		t.Fatal("reading particles never written passed the check")
	}
}

// Each round of a case is its own figure next to the ceiling measured
// right after it (not one median over rounds against one ceiling), the
// rounds of a case run back to back on one object after an untimed pass.
func TestIORoundsEachWithCeiling(t *testing.T) {
	cfg := startCluster(t)
	cfg.ObjectSize = 1 << 20
	cfg.Regions = []int64{256 << 10}
	cfg.Partitions = []client.Partition{client.RegionStatic}
	cfg.Storages = []client.Storage{client.StorageByOffset}
	cfg.Rounds = 3
	cfg.Small = 16
	cfg.FloorDir = t.TempDir()
	rs, err := IO(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ss := Summarize(rs)
	if len(ss) != 6 {
		t.Fatalf("%d cases, want 6 (write, read, two store floors, two start_all)", len(ss))
	}
	for _, s := range ss {
		if len(s.Rounds) != 3 {
			t.Errorf("%s: %d rounds, want 3", s.Key(), len(s.Rounds))
		}
		for i, r := range s.Rounds {
			if r.Value <= 0 || r.CeilingValue <= 0 || r.Ratio <= 0 {
				t.Errorf("%s: round %d: %+v", s.Key(), i, r)
			}
		}
	}
}
