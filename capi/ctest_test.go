package capi_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestCPrograms installs libpdc as make capi does (capi/install.sh) and
// runs the C tests against it (capi/tests/run.sh): C programs built with
// gcc through pkg-config, against real pdc server processes.
func TestCPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("builds libpdc.so and starts servers; skipped with -short")
	}
	for _, tool := range []string{"gcc", "pkg-config", "nm", "bash", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the C tests need %s, which is not installed (.ci/run installs gcc and pkg-config): %v", tool, err)
		}
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		// Leave time to report what the scripts printed.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		defer cancel()
	}
	prefix := filepath.Join(t.TempDir(), "capi")
	for _, args := range [][]string{{"./install.sh", prefix}, {"./tests/run.sh", prefix}} {
		start := time.Now()
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = 10 * time.Second
		err := cmd.Run()
		t.Logf("%s (%v):\n%s", args[0], time.Since(start).Round(time.Millisecond), out.String())
		if err != nil {
			t.Fatalf("%s: %v", args[0], err)
		}
	}
}
