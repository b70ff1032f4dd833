package metaserver

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

func TestMoveForeignToANewOwner(t *testing.T) {
	a, b := newSvc(t), newSvc(t)
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	var names []string
	for i := range 200 {
		names = append(names, fmt.Sprint("obj", i))
	}
	resp, err := a.objCreate(ctx, createReq(names...))
	if err != nil {
		t.Fatal(err)
	}
	var res wire.ObjResults
	if err := res.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	ids := map[string]uint64{}
	for i, r := range res.Items {
		if r.Code != 0 {
			t.Fatalf("create %s: %s", names[i], r.Message)
		}
		ids[names[i]] = r.Meta.ID
	}
	hw := a.st.HighWater()

	// The cluster grows to two metadata servers: a is index 0, b index 1.
	a.ready.Store(false)
	b.ready.Store(false)
	a.SetPlacement(0, 2)
	b.SetPlacement(1, 2)
	moved, err := a.MoveForeign(ctx, func(ctx context.Context, index int, kvs *wire.KVBatch) error {
		if index != 1 {
			return fmt.Errorf("sent to index %d", index)
		}
		return b.importKVs(kvs)
	})
	if err != nil || moved == 0 {
		t.Fatalf("moved %d entries: %v", moved, err)
	}
	a.SetReady()
	b.SetReady()
	for name, id := range ids {
		owner, other := a, b
		if placement.Owner(placement.Key(name, 0), 2) == 1 {
			owner, other = b, a
		}
		if m, _, err := owner.loadObjByID(id); err != nil || m.Name != name {
			t.Fatalf("%s on its new owner: %v", name, err)
		}
		if _, ok, _ := other.st.Get(keyObjID(id)); ok {
			t.Fatalf("%s still on its old owner", name)
		}
	}
	if b.st.HighWater() < hw {
		t.Fatalf("new owner's id high-water %d is below the old owner's %d: ids could be reused", b.st.HighWater(), hw)
	}
	// Imports are refused once the cluster serves clients.
	if _, err := b.importRPC(ctx, nil); err == nil {
		t.Fatal("import accepted after the cluster became ready")
	}
}

// A store of one rank adopted twice within a second (killed starts in a
// row): the second adoption must not fail on the first one's directory.
func TestAdoptTwiceInOneSecond(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "meta-1")
	now := time.Date(2026, 11, 27, 23, 13, 42, 0, time.UTC)
	fsys := vfs.OrDefault(nil)
	var names []string
	for round := range 3 {
		leaveStore(t, dir, fmt.Sprint("obj", round))
		name := adoptedName(fsys, dir, now)
		names = append(names, name)
		if err := fsys.Rename(dir, name); err != nil {
			t.Fatalf("round %d: rename to %s: %v", round, name, err)
		}
	}
	if names[0] == names[1] || names[1] == names[2] || names[0] == names[2] {
		t.Fatalf("adopted names repeat: %q", names)
	}

	// And through Adopt itself, which renames with the clock.
	s := newSvc(t)
	defer s.Close()
	s.ready.Store(false)
	for round := range 2 {
		leaveStore(t, dir, fmt.Sprint("adopted", round))
		if n, err := s.Adopt(ctx, dir, nil); err != nil || n == 0 {
			t.Fatalf("round %d: adopted %d entries: %v", round, n, err)
		}
	}
}

// leaveStore leaves a metadata store in dir holding one object, name, as
// a server that is gone would.
func leaveStore(t *testing.T, dir, name string) {
	t.Helper()
	old, err := Open(Config{Dir: dir, CheckpointDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	old.SetPlacement(0, 1)
	old.SetReady()
	if _, err := old.objCreate(context.Background(), createReq(name)); err != nil {
		t.Fatal(err)
	}
	old.Close()
}
