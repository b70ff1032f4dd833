package commands_test

import (
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// PDC's MPI scripts stop the servers with `mpiexec -n N close_server`,
// one rank per server, and close_server runs pdc down --rank0-only: the
// ranks other than 0 leave the cluster alone and say nothing, rank 0
// stops it. Without the flag every rank stopped the cluster at once and
// all but one failed.
func TestDownRank0OnlyStopsOnceUnderALauncher(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	for _, env := range [][]string{
		{"PMI_RANK=1", "PMI_SIZE=4"},
		{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4"},
		{"SLURM_PROCID=2", "SLURM_NTASKS=4"},
	} {
		r := e2e.Run(t, env, "down", "--tmpdir", tmpdir, "--rank0-only")
		if r.Err != nil || r.Stdout != "" || r.Stderr != "" {
			t.Fatalf("pdc down --rank0-only with %v: %v\nstdout:\n%s\nstderr:\n%s", env, r.Err, r.Stdout, r.Stderr)
		}
	}
	if out := e2e.MustRun(t, "ping", "--tmpdir", tmpdir); strings.Count(out, "pong") != 2 {
		t.Fatalf("the cluster should still run after the other ranks' down:\n%s", out)
	}
	r := e2e.Run(t, []string{"PMI_RANK=0", "PMI_SIZE=4"}, "down", "--tmpdir", tmpdir, "--rank0-only")
	if r.Err != nil || r.Stdout != "stopped 2 servers\n" {
		t.Fatalf("pdc down --rank0-only on rank 0: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	// A rank variable that is no rank is an error, not a reason to stop.
	r = e2e.Run(t, []string{"PMI_RANK=one"}, "down", "--tmpdir", tmpdir, "--rank0-only")
	if r.Err == nil || !strings.Contains(r.Stderr, `PMI_RANK="one" is not a rank`) {
		t.Fatalf("pdc down --rank0-only with PMI_RANK=one: %v\nstderr:\n%s", r.Err, r.Stderr)
	}
}
