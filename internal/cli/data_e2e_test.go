package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// pdc put and pdc get move files in and out of objects' regions, with flags
// before or after the arguments, and say clearly what is wrong.
func TestPutGet(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	dir := t.TempDir()
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "files")
	e2e.MustRun(t, "obj", "create", "--tmpdir", tmpdir, "--cont", "files", "--dims", "3000x64", "--type", "int32",
		"--partition", "region-static", "--storage", "region", "big")
	whole := make([]byte, 3000*64*4)
	for i := range whole {
		whole[i] = byte(i*13 + i>>10)
	}
	in := filepath.Join(dir, "in.bin")
	if err := os.WriteFile(in, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	e2e.MustRun(t, "put", "--tmpdir", tmpdir, "big", in)
	out := filepath.Join(dir, "out.bin")
	e2e.MustRun(t, "get", "big", out, "--tmpdir", tmpdir, "--progress")
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, whole) {
		t.Fatal("get returned other bytes than put stored")
	}

	// A region: rows 10-12, columns 8-15, overwritten, then read to stdout.
	part := bytes.Repeat([]byte{0xAB}, 2*8*4)
	pf := filepath.Join(dir, "part.bin")
	if err := os.WriteFile(pf, part, 0o644); err != nil {
		t.Fatal(err)
	}
	e2e.MustRun(t, "put", "big", "--region", "10:12,8:16", pf, "--tmpdir", tmpdir)
	if s := e2e.MustRun(t, "get", "--tmpdir", tmpdir, "--region", "10:12,8:16", "big", "-"); s != string(part) {
		t.Fatalf("region read back %d bytes, not what was put", len(s))
	}
	if s := e2e.MustRun(t, "get", "--tmpdir", tmpdir, "--region", "10:11,0:8", "big", "-"); s != string(whole[10*256:10*256+32]) {
		t.Fatal("bytes next to the overwritten region changed")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"put", "big", in, "--region", "0:10,0:64"}, "holds 768000 bytes"},
		{[]string{"get", "big", out, "--region", "0:5000,0:64"}, "past the object's dim 3000"},
		{[]string{"get", "big", out, "--region", "5:5,0:64"}, "is empty"},
		{[]string{"get", "big", out, "--region", "0:1"}, "has 1 dimensions"},
		{[]string{"get", "nosuch", out}, "nosuch"},
		{[]string{"put", "big", filepath.Join(dir, "missing.bin")}, "missing.bin"},
		{[]string{"put", "big"}, "give an object and a file"},
	} {
		r := e2e.Run(t, nil, append(tc.args, "--tmpdir", tmpdir)...)
		if r.Err == nil || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("pdc %s: err %v, stderr %q; want an error saying %q", strings.Join(tc.args, " "), r.Err, r.Stderr, tc.want)
		}
	}
}
