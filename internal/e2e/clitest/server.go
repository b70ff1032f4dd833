package clitest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/e2e"
)

// RestartServer starts rank of a cluster of size again, in place (it
// rejoins the running cluster), with extra flags, and returns once it
// serves. It is killed when the test ends, if pdc down has not stopped it.
func RestartServer(t *testing.T, ctx context.Context, tmpdir, datadir string, rank, size int, extra ...string) {
	t.Helper()
	logPath := filepath.Join(tmpdir, "logs", fmt.Sprintf("server-%d-restarted.log", rank))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e2e.Bin(), append([]string{"server", "--rank", fmt.Sprint(rank), "--size", fmt.Sprint(size), "--tmpdir", tmpdir, "--datadir", datadir}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "serving") {
			return
		}
		select {
		case <-tick.C:
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("the restarted server of rank %d exited:\n%s", rank, b)
		case <-ctx.Done():
			t.Fatalf("the restarted server of rank %d never said it was serving", rank)
		}
	}
}
