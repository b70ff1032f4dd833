package metaserver

import (
	"context"
	"testing"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// createItems sends one create batch and returns its answer, or the
// error of the whole request.
func createItems(s *Service, creates ...wire.ObjCreate) ([]wire.ObjResult, error) {
	b := wire.ObjBatch{Creates: creates}
	resp, err := s.objCreate(context.Background(), &rpc.Request{Header: b.Marshal(nil), Client: "c"})
	if err != nil {
		return nil, err
	}
	var out wire.ObjResults
	if err := out.Unmarshal(resp.Header); err != nil {
		return nil, err
	}
	return out.Items, nil
}

func objCreate(name string, dims ...uint64) wire.ObjCreate {
	return wire.ObjCreate{ContID: 1, Name: name, Props: wire.ObjectProps{Dims: dims, Type: 1}}
}

// A create whose commit was applied but whose fsync failed was answered
// with an error, and its client may send it again: the retry must succeed,
// with the object the first one made (no second object, no id the first
// did not give), and that object must be there after a restart. Before,
// the retry found the object and answered "exists", to a client that had
// been told its create failed and that holds no handle to it. A create
// of the identity with other properties still finds it taken.
func TestRetriedCreateAfterFailedSyncSucceeds(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	// Ids are reserved ahead, in a commit of their own: one create
	// before the fault, so that the fault meets the create's commit.
	if _, err := createItems(s, objCreate("w", 4)); err != nil {
		t.Fatal(err)
	}
	restore := failSyncs(s)
	if _, err := createItems(s, objCreate("x", 4), objCreate("y", 4), objCreate("z", 4)); err == nil {
		t.Fatal("a create whose fsync failed succeeded")
	}
	restore()
	got, err := createItems(s, objCreate("x", 4), objCreate("y", 4), objCreate("z", 8))
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"x", "y"} {
		if got[i].Code != wire.CodeOK {
			t.Fatalf("retried create of %q: %s (code %d)", name, got[i].Message, got[i].Code)
		}
	}
	if got[2].Code != wire.CodeExists {
		t.Fatalf("create of z with other dims than the failed one: code %d (%s), want exists", got[2].Code, got[2].Message)
	}
	ids := map[string]uint64{"x": got[0].Meta.ID, "y": got[1].Meta.ID}
	check := func(when string) {
		t.Helper()
		for name, id := range ids {
			m, _, err := s.resolveObj(&wire.ObjKey{Name: name})
			if err != nil {
				t.Fatalf("%s: open %q: %v", when, name, err)
			}
			if m.ID != id {
				t.Fatalf("%s: %q has id %d, the retried create answered %d", when, name, m.ID, id)
			}
		}
	}
	check("after the retry")
	// Once taken over, it is an object like any other.
	again, err := createItems(s, objCreate("x", 4))
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Code != wire.CodeExists {
		t.Fatalf("a third create of x: code %d (%s), want exists", again[0].Code, again[0].Message)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir)
	defer s.Close()
	check("after a restart")
}
