package durable_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// pdc checkpoint restore puts a named checkpoint back as the metadata
// stores of a stopped cluster: after it, the cluster holds exactly what
// it held at the checkpoint, tags and objects made or changed since are
// gone, and data written before it reads back. It refuses while the
// servers run, naming them. Restoring used to be a copy by hand of
// checkpoints/meta-R/TIME over meta-R, store by store, unchecked.
func TestCheckpointRestore(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 2*time.Minute)
	run := func(args ...string) string { return e2e.MustRun(t, append(args, "--tmpdir", tmpdir)...) }

	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "run", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{32, 32}
	whole := region.Shape(dims...)
	var kept []uint64
	for _, name := range []string{"a", "b", "c"} {
		o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Write(ctx, whole, clitest.PatternOf(dims, whole)); err != nil {
			t.Fatal(err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, o.ID())
	}
	c.Close()
	run("obj", "tag", "put", "a", "step", "1", "int64")
	run("cont", "tag", "put", "run", "state", "saved")

	out := run("checkpoint", "create", "--name", "saved")
	if !strings.HasPrefix(out, "checkpoint saved\n") || strings.Count(out, filepath.Join("checkpoints", "meta-0", "saved")) != 1 ||
		strings.Count(out, filepath.Join("checkpoints", "meta-1", "saved")) != 1 {
		t.Fatalf("pdc checkpoint create --name saved said:\n%s", out)
	}

	// Changes after the checkpoint, which the restore takes back.
	run("obj", "tag", "put", "a", "step", "2", "int64")
	run("obj", "tag", "put", "b", "late", "yes")
	run("cont", "tag", "put", "run", "state", "changed")
	run("obj", "create", "--cont", "run", "--dims", "8", "--type", "uint8", "later")
	run("cont", "create", "other")

	r := e2e.Run(t, nil, "checkpoint", "restore", "--datadir", datadir, "saved")
	t.Logf("pdc checkpoint restore on a running cluster: %v\n%s", r.Err, r.Stderr)
	if r.Err == nil || !strings.Contains(r.Stderr, "runs on it") || !strings.Contains(r.Stderr, "pid ") || !strings.Contains(r.Stderr, "pdc down --tmpdir") {
		t.Fatalf("pdc checkpoint restore on a running cluster: %v; want a refusal naming the running server:\n%s%s", r.Err, r.Stdout, r.Stderr)
	}

	run("down")
	out = e2e.MustRun(t, "checkpoint", "restore", "--datadir", datadir, "saved")
	t.Logf("pdc checkpoint restore:\n%s", out)
	for _, want := range []string{"rank 0: restored", "rank 1: restored", "meta-0" + ".before-restore-", "restored checkpoint saved into"} {
		if !strings.Contains(out, want) {
			t.Errorf("pdc checkpoint restore does not say %q:\n%s", want, out)
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(datadir, "*.restoring")); len(ents) > 0 {
		t.Errorf("the restore left its copies %v", ents)
	}
	e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", datadir)

	if got := run("obj", "tag", "get", "a", "step"); got != "step\tint64\t1\n" {
		t.Errorf("tag step of a after the restore: %q, want the checkpoint's 1", got)
	}
	if got := run("cont", "tag", "get", "run", "state"); got != "state\tstring\tsaved\n" {
		t.Errorf("container tag state after the restore: %q, want the checkpoint's", got)
	}
	for _, args := range [][]string{{"obj", "tag", "get", "b", "late"}, {"obj", "info", "later"}, {"cont", "info", "other"}} {
		r := e2e.Run(t, nil, append(args, "--tmpdir", tmpdir)...)
		if r.Err == nil || !strings.Contains(r.Stderr, "not found") {
			t.Errorf("pdc %s after the restore: %v, stdout %q; want not found, as at the checkpoint:\n%s", strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
		}
	}
	if got := run("obj", "ls", "--cont", "run"); strings.Count(got, "\n") != 4 {
		t.Errorf("objects of run after the restore, want a, b and c:\n%s", got)
	}
	c = e2e.Connect(t, tmpdir)
	for i, name := range []string{"a", "b", "c"} {
		o, err := c.OpenObject(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if o.ID() != kept[i] {
			t.Errorf("object %s has id %#x after the restore, %#x before", name, o.ID(), kept[i])
		}
		got := make([]byte, whole.Volume()*4)
		if err := o.Read(ctx, whole, got); err != nil {
			t.Fatalf("read %s after the restore: %v", name, err)
		}
		if !bytes.Equal(got, clitest.PatternOf(dims, whole)) {
			t.Errorf("object %s does not read what was written before the checkpoint", name)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.OpenObject(ctx, "later"); !errors.Is(err, pdc.ErrNotFound) {
		t.Errorf("open object later, made after the checkpoint: %v; want not found", err)
	}
}

// A checkpoint that fails its manifest's checks (a byte changed in one
// of its files) is refused before anything is touched: the error names
// the file, and the data dir is byte for byte as it was.
func TestCorruptCheckpointRestoreRefused(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	run := func(args ...string) string { return e2e.MustRun(t, append(args, "--tmpdir", tmpdir)...) }
	run("cont", "create", "run")
	run("obj", "create", "--cont", "run", "--dims", "8", "--type", "uint8", "a")
	run("obj", "tag", "put", "a", "k", "v")
	run("checkpoint", "create", "--name", "saved")
	run("obj", "tag", "put", "a", "k", "w")
	run("down")

	// Change one byte of the largest file of rank 1's checkpoint: a
	// copy of it, renamed over it, for the checkpoint's tables are hard
	// links to the store's.
	cp := filepath.Join(datadir, "checkpoints", "meta-1", "saved")
	ents, err := os.ReadDir(cp)
	if err != nil {
		t.Fatal(err)
	}
	victim, size := "", int64(-1)
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.Size() > size && e.Name() != "CHECKPOINT" {
			victim, size = e.Name(), info.Size()
		}
	}
	b, err := os.ReadFile(filepath.Join(cp, victim))
	if err != nil || len(b) == 0 {
		t.Fatalf("read %s: %v (%d bytes)", victim, err, len(b))
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(filepath.Join(cp, "x"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(cp, "x"), filepath.Join(cp, victim)); err != nil {
		t.Fatal(err)
	}

	before := tree(t, datadir)
	r := e2e.Run(t, nil, "checkpoint", "restore", "--datadir", datadir, "saved")
	if r.Err == nil {
		t.Fatalf("a corrupt checkpoint was restored:\n%s", r.Stdout)
	}
	t.Logf("pdc checkpoint restore of a corrupt checkpoint: %v\n%s", r.Err, r.Stderr)
	for _, want := range []string{victim, "crc", "stored data is corrupt"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.Stderr)
		}
	}
	if r.Stdout != "" {
		t.Errorf("the refused restore reported:\n%s", r.Stdout)
	}
	if after := tree(t, datadir); after != before {
		t.Fatalf("the refused restore changed the data dir:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The cluster starts on its stores, as they were.
	e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", datadir)
	if got := run("obj", "tag", "get", "a", "k"); got != "k\tstring\tw\n" {
		t.Errorf("tag k of a after the refused restore: %q, want the last one put", got)
	}
}

// tree describes every file and dir under dir: path, size and CRC.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var s strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			fmt.Fprintf(&s, "%s/\n", rel)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&s, "%s %d %08x\n", rel, len(b), crc32.ChecksumIEEE(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s.String()
}
