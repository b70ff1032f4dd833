package access_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

// Everything a cluster writes (server list, secret, logs, metadata,
// checkpoints, region data, moved slots, staged copies) is private to its
// user: files 0600 and directories 0700 whatever the umask, since data
// and metadata are the cluster's to give out, not the machine's (issue 26).
func TestFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022) // the common umask: it would leave 0644 and 0755
	t.Cleanup(func() { syscall.Umask(old) })
	base := t.TempDir()
	tmpdir := filepath.Join(base, "tmp")
	datadir := filepath.Join(base, "data")
	cons := filepath.Join(base, "cons-b")
	up := func(n int, hosts string) {
		e2e.MustRun(t, "up", "-n", string(rune('0'+n)), "--tmpdir", tmpdir, "--datadir", filepath.Join(datadir, "{host}"),
			"--hosts", hosts, "--stage-producer-dir", filepath.Join(base, "prod-{host}"))
	}
	up(2, "node-a,node-b")
	t.Cleanup(func() { e2e.Cleanup(t, tmpdir) })
	in := filepath.Join(base, "in")
	if err := os.WriteFile(in, []byte(strings.Repeat("x", 4096)), 0o600); err != nil {
		t.Fatal(err)
	}
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "c")
	for _, p := range []string{"object-static", "region-static", "region-dynamic"} {
		e2e.MustRun(t, "obj", "create", "--tmpdir", tmpdir, "--cont", "c", "--dims", "4096", "--type", "uint8", "--partition", p, p)
		e2e.MustRun(t, "put", "--tmpdir", tmpdir, p, in)
		e2e.MustRun(t, "obj", "tag", "put", "--tmpdir", tmpdir, p, "kind", p)
	}
	e2e.MustRun(t, "checkpoint", "--tmpdir", tmpdir)
	if err := os.WriteFile(filepath.Join(base, "prod-node-a", "f"), []byte("staged"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PDC_STAGE_PRODUCER_DIR=", "PDC_STAGE_CONSUMER_DIR=", "PDC_STAGE_SHARED=", "PDC_DTL="}
	if r := e2e.Run(t, append(env, "PDC_HOST=node-a"), "stage", "produce", "--tmpdir", tmpdir, "--producer-dir", filepath.Join(base, "prod-node-a"), "f"); r.Err != nil {
		t.Fatalf("produce: %v\n%s", r.Err, r.Stderr)
	}
	if r := e2e.Run(t, append(env, "PDC_HOST=node-b"), "stage", "consume", "--tmpdir", tmpdir, "--consumer-dir", cons, "f"); r.Err != nil {
		t.Fatalf("consume: %v\n%s", r.Err, r.Stderr)
	}
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	// A third node: slots move to its data dir over the network.
	up(3, "node-a,node-b,node-c")
	for _, p := range []string{"object-static", "region-static", "region-dynamic"} {
		if got := e2e.MustRun(t, "get", "--tmpdir", tmpdir, p, "-"); got != strings.Repeat("x", 4096) {
			t.Fatalf("%s read back %d bytes", p, len(got))
		}
	}
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)

	var open []string
	files := 0
	for _, root := range []string{tmpdir, datadir, cons} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			st, err := d.Info()
			if err != nil {
				return err
			}
			if !st.IsDir() {
				files++
			}
			if st.Mode().Perm()&0o077 != 0 {
				open = append(open, st.Mode().String()+" "+path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 20 {
		t.Fatalf("walked only %d files; the workload wrote less than it should", files)
	}
	if len(open) > 0 {
		t.Fatalf("%d of the cluster's files and dirs are open to group or others:\n%s", len(open), strings.Join(open, "\n"))
	}
}
