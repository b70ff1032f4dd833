package durable_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// Object ids are never reused (record 0016): data servers keep what they
// know of an id, and a new object's unwritten data reads as zeros. A
// metadata store put back from a checkpoint (README: copy
// checkpoints/meta-<rank>/<time> back as meta-<rank>) hands out ids from
// the checkpoint's high-water mark again, so an object created after the
// checkpoint, whose data files the data servers still hold, could have
// its id handed out again: created again under the same name (a rerun),
// the new object read the old object's bytes instead of zeros. The start
// must hand out ids above every id whose data files the data servers
// hold.
func TestRestoredCheckpointReusesNoID(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	if _, _, err := c.CreateContainer(ctx, "run", client.Persistent); err != nil {
		t.Fatal(err)
	}
	c.Close()
	out := e2e.MustRun(t, "checkpoint", "--tmpdir", tmpdir)
	line := strings.TrimSpace(out)
	cp := line[strings.LastIndex(line, ": ")+2:]
	if st, err := os.Stat(cp); err != nil || !st.IsDir() {
		t.Fatalf("pdc checkpoint said %q: %v", out, err)
	}
	// A restart: the next ids come from the store's reserved mark, the
	// one the checkpoint has too.
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "1", "--tmpdir", tmpdir, "--datadir", datadir)

	dims := []uint64{32, 32}
	whole := region.Shape(dims...)
	create := func(when string) *client.Object {
		t.Helper()
		c := e2e.Connect(t, tmpdir)
		ct, err := c.OpenContainer(ctx, "run")
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		o, err := ct.CreateObject(ctx, "field", client.ObjectProps{Dims: dims, Type: region.Int32})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		return o
	}
	o := create("after the checkpoint")
	if err := o.Write(ctx, whole, clitest.PatternOf(dims, whole)); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	oldID := o.ID()
	if len(clitest.ObjectFiles(t, datadir, oldID)) == 0 {
		t.Fatal("the written object has no file")
	}
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)

	// Put the checkpoint back as the store.
	store := filepath.Join(datadir, "meta-0")
	if err := os.Rename(store, store+".old"); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("cp", "-a", cp, store).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, b)
	}
	e2e.MustRun(t, "up", "-n", "1", "--tmpdir", tmpdir, "--datadir", datadir)

	o = create("after the restore")
	t.Logf("object made after the checkpoint: id %#x; made again after the restore: id %#x", oldID, o.ID())
	got := make([]byte, whole.Volume()*4)
	if err := o.Read(ctx, whole, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, make([]byte, len(got))) {
		t.Fatalf("a new object (id %#x) reads the data of the object of id %#x, lost with the restore, instead of zeros", o.ID(), oldID)
	}
	if o.ID() == oldID {
		t.Fatalf("the restored store handed out id %#x again, whose data files the data server holds", oldID)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
