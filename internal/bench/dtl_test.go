package bench

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/dtl/dtlpeer"
)

// startDTL starts a transport sender and the raw source in this process
// (pdc bench dtl runs them as processes of their own).
func startDTL(tb testing.TB) DTLConfig {
	tb.Helper()
	dir := tb.TempDir()
	p, err := dtlpeer.Start(dtlpeer.Config{Secret: []byte("s"), ShmDir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	sock := filepath.Join(dir, "raw.sock")
	unix, err := net.Listen("unix", sock)
	if err != nil {
		tb.Fatal(err)
	}
	src := NewSourceServer(tcp, unix)
	tb.Cleanup(func() { src.Close() })
	return DTLConfig{Peer: p.Addr(), Secret: []byte("s"), RawTCP: tcp.Addr().String(), RawUnix: sock}
}

func BenchmarkDTL(b *testing.B) {
	cfg := startDTL(b)
	var rs []Result
	for b.Loop() {
		var err error
		rs, err = DTL(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
	}
	report(b, rs)
}

func TestDTLBenchRuns(t *testing.T) {
	cfg := startDTL(t)
	cfg.Sizes = []int64{4 << 10, 1 << 20}
	cfg.Budget = 50 * time.Millisecond
	rs, err := DTL(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 64 MiB only by shm, the one mode whose cases differ there (its view,
	// its target): the other modes' 64 MiB cases are their 1 MiB cases'
	// code with 64 times the bytes to fill, move and check, which under
	// the race detector cost most of this package's CPU.
	cfg.Sizes, cfg.Modes = []int64{64 << 20}, []dtl.Mode{dtl.ModeShm}
	big, err := DTL(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rs = append(rs, big...)
	// Two sizes by four modes, and shm's copy and view at 64 MiB.
	if len(rs) != 2*len(dtl.Modes)+2 {
		t.Fatalf("got %d results, want %d", len(rs), 2*len(dtl.Modes)+2)
	}
	for _, r := range rs {
		if r.Value <= 0 || r.CeilingValue <= 0 || r.Ratio <= 0 {
			t.Errorf("%s: empty figure %+v", r.Case, r)
		}
	}
	if got := rs[len(rs)-1].Case; got != "shm view (mapped, no copy) 64 MiB" {
		t.Errorf("last case %q, want the shm view at 64 MiB", got)
	}
}
