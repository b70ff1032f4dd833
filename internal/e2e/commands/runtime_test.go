package commands

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
)

// serverGODEBUG is the GODEBUG in the environment of each server of the
// cluster in tmpdir.
func serverGODEBUG(t *testing.T, tmpdir string) []string {
	t.Helper()
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Servers {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", s.PID))
		if err != nil {
			t.Fatalf("%s: %v", s.Label(), err)
		}
		// Executed again, it keeps its name for ps, pgrep and pkill.
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", s.PID))
		if want := filepath.Base(e2e.Bin()); err != nil || !strings.HasPrefix(want, strings.TrimSpace(string(comm))) {
			t.Errorf("%s runs as %q (%v); want %q", s.Label(), comm, err, want)
		}
		v := "(unset)"
		for _, kv := range strings.Split(string(b), "\x00") {
			if g, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
				v = g
				break // the first is the one Go reads
			}
		}
		out = append(out, v)
	}
	return out
}

// A server frees memory with MADV_FREE (madvdontneed=0: a burst of
// requests after a quiet spell takes no page faults for the pages the
// runtime gave back), keeping any other GODEBUG setting given; a
// madvdontneed the user chose is left as it is.
func TestServersFreeMemoryLazily(t *testing.T) {
	cases := []struct {
		env  []string
		want string
	}{
		{nil, "madvdontneed=0"},
		{[]string{"GODEBUG=scavtrace=1"}, "scavtrace=1,madvdontneed=0"},
		{[]string{"GODEBUG=madvdontneed=1"}, "madvdontneed=1"},
	}
	for _, c := range cases {
		tmpdir := filepath.Join(t.TempDir(), "tmp")
		r := e2e.Run(t, append([]string{"GODEBUG="}, c.env...), "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", filepath.Join(t.TempDir(), "data"))
		if r.Err != nil {
			t.Fatalf("pdc up with %q: %v\n%s", c.env, r.Err, r.Stderr)
		}
		got := serverGODEBUG(t, tmpdir)
		e2e.Cleanup(t, tmpdir)
		for rank, g := range got {
			if g != c.want {
				t.Errorf("with %q, rank %d runs with GODEBUG=%s; want %s", c.env, rank, g, c.want)
			}
		}
	}
}
