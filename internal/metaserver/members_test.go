package metaserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Containers of the membership tests. Memberships do not need the
// container records, which live on the containers' own servers.
const (
	contA = 1001
	contB = 1002
	contC = 1003
)

func (c *testCluster) ownerOf(id uint64) *Service {
	return c.svcs[placement.OwnerOfID(id, len(c.svcs))]
}

// createIn creates name in container cont and returns its id.
func (c *testCluster) createIn(name string, cont uint64) uint64 {
	c.t.Helper()
	b := wire.ObjBatch{Creates: []wire.ObjCreate{{ContID: cont, Name: name, Props: wire.ObjectProps{Dims: []uint64{4}, Type: 1}}}}
	resp, err := c.owner(name).objCreate(context.Background(), &rpc.Request{Header: b.Marshal(nil), Client: "c"})
	if err != nil {
		c.t.Fatal(err)
	}
	var res wire.ObjResults
	if err := res.Unmarshal(resp.Header); err != nil || res.Items[0].Code != 0 {
		c.t.Fatalf("create %s: %v %+v", name, err, res.Items)
	}
	return res.Items[0].Meta.ID
}

// nameOn returns a fresh object name held by server index i.
func (c *testCluster) nameOn(i int, prefix string) string {
	for n := 0; ; n++ {
		name := fmt.Sprint(prefix, n)
		if placement.Owner(placement.Key(name, 0), len(c.svcs)) == i {
			return name
		}
	}
}

// members sends a Members request to svc.
func members(svc *Service, m wire.Members) (uint64, error) {
	if m.Version == 0 {
		m.Version = wire.MembersVersion
	}
	resp, err := svc.objMembers(context.Background(), &rpc.Request{Header: m.Marshal(nil), Client: "c"})
	if err != nil {
		return 0, err
	}
	var r wire.MembersReply
	if err := r.Unmarshal(resp.Header); err != nil {
		return 0, err
	}
	if r.Version != wire.MembersVersion {
		return 0, fmt.Errorf("reply of version %d", r.Version)
	}
	return r.Changed, nil
}

// change adds (or removes) id to cont on its owner and returns how many
// memberships changed; it fails the test on an error.
func (c *testCluster) change(cont, id uint64, remove bool) uint64 {
	c.t.Helper()
	n, err := members(c.ownerOf(id), wire.Members{ContID: cont, ObjIDs: []uint64{id}, Remove: remove})
	if err != nil {
		c.t.Fatalf("members of %d, object %d, remove %v: %v", cont, id, remove, err)
	}
	return n
}

// list returns the ids of cont's objects, from every server, sorted.
func (c *testCluster) list(cont uint64) []uint64 {
	c.t.Helper()
	var ids []uint64
	for _, s := range c.svcs {
		resp, err := s.objList(context.Background(), &rpc.Request{Header: (&wire.IDArg{ID: cont}).Marshal(nil)})
		if err != nil {
			c.t.Fatal(err)
		}
		var l wire.ObjList
		if err := l.Unmarshal(resp.Header); err != nil {
			c.t.Fatal(err)
		}
		for _, m := range l.Items {
			ids = append(ids, m.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func (c *testCluster) wantList(cont uint64, want ...uint64) {
	c.t.Helper()
	slices.Sort(want)
	if got := c.list(cont); !slices.Equal(got, want) {
		c.t.Fatalf("container %d lists %v, want %v", cont, got, want)
	}
}

func (c *testCluster) deleteObj(id uint64) {
	c.t.Helper()
	if _, err := c.ownerOf(id).objDelete(context.Background(), &rpc.Request{Header: (&wire.ObjKey{ID: id}).Marshal(nil)}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *testCluster) deleteCont(cont uint64) {
	c.t.Helper()
	for _, s := range c.svcs {
		if _, err := s.objDeleteCont(context.Background(), &rpc.Request{Header: (&wire.IDArg{ID: cont, Force: true}).Marshal(nil)}); err != nil {
			c.t.Fatal(err)
		}
	}
}

// crash drops every service as kill -9 would, then opens them again.
func (c *testCluster) crashAndReopen() {
	for _, s := range c.svcs {
		crash(s)
	}
	c.svcs = nil
	c.open()
}

// crash drops s as kill -9 would: its goroutines stop, as a dead
// process's do, and its store keeps only what was committed, with no
// final flush or log reset.
func crash(s *Service) {
	s.StopStageWaits()
	s.tombs.close()
	s.ix.ob.Close()
	s.ix.post.Close()
	s.st.Crash()
}

// keys returns the keys with prefix p on every server.
func (c *testCluster) keys(p []byte) [][]byte {
	var out [][]byte
	for _, s := range c.svcs {
		_ = s.scan(p, func(k, _ []byte) error {
			out = append(out, append([]byte(nil), k...))
			return nil
		})
	}
	return out
}

func wantErr(t *testing.T, what string, err, sentinel error, mentions ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: got %v, want %v", what, err, sentinel)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Fatalf("%s: %q does not mention %q", what, err, m)
		}
	}
}

func TestMembersAddListRemove(t *testing.T) {
	c := newTestCluster(t, 2)
	o0 := c.createIn(c.nameOn(0, "a"), contA)
	o1 := c.createIn(c.nameOn(1, "b"), contA)
	o2name := c.nameOn(0, "home-b")
	o2 := c.createIn(o2name, contB)

	// Added by reference, on each object's server; adding again, or
	// adding an object to its home, changes nothing.
	if c.change(contB, o0, false) != 1 || c.change(contB, o1, false) != 1 {
		t.Fatal("a new membership did not count as a change")
	}
	if c.change(contB, o0, false) != 0 || c.change(contB, o2, false) != 0 {
		t.Fatal("adding a member again changed something")
	}
	c.wantList(contB, o0, o1, o2)
	c.wantList(contA, o0, o1)

	// A request is checked whole before anything changes.
	missing := placement.ID(placement.KeyOf(o0), 1<<30)
	_, err := members(c.ownerOf(o0), wire.Members{ContID: contC, ObjIDs: []uint64{o0, missing}})
	wantErr(t, "add a missing object", err, pdc.ErrNotFound, fmt.Sprint("object ", missing))
	c.wantList(contC)
	n, err := members(c.ownerOf(o0), wire.Members{ContID: contC, ObjIDs: []uint64{o0, o0}, Check: true})
	if err != nil || n != 1 {
		t.Fatalf("check: %d, %v", n, err)
	}
	c.wantList(contC)

	// Bad requests.
	_, err = members(c.ownerOf(o0), wire.Members{ContID: contB, ObjIDs: []uint64{o2}, Remove: true})
	wantErr(t, "remove from home", err, pdc.ErrInvalid, fmt.Sprintf("%q", o2name), fmt.Sprint("container ", contB), "delete the object instead")
	_, err = members(c.ownerOf(o0), wire.Members{ContID: contC, ObjIDs: []uint64{o0}, Remove: true})
	wantErr(t, "remove a non-member", err, pdc.ErrNotFound, "is not a member of container")
	_, err = members(c.ownerOf(o0), wire.Members{ContID: contB, ObjIDs: []uint64{o0, o2}, Remove: true})
	wantErr(t, "remove a member and a home object", err, pdc.ErrInvalid, "its home")
	_, err = members(c.ownerOf(o0), wire.Members{ContID: contB, ObjIDs: []uint64{o1}})
	wantErr(t, "object of another server", err, pdc.ErrInvalid, "belongs to metadata server 1")
	_, err = members(c.ownerOf(o0), wire.Members{Version: 2, ContID: contB, ObjIDs: []uint64{o0}})
	wantErr(t, "version 2", err, pdc.ErrVersion, "version 2")
	_, err = members(c.ownerOf(o0), wire.Members{ObjIDs: []uint64{o0}})
	wantErr(t, "no container", err, pdc.ErrInvalid, "no container")
	_, err = members(c.ownerOf(o0), wire.Members{ContID: contB})
	wantErr(t, "no objects", err, pdc.ErrInvalid, "0 objects")
	_, err = members(c.ownerOf(o0), wire.Members{ContID: contB, ObjIDs: []uint64{0}})
	wantErr(t, "object 0", err, pdc.ErrInvalid, "object id 0")
	var many []uint64
	for i := range 5 {
		many = append(many, placement.ID(placement.KeyOf(o0), uint32(1<<30+i)))
	}
	_, err = members(c.ownerOf(o0), wire.Members{ContID: contB, ObjIDs: many})
	wantErr(t, "5 missing objects", err, pdc.ErrNotFound, "(and 2 more)")
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("the error is not one line: %q", err)
	}
	c.wantList(contB, o0, o1, o2)

	// Removed, on one server and then the other.
	if c.change(contB, o0, true) != 1 {
		t.Fatal("remove did not count")
	}
	c.wantList(contB, o1, o2)
	c.wantList(contA, o0, o1)
	if c.change(contB, o1, true) != 1 {
		t.Fatal("remove did not count")
	}
	c.wantList(contB, o2)
	if k := c.keys([]byte{'m'}); len(k) != 0 {
		t.Fatalf("reverse keys left after removing every added member: %q", k)
	}
}

func TestMembersGoWithTheirObjectAndContainer(t *testing.T) {
	c := newTestCluster(t, 2)
	o0 := c.createIn(c.nameOn(0, "a"), contA)
	o1 := c.createIn(c.nameOn(1, "b"), contA)
	b0 := c.createIn(c.nameOn(0, "home-b"), contB)
	for _, cont := range []uint64{contB, contC} {
		c.change(cont, o0, false)
		c.change(cont, o1, false)
	}
	c.change(contC, b0, false)

	// Deleting an object removes it from every container.
	c.deleteObj(o1)
	c.wantList(contA, o0)
	c.wantList(contB, o0, b0)
	c.wantList(contC, o0, b0)
	if k := c.keys(addedPrefix(o1)); len(k) != 0 {
		t.Fatalf("reverse keys of a deleted object: %q", k)
	}

	// Deleting a container deletes its home objects and only the
	// memberships of the others.
	c.deleteCont(contB)
	c.wantList(contB)
	c.wantList(contA, o0)
	c.wantList(contC, o0)
	if _, _, err := c.ownerOf(b0).loadObjByID(b0); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("an object whose home was deleted is still there: %v", err)
	}
	if _, _, err := c.ownerOf(o0).loadObjByID(o0); err != nil {
		t.Fatalf("an object added to a deleted container went with it: %v", err)
	}
	if k := c.keys(keyAdded(o0, contB)); len(k) != 0 {
		t.Fatalf("reverse key of a deleted container's membership: %q", k)
	}
	// The deleted container's object also left the one it was added to.
	if k := c.keys(keyMember(contC, b0)); len(k) != 0 {
		t.Fatalf("membership of a deleted object: %q", k)
	}
}

func TestMembersSurviveCrashAndResize(t *testing.T) {
	c := newTestCluster(t, 2)
	var ids []uint64
	for i := range 12 {
		id := c.createIn(fmt.Sprint("obj", i), contA)
		ids = append(ids, id)
		c.change(contB, id, false)
	}
	c.crashAndReopen()
	c.wantList(contB, ids...)

	// Grow to three servers: the 'M' and 'm' keys move with their objects.
	c.close()
	c.dirs = append(c.dirs, t.TempDir())
	svcs := make([]*Service, 3)
	for i, d := range c.dirs {
		s, err := Open(Config{Dir: d, CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		s.SetPlacement(i, 3)
		svcs[i] = s
	}
	c.svcs = svcs
	ctx := context.Background()
	for _, s := range svcs {
		if _, err := s.MoveForeign(ctx, func(ctx context.Context, index int, kvs *wire.KVBatch) error {
			return svcs[index].importKVs(kvs)
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range svcs {
		s.MovesDone()
		if err := s.StartIndex(ctx, fakePeers{c}); err != nil {
			t.Fatal(err)
		}
		s.SetReady()
	}
	c.wantList(contB, ids...)
	c.wantList(contA, ids...)
	for i, s := range svcs {
		for _, p := range [][]byte{{'M'}, {'m'}} {
			_ = s.scan(p, func(k, _ []byte) error {
				if dest, _ := keyDest(k, 3); dest != i {
					t.Errorf("server %d holds %q, owned by %d", i, k, dest)
				}
				return nil
			})
		}
	}
	moved := 0
	for _, id := range ids {
		if placement.OwnerOfID(id, 3) == 2 {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no object moved to the new server: pick other names")
	}
	// On their new servers they are removed and deleted as before.
	c.change(contB, ids[0], true)
	c.deleteObj(ids[1])
	c.wantList(contB, ids[2:]...)
	c.wantList(contA, append([]uint64{ids[0]}, ids[2:]...)...)
}
