package commands_test

import (
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// The command line as a new user meets it (issue 32): help of every kind
// without a cluster, and on one small cluster, commands that say what
// they did or will not do.
func TestCommandLine(t *testing.T) {
	// The cases of the issue, as processes; every other command and verb
	// is walked in process by internal/cli's TestHelpEverywhere.
	t.Run("help without a cluster", func(t *testing.T) {
		env := []string{"PDC_TMPDIR=" + t.TempDir()}
		for _, tc := range []struct {
			args    []string
			want    []string // in stdout
			notWant string
		}{
			{[]string{"cont", "-h"}, []string{"Usage: pdc cont VERB", "create", "Examples:"}, ""},
			{[]string{"obj", "-h"}, []string{"Usage: pdc obj VERB", "set-dims"}, ""},
			{[]string{"stage", "-h"}, []string{"Usage: pdc stage VERB", "consume"}, ""},
			{[]string{"obj", "tag", "-h"}, []string{"Usage: pdc obj tag put NAME KEY VALUE", "--time-step"}, "--dims"},
			{[]string{"bench", "--help"}, []string{"Usage: pdc bench WHAT", "rpc", "preload", "soak", "compare"}, ""},
		} {
			r := e2e.Run(t, env, tc.args...)
			if r.Err != nil || r.Stderr != "" {
				t.Errorf("pdc %s: %v, stderr %q; want help, exit 0", strings.Join(tc.args, " "), r.Err, r.Stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Stdout, w) {
					t.Errorf("pdc %s: no %q in:\n%s", strings.Join(tc.args, " "), w, r.Stdout)
				}
			}
			if tc.notWant != "" && strings.Contains(r.Stdout, tc.notWant) {
				t.Errorf("pdc %s: %q in:\n%s", strings.Join(tc.args, " "), tc.notWant, r.Stdout)
			}
		}
	})

	tmpdir := e2e.Up(t, 2)
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "full", "empty")
	e2e.MustRun(t, "obj", "create", "--tmpdir", tmpdir, "--cont", "full", "--dims", "4x4", "--type", "int64", "a", "b")

	t.Run("cont rm needs --recursive", func(t *testing.T) {
		r := e2e.Run(t, nil, "cont", "rm", "--tmpdir", tmpdir, "empty", "full")
		if r.Err == nil || !strings.Contains(r.Stderr, "full holds 2 objects") || !strings.Contains(r.Stderr, "--recursive") {
			t.Fatalf("cont rm of a container of 2 objects: %v, stderr %q; want a refusal naming the count and --recursive", r.Err, r.Stderr)
		}
		// Nothing went, not even the empty one named first.
		if out := e2e.MustRun(t, "cont", "ls", "--tmpdir", tmpdir); !strings.Contains(out, "empty ") || !strings.Contains(out, "full ") {
			t.Fatalf("a refused cont rm deleted a container:\n%s", out)
		}
		e2e.MustRun(t, "obj", "info", "--tmpdir", tmpdir, "a")
		if out := e2e.MustRun(t, "cont", "rm", "--tmpdir", tmpdir, "empty"); out != "deleted container empty and its 0 objects\n" {
			t.Errorf("cont rm of an empty container said %q", out)
		}
	})

	t.Run("tag put says what it did", func(t *testing.T) {
		out := e2e.MustRun(t, "obj", "tag", "put", "--tmpdir", tmpdir, "a", "step", "12", "int64")
		if out != "put tag step = 12 (int64) on object a\n" {
			t.Errorf("obj tag put said %q", out)
		}
		out = e2e.MustRun(t, "cont", "tag", "put", "--tmpdir", tmpdir, "full", "units", "kelvin")
		if out != "put tag units = kelvin (string) on container full\n" {
			t.Errorf("cont tag put said %q", out)
		}
	})

	t.Run("cont rm --recursive", func(t *testing.T) {
		if out := e2e.MustRun(t, "cont", "rm", "--recursive", "--tmpdir", tmpdir, "full"); out != "deleted container full and its 2 objects\n" {
			t.Errorf("cont rm --recursive said %q", out)
		}
		if r := e2e.Run(t, nil, "obj", "info", "--tmpdir", tmpdir, "a"); r.Err == nil {
			t.Errorf("object a outlived its container's rm --recursive")
		}
	})
}
