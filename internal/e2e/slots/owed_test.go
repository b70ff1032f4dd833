package slots_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

// resize is the model's set dims: elements inside both the old dims and
// the new keep their values, the rest read as never written.
func (m *model) resize(dims []uint64) {
	data := make([]byte, 4*region.Shape(dims...).Volume())
	keep := region.Shape(min(m.dims[0], dims[0]), min(m.dims[1], dims[1]))
	if keep.Volume() > 0 {
		part := make([]byte, 4*keep.Volume())
		if err := region.Copy(part, keep, m.data, region.Shape(m.dims...), keep, 4); err != nil {
			panic(err)
		}
		if err := region.Copy(data, region.Shape(dims...), part, keep, keep, 4); err != nil {
			panic(err)
		}
	}
	m.dims, m.data = dims, data
}

// setDims sets the dims of every object of d, and its model's.
func (d *dataset) setDims(t *testing.T, ctx context.Context, tc *testCluster, dims []uint64, when string) {
	t.Helper()
	c := tc.connect()
	for _, do := range d.objs {
		o, err := c.OpenObject(ctx, do.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.SetDims(ctx, dims); err != nil {
			t.Fatalf("%s: set dims of %s to %v: %v", when, do.name, dims, err)
		}
		do.m.resize(dims)
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// withoutSlot1 writes objects of every partition and storage mode over
// two data servers sharing one data dir, then restarts the cluster with
// slot 1's dir moved away (a restore to come): rank 1 is missing it. It
// returns the dataset and where the dir is kept.
func withoutSlot1(t *testing.T, ctx context.Context, tc *testCluster, rng *rand.Rand) (*dataset, string) {
	t.Helper()
	tc.up(2, "")
	d := fill(t, ctx, tc.connect(), []uint64{64, 40}, 1, rng)
	tc.down()
	kept := filepath.Join(t.TempDir(), "data-1")
	if err := os.Rename(filepath.Join(tc.datadir, "data-1"), kept); err != nil {
		t.Fatal(err)
	}
	tc.up(2, "")
	return d, kept
}

// shrinkWithoutSlot1 shrinks every object of d, grows it, and shrinks it
// again, with slot 1 out of reach: each set dims succeeds (the cuts are
// kept for slot 1 on rank 1), and pdc status says what is kept. It
// returns the objects that cannot be read without slot 1.
func shrinkWithoutSlot1(t *testing.T, ctx context.Context, tc *testCluster, d *dataset) map[string]error {
	t.Helper()
	// Rows 40-63 are in the second block of region static (32 rows a
	// block over 2 slots), rows 20-31 in the first: each slot has rows
	// the cuts drop, and the grow between them must not bring rows 40-55
	// back.
	d.setDims(t, ctx, tc, []uint64{40, 40}, "shrink without slot 1")
	d.setDims(t, ctx, tc, []uint64{56, 40}, "grow after a shrink without slot 1")
	d.setDims(t, ctx, tc, []uint64{20, 40}, "second shrink without slot 1")
	st := e2e.MustRun(t, "status", "--tmpdir", tc.tmpdir)
	if !strings.Contains(st, "rank 1 is missing data slot 1") || !strings.Contains(st, "dims cuts owed to it kept here") {
		t.Errorf("pdc status with cuts kept for missing slot 1:\n%s", st)
	}
	if strings.Contains(st, "holds") && strings.Contains(st, "dims cut") && strings.Contains(st, "not applied yet") {
		t.Errorf("pdc status shows cuts waiting on a metadata server, which rank 1 acknowledged:\n%s", st)
	}
	// What only slot 1 holds cannot be read; nothing reads back wrong.
	good, failed, wrong := d.check(ctx, tc.connect())
	if len(wrong) > 0 {
		t.Fatalf("without slot 1, %d objects read back wrong with no error, e.g. %s", len(wrong), wrong[0])
	}
	for name, err := range failed {
		if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "data slot 1") {
			t.Fatalf("without slot 1, %s: %v", name, err)
		}
	}
	if len(failed) == 0 || good == 0 {
		t.Fatalf("without slot 1: %d bytes read back, %d objects failed; want some of each", good, len(failed))
	}
	return failed
}

// slot1Back restores slot 1's dir and starts the cluster: the cuts kept
// for it are applied before it serves (slot1Served).
func slot1Back(t *testing.T, ctx context.Context, tc *testCluster, d *dataset, kept string, rng *rand.Rand) {
	t.Helper()
	if err := os.Rename(kept, filepath.Join(tc.datadir, "data-1")); err != nil {
		t.Fatal(err)
	}
	tc.up(2, "")
	slot1Served(t, ctx, tc, d, rng, filepath.Join(tc.datadir, "data-1.cuts"))
}

// slot1Served checks a cluster that holds slot 1 again: every object
// reads back as its model (rows the shrinks dropped as never written,
// never their old bytes), a regrow to the first dims brings none of them
// back, and the file of cuts kept for slot 1 (cuts) is gone.
func slot1Served(t *testing.T, ctx context.Context, tc *testCluster, d *dataset, rng *rand.Rand, cuts string) {
	t.Helper()
	d.verify(t, ctx, tc.connect(), "slot 1 back")
	if _, err := os.Stat(cuts); err == nil {
		t.Errorf("the cuts owed to slot 1 are still kept (%s) once it is back and cut", cuts)
	}
	if st := e2e.MustRun(t, "status", "--tmpdir", tc.tmpdir); strings.Contains(st, "missing data slot") {
		t.Errorf("pdc status with slot 1 back:\n%s", st)
	}
	d.setDims(t, ctx, tc, []uint64{64, 40}, "regrow with slot 1 back")
	d.verify(t, ctx, tc.connect(), "regrown with slot 1 back")
	d.overwrite(t, ctx, tc.connect(), rng, len(d.objs))
	d.verify(t, ctx, tc.connect(), "overwritten with slot 1 back")
}

// A data server started without one of its data slots (its dir moved away
// for a restore): a shrink of objects partly in that slot is acknowledged
// with the cut kept for the slot, so the objects' later set dims go on;
// once the slot is back, the cuts are applied before it serves.
// Before, the cut stayed pending on its metadata server and every later
// set dims of those objects was refused until the slot came back.
func TestCutsOwedToAMissingSlot(t *testing.T) {
	tc := newCluster(t)
	ctx := e2e.Ctx(t, 3*time.Minute)
	rng := rand.New(rand.NewPCG(21, 22))
	d, kept := withoutSlot1(t, ctx, tc, rng)
	shrinkWithoutSlot1(t, ctx, tc, d)
	tc.down()
	slot1Back(t, ctx, tc, d, kept, rng)
}

// kill -9 of every server, the one that keeps the cuts owed to the
// missing slot among them, once the cuts are acknowledged and before the
// slot is back to have them applied: they were kept durably, and the
// start that finds the slot applies them.
func TestCutsOwedToAMissingSlotSurviveKill(t *testing.T) {
	tc := newCluster(t)
	ctx := e2e.Ctx(t, 3*time.Minute)
	rng := rand.New(rand.NewPCG(23, 24))
	d, kept := withoutSlot1(t, ctx, tc, rng)
	shrinkWithoutSlot1(t, ctx, tc, d)
	e2e.KillAll(t, tc.tmpdir)
	slot1Back(t, ctx, tc, d, kept, rng)
}

// Node-local data dirs: slot 1's dir is on node b, which is not started,
// and its holder on node a keeps the cuts owed to it in a's data dir.
// When node b is back, with slot 1's holder there, the start sends it the
// cuts from node a and it applies them before the slot serves.
func TestCutsOwedToASlotOnAnotherNode(t *testing.T) {
	tc := newCluster(t)
	ctx := e2e.Ctx(t, 3*time.Minute)
	rng := rand.New(rand.NewPCG(25, 26))
	tc.up(2, "a,b")
	d := fill(t, ctx, tc.connect(), []uint64{64, 40}, 1, rng)
	tc.down()
	moveStores(t, filepath.Join(tc.datadir, "b"), filepath.Join(tc.datadir, "a"))
	tc.up(2, "a,a")
	shrinkWithoutSlot1(t, ctx, tc, d)
	cuts := filepath.Join(tc.datadir, "a", "data-1.cuts")
	if _, err := os.Stat(cuts); err != nil {
		t.Fatalf("the cuts owed to slot 1 are not kept under node a's data dir: %v", err)
	}
	tc.down()
	tc.up(3, "a,b,b")
	slot1Served(t, ctx, tc, d, rng, cuts)
}

// A slot gone for good: the operator abandons it (--abandon-slot), and
// the start begins it empty. Objects with nothing in it read back as
// before; those that had read as never written where it held their rows,
// and take writes again, which a restart keeps; the cuts kept for it are
// dropped.
func TestAbandonAMissingSlot(t *testing.T) {
	tc := newCluster(t)
	ctx := e2e.Ctx(t, 3*time.Minute)
	rng := rand.New(rand.NewPCG(27, 28))
	d, _ := withoutSlot1(t, ctx, tc, rng)
	failed := shrinkWithoutSlot1(t, ctx, tc, d)
	tc.down()
	e2e.MustRun(t, append(tc.upArgs(2, ""), "--abandon-slot", "1")...)
	if st := e2e.MustRun(t, "status", "--tmpdir", tc.tmpdir); strings.Contains(st, "missing data slot") {
		t.Errorf("pdc status with slot 1 abandoned:\n%s", st)
	}
	if _, err := os.Stat(filepath.Join(tc.datadir, "data-1.cuts")); err == nil {
		t.Errorf("the cuts owed to slot 1 are still kept once it is abandoned")
	}
	c := tc.connect()
	for _, do := range d.objs {
		o, err := c.OpenObject(ctx, do.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := o.GetData(ctx)
		_ = o.Close(ctx)
		if err != nil {
			t.Fatalf("%s with slot 1 abandoned: %v", do.name, err)
		}
		if _, lost := failed[do.name]; lost {
			do.m.data = got // what slot 1 held reads as never written
			continue
		}
		if !bytes.Equal(got, do.m.data) {
			t.Fatalf("%s, with nothing in slot 1, reads back %d bytes different once it is abandoned", do.name, differ(got, do.m.data))
		}
	}
	d.overwrite(t, ctx, c, rng, 2*len(d.objs))
	d.setDims(t, ctx, tc, []uint64{64, 40}, "regrow with slot 1 abandoned")
	d.verify(t, ctx, tc.connect(), "written with slot 1 abandoned")
	// The slot is the cluster's again: a restart holds it, with what was
	// written to it since.
	tc.down()
	tc.up(2, "")
	d.verify(t, ctx, tc.connect(), "restarted with slot 1 abandoned")
}
