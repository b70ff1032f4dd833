package commands_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
)

// pdc server for a rank whose server runs and answers is refused at
// once, naming the rank, its address and pid. It used to wait up to 10 s
// for that server "to exit", as for a predecessor killed a moment ago,
// and then name neither its address nor that it was running.
func TestServerForARunningRankIsRefused(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Servers {
		t.Run(fmt.Sprint("rank ", s.Rank), func(t *testing.T) {
			r := e2e.Run(t, nil, "server", "--rank", fmt.Sprint(s.Rank), "--size", "2", "--tmpdir", tmpdir, "--datadir", datadir)
			if r.Err == nil {
				t.Fatal("a second server of a running rank started")
			}
			for _, want := range []string{fmt.Sprintf("rank %d:", s.Rank), s.Addr, fmt.Sprintf("pid %d", s.PID), "already running", "pdc down --tmpdir"} {
				if !strings.Contains(r.Stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, r.Stderr)
				}
			}
			if strings.Contains(r.Stderr, "waiting for the previous server") {
				t.Errorf("it waited for a server that answers to exit:\n%s", r.Stderr)
			}
		})
	}
	// Both still serve.
	for _, s := range list.Servers {
		if _, err := e2e.Connect(t, tmpdir).Ping(e2e.Ctx(t, 10*time.Second), s.Rank); err != nil {
			t.Errorf("rank %d after the refused start: %v", s.Rank, err)
		}
	}
}
