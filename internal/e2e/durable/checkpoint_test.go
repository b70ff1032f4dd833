package durable_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/internal/vfs/vfstest"
	"github.com/pdcgo/pdc/region"
)

// A metadata store put back from a copy of a checkpoint that lost its
// empty files (pebble's markers; some copy tools drop empty files) is
// refused at start, naming what is missing. It was opened as an empty
// store: the cluster served with no object known, and pdc fsck --remove
// deleted the data of every object written before the checkpoint.
func TestRestoreFromIncompleteCheckpointRefused(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "saved", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{64, 64}
	whole := region.Shape(dims...)
	o, err := ct.CreateObject(ctx, "field", client.ObjectProps{Dims: dims, Type: region.Int32})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Write(ctx, whole, clitest.PatternOf(dims, whole)); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	id := o.ID()
	c.Close()
	if len(clitest.ObjectFiles(t, datadir, id)) == 0 {
		t.Fatal("the written object has no file")
	}

	out := e2e.MustRun(t, "checkpoint", "--tmpdir", tmpdir)
	line := strings.TrimSpace(out)
	cp := line[strings.LastIndex(line, ": ")+2:]
	if st, err := os.Stat(cp); err != nil || !st.IsDir() {
		t.Fatalf("pdc checkpoint said %q: %v", out, err)
	}
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)

	// Put the checkpoint back as the store, copied without its empty files.
	store := filepath.Join(datadir, "meta-0")
	if err := os.Rename(store, store+".old"); err != nil {
		t.Fatal(err)
	}
	copyNonEmpty(t, cp, store)

	r := e2e.Run(t, nil, "up", "-n", "1", "--tmpdir", tmpdir, "--datadir", datadir)
	if r.Err == nil {
		r := e2e.Run(t, nil, "fsck", "--remove", "--no-verify", "--tmpdir", tmpdir)
		t.Logf("pdc fsck --remove: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
		t.Fatalf("a cluster started on an incomplete copy of a checkpoint; pdc fsck --remove then left the object's files %v",
			clitest.ObjectFiles(t, datadir, id))
	}
	logs, _ := os.ReadFile(filepath.Join(tmpdir, "logs", "server-0.log"))
	said := r.Stdout + r.Stderr + string(logs)
	t.Logf("pdc up: %v\n%s", r.Err, r.Stderr)
	if !strings.Contains(said, "marker.manifest") || !strings.Contains(said, store) {
		t.Fatalf("pdc up on an incomplete store: %v; it does not name the store and the missing marker:\n%s", r.Err, said)
	}
	if len(clitest.ObjectFiles(t, datadir, id)) == 0 {
		t.Fatal("the refused start removed the object's files")
	}
}

// copyNonEmpty copies the files of dir src that are not empty into a new
// dir dst.
func copyNonEmpty(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(src, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			continue
		}
		if err := os.WriteFile(filepath.Join(dst, n.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// pdc checkpoint into a full disk fails at once, saying so, and the
// metadata server goes on taking writes; once space is freed a checkpoint
// works, and the cluster stops. The checkpoint's writes were retried as
// the store's own, forever: pdc checkpoint hung until its deadline, every
// metadata write meanwhile was refused, and pdc down hung on the
// checkpoint a server takes as it stops.
func TestCheckpointOnAFullDisk(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	datadir := e2e.ServerDataDir(t, tmpdir)
	small := vfstest.SmallFS(t, 1<<20)
	cpDir := filepath.Join(datadir, "checkpoints")
	if err := os.Symlink(small, cpDir); err != nil {
		t.Fatal(err)
	}
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "before")
	filler := vfstest.Fill(t, small, 0)

	start := time.Now()
	r := e2e.Run(t, nil, "checkpoint", "--tmpdir", tmpdir, "--timeout", "20s")
	took := time.Since(start)
	if r.Err == nil || took > 10*time.Second || !strings.Contains(r.Stderr, "no space left") || !strings.Contains(r.Stderr, cpDir) {
		t.Fatalf("pdc checkpoint into a full disk: %v after %v; want a quick failure saying the disk under %s is full:\n%s%s",
			r.Err, took.Round(time.Millisecond), cpDir, r.Stdout, r.Stderr)
	}
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "--timeout", "10s", "after")

	filler.Release(t)
	e2e.MustRun(t, "checkpoint", "--tmpdir", tmpdir)
	e2e.MustRun(t, "down", "--tmpdir", tmpdir, "--timeout", "20s")
}
