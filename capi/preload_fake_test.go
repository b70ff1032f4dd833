package capi_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A file still open at exit is produced by the interposer only if the
// program exits with status 0: a program that fails mid-output (exit(1)
// after half its file) must not have that half staged as complete. The
// interposer runs against a stand-in libpdc that logs its produces.
func TestPreloadExitStatus(t *testing.T) {
	needC(t)
	tmp := t.TempDir()
	preload, fake := buildPreload(t, tmp)
	prog := filepath.Join(tmp, "preload_exit")
	gcc(t, "-o", prog, "tests/preload_exit.c")
	prod := filepath.Join(tmp, "prod")
	if err := os.Mkdir(prod, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		status  string
		produce bool
	}{{"1", false}, {"0", true}, {"3", false}, {"256", true}} {
		log := filepath.Join(tmp, "log."+c.status)
		cmd := exec.Command(prog, filepath.Join(prod, "out"+c.status), c.status)
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+preload, "PDC_LIBPDC="+fake, "PRELOAD_LOG="+log,
			"PDC_STAGE_PRODUCER_DIR="+prod, "PDC_STAGE_CONSUMER_DIR=")
		out, err := cmd.CombinedOutput()
		// exit(256) is a status of 0 to the parent, and a success.
		if ee, ok := err.(*exec.ExitError); (c.produce && err != nil) || (!c.produce && (!ok || ee.ExitCode() == 0)) {
			t.Fatalf("exit %s: %v\n%s", c.status, err, out)
		}
		got, _ := os.ReadFile(log)
		if want := "produce out" + c.status + "\n"; c.produce && string(got) != want {
			t.Errorf("a program exiting with status %s produced %q; want %q", c.status, got, want)
		} else if !c.produce && len(got) != 0 {
			t.Errorf("a program exiting with status %s, its file still open, produced %q: a partial file staged as complete", c.status, got)
		}
	}
}

func gcc(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, out)
	}
}

// buildPreload builds libpdc_preload.so as capi/install.sh does, and the
// stand-in libpdc that logs its calls (tests/preload_fakelib.c), in dir.
func buildPreload(t *testing.T, dir string) (preload, fake string) {
	t.Helper()
	preload, fake = filepath.Join(dir, "libpdc_preload.so"), filepath.Join(dir, "libfake.so")
	gcc(t, "-std=c11", "-O2", "-U_FORTIFY_SOURCE", "-fno-delete-null-pointer-checks", "-Wno-nonnull-compare", "-fPIC", "-shared",
		"-fvisibility=hidden", "-Wall", "-Wextra", "-Werror", "-o", preload, "preload/pdc_preload.c", "-ldl", "-lpthread")
	gcc(t, "-shared", "-fPIC", "-o", fake, "tests/preload_fakelib.c")
	return preload, fake
}

// A path with ".." after a symbolic link names what the kernel opens:
// the link's target's parent, not the link's directory. Cleaned lexically,
// cons/out/../f (out a link to a dir outside) was consumed as f, which may
// never be produced, while the program read another file; and
// other/in/../f (in a link into the consumer dir) read the consumer dir's
// f, an older copy perhaps, without consuming it.
func TestPreloadDotDotAfterSymlink(t *testing.T) {
	needC(t)
	tmp := t.TempDir()
	preload, fake := buildPreload(t, tmp)
	cons, other := filepath.Join(tmp, "cons"), filepath.Join(tmp, "other")
	for _, d := range []string{filepath.Join(cons, "x"), filepath.Join(other, "dir")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []struct{ path, data string }{{filepath.Join(cons, "f"), "cons"}, {filepath.Join(other, "f"), "other"}} {
		if err := os.WriteFile(f.path, []byte(f.data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []struct{ target, link string }{{filepath.Join(other, "dir"), filepath.Join(cons, "out")}, {filepath.Join(cons, "x"), filepath.Join(other, "in")}} {
		if err := os.Symlink(l.target, l.link); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range []struct {
		dir, path, read, log string
	}{
		// Not filepath.Join: it would clean the ".." lexically.
		{"/", cons + "/out/../f", "other", ""},
		{"/", other + "/in/../f", "cons", "consume f\n"},
		{"/", cons + "/x/../f", "cons", "consume f\n"},
		{filepath.Join(cons, "x"), "../f", "cons", "consume f\n"},
		{filepath.Join(cons, "out"), "../f", "other", ""},
		{"/", cons + "/x/../x/../f", "cons", "consume f\n"},
	} {
		log := filepath.Join(tmp, fmt.Sprintf("log.%d", i))
		cmd := exec.Command("cat", c.path)
		cmd.Dir = c.dir
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+preload, "PDC_LIBPDC="+fake, "PRELOAD_LOG="+log,
			"PDC_STAGE_CONSUMER_DIR="+cons, "PDC_STAGE_PRODUCER_DIR=")
		out, err := cmd.Output()
		got, _ := os.ReadFile(log)
		if err != nil || string(out) != c.read || string(got) != c.log {
			t.Errorf("cat %s in %s: read %q (%v), want %q; staging calls %q, want %q", c.path, c.dir, out, err, c.read, got, c.log)
		}
	}
}
