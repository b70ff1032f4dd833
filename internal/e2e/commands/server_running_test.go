package commands_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// A refused start leaves nothing on disk. pdc server --rank R with
// another --datadir, next to a running cluster, used to leave that data
// dir behind holding an empty metadata store meta-R and R's owner files:
// a later start of a cluster there would find a store nobody made on
// purpose. A data dir that existed stays, empty as it was.
func TestRefusedServerLeavesNothing(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	for _, rank := range []int{0, 1} {
		for _, existed := range []bool{false, true} {
			t.Run(fmt.Sprintf("rank %d existed %v", rank, existed), func(t *testing.T) {
				datadir := filepath.Join(t.TempDir(), "other")
				if existed {
					if err := os.Mkdir(datadir, 0o700); err != nil {
						t.Fatal(err)
					}
				}
				r := e2e.Run(t, nil, "server", "--rank", fmt.Sprint(rank), "--size", "2", "--tmpdir", tmpdir, "--datadir", datadir)
				if r.Err == nil {
					t.Fatal("a second server of a running rank started")
				}
				if !strings.Contains(r.Stderr, fmt.Sprintf("rank %d:", rank)) {
					t.Errorf("stderr does not name rank %d:\n%s", rank, r.Stderr)
				}
				entries, err := os.ReadDir(datadir)
				switch {
				case !existed && !errors.Is(err, fs.ErrNotExist):
					t.Errorf("the refused start left data dir %s behind (%v, %v)", datadir, names(entries), err)
				case existed && (err != nil || len(entries) > 0):
					t.Errorf("the refused start left %v in data dir %s (%v)", names(entries), datadir, err)
				}
			})
		}
	}
}

func names(entries []os.DirEntry) []string {
	var n []string
	for _, e := range entries {
		n = append(n, e.Name())
	}
	return n
}
