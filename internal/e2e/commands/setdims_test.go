package commands_test

import (
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// obj set-dims says what it did, as obj rm and tag put do: it printed
// nothing.
func TestSetDimsSaysWhatItDid(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "c")
	e2e.MustRun(t, "obj", "create", "--tmpdir", tmpdir, "--cont", "c", "--dims", "unlimitedx3", "--type", "int32", "events")
	if out := e2e.MustRun(t, "obj", "set-dims", "--tmpdir", tmpdir, "events", "4096x3"); out != "set dims of object events to 4096x3\n" {
		t.Errorf("obj set-dims said %q", out)
	}
}
