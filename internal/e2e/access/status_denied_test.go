package access_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// A status whose secret the servers refuse shows them running but
// denying it, not down, and does not tell its user to restart them.
func TestStatusWithWrongSecretIsNotDown(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	wrong := filepath.Join(t.TempDir(), "wrong_secret")
	if err := os.WriteFile(wrong, []byte("not the cluster's secret at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e2e.Run(t, nil, "status", "--tmpdir", tmpdir, "--secret-file", wrong)
	if r.Err == nil {
		t.Fatalf("status with a wrong secret succeeded:\n%s", r.Stdout)
	}
	if strings.Contains(r.Stdout, "DOWN") || strings.Count(r.Stdout, "DENIED") != 2 {
		t.Errorf("status with a wrong secret should show both servers DENIED, none DOWN:\n%s", r.Stdout)
	}
	if strings.Contains(r.Stderr, "down") || strings.Contains(r.Stderr, "restart") || !strings.Contains(r.Stderr, "wrong cluster secret") {
		t.Errorf("status with a wrong secret should say the secret is wrong, not down or restart:\n%s", r.Stderr)
	}
}
