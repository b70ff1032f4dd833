package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/client/clienttest"
	"github.com/pdcgo/pdc/region"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// servers runs n pdc servers in this process over dir until stop.
type servers struct {
	t  *testing.T
	tc *clienttest.Cluster
}

func startServers(t *testing.T, dir string, n int) *servers {
	t.Helper()
	return &servers{t: t, tc: clienttest.Start(t, clienttest.Options{Servers: n, Dir: dir})}
}

// stop stops the servers and waits for them; idempotent.
func (s *servers) stop() {
	if err := s.tc.StopAll(); err != nil {
		s.t.Error(err)
	}
}

func (s *servers) connect(t *testing.T) *client.Client {
	t.Helper()
	return s.tc.Connect(t)
}

func names(objs []client.ObjectInfo) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	slices.Sort(out)
	return out
}

func wantObjects(t *testing.T, ctx context.Context, ct *client.Container, want ...string) []client.ObjectInfo {
	t.Helper()
	objs, err := ct.Objects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if got := names(objs); !slices.Equal(got, want) {
		t.Fatalf("container %q lists %q, want %q", ct.Name(), got, want)
	}
	return objs
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

// Objects added to a container by reference, with objects on both of two
// metadata servers: listed, added again, removed, refused removal from
// their home, gone with their object, kept when the container goes, and
// still there after the servers restart.
func TestContainerMembers(t *testing.T) {
	r := newMembersRun(t)
	r.add()
	r.refuse()
	r.remove()
	r.restart()
	r.deleteObject()
	r.deleteContainer()
}

// membersRun is what TestContainerMembers's steps share: two metadata
// servers, containers home (8 objects, on both servers), box and other,
// and what each step leaves for the next.
type membersRun struct {
	t                *testing.T
	ctx              context.Context
	dir              string
	srv              *servers
	c                *client.Client
	home, box, other *client.Container
	props            client.ObjectProps
	byRank           map[int]*client.Object // a home object on each server
	hnames           []string
	hids             []uint64
	own              *client.Object // box's own object
	rest             []string       // home objects still in box after remove
}

// newMembersRun starts the servers and makes the containers and objects,
// each home object holding data.
func newMembersRun(t *testing.T) *membersRun {
	r := &membersRun{t: t, dir: t.TempDir(), props: client.ObjectProps{Dims: []uint64{16}, Type: region.Char}, byRank: map[int]*client.Object{}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	r.srv = startServers(t, r.dir, 2)
	r.c = r.srv.connect(t)
	mk := func(name string) *client.Container {
		ct, _, err := r.c.CreateContainer(ctx, name, client.Persistent)
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	r.home, r.box, r.other = mk("home"), mk("box"), mk("other")
	var specs []client.ObjectSpec
	for i := range 8 {
		specs = append(specs, client.ObjectSpec{Name: fmt.Sprint("h", i), Props: r.props})
	}
	hs, err := r.home.CreateObjects(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range hs {
		r.byRank[o.Info().Server] = o
		r.hids = append(r.hids, o.ID())
		r.hnames = append(r.hnames, o.Name())
		if err := o.PutData(ctx, bytes.Repeat([]byte(o.Name()), 8)); err != nil {
			t.Fatal(err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.byRank) != 2 {
		t.Fatalf("every object is on one metadata server (%v): pick other names", r.byRank)
	}
	if r.own, err = r.box.CreateObject(ctx, "own", r.props); err != nil {
		t.Fatal(err)
	}
	if err := r.own.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// add: adding, and adding again, is the same; members list with their
// home container.
func (r *membersRun) add() {
	t, ctx, box := r.t, r.ctx, r.box
	if err := box.AddObjects(ctx, r.hids...); err != nil {
		t.Fatal(err)
	}
	if err := box.AddObjects(ctx, r.hids[0], r.hids[0], r.own.ID()); err != nil {
		t.Fatalf("adding members again, and a home object to its home: %v", err)
	}
	objs := wantObjects(t, ctx, box, append([]string{"own"}, r.hnames...)...)
	for _, o := range objs {
		if want := map[bool]uint64{true: box.ID(), false: r.home.ID()}[o.Name == "own"]; o.ContainerID != want {
			t.Errorf("%s lists with container %d, want its home %d", o.Name, o.ContainerID, want)
		}
	}
	wantObjects(t, ctx, r.home, r.hnames...)
	for _, id := range []uint64{r.hids[0], r.own.ID()} {
		if in, err := box.Contains(ctx, id); err != nil || !in {
			t.Fatalf("box contains %d: %v, %v", id, in, err)
		}
	}
	if in, err := r.other.Contains(ctx, r.hids[0]); err != nil || in {
		t.Fatalf("other contains %d: %v, %v", r.hids[0], in, err)
	}
}

// refuse: refused, changing nothing: removal from the home; a non-member
// or a missing object among good ones, on the other server.
func (r *membersRun) refuse() {
	t, ctx, other := r.t, r.ctx, r.other
	r0, r1 := r.byRank[0].ID(), r.byRank[1].ID()
	err := r.home.RemoveObjects(ctx, r0)
	wantErr(t, "remove from home", err, pdc.ErrInvalid, `container "home"`, fmt.Sprintf("%q", r.byRank[0].Name()), "its home", "delete the object instead")
	if err := other.AddObjects(ctx, r0); err != nil {
		t.Fatal(err)
	}
	err = other.RemoveObjects(ctx, r0, r1)
	wantErr(t, "remove a member and a non-member", err, pdc.ErrNotFound, `container "other"`, fmt.Sprintf("%q", r.byRank[1].Name()), "is not a member")
	wantObjects(t, ctx, other, r.byRank[0].Name())
	gone, err := r.home.CreateObject(ctx, "gone", r.props)
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	err = other.AddObjects(ctx, r1, gone.ID())
	wantErr(t, "add a deleted object", err, pdc.ErrNotFound, fmt.Sprint("object ", gone.ID()))
	wantObjects(t, ctx, other, r.byRank[0].Name())
	wantErr(t, "add object 0", other.AddObjects(ctx, r1, 0), pdc.ErrInvalid, "object id 0")
	if err := other.AddObjects(ctx); err != nil {
		t.Fatalf("adding nothing: %v", err)
	}
}

// remove: removing members held on both servers.
func (r *membersRun) remove() {
	if err := r.box.RemoveObjects(r.ctx, r.byRank[0].ID(), r.byRank[1].ID()); err != nil {
		r.t.Fatal(err)
	}
	for _, n := range r.hnames {
		if n != r.byRank[0].Name() && n != r.byRank[1].Name() {
			r.rest = append(r.rest, n)
		}
	}
	wantObjects(r.t, r.ctx, r.box, append([]string{"own"}, r.rest...)...)
}

// restart: memberships survive a restart of every server.
func (r *membersRun) restart() {
	t, ctx := r.t, r.ctx
	r.c.Close()
	r.srv.stop()
	r.srv = startServers(t, r.dir, 2)
	r.c = r.srv.connect(t)
	var err error
	if r.box, err = r.c.OpenContainer(ctx, "box"); err != nil {
		t.Fatal(err)
	}
	if r.other, err = r.c.OpenContainer(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	wantObjects(t, ctx, r.box, append([]string{"own"}, r.rest...)...)
	wantObjects(t, ctx, r.other, r.byRank[0].Name())
}

// deleteObject: deleting an object takes it out of every container.
func (r *membersRun) deleteObject() {
	t, ctx := r.t, r.ctx
	o, err := r.c.OpenObject(ctx, r.byRank[0].Name())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.box.AddObjects(ctx, o.ID()); err != nil {
		t.Fatal(err)
	}
	if err := o.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	wantObjects(t, ctx, r.other)
	wantObjects(t, ctx, r.box, append([]string{"own"}, r.rest...)...)
}

// deleteContainer: deleting a container deletes its own objects and
// keeps, with their data, those added to it.
func (r *membersRun) deleteContainer() {
	t, ctx, c := r.t, r.ctx, r.c
	if err := r.box.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenObject(ctx, "own"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("the deleted container's own object: %v", err)
	}
	home, err := c.OpenContainer(ctx, "home")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, n := range r.hnames {
		if n != r.byRank[0].Name() {
			left = append(left, n)
		}
	}
	wantObjects(t, ctx, home, left...)
	for _, n := range r.rest {
		o, err := c.OpenObject(ctx, n)
		if err != nil {
			t.Fatalf("%s, added to the deleted container: %v", n, err)
		}
		got, err := o.GetData(ctx)
		if err != nil || !bytes.Equal(got, bytes.Repeat([]byte(n), 8)) {
			t.Fatalf("%s's data after its other container went: %q, %v", n, got, err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	err = r.box.AddObjects(ctx, r.hids[1])
	wantErr(t, "add to a deleted container", err, pdc.ErrNotFound, `container "box"`)
}
