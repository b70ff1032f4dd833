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
	dir := t.TempDir()
	srv := startServers(t, dir, 2)
	c := srv.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	mk := func(name string) *client.Container {
		ct, _, err := c.CreateContainer(ctx, name, client.Persistent)
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	home, box, other := mk("home"), mk("box"), mk("other")
	props := client.ObjectProps{Dims: []uint64{16}, Type: region.Char}
	var specs []client.ObjectSpec
	for i := range 8 {
		specs = append(specs, client.ObjectSpec{Name: fmt.Sprint("h", i), Props: props})
	}
	hs, err := home.CreateObjects(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	byRank := map[int]*client.Object{}
	var hnames []string
	var hids []uint64
	for _, o := range hs {
		byRank[o.Info().Server] = o
		hids = append(hids, o.ID())
		hnames = append(hnames, o.Name())
		if err := o.PutData(ctx, bytes.Repeat([]byte(o.Name()), 8)); err != nil {
			t.Fatal(err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(byRank) != 2 {
		t.Fatalf("every object is on one metadata server (%v): pick other names", byRank)
	}
	own, err := box.CreateObject(ctx, "own", props)
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Add, and add again: the same.
	if err := box.AddObjects(ctx, hids...); err != nil {
		t.Fatal(err)
	}
	if err := box.AddObjects(ctx, hids[0], hids[0], own.ID()); err != nil {
		t.Fatalf("adding members again, and a home object to its home: %v", err)
	}
	objs := wantObjects(t, ctx, box, append([]string{"own"}, hnames...)...)
	for _, o := range objs {
		if want := map[bool]uint64{true: box.ID(), false: home.ID()}[o.Name == "own"]; o.ContainerID != want {
			t.Errorf("%s lists with container %d, want its home %d", o.Name, o.ContainerID, want)
		}
	}
	wantObjects(t, ctx, home, hnames...)
	for _, id := range []uint64{hids[0], own.ID()} {
		if in, err := box.Contains(ctx, id); err != nil || !in {
			t.Fatalf("box contains %d: %v, %v", id, in, err)
		}
	}
	if in, err := other.Contains(ctx, hids[0]); err != nil || in {
		t.Fatalf("other contains %d: %v, %v", hids[0], in, err)
	}

	// Refused, changing nothing: removal from the home; a non-member or a
	// missing object among good ones, on the other server.
	r0, r1 := byRank[0].ID(), byRank[1].ID()
	err = home.RemoveObjects(ctx, r0)
	wantErr(t, "remove from home", err, pdc.ErrInvalid, `container "home"`, fmt.Sprintf("%q", byRank[0].Name()), "its home", "delete the object instead")
	if err := other.AddObjects(ctx, r0); err != nil {
		t.Fatal(err)
	}
	err = other.RemoveObjects(ctx, r0, r1)
	wantErr(t, "remove a member and a non-member", err, pdc.ErrNotFound, `container "other"`, fmt.Sprintf("%q", byRank[1].Name()), "is not a member")
	wantObjects(t, ctx, other, byRank[0].Name())
	gone, err := home.CreateObject(ctx, "gone", props)
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	err = other.AddObjects(ctx, r1, gone.ID())
	wantErr(t, "add a deleted object", err, pdc.ErrNotFound, fmt.Sprint("object ", gone.ID()))
	wantObjects(t, ctx, other, byRank[0].Name())
	wantErr(t, "add object 0", other.AddObjects(ctx, r1, 0), pdc.ErrInvalid, "object id 0")
	if err := other.AddObjects(ctx); err != nil {
		t.Fatalf("adding nothing: %v", err)
	}

	// Remove, on both servers.
	if err := box.RemoveObjects(ctx, r0, r1); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for _, n := range hnames {
		if n != byRank[0].Name() && n != byRank[1].Name() {
			rest = append(rest, n)
		}
	}
	wantObjects(t, ctx, box, append([]string{"own"}, rest...)...)

	// Survives a restart of every server.
	c.Close()
	srv.stop()
	srv = startServers(t, dir, 2)
	c = srv.connect(t)
	box, err = c.OpenContainer(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	other, err = c.OpenContainer(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	wantObjects(t, ctx, box, append([]string{"own"}, rest...)...)
	wantObjects(t, ctx, other, byRank[0].Name())

	// Deleting an object takes it out of every container.
	o, err := c.OpenObject(ctx, byRank[0].Name())
	if err != nil {
		t.Fatal(err)
	}
	if err := box.AddObjects(ctx, o.ID()); err != nil {
		t.Fatal(err)
	}
	if err := o.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	wantObjects(t, ctx, other)
	wantObjects(t, ctx, box, append([]string{"own"}, rest...)...)

	// Deleting a container deletes its own objects and keeps, with their
	// data, those added to it.
	if err := box.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenObject(ctx, "own"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("the deleted container's own object: %v", err)
	}
	home, err = c.OpenContainer(ctx, "home")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, n := range hnames {
		if n != byRank[0].Name() {
			left = append(left, n)
		}
	}
	wantObjects(t, ctx, home, left...)
	for _, n := range rest {
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
	err = box.AddObjects(ctx, hids[1])
	wantErr(t, "add to a deleted container", err, pdc.ErrNotFound, `container "box"`)
}
