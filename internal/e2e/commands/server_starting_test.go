package commands_test

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// startServer starts pdc server with args in the background, killed when
// the test ends, and returns once its log says it listens: the line
// names its address.
func startServer(t *testing.T, args ...string) (cmd *exec.Cmd, listening string) {
	t.Helper()
	cmd = exec.Command(e2e.Bin(), append([]string{"server"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	drained := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-drained
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if line := lines.Text(); strings.Contains(line, "msg=listening") {
			// Drain the rest, so that the server never blocks on its
			// log; it ends when the server does. The line is taken
			// first: the next Scan reuses its buffer.
			go func() {
				defer close(drained)
				for lines.Scan() {
				}
			}()
			return cmd, line
		}
	}
	close(drained)
	t.Fatalf("pdc server %s ended without listening: %v", strings.Join(args, " "), lines.Err())
	return nil, ""
}

// pdc server for a rank whose server runs in a cluster still starting
// (not every rank has registered, so there is no server list yet) is
// refused at once, naming that server's address and pid. With no list to
// find it in, the second start took the running one for a predecessor
// still exiting, waited 10 s for it, and then named no address.
func TestServerForAStartingRankIsRefused(t *testing.T) {
	dir := t.TempDir()
	tmpdir, datadir := filepath.Join(dir, "tmp"), filepath.Join(dir, "data")
	common := []string{"--size", "3", "--tmpdir", tmpdir, "--datadir", datadir, "--startup-timeout", "2m"}
	startServer(t, append([]string{"--rank", "0"}, common...)...)
	r1, listening := startServer(t, append([]string{"--rank", "1"}, common...)...)
	addr := ""
	for _, f := range strings.Fields(listening) {
		if a, ok := strings.CutPrefix(f, "addr="); ok {
			addr = a
		}
	}
	if addr == "" {
		t.Fatalf("no address in %q", listening)
	}

	r := e2e.Run(t, nil, append([]string{"server", "--rank", "1"}, common...)...)
	if r.Err == nil {
		t.Fatal("a second server of a starting rank started")
	}
	for _, want := range []string{"rank 1:", addr, fmt.Sprintf("pid %d", r1.Process.Pid), "already running", "starting"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.Stderr)
		}
	}
	if strings.Contains(r.Stderr, "waiting for the previous server") {
		t.Errorf("it waited for a server that answers to exit:\n%s", r.Stderr)
	}
}

// A rank started before rank 0 (launchers start ranks in any order) says
// once what it waits for and under which flag's deadline; when that
// passes, its error names the flag, and the start leaves nothing behind.
func TestServerWaitingForRank0SaysSo(t *testing.T) {
	dir := t.TempDir()
	tmpdir, datadir := filepath.Join(dir, "tmp"), filepath.Join(dir, "data")
	r := e2e.Run(t, nil, "server", "--rank", "1", "--size", "2", "--tmpdir", tmpdir, "--datadir", datadir, "--startup-timeout", "1s")
	if r.Err == nil {
		t.Fatal("rank 1 started without rank 0")
	}
	if n := strings.Count(r.Stderr, "waiting for rank 0"); n != 1 {
		t.Errorf("stderr says %d times that it waits for rank 0, want once:\n%s", n, r.Stderr)
	}
	for _, want := range []string{"pdc_rank0", "--startup-timeout"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.Stderr)
		}
	}
	if _, err := os.Stat(datadir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the failed start left data dir %s behind: %v", datadir, err)
	}
}
