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

// A request sent again after its first copy's commit was applied but its
// fsync failed finds its change made and nothing to do. It must not be
// answered with success while the change may still be lost in a crash:
// that success would acknowledge it. Before, each of these answered at
// once, with the disk still failing.
func TestRetryFindingItsChangeIsAnsweredOnceDurable(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, t.TempDir())
	defer s.Close()
	id := createOne(t, s, "a", []uint64{4}) // ids are reserved ahead, in a commit of their own
	call := func(h func(context.Context, *rpc.Request) (*rpc.Response, error), m interface{ Marshal([]byte) []byte }) func() error {
		return func() error {
			_, err := h(ctx, &rpc.Request{Header: m.Marshal(nil), Client: "c"})
			return err
		}
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"container create", call(s.contCreate, &wire.ContCreate{Name: "c"})},
		{"container marked as being deleted", call(s.contDeleting, &wire.ContKey{Name: "c"})},
		{"membership added", func() error {
			_, err := members(s, wire.Members{ContID: 99, ObjIDs: []uint64{id}})
			return err
		}},
		{"membership purged", call(s.objPurge, &wire.ObjPurge{Version: wire.PageVersion, ContID: 99, IDs: []uint64{id}})},
		{"container's objects deleted", call(s.objDeleteCont, &wire.IDArg{ID: 1, Force: true})},
	}
	for _, st := range steps {
		restore := failSyncs(s)
		if err := st.do(); err == nil {
			t.Fatalf("%s: succeeded with a failed fsync", st.name)
		}
		if err := st.do(); err == nil {
			t.Fatalf("%s, sent again: succeeded while the first copy's change is not durable", st.name)
		}
		restore()
		if err := st.do(); err != nil {
			t.Fatalf("%s, sent again once the disk works: %v", st.name, err)
		}
	}
}
