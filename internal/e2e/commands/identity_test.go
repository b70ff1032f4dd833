package commands_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// Objects of one name and time step that differ by user id or app name
// (obj create --user-id, --app) can be reached from the command line:
// the server refuses to guess between them ("open it with both"), and no
// verb but create took --user-id or --app, so they could be neither
// read, written, tagged nor deleted with pdc. Put and get take
// --time-step too: an object of another time step was out of their reach.
func TestObjectsSharingANameAreReachable(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	run := func(args ...string) string { return e2e.MustRun(t, append(args, "--tmpdir", tmpdir)...) }
	run("cont", "create", "c")
	run("obj", "create", "--cont", "c", "--dims", "4", "--type", "uint8", "--app", "a", "x")
	run("obj", "create", "--cont", "c", "--dims", "4", "--type", "uint8", "--app", "b", "--user-id", "7", "x")
	run("obj", "create", "--cont", "c", "--dims", "4", "--type", "uint8", "--time-step", "3", "x")

	if r := e2e.Run(t, nil, "obj", "info", "--tmpdir", tmpdir, "x"); r.Err == nil || !strings.Contains(r.Stderr, "2 objects have this name") {
		t.Fatalf("obj info of a name two objects share: %v, stderr %q; want a refusal", r.Err, r.Stderr)
	}
	if out := run("obj", "info", "--app", "b", "--user-id", "7", "x"); !strings.Contains(out, "app:         b\n") {
		t.Errorf("obj info --app b --user-id 7 x:\n%s", out)
	}
	if out := run("obj", "tag", "put", "--app", "a", "x", "k", "v"); !strings.Contains(out, "put tag k") {
		t.Errorf("obj tag put --app a: %q", out)
	}

	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.WriteFile(in, []byte("abcd"), 0o600); err != nil {
		t.Fatal(err)
	}
	run("put", "--app", "a", "x", in)
	run("get", "--app", "a", "x", out)
	if b, err := os.ReadFile(out); err != nil || string(b) != "abcd" {
		t.Errorf("get --app a x read %q, %v; want what put --app a x wrote", b, err)
	}
	run("put", "--time-step", "3", "x", in)
	run("get", "--time-step", "3", "x", out)
	if b, err := os.ReadFile(out); err != nil || string(b) != "abcd" {
		t.Errorf("get --time-step 3 x read %q, %v; want what put --time-step 3 x wrote", b, err)
	}

	if out := run("obj", "rm", "--app", "b", "--user-id", "7", "x"); out != "deleted object x\n" {
		t.Errorf("obj rm --app b --user-id 7 x said %q", out)
	}
	// One is left at time step 0: its name alone opens it, with its tag.
	if out := run("obj", "tag", "get", "x", "k"); out != "k\tstring\tv\n" {
		t.Errorf("obj tag get x k of the one left: %q", out)
	}
}
