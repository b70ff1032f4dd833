package commands_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// pdc ping --wait, run while servers start in a tmpdir where a killed
// cluster left its list (the README's launcher recipe, run again after a
// job was killed), waits for the new cluster instead of pinging the dead
// one's servers and failing at once.
func TestPingWaitPastADeadClustersList(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	e2e.KillAll(t, tmpdir)

	r := e2e.Run(t, nil, "ping", "--tmpdir", tmpdir, "--wait", "2s")
	if r.Err == nil || !strings.Contains(r.Stderr, "no cluster came up") || !strings.Contains(r.Stderr, "dead cluster") || strings.Contains(r.Stdout, "rank 0") {
		t.Fatalf("ping --wait on a dead cluster's list should wait and say none came up, not ping its servers: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}

	ping := exec.Command(e2e.CommandBin(t, "ping"), "ping", "--tmpdir", tmpdir, "--wait", "2m")
	var out, errb bytes.Buffer
	ping.Stdout, ping.Stderr = &out, &errb
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ping.Process.Kill(); _ = ping.Wait() })
	e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", filepath.Join(t.TempDir(), "data"))
	if err := ping.Wait(); err != nil {
		t.Fatalf("ping --wait while a new cluster started over a dead one's list: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	if strings.Count(out.String(), "pong") != 2 {
		t.Fatalf("ping --wait should pong both new servers:\n%s", out.String())
	}
}
