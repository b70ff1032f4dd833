package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
)

// An up whose servers started but do not answer (here: they report ready
// and serve nothing, and wrote no server list) fails, and stops the
// servers it started: pdc bench removes the tmpdir of an up that failed,
// so nothing could stop them later.
func TestFailedUpStopsItsServers(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	bin := filepath.Join(dir, "fake-pdc")
	script := "#!/bin/sh\necho $$ >> " + pids + "\necho 'ready 0 127.0.0.1:9' >&3\nexec 3>&-\nexec sleep 300\n"
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := cluster.LocalConfig{Binary: bin, N: 2, TmpDir: filepath.Join(dir, "tmp"), DataDir: filepath.Join(dir, "data"), Timeout: time.Minute}
	_, err := startAndPing(ctx, cfg)
	if err == nil {
		t.Fatal("up of servers that serve nothing succeeded")
	}
	b, rerr := os.ReadFile(pids)
	if rerr != nil {
		t.Fatal(rerr)
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		t.Fatalf("started %d servers (%q), want 2", len(fields), fields)
	}
	for _, f := range fields {
		pid, perr := strconv.Atoi(f)
		if perr != nil {
			t.Fatal(perr)
		}
		if processExists(pid) {
			t.Errorf("server process %d is still running after its up failed with: %v", pid, err)
		}
		t.Cleanup(func() {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				var ws syscall.WaitStatus
				for {
					if _, err := syscall.Wait4(pid, &ws, 0, nil); !errors.Is(err, syscall.EINTR) {
						break
					}
				}
			}
		})
	}
}
