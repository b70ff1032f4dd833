package slots_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
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
	"github.com/pdcgo/pdc/region"
)

var (
	partitions = []client.Partition{client.ObjectStatic, client.RegionStatic, client.RegionDynamic, client.RegionLocal}
	storages   = []client.Storage{client.StorageByOffset, client.StorageByRegion}
)

// model is the naive object: a row-major array of int32, zero where never
// written.
type model struct {
	dims []uint64
	data []byte
}

func (m *model) write(box region.Box, b []byte) {
	if err := region.Copy(m.data, region.Shape(m.dims...), b, box, box, 4); err != nil {
		panic(err)
	}
}

// cells returns n int32 values that name their index plus base.
func cells(n int, base int32) []byte {
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(base+int32(i)))
	}
	return b
}

// dataset is objects of every partition and storage mode, with what was
// acknowledged of each.
type dataset struct {
	objs   []*dobj
	writes int // acknowledged writes
}

type dobj struct {
	name string
	m    *model
}

// cluster is a local cluster restarted with various numbers of servers:
// with hosts set, each server reports a host of it and keeps its data dir
// under datadir/<host>, as servers on nodes with node-local disks do.
type testCluster struct {
	t       *testing.T
	tmpdir  string
	datadir string
}

func newCluster(t *testing.T) *testCluster {
	tc := &testCluster{t: t, tmpdir: filepath.Join(t.TempDir(), "tmp"), datadir: filepath.Join(t.TempDir(), "data")}
	t.Cleanup(func() { e2e.Cleanup(t, tc.tmpdir) })
	return tc
}

func (tc *testCluster) upArgs(n int, hosts string) []string {
	args := []string{"up", "-n", strconv.Itoa(n), "--tmpdir", tc.tmpdir}
	if hosts == "" {
		return append(args, "--datadir", tc.datadir)
	}
	return append(args, "--hosts", hosts, "--datadir", filepath.Join(tc.datadir, "{host}"))
}

// up starts the cluster with n servers (hosts: one per rank, or "" for one
// shared data dir).
func (tc *testCluster) up(n int, hosts string) {
	tc.t.Helper()
	e2e.MustRun(tc.t, tc.upArgs(n, hosts)...)
}

func (tc *testCluster) down() {
	tc.t.Helper()
	e2e.MustRun(tc.t, "down", "--tmpdir", tc.tmpdir)
}

func (tc *testCluster) connect() *client.Client { return e2e.Connect(tc.t, tc.tmpdir) }

// fill creates perKind objects of every partition and storage mode and
// writes them: the first half of the rows at once, the next quarter a few
// rows at a time, the last quarter never (it reads as zeros), then
// overwrites.
func fill(t *testing.T, ctx context.Context, c *client.Client, dims []uint64, perKind int, rng *rand.Rand) *dataset {
	t.Helper()
	ct, _, err := c.CreateContainer(ctx, "slots", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	d := &dataset{}
	for _, p := range partitions {
		for _, st := range storages {
			for k := range perKind {
				name := fmt.Sprintf("%d-%v-%d", p, st, k)
				o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p, Storage: st})
				if err != nil {
					t.Fatal(err)
				}
				do := &dobj{name: name, m: &model{dims: dims, data: make([]byte, 4*region.Shape(dims...).Volume())}}
				d.objs = append(d.objs, do)
				half := dims[0] / 2
				d.write(t, ctx, o, do, region.Box{Off: []uint64{0, 0}, Size: []uint64{half, dims[1]}}, int32(rng.Uint32()>>2))
				step := max(dims[0]/64, 1)
				for r := half; r < half+dims[0]/4; r += step {
					d.write(t, ctx, o, do, region.Box{Off: []uint64{r, 0}, Size: []uint64{step, dims[1]}}, int32(rng.Uint32()>>2))
				}
				if err := o.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	d.overwrite(t, ctx, c, rng, 2*len(d.objs))
	return d
}

func (d *dataset) write(t *testing.T, ctx context.Context, o *client.Object, do *dobj, b region.Box, base int32) {
	t.Helper()
	data := cells(int(b.Volume()), base)
	if err := o.Write(ctx, b, data); err != nil {
		t.Fatalf("%s: write %v: %v", do.name, b, err)
	}
	do.m.write(b, data)
	d.writes++
}

// overwrite writes n random boxes of random objects.
func (d *dataset) overwrite(t *testing.T, ctx context.Context, c *client.Client, rng *rand.Rand, n int) {
	t.Helper()
	for range n {
		do := d.objs[rng.IntN(len(d.objs))]
		o, err := c.OpenObject(ctx, do.name)
		if err != nil {
			t.Fatal(err)
		}
		dims := do.m.dims
		off := []uint64{rng.Uint64N(dims[0]), rng.Uint64N(dims[1])}
		size := []uint64{1 + rng.Uint64N(dims[0]-off[0]), 1 + rng.Uint64N(dims[1]-off[1])}
		d.write(t, ctx, o, do, region.Box{Off: off, Size: size}, int32(rng.Uint32()>>2))
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// check reads every object whole and returns how many bytes read back as
// acknowledged, the objects whose read failed (with why) and those that
// read back different bytes with no error: lost or zeroed data.
func (d *dataset) check(ctx context.Context, c *client.Client) (good int64, failed map[string]error, wrong []string) {
	failed = map[string]error{}
	for _, do := range d.objs {
		o, err := c.OpenObject(ctx, do.name)
		if err != nil {
			failed[do.name] = err
			continue
		}
		got, err := o.GetData(ctx)
		_ = o.Close(ctx)
		switch {
		case err != nil:
			failed[do.name] = err
		case !bytes.Equal(got, do.m.data):
			wrong = append(wrong, fmt.Sprintf("%s (%d of %d bytes differ)", do.name, differ(got, do.m.data), len(got)))
		default:
			good += int64(len(got))
		}
	}
	return good, failed, wrong
}

func differ(a, b []byte) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n + max(len(a), len(b)) - min(len(a), len(b))
}

// verify fails the test unless every object reads back as acknowledged.
func (d *dataset) verify(t *testing.T, ctx context.Context, c *client.Client, when string) int64 {
	t.Helper()
	good, failed, wrong := d.check(ctx, c)
	for name, err := range failed {
		t.Errorf("%s: %s: %v", when, name, err)
	}
	if len(wrong) > 0 {
		t.Errorf("%s: %d objects read back wrong with no error, e.g. %s", when, len(wrong), wrong[0])
	}
	if t.Failed() {
		t.FailNow()
	}
	return good
}

// A cluster restarted with fewer servers, then more, then fewer again, on
// one shared data dir (as pdc up makes): every acknowledged byte of every
// partition and storage mode reads back after each restart, and writes
// made after one restart survive the next.
func TestRestartWithAnotherServerCountKeepsEveryByte(t *testing.T) {
	tc := newCluster(t)
	ctx := e2e.Ctx(t, 3*time.Minute)
	rng := rand.New(rand.NewPCG(1, 2))
	tc.up(4, "")
	d := fill(t, ctx, tc.connect(), []uint64{64, 40}, 2, rng)
	d.verify(t, ctx, tc.connect(), "4 servers")
	counts := []int{2, 5, 3}
	if e2e.Race {
		counts = []int{2, 3}
	}
	for _, n := range counts {
		tc.down()
		tc.up(n, "")
		c := tc.connect()
		d.verify(t, ctx, c, fmt.Sprintf("restarted with %d servers", n))
		d.overwrite(t, ctx, c, rng, len(d.objs))
		d.verify(t, ctx, c, fmt.Sprintf("overwritten with %d servers", n))
	}
	// A data query reads the slots a server holds for others too.
	o, err := tc.connect().OpenObject(ctx, d.objs[4].name) // region static, by offset
	if err != nil {
		t.Fatal(err)
	}
	res, err := o.Query(ctx, client.Ge(int32(-1<<31)))
	if err != nil {
		t.Fatal(err)
	}
	if want := region.Shape(d.objs[4].m.dims...).Volume(); res.Hits != want {
		t.Fatalf("a query matching everything counts %d elements of %d", res.Hits, want)
	}
}

// Servers on two nodes (hosts a and b), each with a node-local data dir:
// a restart with fewer or more servers sends the data slots between the
// nodes' dirs, and back. A restart that leaves node b out (its metadata
// stores moved to node a, without which the start is refused:
// TestStartWithoutTheNodeOfAStoreRefuses) cannot reach the data there:
// reads of it fail with an error naming the data slot and why, never
// zeros; once node b is back, every byte reads back.
func TestNodeLocalDataDirs(t *testing.T) {
	tc := newCluster(t)
	ctx := e2e.Ctx(t, 3*time.Minute)
	rng := rand.New(rand.NewPCG(3, 4))
	tc.up(4, "a,a,b,b")
	d := fill(t, ctx, tc.connect(), []uint64{64, 40}, 2, rng)
	for _, hosts := range []string{"a,a,b", "b,a"} {
		tc.down()
		tc.up(strings.Count(hosts, ",")+1, hosts)
		c := tc.connect()
		d.verify(t, ctx, c, "restarted on hosts "+hosts)
		d.overwrite(t, ctx, c, rng, len(d.objs)/2)
	}
	tc.down()
	// Node b is not started: its data dir is out of reach, but for the
	// metadata stores, moved to node a as an operator would.
	moveStores(t, filepath.Join(tc.datadir, "b"), filepath.Join(tc.datadir, "a"))
	tc.up(2, "a,a")
	good, failed, wrong := d.check(ctx, tc.connect())
	if len(wrong) > 0 {
		t.Fatalf("without node b, %d objects read back wrong with no error, e.g. %s", len(wrong), wrong[0])
	}
	missingSlot := 0
	for name, err := range failed {
		switch {
		case errors.Is(err, pdc.ErrUnavailable) && strings.Contains(err.Error(), "data slot") && strings.Contains(err.Error(), "no server of this cluster finds it"):
			missingSlot++
		default:
			t.Fatalf("without node b, %s: %v", name, err)
		}
	}
	if missingSlot == 0 || good == 0 {
		t.Fatalf("without node b: %d bytes read back, %d reads failed for a missing data slot; want some of each", good, missingSlot)
	}
	t.Logf("without node b: %d bytes read back, %d objects unreachable for a missing data slot", good, missingSlot)
	tc.down()
	tc.up(5, "a,b,b,a,b")
	d.verify(t, ctx, tc.connect(), "node b back")
}

// moveStores moves the metadata stores (meta-<rank>) of data dir from to
// data dir to, which must have none of those names.
func moveStores(t *testing.T, from, to string) {
	t.Helper()
	names, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, e := range names {
		r, ok := strings.CutPrefix(e.Name(), "meta-")
		if _, err := strconv.Atoi(r); !ok || err != nil || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(to, e.Name())); err == nil {
			t.Fatalf("move %s to %s: it has one", e.Name(), to)
		}
		if err := os.Rename(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			t.Fatal(err)
		}
		moved++
	}
	if moved == 0 {
		t.Fatalf("no metadata store in %s", from)
	}
}

// kill -9 of a random server while the cluster moves its data slots
// between node-local data dirs, again and again, each time restarting
// with another number of servers on other nodes: once a start completes,
// every acknowledged byte reads back, and none of it is lost, zeroed or
// duplicated wrongly.
func TestKilledWhileMovingData(t *testing.T) {
	// PDC_SLOTS_KILL_CYCLES runs more cycles, outside CI.
	cycles := 10
	if e2e.Race {
		cycles = 4
	}
	if n, err := strconv.Atoi(os.Getenv("PDC_SLOTS_KILL_CYCLES")); err == nil && n > 0 {
		cycles = n
	}
	tc := newCluster(t)
	ctx := e2e.Ctx(t, time.Duration(120+15*cycles)*time.Second)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	layouts := []string{"a,a,b,b", "a,a,b", "a,b,b", "b,a", "a,b,a,b,a"}
	tc.up(4, layouts[0])
	d := fill(t, ctx, tc.connect(), []uint64{1024, 256}, 1, rng)
	d.verify(t, ctx, tc.connect(), "written")
	tc.down()

	prev := layouts[0]
	var kills, midMove, beforeReady, afterReady, checks int
	var checked int64
	for cycle := range cycles {
		hosts := prev
		for hosts == prev {
			hosts = layouts[rng.IntN(len(layouts))]
		}
		prev = hosts
		n := strings.Count(hosts, ",") + 1
		if cycle%4 == 3 {
			// A start left to complete: everything is there, and more
			// writes land in this layout.
			tc.up(n, hosts)
			c := tc.connect()
			checked += d.verify(t, ctx, c, fmt.Sprintf("cycle %d, hosts %s", cycle, hosts))
			checks++
			d.overwrite(t, ctx, c, rng, 4)
			tc.down()
			continue
		}
		where := tc.killDuringStart(ctx, n, hosts, rng)
		kills++
		switch where {
		case "moving":
			midMove++
		case "starting":
			beforeReady++
		default:
			afterReady++
		}
		t.Logf("cycle %d: hosts %s: killed a server %s", cycle, hosts, where)
	}
	tc.up(4, layouts[0])
	checked += d.verify(t, ctx, tc.connect(), "after the kills")
	checks++
	t.Logf("fault table: kill -9 of a server during a start with another server count: %d (%d while slots moved, %d earlier in the start, %d once serving); "+
		"%d full checks of %d objects (%d acknowledged writes), %d bytes checked, 0 lost or zeroed",
		kills, midMove, beforeReady, afterReady, checks, len(d.objs), d.writes, checked)
}

// killDuringStart starts the cluster with n servers on hosts and SIGKILLs
// one of them at a random point of the start, then the others; it says
// where the kill landed: "moving" (a data slot was being received),
// "starting" or "serving".
func (tc *testCluster) killDuringStart(ctx context.Context, n int, hosts string, rng *rand.Rand) string {
	t := tc.t
	t.Helper()
	start := time.Now()
	cmd := exec.Command(e2e.Bin(), tc.upArgs(n, hosts)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan error, 1)
	go func() { upDone <- cmd.Wait() }()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	list := tc.waitStartList(ctx, n, start, upDone, &out, tick)
	where := tc.killMoment(upDone, tick, rng)
	victim := list.Servers[rng.IntN(len(list.Servers))]
	_ = syscall.Kill(victim.PID, syscall.SIGKILL)
	for _, s := range list.Servers {
		_ = syscall.Kill(s.PID, syscall.SIGKILL)
	}
	for _, s := range list.Servers {
		if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), s.PID); err != nil {
			t.Fatal(err)
		}
	}
	<-upDone
	return where
}

// waitStartList waits for rank 0 to list the n servers of the start begun
// at start, failing the test if pdc up ends first.
func (tc *testCluster) waitStartList(ctx context.Context, n int, start time.Time, upDone chan error, out *bytes.Buffer, tick *time.Ticker) *cluster.List {
	t := tc.t
	t.Helper()
	var list *cluster.List
	for list == nil {
		select {
		case err := <-upDone:
			t.Fatalf("pdc up ended before its servers were listed: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatal("no server list")
		case <-tick.C:
			if l, err := cluster.ReadList(tc.tmpdir); err == nil && l.Size == n && l.Created.After(start) {
				list = l
			}
		}
	}
	return list
}

// killMoment waits for the moment to kill at and says where the start was
// then: "moving", "starting" or "serving". An end of pdc up it sees is put
// back on upDone for the caller.
func (tc *testCluster) killMoment(upDone chan error, tick *time.Ticker, rng *rand.Rand) string {
	// Two times in three once a slot is being received, else at a random
	// moment.
	deadline := time.NewTimer(time.Duration(rng.IntN(1500)) * time.Millisecond)
	defer deadline.Stop()
	waitMove := rng.IntN(3) != 0
	where := ""
wait:
	for {
		select {
		case <-deadline.C:
			if !waitMove {
				break wait
			}
		case <-tick.C:
			if moving(tc.datadir) {
				where = "moving"
				if waitMove {
					break wait
				}
			}
			continue
		case err := <-upDone:
			upDone <- err
			break wait
		}
	}
	if where == "" && moving(tc.datadir) {
		where = "moving"
	}
	if where == "" {
		where = "starting"
		select {
		case err := <-upDone:
			upDone <- err
			if err == nil {
				where = "serving"
			}
		default:
		}
	}
	return where
}

// moving reports whether a data slot is being received under datadir.
func moving(datadir string) bool {
	m, _ := filepath.Glob(filepath.Join(datadir, "*", "data-*.incoming"))
	return len(m) > 0
}
