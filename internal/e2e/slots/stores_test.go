package slots_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/slots"
	"github.com/pdcgo/pdc/region"
)

// A full restart that puts no server at all on a node whose node-local
// data dir holds a metadata store of the cluster did not see that store:
// the cluster started, everything in the store answered "not found", a
// client could create the same names again, and `pdc fsck --remove` would
// have deleted the data of its objects. The cluster records the stores it
// has, in every data dir, and such a start is refused, naming the store,
// its id, and the host and data dir it was last seen in; with node b back,
// everything is there. Abandoned deliberately (--abandon-store), the start
// goes on and the cluster forgets the store; when the store comes back
// with its node, it is refused rather than taken back beside the names
// made since, until it is moved aside.
func TestStartWithoutTheNodeOfAStoreRefuses(t *testing.T) {
	tc := newCluster(t)
	ctx := e2e.Ctx(t, 3*time.Minute)
	tc.up(2, "a,b")
	c := tc.connect()
	ct, _, err := c.CreateContainer(ctx, "kept", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const n = 24
	name := func(i int) string { return fmt.Sprintf("obj-%02d", i) }
	for i := range n {
		o, err := ct.CreateObject(ctx, name(i), client.ObjectProps{Dims: []uint64{4}, Type: region.Int32})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.PutTag(ctx, "step", client.Int64(int64(i))); err != nil {
			t.Fatal(err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tc.down()
	storeB := filepath.Join(tc.datadir, "b", "meta-1")
	id, err := metastore.ReadIdentity(nil, storeB)
	if err != nil {
		t.Fatalf("node b's store of rank 1: %v", err)
	}
	// found opens every object and returns those found; any other error
	// than "not found" fails the test.
	found := func(when string) map[string]bool {
		t.Helper()
		c := tc.connect()
		got := map[string]bool{}
		for i := range n {
			o, err := c.OpenObject(ctx, name(i))
			if errors.Is(err, pdc.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Fatalf("%s: open %s: %v", when, name(i), err)
			}
			_ = o.Close(ctx)
			got[name(i)] = true
		}
		return got
	}
	refused := func(when string, args []string, wants ...string) {
		t.Helper()
		res := e2e.Run(t, nil, append(args, "--timeout", "30s")...)
		if res.Err == nil {
			t.Fatalf("%s: started:\n%s%s", when, res.Stdout, res.Stderr)
		}
		for _, want := range wants {
			if !strings.Contains(res.Stderr, want) {
				t.Fatalf("%s: pdc up's error does not say %q:\n%s", when, want, res.Stderr)
			}
		}
		t.Logf("%s: refused:\n%s", when, res.Stderr)
		tc.noServerRuns()
	}

	// Node b not started: two servers on node a, or one.
	for _, size := range []int{2, 1} {
		refused(fmt.Sprintf("-n %d on node a", size), tc.upArgs(size, "a"),
			"meta-1 (id "+id.ID+")", "data dir "+filepath.Join(tc.datadir, "b")+" on host b", storeB,
			"found by no server of this start", "the start is refused", "--abandon-store", "move the store")
	}
	tc.up(2, "a,b")
	if got := found("node b back"); len(got) != n {
		t.Fatalf("node b back: %d of %d objects found", len(got), n)
	}
	tc.down()

	// Abandoned deliberately: the start goes on without store 1.
	e2e.MustRun(t, append(tc.upArgs(2, "a"), "--abandon-store", "1")...)
	got := found("store 1 abandoned")
	if len(got) == 0 || len(got) == n {
		t.Fatalf("store 1 abandoned: %d of %d objects found; want those of store 0 only", len(got), n)
	}
	// A name of store 1 made again: a second copy of it, should the
	// abandoned store come back.
	again := ""
	for i := range n {
		if !got[name(i)] {
			again = name(i)
			break
		}
	}
	c = tc.connect()
	ct2, _, err := c.CreateContainer(ctx, "after", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	o, err := ct2.CreateObject(ctx, again, client.ObjectProps{Dims: []uint64{8}, Type: region.Int32})
	if err != nil {
		t.Fatalf("make %s again once its store is abandoned: %v", again, err)
	}
	_ = o.Close(ctx)
	tc.down()
	// Forgotten: the next start on node a needs no flag.
	tc.up(2, "a")
	tc.down()

	// Node b back, with the abandoned store: refused, not taken back.
	refused("node b back with the abandoned store", tc.upArgs(2, "a,b"),
		"meta-1 (id "+id.ID+") in data dir "+filepath.Join(tc.datadir, "b"), "host b", storeB, "was abandoned", "second copy", "Move it out of the data dir")
	// Moved aside, the cluster starts with what it has.
	if err := os.Rename(storeB, storeB+".abandoned"); err != nil {
		t.Fatal(err)
	}
	tc.up(2, "a,b")
	if after := found("the abandoned store moved aside"); len(after) != len(got)+1 || !after[again] {
		t.Fatalf("the abandoned store moved aside: found %d objects (%s among them: %v), want %d", len(after), again, after[again], len(got)+1)
	}
	o, err = tc.connect().OpenObject(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if dims, err := o.Dims(ctx); err != nil || len(dims) != 1 || dims[0] != 8 {
		t.Fatalf("%s made again: dims %v, %v; want [8]", again, dims, err)
	}
	_ = o.Close(ctx)
	e2e.MustRun(t, "fsck", "--remove", "--tmpdir", tc.tmpdir)

	// Defence in depth: while the record names a store that no
	// metadata server of the running cluster serves (here written by
	// hand), pdc fsck --remove removes nothing.
	recPath := filepath.Join(tc.datadir, "a", "metadata-stores")
	b, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := slots.DecodeStores(recPath, b)
	if err != nil {
		t.Fatal(err)
	}
	ghost := slots.StoreEntry{Rank: 7, ID: strings.Repeat("7", 32), Host: "c", Path: filepath.Join(tc.datadir, "c")}
	rec.Have = append(rec.Have, ghost)
	if err := os.WriteFile(recPath, slots.EncodeStores(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	res := e2e.Run(t, nil, "fsck", "--remove", "--tmpdir", tc.tmpdir)
	if res.Err == nil || !strings.Contains(res.Stderr, "meta-7 (id "+ghost.ID) || !strings.Contains(res.Stderr, "refused") {
		t.Fatalf("pdc fsck --remove with a store no server serves: %v\n%s%s", res.Err, res.Stdout, res.Stderr)
	}
	t.Logf("pdc fsck --remove refused:\n%s", res.Stderr)
	e2e.MustRun(t, "fsck", "--tmpdir", tc.tmpdir) // looking is fine
	if err := os.WriteFile(recPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e2e.MustRun(t, "fsck", "--remove", "--tmpdir", tc.tmpdir)
}
