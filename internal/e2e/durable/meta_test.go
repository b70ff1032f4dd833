package durable_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

func TestMetadataSurvivesKillAndResize(t *testing.T) {
	tmpdir := e2e.Up(t, 3)
	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	// The data dir up() used: find it from the server's own log line.
	datadir := e2e.ServerDataDir(t, tmpdir)

	const n = 240
	writer, out, _ := e2e.ClientProc(t, tmpdir, "writer", "PDC_E2E_N="+strconv.Itoa(n))
	acked, failed, serving := killAndRestartDuring(t, out, tmpdir, datadir, list, n)
	if err := writer.Wait(); err != nil {
		t.Fatalf("writer: %v", err)
	}
	// The restarted server may still be starting when a fast writer ends.
	select {
	case <-serving:
	case <-e2e.Ctx(t, 30*time.Second).Done():
		t.Fatal("the restarted server never said it was serving")
	}
	if len(acked) < n/2 {
		t.Fatalf("only %d of %d creates acknowledged", len(acked), n)
	}
	if len(failed) == 0 {
		t.Log("no create failed while a server was down (its objects may all have been late)")
	}
	// Every acknowledged create, with its tags, is there for another process.
	if bad := clitest.ReadAll(t, tmpdir, acked); len(bad) > 0 {
		t.Fatalf("%d acknowledged objects are missing or wrong after kill -9 and restart, e.g. %q", len(bad), bad[0])
	}

	// Restart the whole cluster with 5 servers: the metadata moves to its
	// new owners and is all still found.
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "5", "--tmpdir", tmpdir, "--datadir", datadir)
	if bad := clitest.ReadAll(t, tmpdir, acked); len(bad) > 0 {
		t.Fatalf("%d objects lost moving from 3 to 5 servers, e.g. %q", len(bad), bad[0])
	}
	// And back down to 2: stores of ranks 2-4 are adopted.
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", datadir)
	if bad := clitest.ReadAll(t, tmpdir, acked); len(bad) > 0 {
		t.Fatalf("%d objects lost moving from 5 to 2 servers, e.g. %q", len(bad), bad[0])
	}
}

// killAndRestartDuring reads the writer's output, n creates' outcomes:
// after a third of them it kills server 1, after half it restarts it in
// place. It returns the names acknowledged and failed, and a channel
// closed once the restarted server says it is serving.
func killAndRestartDuring(t *testing.T, out *bufio.Scanner, tmpdir, datadir string, list *cluster.List, n int) (acked, failed []string, serving chan struct{}) {
	t.Helper()
	killed, restarted := false, false
	var restartCmd *exec.Cmd
	serving = make(chan struct{})
	for out.Scan() {
		f := strings.Fields(out.Text())
		switch f[0] {
		case "ok":
			acked = append(acked, f[1])
		case "fail":
			failed = append(failed, f[1])
		}
		done := len(acked) + len(failed)
		if done == n/3 && !killed {
			// Kill a server mid-workload.
			killed = true
			if err := syscall.Kill(list.Servers[1].PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		if done == n/2 && !restarted {
			// Restart it in place; it rejoins the running cluster.
			restarted = true
			_ = cluster.WaitExit(e2e.Ctx(t, 10*time.Second), list.Servers[1].PID)
			restartCmd = exec.Command(e2e.Bin(), "server", "--rank", "1", "--size", "3", "--tmpdir", tmpdir, "--datadir", datadir)
			logf, _ := os.Create(filepath.Join(tmpdir, "logs", "server-1-restarted.log"))
			pr, pw := io.Pipe()
			restartCmd.Stdout, restartCmd.Stderr = io.MultiWriter(logf, pw), io.MultiWriter(logf, pw)
			if err := restartCmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func(serving chan struct{}) {
				// Closes serving once the server says so, and drains
				// its output until it exits.
				sc := bufio.NewScanner(pr)
				for sc.Scan() {
					if serving != nil && strings.Contains(sc.Text(), "serving") {
						close(serving)
						serving = nil
					}
				}
			}(serving)
			go func() { _ = restartCmd.Wait(); pw.Close() }()
			t.Cleanup(func() { _ = restartCmd.Process.Kill() })
		}
	}
	return acked, failed, serving
}

func TestMetadataBadInput(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	c := e2e.Connect(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	ct, created, err := c.CreateContainer(ctx, "box", client.Persistent)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	again, created, err := c.CreateContainer(ctx, "box", client.Persistent)
	if err != nil || created || again.ID() != ct.ID() {
		t.Fatalf("creating an existing container: %v, created %v, id %d vs %d", err, created, again.ID(), ct.ID())
	}
	good := client.ObjectProps{Dims: []uint64{4, 4}, Type: region.Float}

	expect := func(what string, err error, sentinel error, mention string) {
		t.Helper()
		expectErr(t, what, err, sentinel, mention)
	}
	checkBadCreates(ctx, t, c, ct, good)

	o, err := ct.CreateObject(ctx, "grid", client.ObjectProps{Dims: []uint64{client.Unlimited, 16}, Type: region.Double, AppName: "vpic"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ct.CreateObject(ctx, "grid", client.ObjectProps{Dims: []uint64{1}, Type: region.Double, AppName: "vpic"})
	expect("duplicate create", err, pdc.ErrExists, "grid")
	other, err := ct.CreateObject(ctx, "grid", client.ObjectProps{Dims: []uint64{1}, Type: region.Double, AppName: "other"})
	if err != nil {
		t.Fatalf("same name, other app: %v", err)
	}
	_, err = c.OpenObject(ctx, "grid")
	expect("ambiguous open", err, pdc.ErrInvalid, "app names")
	if got, err := c.OpenObject(ctx, "grid", client.WithIdentity(0, "other")); err != nil || got.ID() != other.ID() {
		t.Fatalf("open by identity: %v", err)
	}

	expect("set_dims to 0", o.SetDims(ctx, []uint64{0, 16}), pdc.ErrInvalid, "dim 0 is 0")
	expect("set_dims with another ndim", o.SetDims(ctx, []uint64{5}), pdc.ErrInvalid, "1 dims given, the object has 2")
	expect("oversized tag value", o.PutTag(ctx, "big", client.Bytes(make([]byte, 1<<16+1))), pdc.ErrTooLarge, "over the limit")
	expect("tag of nothing", o.DeleteTag(ctx, "nosuch"), pdc.ErrNotFound, "nosuch")
	_, err = o.GetTag(ctx, "nosuch")
	expect("get a missing tag", err, pdc.ErrNotFound, "nosuch")

	// Deleting a container whose objects are open is refused; after close
	// it deletes the container and its objects.
	expect("delete a container with open objects", ct.Delete(ctx), pdc.ErrInvalid, "open")
	for _, h := range []*client.Object{o, other} {
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Opens by this test above also hold objects open; close them too.
	c.Close()
	c = checkDeleteBoxAfterClose(ctx, t, tmpdir, good)

	// The servers kept serving through all of it.
	for rank := range 2 {
		if _, err := c.Ping(ctx, rank); err != nil {
			t.Fatal(err)
		}
	}
}

// expectErr checks err is sentinel and its text mentions what it is
// about.
func expectErr(t *testing.T, what string, err error, sentinel error, mention string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: got %v, want %v", what, err, sentinel)
		return
	}
	if !strings.Contains(err.Error(), mention) {
		t.Errorf("%s: error %q does not mention %q", what, err, mention)
	}
}

// checkBadCreates checks bad names and properties of containers and
// objects, and an open of a missing object, are refused, each saying why.
func checkBadCreates(ctx context.Context, t *testing.T, c *client.Client, ct *client.Container, good client.ObjectProps) {
	t.Helper()
	long := strings.Repeat("n", 1025)
	var err error
	_, _, err = c.CreateContainer(ctx, "", client.Persistent)
	expectErr(t, "empty container name", err, pdc.ErrInvalid, "empty")
	_, _, err = c.CreateContainer(ctx, long, client.Persistent)
	expectErr(t, "over-long container name", err, pdc.ErrInvalid, "over the limit")
	_, _, err = c.CreateContainer(ctx, "a\x00b", client.Persistent)
	expectErr(t, "NUL in container name", err, pdc.ErrInvalid, "NUL")
	_, err = ct.CreateObject(ctx, "", good)
	expectErr(t, "empty object name", err, pdc.ErrInvalid, "empty")
	_, err = ct.CreateObject(ctx, long, good)
	expectErr(t, "over-long object name", err, pdc.ErrInvalid, "over the limit")
	_, err = ct.CreateObject(ctx, "x\x00y", good)
	expectErr(t, "NUL in object name", err, pdc.ErrInvalid, "NUL")
	// No dims is a shapeless object, as PDC makes from an unset property:
	// metadata and tags, no data.
	shapeless, err := ct.CreateObject(ctx, "nodims", client.ObjectProps{Type: region.Unknown})
	if err != nil || len(shapeless.Info().Props.Dims) != 0 {
		t.Fatalf("a shapeless object: %v", err)
	}
	err = shapeless.Write(ctx, region.Box{Off: []uint64{0}, Size: []uint64{4}}, make([]byte, 4))
	expectErr(t, "a write to a shapeless object", err, pdc.ErrInvalid, "has no dims")
	_, err = ct.CreateObject(ctx, "typeless", client.ObjectProps{Dims: []uint64{4}, Type: region.Unknown})
	expectErr(t, "dims without a type", err, pdc.ErrInvalid, "unknown element type")
	_, err = ct.CreateObject(ctx, "toomany", client.ObjectProps{Dims: make([]uint64, 33), Type: region.Float})
	expectErr(t, "ndim 33", err, pdc.ErrInvalid, "33 dims")
	_, err = ct.CreateObject(ctx, "zerodim", client.ObjectProps{Dims: []uint64{4, 0}, Type: region.Float})
	expectErr(t, "zero dim", err, pdc.ErrInvalid, "dim 1 is 0")
	_, err = ct.CreateObject(ctx, "badtype", client.ObjectProps{Dims: []uint64{4}, Type: 99})
	expectErr(t, "unknown type", err, pdc.ErrInvalid, "element type 99")
	_, err = ct.CreateObject(ctx, "badpart", client.ObjectProps{Dims: []uint64{4}, Type: region.Float, Partition: 9})
	expectErr(t, "unknown partition", err, pdc.ErrInvalid, "partition strategy 9")
	_, err = c.OpenObject(ctx, "nosuchobject")
	expectErr(t, "open a missing object", err, pdc.ErrNotFound, "nosuchobject")
}

// checkDeleteBoxAfterClose, from a new client, deletes an object and
// checks a tag on it fails, then deletes container box, which now has no
// open objects, and checks it and its objects are gone. It returns the
// client.
func checkDeleteBoxAfterClose(ctx context.Context, t *testing.T, tmpdir string, good client.ObjectProps) *client.Client {
	t.Helper()
	c := e2e.Connect(t, tmpdir)
	ct, err := c.OpenContainer(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := ct.CreateObject(ctx, "tagged", good)
	if err != nil {
		t.Fatal(err)
	}
	if err := tagged.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	expectErr(t, "tag on a deleted object", tagged.PutTag(ctx, "k", client.String("v")), pdc.ErrNotFound, "tagged")
	if err := ct.Delete(ctx); err != nil {
		t.Fatalf("delete a container after closing its objects: %v", err)
	}
	_, err = c.OpenObject(ctx, "grid", client.WithIdentity(0, "vpic"))
	expectErr(t, "object of a deleted container", err, pdc.ErrNotFound, "grid")
	_, err = c.OpenContainer(ctx, "box")
	expectErr(t, "deleted container", err, pdc.ErrNotFound, "box")
	return c
}

func TestDimsAndTagsAcrossClients(t *testing.T) {
	tmpdir := e2e.Up(t, 3, "--durability", "sync")
	ctx := e2e.Ctx(t, time.Minute)
	a, b := e2e.Connect(t, tmpdir), e2e.Connect(t, tmpdir)
	ct, _, err := a.CreateContainer(ctx, "shared", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	oa, err := ct.CreateObject(ctx, "field", client.ObjectProps{Dims: []uint64{10, 10}, Type: region.Float})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := b.OpenObject(ctx, "field")
	if err != nil {
		t.Fatal(err)
	}
	checkDimsAndTagsSeen(ctx, t, oa, ob)
	// Container tags and listing.
	if err := ct.PutTag(ctx, "owner", client.String("alice")); err != nil {
		t.Fatal(err)
	}
	bc, err := b.OpenContainer(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := bc.GetTag(ctx, "owner"); err != nil || v.String() != "alice" {
		t.Fatalf("container tag: %v %v", v, err)
	}
	// Batched create and open.
	specs := make([]client.ObjectSpec, 500)
	names := make([]string, len(specs))
	for i := range specs {
		names[i] = fmt.Sprintf("batch%03d", i)
		specs[i] = client.ObjectSpec{Name: names[i], Props: client.ObjectProps{Dims: []uint64{8}, Type: region.Int}}
	}
	objs, err := ct.CreateObjects(ctx, specs)
	if err != nil || len(objs) != len(specs) {
		t.Fatal(err)
	}
	opened, err := b.OpenObjects(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	for i := range opened {
		if opened[i].ID() != objs[i].ID() {
			t.Fatalf("%s: opened id %d, created %d", names[i], opened[i].ID(), objs[i].ID())
		}
	}
	puts := make([]client.TagPut, len(objs))
	for i, o := range objs {
		puts[i] = client.TagPut{Object: o, Name: "i", Value: client.Int64(int64(i))}
	}
	if err := a.PutTags(ctx, puts); err != nil {
		t.Fatal(err)
	}
	if v, err := opened[321].GetTag(ctx, "i"); err != nil || v.String() != "321" {
		t.Fatalf("batched tag: %v %v", v, err)
	}
	list, err := bc.Objects(ctx)
	if err != nil || len(list) != 501 {
		t.Fatalf("container lists %d objects (%v), want 501", len(list), err)
	}
	checkTagsOnADeletedObject(ctx, t, a, objs)
	// A duplicate in a batch fails alone.
	checkDuplicateInBatch(ctx, t, ct, specs)
}

// checkDimsAndTagsSeen checks client b's handle ob sees the dims and the
// tags of every type that client a sets through oa, and a deleted tag is
// gone.
func checkDimsAndTagsSeen(ctx context.Context, t *testing.T, oa, ob *client.Object) {
	t.Helper()
	for _, dims := range [][]uint64{{20, 10}, {5, 3}} { // grow, then shrink
		if err := oa.SetDims(ctx, dims); err != nil {
			t.Fatal(err)
		}
		got, err := ob.Dims(ctx)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(dims) {
			t.Fatalf("other client sees dims %v (%v), want %v", got, err, dims)
		}
	}
	values := []client.TagValue{client.String("s"), client.Int32(-7), client.Int64(1 << 40), client.Uint64(1 << 63),
		client.Float32(1.5), client.Float64(-2.25), client.Bytes([]byte{0, 1, 2}), client.Typed(region.Int8, []byte{0xff})}
	for i, v := range values {
		if err := oa.PutTag(ctx, fmt.Sprint("t", i), v); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range values {
		got, err := ob.GetTag(ctx, fmt.Sprint("t", i))
		if err != nil || got.Type != v.Type || string(got.Value) != string(v.Value) {
			t.Fatalf("tag t%d: got %v %v, want %v", i, got, err, v)
		}
	}
	if err := oa.DeleteTag(ctx, "t0"); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.GetTag(ctx, "t0"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}

// checkTagsOnADeletedObject checks tags put in one batch on a deleted
// object and a live one fail, each of them, for the deleted one alone.
func checkTagsOnADeletedObject(ctx context.Context, t *testing.T, a *client.Client, objs []*client.Object) {
	t.Helper()
	gone, live := objs[0], objs[1]
	if err := gone.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	err := a.PutTags(ctx, []client.TagPut{
		{Object: gone, Name: "x", Value: client.Int64(1)},
		{Object: live, Name: "x", Value: client.Int64(2)},
		{Object: gone, Name: "y", Value: client.Int64(3)},
		{Object: live, Name: "y", Value: client.Int64(4)},
	})
	if !errors.Is(err, pdc.ErrNotFound) || strings.Count(err.Error(), `on object "batch000"`) != 2 || strings.Contains(err.Error(), "batch001") {
		t.Fatalf("tags on a deleted and a live object: %v; want two not-found errors, both on batch000", err)
	}
	for name, want := range map[string]string{"x": "2", "y": "4"} {
		if v, err := live.GetTag(ctx, name); err != nil || v.String() != want {
			t.Fatalf("tag %s of the live object: %v %v; want %s", name, v, err, want)
		}
	}
}

// checkDuplicateInBatch checks a batched create with an existing name
// fails for that object alone.
func checkDuplicateInBatch(ctx context.Context, t *testing.T, ct *client.Container, specs []client.ObjectSpec) {
	t.Helper()
	objs, err := ct.CreateObjects(ctx, []client.ObjectSpec{specs[1], {Name: "fresh", Props: specs[1].Props}})
	if !errors.Is(err, pdc.ErrExists) || objs[0] != nil || objs[1] == nil {
		t.Fatalf("batch with a duplicate: %v, %v", objs, err)
	}
}

func TestTransientContainersEndWithTheCluster(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	keep, _, err := c.CreateContainer(ctx, "keep", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	scratch, _, err := c.CreateContainer(ctx, "scratch", client.Transient)
	if err != nil {
		t.Fatal(err)
	}
	props := client.ObjectProps{Dims: []uint64{4}, Type: region.Int}
	if _, err := keep.CreateObject(ctx, "kept", props); err != nil {
		t.Fatal(err)
	}
	if _, err := scratch.CreateObject(ctx, "temp", props); err != nil { // left open
		t.Fatal(err)
	}
	if err := keep.SetLifetime(ctx, client.Persistent); err != nil { // PDCcont_persist
		t.Fatal(err)
	}
	c.Close()
	r := e2e.Run(t, nil, "down", "--tmpdir", tmpdir)
	if r.Err != nil || !strings.Contains(r.Stderr, "deleted 1 transient container") {
		t.Fatalf("down: %v\n%s", r.Err, r.Stderr)
	}
	e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", datadir)
	c = e2e.Connect(t, tmpdir)
	if _, err := c.OpenContainer(ctx, "scratch"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("transient container after restart: %v", err)
	}
	if _, err := c.OpenObject(ctx, "temp"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("object of a transient container after restart: %v", err)
	}
	if _, err := c.OpenObject(ctx, "kept"); err != nil {
		t.Fatalf("persistent object after restart: %v", err)
	}
}

// A metadata server killed with SIGKILL whose log (pdc.wal) then has a
// byte flipped in an early acknowledged record, as a bad sector would,
// refuses to start, naming the log and the record's offset, rather than
// serve a store without the acknowledged changes after it. Cut at that
// offset, as the error says an operator may, the log lets it start.
func TestDamagedMetadataLogIsRefused(t *testing.T) {
	for _, durability := range []string{"process", "sync"} {
		t.Run(durability, func(t *testing.T) {
			tmpdir := e2e.Up(t, 2, "--durability", durability)
			datadir := e2e.ServerDataDir(t, tmpdir)
			s := startSurvivor(t, tmpdir)
			for i := range 12 {
				s.mustWrite(fmt.Sprintf("obj-%d", i))
			}
			killRank(t, tmpdir, 1)
			walPath := filepath.Join(datadir, "meta-1", "pdc.wal")
			offs := walRecords(t, walPath)
			if len(offs) < 4 {
				t.Fatalf("%s holds %d records, want a few", walPath, len(offs))
			}
			bad := offs[1]
			flipByte(t, walPath, bad+20)

			ctx := e2e.Ctx(t, time.Minute)
			cmd := exec.CommandContext(ctx, e2e.Bin(), "server", "--rank", "1", "--size", "2", "--tmpdir", tmpdir, "--datadir", datadir, "--durability", durability)
			out, err := cmd.CombinedOutput()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("the server started with an acknowledged record of its log damaged (%v):\n%s", err, out)
			}
			for _, want := range []string{walPath, fmt.Sprintf("byte %d ", bad), "truncate -s"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("the refusal does not mention %q:\n%s", want, out)
				}
			}
			if strings.Contains(string(out), "serving") {
				t.Fatalf("the server served before it refused:\n%s", out)
			}

			if err := os.Truncate(walPath, int64(bad)); err != nil {
				t.Fatal(err)
			}
			clitest.RestartServer(t, ctx, tmpdir, datadir, 1, 2, "--durability", durability)
			s.mustWrite("after-the-cut")
		})
	}
}

// walRecords returns the offsets of the whole records of the metadata log
// at path (version 2: a 32-byte header, records of a 16-byte header and
// their payload).
func walRecords(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "PDCWAL2\n") {
		t.Fatalf("%s: header %q, want version 2", path, data[:min(len(data), 8)])
	}
	var offs []int
	for off := 32; off+16 <= len(data); {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		if n == 0 || off+16+n > len(data) {
			break
		}
		offs = append(offs, off)
		off += 16 + n
	}
	return offs
}

func flipByte(t *testing.T, path string, off int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, int64(off)); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20
	if _, err := f.WriteAt(b, int64(off)); err != nil {
		t.Fatal(err)
	}
}
