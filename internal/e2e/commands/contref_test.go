package commands_test

import (
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// A container whose members are added by reference is refused by cont rm
// (it holds objects), but the refusal does not say that --recursive
// deletes them: it deletes the objects created in the container, and the
// others stay in their own.
func TestContRmSaysReferencesStay(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	run := func(args ...string) string { return e2e.MustRun(t, append(args, "--tmpdir", tmpdir)...) }
	run("cont", "create", "home", "plots")
	run("obj", "create", "--cont", "home", "--dims", "4", "x")
	run("cont", "add", "plots", "x")
	r := e2e.Run(t, nil, "cont", "rm", "--tmpdir", tmpdir, "plots")
	if r.Err == nil || !strings.Contains(r.Stderr, "plots holds 1 object") || !strings.Contains(r.Stderr, "objects added by reference stay") {
		t.Errorf("cont rm of a container holding a reference: %v, stderr %q; want a refusal saying references stay", r.Err, r.Stderr)
	}
	if out := run("cont", "rm", "--recursive", "plots"); out != "deleted container plots and its 0 objects\n" {
		t.Errorf("cont rm --recursive plots said %q", out)
	}
	run("obj", "info", "x")
}
