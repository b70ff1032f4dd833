package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/client/clienttest"
	"github.com/pdcgo/pdc/internal/dtl"
)

// startStage runs two in-process servers standing for node-a (serving a
// producer dir) and node-b, a producer client on node-a, a consumer client
// on node-b, and the raw ceilings.
func startStage(tb testing.TB) StageConfig {
	tb.Helper()
	dir := tb.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		// Node-local staging dirs are memory on HPC nodes; on a disk the
		// figures would time its fsyncs.
		d, err := os.MkdirTemp("/dev/shm", "pdc-bench-stage-test-")
		if err == nil {
			dir = d
			tb.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	tc := clienttest.Start(tb, clienttest.Options{Dir: dir, Hosts: []string{"node-a", "node-b"}, Staging: true})
	tmp := tc.TmpDir()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	prod, err := client.Connect(ctx, client.WithTmpDir(tmp), client.WithStageDirs(tc.ProducerDir(0), ""), client.WithHost("node-a"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { prod.Close() })
	cons, err := client.Connect(ctx, client.WithTmpDir(tmp), client.WithStageDirs("", filepath.Join(dir, "cons")), client.WithHost("node-b"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cons.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	sock := filepath.Join(dir, "raw.sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		tb.Fatal(err)
	}
	src := NewSourceServer(ln, uln)
	tb.Cleanup(func() { src.Close() })
	eln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	echo := NewEchoServer(eln)
	tb.Cleanup(func() { echo.Close() })
	produce := func(ctx context.Context, size int64) (string, error) {
		name := fmt.Sprintf("f-%d", size)
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*31 + i>>8)
		}
		if err := os.WriteFile(filepath.Join(tc.ProducerDir(0), name), data, 0o644); err != nil {
			return "", err
		}
		_, err := prod.Produce(ctx, name)
		return name, err
	}
	return StageConfig{Consumer: cons, Produce: produce, RawTCP: ln.Addr().String(), RawUnix: sock, RawEcho: echo.Addr()}
}

func BenchmarkStage(b *testing.B) {
	cfg := startStage(b)
	cfg.Sizes = []int64{1 << 10, 1 << 20, 64 << 20}
	var rs []Result
	for b.Loop() {
		var err error
		if rs, err = Stage(context.Background(), cfg); err != nil {
			b.Fatal(err)
		}
	}
	report(b, rs)
}

// The benchmark consumes by every mode (each consume checked against the
// produce's checksum) and reports figures with their ceilings.
func TestStageBenchRuns(t *testing.T) {
	cfg := startStage(t)
	cfg.Sizes = []int64{1 << 10, 256 << 10}
	cfg.Budget = 1
	cfg.FloorDir = t.TempDir()
	rs, err := Stage(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Every mode, and a floor, of each size; one lookup.
	if want := len(cfg.Sizes)*(len(dtl.Modes)+1) + 1; len(rs) != want {
		t.Fatalf("got %d results, want %d", len(rs), want)
	}
	floors := 0
	for _, r := range rs {
		if r.Value <= 0 || r.CeilingValue <= 0 {
			t.Errorf("%s: value %v, ceiling %v", r.Case, r.Value, r.CeilingValue)
		}
		if strings.HasPrefix(r.Case, "consume floor ") {
			floors++
		}
	}
	if floors != len(cfg.Sizes) {
		t.Errorf("%d floor results, want %d", floors, len(cfg.Sizes))
	}
	// The floor's files are renamed into place and removed after each.
	if left, _ := os.ReadDir(cfg.FloorDir); len(left) != 0 {
		t.Errorf("floor left %d files in its dir", len(left))
	}
}

// The clean-up between consumes (removing the consumer's copy) is outside
// the timed intervals of both the consume and its ceiling.
func TestAlternateTimedLeavesCleanupOut(t *testing.T) {
	var clock time.Time
	now := func() time.Time { return clock }
	step := func(d time.Duration) func() error {
		return func() error { clock = clock.Add(d); return nil }
	}
	ourT, rawT, err := alternateTimed(context.Background(), 4, 0, now, step(time.Millisecond), step(2*time.Millisecond), step(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(ourT) != 4 || len(rawT) != 4 {
		t.Fatalf("%d and %d pairs, want 4", len(ourT), len(rawT))
	}
	for i := range ourT {
		if ourT[i] != time.Millisecond || rawT[i] != 2*time.Millisecond {
			t.Errorf("pair %d: ours %v, raw %v; want 1ms and 2ms (the clean-up's hour in neither)", i, ourT[i], rawT[i])
		}
	}
}

// The targets printed are issue 28's.
func TestStageTargets(t *testing.T) {
	for size, want := range map[int64]string{1 << 10: "<= 0.25 ms", 1 << 20: "<= 1.0 ms", 64 << 20: "", 1 << 30: "ratio >= 0.85"} {
		if got := stageTarget(size); got != want {
			t.Errorf("stageTarget(%s) = %q, want %q", sizeName(size), got, want)
		}
	}
}
