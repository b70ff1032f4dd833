package commands_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// put and get of an object with an unlimited dim, without --region, say
// that it needs one: they refused "region [0+18446744073709551615, 0+3]:
// more than 2^64 elements", a region nobody gave.
func TestUnlimitedObjectNeedsARegion(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "c")
	e2e.MustRun(t, "obj", "create", "--tmpdir", tmpdir, "--cont", "c", "--dims", "unlimitedx3", "--type", "int32", "events")
	out := filepath.Join(t.TempDir(), "out")
	for _, args := range [][]string{{"get", "events", out}, {"put", "events", out}} {
		r := e2e.Run(t, nil, append(args, "--tmpdir", tmpdir)...)
		if r.Err == nil || !strings.Contains(r.Stderr, `object "events" has dims unlimitedx3`) || !strings.Contains(r.Stderr, "give --region") || strings.Contains(r.Stderr, "18446744073709551615") {
			t.Errorf("pdc %s of an unlimited object: %v, stderr %q; want it to ask for --region", args[0], r.Err, r.Stderr)
		}
	}
	if r := e2e.Run(t, nil, "get", "--region", "0:2,0:3", "--tmpdir", tmpdir, "events", out); r.Err != nil {
		t.Errorf("get --region of an unlimited object: %v\n%s", r.Err, r.Stderr)
	}
}
