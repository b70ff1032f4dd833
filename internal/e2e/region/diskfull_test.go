package region_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/internal/vfs/vfstest"
	"github.com/pdcgo/pdc/region"
)

// A full disk under real servers (issue 25, case 4): creates, tags, region
// writes of every partition and storage mode, and staging produces fail
// with pdc.ErrNoSpace naming the server and the file; no server dies;
// everything acknowledged before and during reads back; once space is
// freed every kind of write works again; and after a restart everything
// acknowledged is still there. The data dir is a real tmpfs, filled.
func TestFullDiskE2E(t *testing.T) {
	root := vfstest.SmallFS(t, 24<<20)
	base := t.TempDir()
	tmpdir, prod, datadir := filepath.Join(base, "tmp"), filepath.Join(base, "prod"), filepath.Join(root, "data")
	upArgs := []string{"up", "-n", "2", "--tmpdir", tmpdir, "--datadir", datadir, "--stage-producer-dir", prod}
	e2e.MustRun(t, upArgs...)
	t.Cleanup(func() { e2e.Cleanup(t, tmpdir) })
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e2e.Ctx(t, 5*time.Minute)
	c := e2e.Connect(t, tmpdir, client.WithStageDirs(prod, ""))
	ct, _, err := c.CreateContainer(ctx, "full", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}

	// What was acknowledged, to check; a write that failed is not in it.
	fd := &fullDisk{t: t, ctx: ctx, c: c, ct: ct, root: root, prod: prod, list: list,
		dims: []uint64{4096, fullDiskCols}, created: map[string]bool{}, tags: map[string]string{},
		staged: map[string][]byte{}, faults: map[string]int{}, acked: map[string]int{}}
	fd.writeBefore()

	filler := vfstest.Fill(t, root, 0)
	t.Logf("filled %d bytes; %d free", filler.Bytes(), vfstest.Free(t, root))
	fd.writeUntilEveryKindFails()
	t.Logf("on the full disk: faults %v, acknowledged %v", fd.faults, fd.acked)
	fd.alive("with the disk full")
	checked := fd.check(c, "with the disk full")

	// Free the space: every kind of write works again, soon.
	filler.Release(t)
	fd.writeAgain(time.Now().Add(time.Minute))
	fd.alive("after space was freed")
	checked += fd.check(c, "after space was freed")

	// What the servers took in while the disk was full (metadata in
	// memory, to be flushed) can need more than was freed: their
	// checkpoint at shutdown may fail for room. Everything acknowledged
	// is in their logs all the same, and comes back once an operator has
	// added space (a server that finds none refuses to start, saying so).
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	vfstest.GrowFS(t, root, 64<<20)
	e2e.MustRun(t, upArgs...)
	checked += fd.check(e2e.Connect(t, tmpdir, client.WithStageDirs(prod, "")), "after a restart")
	t.Logf("fault table: %v ENOSPC faults by kind; %d acknowledged operations checked, 0 lost, 0 server deaths", fd.faults, checked)
}

// fullDiskCols is the row length of TestFullDiskE2E's region objects.
const fullDiskCols = 256

// fullDiskObject is a region object of TestFullDiskE2E and the rows
// acknowledged.
type fullDiskObject struct {
	o    *client.Object
	rows map[uint64]int32 // row -> the seed of its cells
	next uint64
}

// fullDisk is the state of TestFullDiskE2E: its cluster, and what was
// acknowledged, to check; a write that failed is not in it.
type fullDisk struct {
	t       *testing.T
	ctx     context.Context
	c       *client.Client
	ct      *client.Container
	root    string
	prod    string
	list    *cluster.List
	dims    []uint64
	objs    []*fullDiskObject
	created map[string]bool
	tags    map[string]string // object name -> value of tag "t"
	staged  map[string][]byte
	faults  map[string]int
	acked   map[string]int
}

// checkErr accepts a failure only as a full disk, named clearly.
func (fd *fullDisk) checkErr(kind string, err error) {
	t := fd.t
	t.Helper()
	if !errors.Is(err, pdc.ErrNoSpace) {
		t.Fatalf("%s on a full disk: %v; want pdc.ErrNoSpace", kind, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "server rank") || !strings.Contains(msg, fd.root) {
		t.Fatalf("%s on a full disk: %q does not name the server and a file under %s", kind, msg, fd.root)
	}
	if fd.faults[kind] == 0 {
		t.Logf("first %s refused: %v", kind, err)
	}
	fd.faults[kind]++
}

func (fd *fullDisk) createBatch(prefix string, n int) error {
	specs := make([]client.ObjectSpec, n)
	for i := range specs {
		specs[i] = client.ObjectSpec{Name: fmt.Sprintf("%s-%05d-%s", prefix, i, strings.Repeat("n", 150)),
			Props: client.ObjectProps{Dims: []uint64{16}, Type: region.Int32}}
	}
	if _, err := fd.ct.CreateObjects(fd.ctx, specs); err != nil {
		return err
	}
	for _, s := range specs {
		fd.created[s.Name] = true
	}
	fd.acked["create"] += n
	return nil
}

func (fd *fullDisk) writeRow(s *fullDiskObject) error {
	const cols = fullDiskCols
	row, seed := s.next, int32(s.next*7+1)
	if err := s.o.Write(fd.ctx, clitest.Box([]uint64{row, 0}, []uint64{1, cols}), clitest.Cells(cols, seed)); err != nil {
		s.next++ // a failed write's row is never checked
		return err
	}
	s.rows[row] = seed
	s.next++
	fd.acked["region write"]++
	return nil
}

func (fd *fullDisk) putTag(o *client.Object, v string) error {
	if err := o.PutTag(fd.ctx, "t", client.String(v)); err != nil {
		return err
	}
	fd.tags[o.Name()] = v
	fd.acked["tag"]++
	return nil
}

func (fd *fullDisk) produce(name string) error {
	data := bytes.Repeat([]byte(name), 100)
	if err := os.WriteFile(filepath.Join(fd.prod, name), data, 0o644); err != nil {
		fd.t.Fatal(err)
	}
	if _, err := fd.c.Produce(fd.ctx, name); err != nil {
		return err
	}
	fd.staged[name] = data
	fd.acked["produce"]++
	return nil
}

// writeBefore creates an object of every partition and storage mode and
// writes each some rows and a tag, creates a batch of objects and
// produces a file, all before the disk fills.
func (fd *fullDisk) writeBefore() {
	t := fd.t
	t.Helper()
	for _, p := range clitest.Partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			o, err := fd.ct.CreateObject(fd.ctx, fmt.Sprintf("%s-%s", clitest.PartName(p), st),
				client.ObjectProps{Dims: fd.dims, Type: region.Int32, Partition: p, Storage: st})
			if err != nil {
				t.Fatal(err)
			}
			s := &fullDiskObject{o: o, rows: map[uint64]int32{}}
			fd.objs = append(fd.objs, s)
			for range 4 {
				if err := fd.writeRow(s); err != nil {
					t.Fatal(err)
				}
			}
			if err := fd.putTag(o, "before"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fd.createBatch("before", 100); err != nil {
		t.Fatal(err)
	}
	if err := fd.produce("before.dat"); err != nil {
		t.Fatal(err)
	}
}

// writeUntilEveryKindFails drives every kind of write until each has
// failed for want of space (the metadata log was reserved ahead, so
// metadata writes go on until it is full).
func (fd *fullDisk) writeUntilEveryKindFails() {
	t := fd.t
	t.Helper()
	kinds := []string{"create", "tag", "region write", "produce"}
	for round := 0; round < 600; round++ {
		done := true
		for _, k := range kinds {
			done = done && fd.faults[k] > 0
		}
		if done {
			break
		}
		if err := fd.createBatch(fmt.Sprintf("r%03d", round), 200); err != nil {
			fd.checkErr("create", err)
		}
		for _, s := range fd.objs {
			if err := fd.putTag(s.o, fmt.Sprintf("round %d", round)); err != nil {
				fd.checkErr("tag", err)
			}
			if s.next < fd.dims[0] {
				if err := fd.writeRow(s); err != nil {
					fd.checkErr("region write", err)
				}
			}
		}
		if err := fd.produce(fmt.Sprintf("r%03d.dat", round)); err != nil {
			fd.checkErr("produce", err)
		}
	}
	for _, k := range kinds {
		if fd.faults[k] == 0 {
			t.Fatalf("no %s failed on the full disk (faults %v)", k, fd.faults)
		}
	}
}

// writeAgain checks every kind of write works again once space is freed,
// retrying those refused for want of space until deadline.
func (fd *fullDisk) writeAgain(deadline time.Time) {
	t := fd.t
	t.Helper()
	again := func(kind string, op func() error) {
		t.Helper()
		for {
			err := op()
			if err == nil {
				return
			}
			if !errors.Is(err, pdc.ErrNoSpace) || time.Now().After(deadline) {
				t.Fatalf("%s after space was freed: %v", kind, err)
			}
		}
	}
	again("create", func() error { return fd.createBatch("after", 200) })
	for _, s := range fd.objs {
		again("tag", func() error { return fd.putTag(s.o, "after") })
		again("region write", func() error { return fd.writeRow(s) })
	}
	again("produce", func() error { return fd.produce("after.dat") })
}

// alive checks every server is alive and answers a ping.
func (fd *fullDisk) alive(when string) {
	t := fd.t
	t.Helper()
	for _, s := range fd.list.Servers {
		if !e2e.Alive(s.PID) {
			t.Fatalf("%s: server %s (pid %d) died", when, s.Label(), s.PID)
		}
		if _, err := fd.c.Ping(fd.ctx, s.Rank); err != nil {
			t.Fatalf("%s: ping %s: %v", when, s.Label(), err)
		}
	}
}

// check checks, through c, every acknowledged row, tag, create and
// produce is there, and returns how many it checked.
func (fd *fullDisk) check(c *client.Client, when string) int {
	t, ctx := fd.t, fd.ctx
	t.Helper()
	const cols = fullDiskCols
	n := 0
	for _, s := range fd.objs {
		o, err := c.OpenObject(ctx, s.o.Name())
		if err != nil {
			t.Fatalf("%s: open %s: %v", when, s.o.Name(), err)
		}
		for row, seed := range s.rows {
			got := make([]byte, cols*4)
			if err := o.Read(ctx, clitest.Box([]uint64{row, 0}, []uint64{1, cols}), got); err != nil {
				t.Fatalf("%s: read %s row %d: %v", when, s.o.Name(), row, err)
			}
			if !bytes.Equal(got, clitest.Cells(cols, seed)) {
				t.Fatalf("%s: %s row %d differs from what was acknowledged", when, s.o.Name(), row)
			}
			n++
		}
		v, err := o.GetTag(ctx, "t")
		if err != nil || string(v.Value) != fd.tags[s.o.Name()] {
			t.Fatalf("%s: tag of %s = %q, %v; want %q", when, s.o.Name(), v.Value, err, fd.tags[s.o.Name()])
		}
		n++
	}
	names := make([]string, 0, len(fd.created))
	for name := range fd.created {
		names = append(names, name)
	}
	for i := 0; i < len(names); i += 500 {
		if _, err := c.OpenObjects(ctx, names[i:min(i+500, len(names))]); err != nil {
			t.Fatalf("%s: open created objects: %v", when, err)
		}
	}
	n += len(names)
	for name := range fd.staged {
		if _, err := c.Lookup(ctx, name); err != nil {
			t.Fatalf("%s: lookup %s: %v", when, name, err)
		}
		n++
	}
	return n
}
