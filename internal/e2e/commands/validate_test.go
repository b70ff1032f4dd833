package commands_test

import (
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// pdc refuses names, dims and tag values the servers would refuse, with a
// message naming what is wrong, and stores nothing (issue 25, case 9).
func TestCreateRefusesBadInput(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "c")
	e2e.MustRun(t, "obj", "create", "--tmpdir", tmpdir, "--cont", "c", "--dims", "4x4", "--type", "int64", "good")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"obj", "create", "--cont", "c", "--dims", "18446744073709551615x4", "max"},
			`dim 0 is 2^64-1, which would mean unlimited: write "unlimited"`},
		{[]string{"obj", "create", "--cont", "c", "--dims", "4611686018427387904x4", "--type", "int64", "huge"},
			"dims 4611686018427387904x4 of 8-byte elements pass 2^63 bytes"},
		{[]string{"obj", "create", "--cont", "c", "--dims", "unlimited x4", "x"}, "is not a size"},
		{[]string{"obj", "create", "--cont", "c", "--dims", "4x4", "--storage", "mmap", "s"}, `unknown storage mode "mmap"`},
		{[]string{"obj", "create", "--cont", "c", "--dims", "4x4", "two\nlines"}, `object name "two\nlines" has a control character (U+000A)`},
		{[]string{"obj", "create", "--cont", "c", "--dims", "4x4", "bad\xff"}, `object name "bad\xff" is not valid UTF-8`},
		{[]string{"cont", "create", "bell\a"}, `container name "bell\a" has a control character (U+0007)`},
		{[]string{"obj", "set-dims", "good", "4611686018427387904x4"}, "pass 2^63 bytes"},
		{[]string{"obj", "set-dims", "good", "18446744073709551615x4"}, "2^64-1"},
		{[]string{"obj", "tag", "put", "good", "tab\tkey", "v"}, `tag name "tab\tkey" has a control character (U+0009)`},
	} {
		r := e2e.Run(t, nil, append(tc.args, "--tmpdir", tmpdir)...)
		if r.Err == nil || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("pdc %q: err %v, stderr %q; want it to fail saying %q", tc.args, r.Err, r.Stderr, tc.want)
		}
	}
	// Nothing was stored: the listing has the one good object, on one line.
	ls := e2e.MustRun(t, "obj", "ls", "--tmpdir", tmpdir, "--cont", "c")
	if lines := strings.Split(strings.TrimSpace(ls), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "good ") {
		t.Fatalf("obj ls after refused creates:\n%s", ls)
	}
	if out := e2e.MustRun(t, "cont", "ls", "--tmpdir", tmpdir); strings.Contains(out, "bell") {
		t.Fatalf("a refused container is listed:\n%s", out)
	}
	if out := e2e.MustRun(t, "obj", "info", "--tmpdir", tmpdir, "good"); !strings.Contains(out, "dims:        4x4\n") {
		t.Fatalf("a refused set-dims changed the object:\n%s", out)
	}
}
