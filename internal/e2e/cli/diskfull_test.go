package cli_test

import (
	"bytes"
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
	const cols = 256
	dims := []uint64{4096, cols}
	type stored struct {
		o    *client.Object
		rows map[uint64]int32 // row -> the seed of its cells
		next uint64
	}
	var objs []*stored
	created := map[string]bool{}
	tags := map[string]string{} // object name -> value of tag "t"
	staged := map[string][]byte{}
	faults := map[string]int{}
	acked := map[string]int{}

	// checkErr accepts a failure only as a full disk, named clearly.
	checkErr := func(kind string, err error) {
		t.Helper()
		if !errors.Is(err, pdc.ErrNoSpace) {
			t.Fatalf("%s on a full disk: %v; want pdc.ErrNoSpace", kind, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "server rank") || !strings.Contains(msg, root) {
			t.Fatalf("%s on a full disk: %q does not name the server and a file under %s", kind, msg, root)
		}
		if faults[kind] == 0 {
			t.Logf("first %s refused: %v", kind, err)
		}
		faults[kind]++
	}
	createBatch := func(prefix string, n int) error {
		specs := make([]client.ObjectSpec, n)
		for i := range specs {
			specs[i] = client.ObjectSpec{Name: fmt.Sprintf("%s-%05d-%s", prefix, i, strings.Repeat("n", 150)),
				Props: client.ObjectProps{Dims: []uint64{16}, Type: region.Int32}}
		}
		if _, err := ct.CreateObjects(ctx, specs); err != nil {
			return err
		}
		for _, s := range specs {
			created[s.Name] = true
		}
		acked["create"] += n
		return nil
	}
	writeRow := func(s *stored) error {
		row, seed := s.next, int32(s.next*7+1)
		if err := s.o.Write(ctx, box([]uint64{row, 0}, []uint64{1, cols}), cells(cols, seed)); err != nil {
			s.next++ // a failed write's row is never checked
			return err
		}
		s.rows[row] = seed
		s.next++
		acked["region write"]++
		return nil
	}
	putTag := func(o *client.Object, v string) error {
		if err := o.PutTag(ctx, "t", client.String(v)); err != nil {
			return err
		}
		tags[o.Name()] = v
		acked["tag"]++
		return nil
	}
	produce := func(name string) error {
		data := bytes.Repeat([]byte(name), 100)
		if err := os.WriteFile(filepath.Join(prod, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Produce(ctx, name); err != nil {
			return err
		}
		staged[name] = data
		acked["produce"]++
		return nil
	}

	for _, p := range partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			o, err := ct.CreateObject(ctx, fmt.Sprintf("%s-%s", partName(p), st),
				client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p, Storage: st})
			if err != nil {
				t.Fatal(err)
			}
			s := &stored{o: o, rows: map[uint64]int32{}}
			objs = append(objs, s)
			for range 4 {
				if err := writeRow(s); err != nil {
					t.Fatal(err)
				}
			}
			if err := putTag(o, "before"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := createBatch("before", 100); err != nil {
		t.Fatal(err)
	}
	if err := produce("before.dat"); err != nil {
		t.Fatal(err)
	}

	filler := vfstest.Fill(t, root, 0)
	t.Logf("filled %d bytes; %d free", filler.Bytes(), vfstest.Free(t, root))
	// Drive every kind of write until each has failed for want of space
	// (the metadata log was reserved ahead, so metadata writes go on until
	// it is full).
	kinds := []string{"create", "tag", "region write", "produce"}
	for round := 0; round < 600; round++ {
		done := true
		for _, k := range kinds {
			done = done && faults[k] > 0
		}
		if done {
			break
		}
		if err := createBatch(fmt.Sprintf("r%03d", round), 200); err != nil {
			checkErr("create", err)
		}
		for _, s := range objs {
			if err := putTag(s.o, fmt.Sprintf("round %d", round)); err != nil {
				checkErr("tag", err)
			}
			if s.next < dims[0] {
				if err := writeRow(s); err != nil {
					checkErr("region write", err)
				}
			}
		}
		if err := produce(fmt.Sprintf("r%03d.dat", round)); err != nil {
			checkErr("produce", err)
		}
	}
	for _, k := range kinds {
		if faults[k] == 0 {
			t.Fatalf("no %s failed on the full disk (faults %v)", k, faults)
		}
	}
	t.Logf("on the full disk: faults %v, acknowledged %v", faults, acked)

	alive := func(when string) {
		t.Helper()
		for _, s := range list.Servers {
			if !e2e.Alive(s.PID) {
				t.Fatalf("%s: server %s (pid %d) died", when, s.Label(), s.PID)
			}
			if _, err := c.Ping(ctx, s.Rank); err != nil {
				t.Fatalf("%s: ping %s: %v", when, s.Label(), err)
			}
		}
	}
	check := func(c *client.Client, when string) int {
		t.Helper()
		n := 0
		for _, s := range objs {
			o, err := c.OpenObject(ctx, s.o.Name())
			if err != nil {
				t.Fatalf("%s: open %s: %v", when, s.o.Name(), err)
			}
			for row, seed := range s.rows {
				got := make([]byte, cols*4)
				if err := o.Read(ctx, box([]uint64{row, 0}, []uint64{1, cols}), got); err != nil {
					t.Fatalf("%s: read %s row %d: %v", when, s.o.Name(), row, err)
				}
				if !bytes.Equal(got, cells(cols, seed)) {
					t.Fatalf("%s: %s row %d differs from what was acknowledged", when, s.o.Name(), row)
				}
				n++
			}
			v, err := o.GetTag(ctx, "t")
			if err != nil || string(v.Value) != tags[s.o.Name()] {
				t.Fatalf("%s: tag of %s = %q, %v; want %q", when, s.o.Name(), v.Value, err, tags[s.o.Name()])
			}
			n++
		}
		names := make([]string, 0, len(created))
		for name := range created {
			names = append(names, name)
		}
		for i := 0; i < len(names); i += 500 {
			if _, err := c.OpenObjects(ctx, names[i:min(i+500, len(names))]); err != nil {
				t.Fatalf("%s: open created objects: %v", when, err)
			}
		}
		n += len(names)
		for name := range staged {
			if _, err := c.Lookup(ctx, name); err != nil {
				t.Fatalf("%s: lookup %s: %v", when, name, err)
			}
			n++
		}
		return n
	}
	alive("with the disk full")
	checked := check(c, "with the disk full")

	// Free the space: every kind of write works again, soon.
	filler.Release(t)
	deadline := time.Now().Add(time.Minute)
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
	again("create", func() error { return createBatch("after", 200) })
	for _, s := range objs {
		again("tag", func() error { return putTag(s.o, "after") })
		again("region write", func() error { return writeRow(s) })
	}
	again("produce", func() error { return produce("after.dat") })
	alive("after space was freed")
	checked += check(c, "after space was freed")

	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, upArgs...)
	checked += check(e2e.Connect(t, tmpdir, client.WithStageDirs(prod, "")), "after a restart")
	t.Logf("fault table: %v ENOSPC faults by kind; %d acknowledged operations checked, 0 lost, 0 server deaths", faults, checked)
}
