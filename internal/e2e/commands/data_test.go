package commands_test

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

// A pdc get that fails part way (here: the stored bytes fail their
// checksum) leaves the file it was to write as it was, and no temporary
// file next to it.
func TestGetFailureLeavesOutput(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	dir := t.TempDir()
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "files")
	e2e.MustRun(t, "obj", "create", "--tmpdir", tmpdir, "--cont", "files", "--dims", "256x256", "--type", "int32", "obj")
	whole := bytes.Repeat([]byte("0123456789abcdef"), 256*256*4/16)
	in := filepath.Join(dir, "in.bin")
	if err := os.WriteFile(in, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	e2e.MustRun(t, "put", "--tmpdir", tmpdir, "obj", in)
	out := filepath.Join(dir, "out.bin")
	e2e.MustRun(t, "get", "--tmpdir", tmpdir, "obj", out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, whole) {
		t.Fatal("get returned other bytes than put stored")
	}

	// Flip the last stored byte behind the server's back.
	files, _ := filepath.Glob(filepath.Join(e2e.ServerDataDir(t, tmpdir), "data-0", "*.off"))
	if len(files) != 1 {
		t.Fatalf("data files %v, want one", files)
	}
	f, err := os.OpenFile(files[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	var b [1]byte
	if _, err := f.ReadAt(b[:], st.Size()-1); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], st.Size()-1); err != nil {
		t.Fatal(err)
	}
	f.Close()

	old := []byte("what the user had here before")
	if err := os.WriteFile(out, old, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o600); err != nil {
		t.Fatal(err)
	}
	r := e2e.Run(t, nil, "get", "--tmpdir", tmpdir, "obj", out)
	if r.Err == nil || !strings.Contains(r.Stderr, "corrupt") {
		t.Fatalf("get of a corrupt object: err %v, stderr %q; want it to fail saying the data is corrupt", r.Err, r.Stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, old) {
		t.Fatalf("after a failed get the output holds %d bytes (%v), want the %d bytes it held before", len(got), err, len(old))
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
		t.Fatalf("the output's mode changed to %v", st.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("dir holds %d entries after a failed get, want in.bin and out.bin only", len(entries))
	}
	// A new file is not made at all by a failed get.
	if r := e2e.Run(t, nil, "get", "--tmpdir", tmpdir, "obj", filepath.Join(dir, "new.bin")); r.Err == nil {
		t.Fatal("get of a corrupt object succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "new.bin")); !os.IsNotExist(err) {
		t.Fatalf("a failed get made its output file: %v", err)
	}
}
