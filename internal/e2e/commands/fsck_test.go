package commands_test

import (
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// fsck --no-verify reads no block, so it does not say that none is
// corrupt: it said "clean: ..., no corrupt blocks" all the same.
func TestFsckNoVerifyDoesNotVouchForBlocks(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	if out := e2e.MustRun(t, "fsck", "--no-verify", "--tmpdir", tmpdir); strings.Contains(out, "no corrupt blocks") || !strings.Contains(out, "blocks not checked (--no-verify)") {
		t.Errorf("fsck --no-verify said:\n%s\nwant its blocks said to be not checked", out)
	}
	if out := e2e.MustRun(t, "fsck", "--tmpdir", tmpdir); !strings.Contains(out, "clean: 0 orphaned objects removed, no corrupt blocks") {
		t.Errorf("fsck said:\n%s", out)
	}
}
