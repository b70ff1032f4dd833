package metaserver

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// A read must not answer what a change whose fsync failed made (or, for
// a delete, leave out what it removed): under sync durability such a
// change is applied, so visible, and a power loss before any later commit
// takes it back, after the reader took the answer as fact. Each step
// makes a change whose fsync of the metadata log fails (a real failed
// fsync on a file system in memory), then:
//   - while every fsync still fails, each read fails with the store's
//     sync error (metastore.ErrUnsynced) instead of answering;
//   - once fsyncs work, each read answers, and a power-loss image taken
//     right after that answer (it keeps only what was fsynced), opened
//     again, answers the same.
//
// Before, each read below answered at once from the change: while the
// disk failed, and after, with an answer the image then contradicted (a
// tag value, a listing, a membership, a region's server the power loss
// took away, or "not found" for what it brought back).
func TestReadsAnswerNoUnsyncedChange(t *testing.T) {
	type read func(s *Service) (string, error)
	type step struct {
		name string
		// setup makes, on a working store, what change acts on.
		setup func(t *testing.T, s *Service)
		// change is the request whose fsync fails.
		change func(s *Service) error
		reads  map[string]read
	}
	// answer renders a read's outcome; "not found" is an answer too.
	answer := func(resp *rpc.Response, err error, decode func([]byte) (string, error)) (string, error) {
		switch {
		case errors.Is(err, pdc.ErrNotFound):
			return "not found", nil
		case err != nil:
			return "", err
		}
		return decode(resp.Header)
	}
	as := func(m interface{ Unmarshal([]byte) error }) func([]byte) (string, error) {
		return func(b []byte) (string, error) {
			if err := m.Unmarshal(b); err != nil {
				return "", err
			}
			return fmt.Sprintf("%+v", m), nil
		}
	}
	raw := func(b []byte) (string, error) { return fmt.Sprintf("%x", b), nil }
	objID := func(s *Service, name string) uint64 {
		m, _, err := s.resolveObj(&wire.ObjKey{Name: name})
		if err != nil {
			return 0 // the read then asks about no object
		}
		return m.ID
	}
	contID := func(s *Service, name string) uint64 {
		m, err := s.resolveCont(&wire.ContKey{Name: name})
		if err != nil {
			return 0
		}
		return m.ID
	}
	tagGet := func(kind uint32, id func(s *Service) uint64, name string) read {
		return func(s *Service) (string, error) {
			resp, err := call(s, tagGetH, &wire.TagKey{Kind: kind, ID: id(s), Name: name})
			return answer(resp, err, raw)
		}
	}
	tagList := func(kind uint32, id func(s *Service) uint64) read {
		return func(s *Service) (string, error) {
			resp, err := call(s, tagListH, &wire.TagKey{Kind: kind, ID: id(s)})
			return answer(resp, err, as(&wire.TagNames{}))
		}
	}
	objList := func(cont func(s *Service) uint64) read {
		return func(s *Service) (string, error) {
			resp, err := call(s, objListH, &wire.IDArg{ID: cont(s)})
			return answer(resp, err, as(&wire.ObjList{}))
		}
	}
	contList := func(s *Service) (string, error) {
		resp, err := call(s, contListH, &wire.IDArg{})
		return answer(resp, err, as(&wire.ContList{}))
	}
	objA := func(s *Service) uint64 { return objID(s, "a") }
	contOne := func(*Service) uint64 { return 1 }
	contC := func(s *Service) uint64 { return contID(s, "c") }
	putTag := func(kind uint32, id func(s *Service) uint64, name string, v byte) func(s *Service) error {
		return func(s *Service) error {
			req := &wire.TagBatch{Puts: []wire.TagPut{{Kind: kind, ID: id(s), Name: name, Type: 1, Value: []byte{v, 0, 0, 0}}}}
			resp, err := call(s, tagPutH, req)
			if err != nil {
				return err
			}
			var res wire.TagResults
			if err := res.Unmarshal(resp.Header); err != nil {
				return err
			}
			if res.Codes[0] != 0 {
				return errors.New(res.Messages[0])
			}
			return nil
		}
	}
	must := func(f func(s *Service) error) func(t *testing.T, s *Service) {
		return func(t *testing.T, s *Service) {
			t.Helper()
			if err := f(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	objectA := func(t *testing.T, s *Service) { createOne(t, s, "a", []uint64{4}) }
	both := func(fs ...func(t *testing.T, s *Service)) func(t *testing.T, s *Service) {
		return func(t *testing.T, s *Service) {
			for _, f := range fs {
				f(t, s)
			}
		}
	}
	// aID is the id of object "a" before the step's change, for reads
	// that ask about it once it may be deleted.
	var aID uint64
	makeC := func(s *Service) error { _, err := call(s, contCreateH, &wire.ContCreate{Name: "c"}); return err }
	steps := []step{
		{
			name:   "object tag put",
			setup:  objectA,
			change: putTag(kindObject, objA, "k", 7),
			reads: map[string]read{
				"tag get":  tagGet(kindObject, objA, "k"),
				"tag list": tagList(kindObject, objA),
				"tag query": func(s *Service) (string, error) {
					resp, err := call(s, tagQueryH, &wire.TagQuery{Query: "k=*", Step: uint32(tagindex.StepScan)})
					if err != nil {
						return "", err
					}
					var res wire.TagQueryResult
					if err := res.Unmarshal(resp.Header); err != nil {
						return "", err
					}
					ids, _, err := wire.ParseQueryPayload(&res, resp.Payload[0])
					return fmt.Sprint(ids), err
				},
			},
		},
		{
			name:   "object tag overwritten",
			setup:  both(objectA, must(putTag(kindObject, objA, "k", 1))),
			change: putTag(kindObject, objA, "k", 2),
			reads:  map[string]read{"tag get": tagGet(kindObject, objA, "k")},
		},
		{
			name:  "object tag delete",
			setup: both(objectA, must(putTag(kindObject, objA, "k", 1))),
			change: func(s *Service) error {
				_, err := call(s, tagDeleteH, &wire.TagKey{Kind: kindObject, ID: objA(s), Name: "k"})
				return err
			},
			reads: map[string]read{
				"tag get":  tagGet(kindObject, objA, "k"),
				"tag list": tagList(kindObject, objA),
			},
		},
		{
			name:   "container tag put",
			setup:  must(makeC),
			change: putTag(kindContainer, contC, "k", 7),
			reads: map[string]read{
				"tag get":  tagGet(kindContainer, contC, "k"),
				"tag list": tagList(kindContainer, contC),
			},
		},
		{
			name:   "object delete",
			setup:  both(objectA, must(putTag(kindObject, objA, "k", 1))),
			change: func(s *Service) error { _, err := call(s, objDeleteH, &wire.ObjKey{Name: "a"}); return err },
			reads: map[string]read{
				// Asked by the id the object had: found after the power
				// loss, unless the delete was durable.
				"tag get of its tag": func(s *Service) (string, error) {
					resp, err := call(s, tagGetH, &wire.TagKey{Kind: kindObject, ID: aID, Name: "k"})
					return answer(resp, err, raw)
				},
				"object list": objList(contOne),
			},
		},
		{
			name:  "object create",
			setup: objectA, // ids are reserved ahead, in a commit of their own
			change: func(s *Service) error {
				_, err := call(s, objCreateH, &wire.ObjBatch{Creates: []wire.ObjCreate{objCreate("b", 4)}})
				return err
			},
			reads: map[string]read{"object list": objList(contOne)},
		},
		{
			name:  "set dims",
			setup: objectA,
			change: func(s *Service) error {
				_, err := s.objSetDims(context.Background(), setDimsReq(objA(s), 8))
				return err
			},
			reads: map[string]read{"object list": objList(contOne)},
		},
		{
			name:   "container create",
			setup:  objectA,
			change: makeC,
			reads:  map[string]read{"container list": contList},
		},
		{
			name:   "container delete",
			setup:  must(makeC),
			change: func(s *Service) error { _, err := call(s, contDeleteH, &wire.ContKey{Name: "c"}); return err },
			reads:  map[string]read{"container list": contList},
		},
		{
			name:  "membership added",
			setup: both(objectA, must(makeC)),
			change: func(s *Service) error {
				_, err := call(s, objMembersH, &wire.Members{Version: wire.MembersVersion, ContID: contID(s, "c"), ObjIDs: []uint64{objA(s)}})
				return err
			},
			reads: map[string]read{
				"membership check": func(s *Service) (string, error) {
					resp, err := call(s, objMembersH, &wire.Members{Version: wire.MembersVersion, ContID: contID(s, "c"), ObjIDs: []uint64{objA(s)}, Check: true})
					return answer(resp, err, as(&wire.MembersReply{}))
				},
				"object list": objList(contC),
			},
		},
		{
			name:  "region placed",
			setup: objectA,
			change: func(s *Service) error {
				batch := wire.RegionBatch{Items: []wire.RegionReq{{Obj: objA(s), Off: []uint64{0}, Size: []uint64{4}, Candidates: []uint64{0}, Elem: 4}}}
				_, err := call(s, regionPlaceH, &batch)
				return err
			},
			reads: map[string]read{
				"region query": func(s *Service) (string, error) {
					resp, err := call(s, regionQueryH, &wire.RegionReq{Obj: objA(s), Off: []uint64{0}, Size: []uint64{4}})
					return answer(resp, err, as(&wire.RegionPieces{}))
				},
				"region query of many": func(s *Service) (string, error) {
					resp, err := call(s, regionQueryAllH, &wire.RegionBatch{Items: []wire.RegionReq{{Obj: objA(s), Off: []uint64{0}, Size: []uint64{4}}}})
					return answer(resp, err, as(&wire.RegionLocatedAll{}))
				},
			},
		},
	}
	for _, st := range steps {
		for name, rd := range st.reads {
			t.Run(st.name+"/"+name, func(t *testing.T) {
				mem := vfs.NewMem()
				fsys := vfs.NewFaulty(mem)
				s := openSyncOn(t, fsys)
				st.setup(t, s)
				aID = objA(s)
				remove := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Err: syscall.EIO})
				if err := st.change(s); !errors.Is(err, metastore.ErrUnsynced) {
					remove()
					crash(s)
					t.Fatalf("the change with its fsync failed: %v, want an error wrapping ErrUnsynced", err)
				}
				got, err := rd(s)
				if !errors.Is(err, metastore.ErrUnsynced) {
					t.Errorf("while the store cannot sync: answered %q, %v; want an error wrapping ErrUnsynced", got, err)
				}
				remove()
				got, err = rd(s)
				if err != nil {
					crash(s)
					t.Fatalf("once syncs work: %v", err)
				}
				crashed := mem.CrashClone() // power loss right after the answer
				crash(s)
				s = openSyncOn(t, crashed)
				defer s.Close()
				after, err := rd(s)
				if err != nil {
					t.Fatalf("after a power loss: %v", err)
				}
				if after != got {
					t.Fatalf("answered\n\t%s\nand after a power loss right then\n\t%s", got, after)
				}
			})
		}
	}
}

func tagGetH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.tagGet
}
func tagListH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.tagList
}
func tagPutH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.tagPut
}
func tagQueryH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.tagQuery
}
func objListH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.objList
}
func contListH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.contList
}
func objCreateH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.objCreate
}
func objMembersH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.objMembers
}
func regionPlaceH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.regionPlace
}
func regionQueryH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.regionQuery
}
func regionQueryAllH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.regionQueryAll
}
