package commands_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
)

// pdc top --once on a cluster one of whose servers was started without
// --metrics-addr fails, after the view, saying which rank has no metrics
// address and how to start it with one. It said "1 of 2 servers could not
// be scraped ... pdc status says which are down", of a server that was
// up, and named neither --metrics-addr nor what to run.
func TestTopNamesServersWithoutMetrics(t *testing.T) {
	tmpdir := filepath.Join(t.TempDir(), "tmp")
	procs, err := cluster.StartLocal(e2e.Ctx(t, 2*time.Minute), cluster.LocalConfig{
		Binary: e2e.Bin(), N: 2, TmpDir: tmpdir, DataDir: t.TempDir(),
		RankArgs: func(rank int) []string {
			if rank == 0 {
				return []string{"--metrics-addr", "127.0.0.1:0"}
			}
			return nil // rank 1: no metrics
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2e.Cleanup(t, tmpdir) })
	r := e2e.Run(t, nil, "top", "--once", "--interval", "100ms", "--tmpdir", tmpdir)
	if r.Err == nil {
		t.Fatalf("top --once with rank 1 serving no metrics succeeded:\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stdout, "RANK") {
		t.Errorf("top --once printed no view before failing:\n%s", r.Stdout)
	}
	last := strings.TrimSpace(r.Stderr)
	if i := strings.LastIndex(last, "\n"); i >= 0 {
		last = last[i+1:]
	}
	rank1 := procs[1]
	for _, want := range []string{"rank 1 (" + rank1.Addr + ")", "no metrics", "--metrics-addr", "pdc server", "pdc up"} {
		if !strings.Contains(last, want) {
			t.Errorf("top's error does not say %q:\n%s", want, last)
		}
	}
	for _, notWant := range []string{"rank 0 (", "which are down"} {
		if strings.Contains(last, notWant) {
			t.Errorf("top's error says %q, of servers that are up:\n%s", notWant, last)
		}
	}
}
