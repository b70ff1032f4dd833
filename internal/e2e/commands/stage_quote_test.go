package commands_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// The staging commands' errors quote the paths they name, on one line:
// run1\nout.dat printed bare split each message in two, the second line
// looking like a message of its own.
func TestStageErrorsQuotePaths(t *testing.T) {
	producer, consumer := t.TempDir(), t.TempDir()
	tmpdir := e2e.Up(t, 1, "--stage-producer-dir", producer)
	env := []string{"PDC_TMPDIR=" + tmpdir, "PDC_STAGE_PRODUCER_DIR=" + producer, "PDC_STAGE_CONSUMER_DIR=" + consumer}
	const rel = "run\n1/out.dat"
	outside := filepath.Join(t.TempDir(), "else\nwhere")
	if err := os.WriteFile(outside, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string // quoted in stderr
	}{
		{[]string{"stage", "produce", rel}, rel},                       // no such file
		{[]string{"stage", "produce", outside}, outside},               // outside the producer dir
		{[]string{"stage", "lookup", rel}, rel},                        // not produced (the server's message)
		{[]string{"stage", "consume", "--timeout", "100ms", rel}, rel}, // not produced in time
	} {
		r := e2e.Run(t, env, c.args...)
		if r.Err == nil {
			t.Errorf("pdc %q succeeded", c.args)
			continue
		}
		if !strings.Contains(r.Stderr, strconv.Quote(c.want)) {
			t.Errorf("pdc %q: stderr does not quote %q:\n%s", c.args, c.want, r.Stderr)
		}
		for _, line := range strings.Split(strings.TrimSuffix(r.Stderr, "\n"), "\n") {
			if !strings.HasPrefix(line, "pdc") {
				t.Errorf("pdc %q: a path split a message; line %q of stderr:\n%s", c.args, line, r.Stderr)
			}
		}
	}
}
