package metaserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// A lookup that read the store before a delete committed must not
// remember the id after the delete's forget.
func TestLiveSetForgetsAcrossALookup(t *testing.T) {
	var l liveSet
	if ok, _ := l.has(7); ok {
		t.Fatal("an empty set knows 7")
	}
	_, gen := l.has(7) // a lookup starts, reads the store: 7 is there
	l.forget([]uint64{7})
	l.add(7, gen) // ...and comes back after the delete
	if ok, _ := l.has(7); ok {
		t.Fatal("7 is remembered after its delete was forgotten")
	}
	_, gen = l.has(8)
	l.add(8, gen)
	if ok, _ := l.has(8); !ok {
		t.Fatal("8 is not remembered")
	}
	l.forgetAll()
	if ok, _ := l.has(8); ok {
		t.Fatal("8 is remembered after forgetAll")
	}
}

func tagPutReq(id uint64, name string, v int64) *rpc.Request {
	val := make([]byte, 8)
	val[0] = byte(v)
	return &rpc.Request{Header: (&wire.TagBatch{Puts: []wire.TagPut{{ID: id, Name: name, Type: int32(region.Int64), Value: val}}}).Marshal(nil)}
}

func tagPutErr(t *testing.T, s *Service, req *rpc.Request) error {
	t.Helper()
	resp, err := s.tagPut(context.Background(), req)
	if err != nil {
		return err
	}
	var res wire.TagResults
	if err := res.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	if res.Codes[0] != 0 {
		return errors.New(res.Messages[0])
	}
	return nil
}

// TestTagChecksReadNoStore: the check that a tag's object exists reads
// the store once per object, not on every tag put and get. Before: every
// tag get made two lookups (the object's existence, the tag), and so did
// every put of a tag that was there before.
func TestTagChecksReadNoStore(t *testing.T) {
	s := newSvc(t)
	defer s.Close()
	ctx := context.Background()
	resp, err := s.objCreate(ctx, createReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	var res wire.ObjResults
	if err := res.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	id := res.Items[0].Meta.ID
	if err := tagPutErr(t, s, tagPutReq(id, "step", 1)); err != nil {
		t.Fatal(err)
	}
	get := &rpc.Request{Header: (&wire.TagKey{ID: id, Name: "step"}).Marshal(nil)}
	before := s.st.Gets()
	const n = 100
	for range n {
		if _, err := s.tagGet(ctx, get); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.st.Gets() - before; got != n {
		t.Errorf("%d tag gets of a created object made %d store lookups; want %d (the tags)", n, got, n)
	}
}

// TestTagsOfADeletedObject: once its delete is answered, no tag of an
// object can be read or written, whether the server learned that it
// existed from its create or from the store.
func TestTagsOfADeletedObject(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openAt(t, dir)
	resp, err := s.objCreate(ctx, createReq("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	var res wire.ObjResults
	if err := res.Unmarshal(resp.Header); err != nil {
		t.Fatal(err)
	}
	a, b := res.Items[0].Meta.ID, res.Items[1].Meta.ID
	check := func(s *Service, id uint64) {
		t.Helper()
		if err := tagPutErr(t, s, tagPutReq(id, "step", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.tagGet(ctx, &rpc.Request{Header: (&wire.TagKey{ID: id, Name: "step"}).Marshal(nil)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.objDelete(ctx, &rpc.Request{Header: (&wire.ObjKey{ID: id}).Marshal(nil)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.tagGet(ctx, &rpc.Request{Header: (&wire.TagKey{ID: id, Name: "step"}).Marshal(nil)}); !errors.Is(err, pdc.ErrNotFound) {
			t.Errorf("tag get of deleted object %d: %v, want not found", id, err)
		}
		if err := tagPutErr(t, s, tagPutReq(id, "step", 2)); err == nil {
			t.Errorf("tag put on deleted object %d succeeded", id)
		}
	}
	check(s, a) // known from its create
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir)
	defer s.Close()
	check(s, b) // known from the store, after a restart
}

// Reads of an object's tags racing its delete answer what it held or
// that it is gone, never a state it was not in: no tags at all (a list)
// or a missing tag (a get), which a client takes for the object's tags.
func TestTagReadsRacingDelete(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	var emptyLists, missingTags int
	for round := range 300 {
		obj := createOne(t, s, fmt.Sprint("o", round), []uint64{1})
		if err := tagPutErr(t, s, tagPutReq(obj, "t", 1)); err != nil {
			t.Fatal(err)
		}
		deleted := make(chan error, 1)
		go func() {
			_, err := s.objDelete(ctx, &rpc.Request{Header: (&wire.ObjKey{ID: obj}).Marshal(nil)})
			deleted <- err
		}()
		key := (&wire.TagKey{Kind: kindObject, ID: obj, Name: "t"}).Marshal(nil)
		for listGone, getGone := false, false; !listGone || !getGone; {
			if !listGone {
				resp, err := s.tagList(ctx, &rpc.Request{Header: key})
				switch {
				case errors.Is(err, pdc.ErrNotFound):
					listGone = true
				case err != nil:
					t.Fatal(err)
				default:
					var names wire.TagNames
					if err := names.Unmarshal(resp.Header); err != nil {
						t.Fatal(err)
					}
					if len(names.Names) == 0 {
						emptyLists++
					}
				}
			}
			if !getGone {
				_, err := s.tagGet(ctx, &rpc.Request{Header: key})
				switch {
				case err == nil:
				case !errors.Is(err, pdc.ErrNotFound):
					t.Fatal(err)
				case strings.Contains(err.Error(), `tag "t" of`):
					missingTags++
					getGone = true
				default:
					getGone = true
				}
			}
		}
		if err := <-deleted; err != nil {
			t.Fatal(err)
		}
	}
	if emptyLists+missingTags > 0 {
		t.Fatalf("reads racing a delete: %d tag lists answered none, %d gets answered the tag missing, for an object that had it", emptyLists, missingTags)
	}
}
