package access_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// pdc up gives every server its --listen: a fixed port (or a Unix socket
// path) for several servers is refused at once, not found out when all
// but one fail to bind and the rest wait out the startup timeout.
func TestUpRefusesOneListenAddressForManyServers(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:7333", "unix:" + filepath.Join(t.TempDir(), "s.sock")} {
		tmpdir := filepath.Join(t.TempDir(), "tmp")
		r := e2e.Run(t, nil, "up", "-n", "2", "--listen", listen, "--tmpdir", tmpdir, "--datadir", filepath.Join(t.TempDir(), "data"), "--timeout", "5s")
		t.Cleanup(func() { e2e.Cleanup(t, tmpdir) })
		if r.Err == nil || !strings.Contains(r.Stderr, "cannot all bind") || strings.Contains(r.Stderr, "server rank") {
			t.Errorf("up -n 2 --listen %s: %v; want it refused before any server starts:\n%s", listen, r.Err, r.Stderr)
		}
	}
}
