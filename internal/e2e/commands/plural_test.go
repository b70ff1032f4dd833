package commands_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// oneOfMany finds a count of one with a plural noun: "added 1 objects".
var oneOfMany = regexp.MustCompile(`(^|[^0-9.])1 (\w+ )?(servers|objects|containers|files|blocks|records|bytes|values|ranks|elements|particles)\b`)

// What the commands say of one thing is singular: they said "1 servers
// up", "added 1 objects to container c2", "stopped 1 servers".
func TestCommandsSayOneInTheSingular(t *testing.T) {
	tmpdir := filepath.Join(t.TempDir(), "tmp")
	datadir := filepath.Join(t.TempDir(), "data")
	var said []string
	run := func(want string, args ...string) {
		t.Helper()
		r := e2e.Run(t, nil, args...)
		out := r.Stdout + r.Stderr
		said = append(said, out)
		if !strings.Contains(out, want) {
			t.Errorf("pdc %s: %v; does not say %q:\n%s", strings.Join(args, " "), r.Err, want, out)
		}
	}
	run("1 server up;", "up", "-n", "1", "--tmpdir", tmpdir, "--datadir", datadir)
	t.Cleanup(func() { e2e.Cleanup(t, tmpdir) })
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "c1", "c2")
	e2e.MustRun(t, "obj", "create", "--tmpdir", tmpdir, "--cont", "c1", "--dims", "4", "--type", "int64", "o1")
	run("added 1 object to container c2", "cont", "add", "--tmpdir", tmpdir, "c2", "o1")
	run("removed 1 object from container c2", "cont", "remove", "--tmpdir", tmpdir, "c2", "o1")
	run("its 1 server answers; none restarted", "up", "--restart-dead", "--tmpdir", tmpdir)
	run("(its 1 server answers; ", "up", "-n", "1", "--tmpdir", tmpdir, "--datadir", datadir) // refused: it runs
	e2e.MustRun(t, "cont", "create", "--transient", "--tmpdir", tmpdir, "tr")
	run("deleted 1 transient container\n", "down", "--tmpdir", tmpdir)
	for _, out := range said {
		for _, line := range strings.Split(out, "\n") {
			if m := oneOfMany.FindString(line); m != "" {
				t.Errorf("%q says %q", line, strings.TrimSpace(m))
			}
		}
	}
	if out := strings.Join(said, ""); !strings.Contains(out, "stopped 1 server\n") {
		t.Errorf("pdc down of one server does not say %q:\n%s", "stopped 1 server", out)
	}
}
