package capi_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// installed is libpdc installed once per test binary, as make capi does
// (capi/install.sh), for the tests that run C programs; TestMain removes
// dir.
var installed struct {
	once   sync.Once
	dir    string
	prefix string
	err    error
}

// needC skips the test with -short or when a tool the C tests need is
// missing, saying which.
func needC(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds libpdc.so and starts servers; skipped with -short")
	}
	for _, tool := range []string{"gcc", "pkg-config", "nm", "bash", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the C tests need %s, which is not installed (.ci/run installs gcc and pkg-config): %v", tool, err)
		}
	}
}

// testCtx is a context that ends 30 s before the test's deadline, leaving
// time to report what the programs printed.
func testCtx(t *testing.T) context.Context {
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		t.Cleanup(cancel)
	}
	return ctx
}

// installLibpdc returns the prefix libpdc is installed in, installing it
// on first use.
func installLibpdc(t *testing.T, ctx context.Context) string {
	t.Helper()
	installed.once.Do(func() {
		installed.dir, installed.err = os.MkdirTemp("", "libpdc-install-")
		if installed.err != nil {
			return
		}
		installed.prefix = filepath.Join(installed.dir, "capi")
		start := time.Now()
		out, err := script(ctx, "./install.sh", installed.prefix)
		t.Logf("./install.sh (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
		installed.err = err
	})
	if installed.err != nil {
		t.Fatalf("install libpdc: %v", installed.err)
	}
	return installed.prefix
}

// removeInstall removes what installLibpdc installed.
func removeInstall() {
	if installed.dir != "" {
		os.RemoveAll(installed.dir)
	}
}

// script runs a program to its end and returns what it printed.
func script(ctx context.Context, name string, args ...string) (string, error) {
	return scriptIn(ctx, "", name, args...)
}

// scriptIn is script with $TMPDIR set to tmp, if given.
func scriptIn(ctx context.Context, tmp, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if tmp != "" {
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	return out.String(), err
}

// TestCPrograms installs libpdc as make capi does (capi/install.sh) and
// runs the C tests against it (capi/tests/run.sh): C programs built with
// gcc through pkg-config, against real pdc server processes.
func TestCPrograms(t *testing.T) {
	needC(t)
	ctx := testCtx(t)
	prefix := installLibpdc(t, ctx)
	// A script killed at the test's deadline does not run its cleanup:
	// the servers it started, whose command lines name its $TMPDIR, are
	// killed when the test ends.
	tmp := t.TempDir()
	t.Cleanup(func() { killUnder(t, tmp) })
	start := time.Now()
	out, err := scriptIn(ctx, tmp, "./tests/run.sh", prefix)
	t.Logf("./tests/run.sh (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("./tests/run.sh: %v", err)
	}
}

// killUnder kills every process whose command line names dir.
func killUnder(t *testing.T, dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			t.Logf("killed process %d, left behind: %s", pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
}

// TestInstallForMPI installs libpdc for MPI (make capi PDC_MPI=1), as
// PDC's programs expect it: pdc_config.h defines ENABLE_MPI, so a program
// built with mpicc gets pdc_mpi.h's forms without -DENABLE_MPI. The
// install set it before building pdc_vpicio with plain cc, which then
// needed mpi.h, and failed.
func TestInstallForMPI(t *testing.T) {
	needLauncher(t, "mpicc")
	ctx := testCtx(t)
	dir := t.TempDir()
	prefix := filepath.Join(dir, "capi")
	cmd := exec.CommandContext(ctx, "./install.sh", prefix)
	cmd.Env = append(os.Environ(), "PDC_MPI=1")
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("PDC_MPI=1 ./install.sh: %v\n%s", err, out)
	}
	prog := filepath.Join(dir, "mpi.c")
	src := `#include "pdc.h"
#ifndef ENABLE_MPI
#error an install for MPI defines ENABLE_MPI in pdc_config.h
#endif
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    pdcid_t (*create)(pdcid_t, const char *, pdcid_t, int, MPI_Comm) = PDCobj_create_mpi;
    MPI_Finalize();
    return create == 0;
}
`
	if err := os.WriteFile(prog, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := script(ctx, "mpicc", "-std=c11", "-Wall", "-Werror", "-I"+filepath.Join(prefix, "include"), "-o", filepath.Join(dir, "mpi"), prog,
		"-L"+filepath.Join(prefix, "lib"), "-Wl,-rpath,"+filepath.Join(prefix, "lib"), "-lpdc"); err != nil {
		t.Fatalf("mpicc against the install for MPI: %v\n%s", err, out)
	}
}
