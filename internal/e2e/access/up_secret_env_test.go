package access_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
)

// The servers pdc up starts (and restarts) use the secret pdc up chose,
// whatever $PDC_SECRET_FILE the shell that restarts them has: a
// $PDC_SECRET_FILE set for pdc up is the cluster's secret, and without
// one the secret it makes in the tmpdir is.
func TestUpServersKeepTheirSecretWhateverTheEnvironment(t *testing.T) {
	mine := filepath.Join(t.TempDir(), "my_secret")
	if err := os.WriteFile(mine, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withMine := []string{client.EnvSecretFile + "=" + mine}
	for _, c := range []struct {
		name           string
		upEnv, restEnv []string // pdc up's, pdc up --restart-dead's
	}{
		{"$PDC_SECRET_FILE for pdc up", withMine, nil},
		{"the tmpdir's secret", nil, withMine},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmpdir := filepath.Join(t.TempDir(), "tmp")
			r := e2e.Run(t, c.upEnv, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", filepath.Join(t.TempDir(), "data"))
			t.Cleanup(func() {
				_ = e2e.Run(t, c.upEnv, "down", "--tmpdir", tmpdir, "--timeout", "10s")
				e2e.Cleanup(t, tmpdir)
			})
			if r.Err != nil {
				t.Fatalf("up: %v\n%s", r.Err, r.Stderr)
			}
			if r := e2e.Run(t, c.upEnv, "status", "--tmpdir", tmpdir); r.Err != nil {
				t.Fatalf("status as pdc up was run: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
			}
			list, err := cluster.ReadList(tmpdir)
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(list.Servers[1].PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), list.Servers[1].PID); err != nil {
				t.Fatal(err)
			}
			r = e2e.Run(t, c.restEnv, "up", "--restart-dead", "--tmpdir", tmpdir, "--timeout", "20s")
			if r.Err != nil || !strings.Contains(r.Stdout, "restarted 1 of 2") {
				t.Fatalf("up --restart-dead in another environment: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
			}
			if r := e2e.Run(t, c.upEnv, "status", "--tmpdir", tmpdir); r.Err != nil {
				t.Fatalf("status after the restart: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
			}
		})
	}
}
