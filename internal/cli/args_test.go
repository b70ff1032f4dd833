package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// badArgs runs each command line, with no cluster in the tmpdir, and
// wants a usage error (exit 2) whose message holds want: refused by the
// command line itself, before any cluster is asked (which would fail,
// exit 1, "no server list").
func badArgs(t *testing.T, cases []struct {
	args []string
	want string
}) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("PDC_TMPDIR", dir)
	t.Setenv("PDC_DATA_LOC", dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range cases {
		var out, errb bytes.Buffer
		err := Run(ctx, c.args, &out, &errb)
		if err == nil || ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("pdc %s: %v (exit %d); want a usage error (exit 2) naming %q", strings.Join(c.args, " "), err, ExitCode(err), c.want)
		}
	}
}

// A time step or user id past 2^32-1 is refused: wrapped, it named
// another time step's object (pdc obj rm --time-step 4294967296 x
// deleted x of time step 0).
func TestTimeStepAndUserIDInRange(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"obj", "rm", "--time-step", "4294967296", "x"}, "-time-step"},
		{[]string{"obj", "info", "--time-step", "-1", "x"}, "from 0 to 4294967295"},
		{[]string{"obj", "tag", "ls", "--time-step", "99999999999", "x"}, "-time-step"},
		{[]string{"obj", "create", "--cont", "c", "--dims", "4", "--time-step", "4294967297", "x"}, "-time-step"},
		{[]string{"obj", "create", "--cont", "c", "--dims", "4", "--user-id", "99999999999", "x"}, "-user-id"},
	})
}

// A command that takes no arguments refuses them rather than ignore
// them: pdc status 1 showed every server, pdc obj ls --cont c x every
// object.
func TestNoArgsRefused(t *testing.T) {
	badArgs(t, []struct {
		args []string
		want string
	}{
		{[]string{"status", "1"}, `status: unexpected argument "1"`},
		{[]string{"ping", "2"}, `ping: unexpected argument "2"`},
		{[]string{"checkpoint", "now"}, `checkpoint: unexpected argument "now"`},
		{[]string{"version", "x"}, `version: unexpected argument "x"`},
		{[]string{"cont", "ls", "results"}, `cont ls: unexpected argument "results"`},
		{[]string{"obj", "ls", "--cont", "results", "temperature"}, `obj ls: unexpected argument "temperature"`},
	})
}
