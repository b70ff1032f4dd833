package deletes_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
)

// lsNames runs pdc obj ls --cont cont and returns the names it lists.
func lsNames(t *testing.T, tmpdir, cont string) []string {
	t.Helper()
	out := e2e.MustRun(t, "obj", "ls", "--tmpdir", tmpdir, "--cont", cont)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var names []string
	for _, l := range lines[1:] { // after the header
		names = append(names, strings.Fields(l)[0])
	}
	slices.Sort(names)
	return names
}

func wantLs(t *testing.T, tmpdir, cont string, want []string) {
	t.Helper()
	if got := lsNames(t, tmpdir, cont); !slices.Equal(got, want) {
		t.Fatalf("pdc obj ls --cont %s: %q, want %q", cont, got, want)
	}
}

// Objects added to containers by reference (pdc cont add) stay members
// through kill -9 of every server, growing to 3 servers and shrinking to
// 1, and go as they should when objects and containers are deleted.
func TestContainerMembersSurviveKillAndResize(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "home", "box")
	e2e.MustRun(t, "cont", "create", "--tmpdir", tmpdir, "--transient", "scratch")
	var objs []string
	for i := range 10 {
		objs = append(objs, fmt.Sprint("o", i))
	}
	e2e.MustRun(t, append([]string{"obj", "create", "--tmpdir", tmpdir, "--cont", "home", "--dims", "8"}, objs...)...)
	out := e2e.MustRun(t, append([]string{"cont", "add", "--tmpdir", tmpdir, "box"}, objs...)...)
	if !strings.Contains(out, "added 10 objects to container box") {
		t.Fatalf("cont add said %q", out)
	}
	e2e.MustRun(t, "cont", "add", "--tmpdir", tmpdir, "box", "o0", "o1") // again: no change, no error
	e2e.MustRun(t, "cont", "add", "--tmpdir", tmpdir, "scratch", "o3")
	wantLs(t, tmpdir, "box", objs)
	wantLs(t, tmpdir, "scratch", []string{"o3"})

	e2e.KillAll(t, tmpdir)
	e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", datadir)
	wantLs(t, tmpdir, "box", objs)

	e2e.MustRun(t, "cont", "remove", "--tmpdir", tmpdir, "box", "o0")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"box", "o0"}, "is not a member of container"},
		{[]string{"home", "o1"}, "delete the object instead"},
	} {
		r := e2e.Run(t, nil, append([]string{"cont", "remove", "--tmpdir", tmpdir}, c.args...)...)
		if r.Err == nil || !strings.Contains(r.Stderr, c.want) {
			t.Fatalf("cont remove %q: %v, stderr %q; want a failure saying %q", c.args, r.Err, r.Stderr, c.want)
		}
	}
	e2e.MustRun(t, "obj", "rm", "--tmpdir", tmpdir, "o2")
	left := slices.Concat([]string{"o1"}, objs[3:])
	wantLs(t, tmpdir, "box", left)

	// pdc down deletes the transient container, not the object added to it.
	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "3", "--tmpdir", tmpdir, "--datadir", datadir)
	wantLs(t, tmpdir, "box", left)
	wantLs(t, tmpdir, "home", slices.Concat([]string{"o0"}, left))
	ctx := e2e.Ctx(t, time.Minute)
	checkMembersAfterRestart(ctx, t, tmpdir)

	e2e.MustRun(t, "down", "--tmpdir", tmpdir)
	e2e.MustRun(t, "up", "-n", "1", "--tmpdir", tmpdir, "--datadir", datadir)
	wantLs(t, tmpdir, "box", left)
	e2e.MustRun(t, "cont", "remove", "--tmpdir", tmpdir, "box", "o9")
	e2e.MustRun(t, "cont", "rm", "--recursive", "--tmpdir", tmpdir, "box")
	wantLs(t, tmpdir, "home", slices.Concat([]string{"o0"}, left))
	c := e2e.Connect(t, tmpdir)
	for _, n := range left {
		o, err := c.OpenObject(ctx, n, client.AtTimeStep(0))
		if err != nil {
			t.Fatalf("%s after its other container was deleted: %v", n, err)
		}
		o.Close(ctx)
	}
}

// checkMembersAfterRestart checks, after pdc down and up, the transient
// container scratch is gone, and every member of box names home as its
// container and is one box contains.
func checkMembersAfterRestart(ctx context.Context, t *testing.T, tmpdir string) {
	t.Helper()
	c := e2e.Connect(t, tmpdir)
	if _, err := c.OpenContainer(ctx, "scratch"); err == nil {
		t.Fatal("the transient container outlived the cluster")
	}
	home, err := c.OpenContainer(ctx, "home")
	if err != nil {
		t.Fatal(err)
	}
	box, err := c.OpenContainer(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := box.Objects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range infos {
		if o.ContainerID != home.ID() {
			t.Errorf("%s lists in box with home %d, want %d", o.Name, o.ContainerID, home.ID())
		}
		if in, err := box.Contains(ctx, o.ID); err != nil || !in {
			t.Errorf("box contains %s: %v, %v", o.Name, in, err)
		}
	}
	c.Close()
}
