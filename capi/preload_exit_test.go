package capi_test

import (
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
	gcc := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	preload, fake, prog := filepath.Join(tmp, "libpdc_preload.so"), filepath.Join(tmp, "libfake.so"), filepath.Join(tmp, "preload_exit")
	// As capi/install.sh builds it.
	gcc("-std=c11", "-O2", "-U_FORTIFY_SOURCE", "-fno-delete-null-pointer-checks", "-Wno-nonnull-compare", "-fPIC", "-shared",
		"-fvisibility=hidden", "-Wall", "-Wextra", "-Werror", "-o", preload, "preload/pdc_preload.c", "-ldl", "-lpthread")
	gcc("-shared", "-fPIC", "-o", fake, "tests/preload_fakelib.c")
	gcc("-o", prog, "tests/preload_exit.c")
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
		if want := "out" + c.status + "\n"; c.produce && string(got) != want {
			t.Errorf("a program exiting with status %s produced %q; want %q", c.status, got, want)
		} else if !c.produce && len(got) != 0 {
			t.Errorf("a program exiting with status %s, its file still open, produced %q: a partial file staged as complete", c.status, got)
		}
	}
}
