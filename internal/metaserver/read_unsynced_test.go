package metaserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// A read of the store, rendered as text so that two answers compare;
// "not found" is an answer too.
type storeRead func(ctx context.Context, s *Service) (string, error)

// callCtx sends m to handler h of s, as client "c2", with ctx.
func callCtx(ctx context.Context, s *Service, h func(*Service) func(context.Context, *rpc.Request) (*rpc.Response, error), m interface{ Marshal([]byte) []byte }) (*rpc.Response, error) {
	return h(s)(ctx, &rpc.Request{Header: m.Marshal(nil), Client: "c2"})
}

// answerOf renders a read's outcome with decode.
func answerOf(resp *rpc.Response, err error, decode func([]byte) (string, error)) (string, error) {
	switch {
	case errors.Is(err, pdc.ErrNotFound):
		return "not found", nil
	case err != nil:
		return "", err
	}
	return decode(resp.Header)
}

func decodeAs(m interface{ Unmarshal([]byte) error }) func([]byte) (string, error) {
	return func(b []byte) (string, error) {
		if err := m.Unmarshal(b); err != nil {
			return "", err
		}
		return fmt.Sprintf("%+v", m), nil
	}
}

func decodeRaw(b []byte) (string, error) { return fmt.Sprintf("%x", b), nil }

// readUsing sends the request req(s) builds to h and renders the answer.
func readUsing[M interface{ Marshal([]byte) []byte }](h func(*Service) func(context.Context, *rpc.Request) (*rpc.Response, error), req func(s *Service) M, decode func() func([]byte) (string, error)) storeRead {
	return func(ctx context.Context, s *Service) (string, error) {
		resp, err := callCtx(ctx, s, h, req(s))
		return answerOf(resp, err, decode())
	}
}

func readTagGet(kind uint32, id func(s *Service) uint64, name string) storeRead {
	return readUsing(tagGetH, func(s *Service) *wire.TagKey { return &wire.TagKey{Kind: kind, ID: id(s), Name: name} },
		func() func([]byte) (string, error) { return decodeRaw })
}

func readTagList(kind uint32, id func(s *Service) uint64) storeRead {
	return readUsing(tagListH, func(s *Service) *wire.TagKey { return &wire.TagKey{Kind: kind, ID: id(s)} },
		func() func([]byte) (string, error) { return decodeAs(&wire.TagNames{}) })
}

func readObjList(cont func(s *Service) uint64) storeRead {
	return readUsing(objListH, func(s *Service) *wire.IDArg { return &wire.IDArg{ID: cont(s)} },
		func() func([]byte) (string, error) { return decodeAs(&wire.ObjList{}) })
}

func readObjPage(cont func(s *Service) uint64, idsOnly bool) storeRead {
	return readUsing(objPageH, func(s *Service) *wire.ObjPageReq {
		return &wire.ObjPageReq{Version: wire.PageVersion, ContID: cont(s), IDsOnly: idsOnly}
	}, func() func([]byte) (string, error) { return decodeAs(&wire.ObjPage{}) })
}

var readContList = readUsing(contListH, func(*Service) *wire.IDArg { return &wire.IDArg{} },
	func() func([]byte) (string, error) { return decodeAs(&wire.ContList{}) })

var readContPage = readUsing(contPageH, func(*Service) *wire.ContPageReq { return &wire.ContPageReq{Version: wire.PageVersion} },
	func() func([]byte) (string, error) { return decodeAs(&wire.ContPage{}) })

func readContGet(k func(s *Service) wire.ContKey) storeRead {
	return readUsing(contGetH, func(s *Service) *wire.ContKey { c := k(s); return &c },
		func() func([]byte) (string, error) { return decodeAs(&wire.ContainerMeta{}) })
}

// readContCreate creates container name, which finds it there, and
// renders the answer: the container's record, or the refusal of one
// being deleted.
func readContCreate(name string) storeRead {
	return func(ctx context.Context, s *Service) (string, error) {
		resp, err := callCtx(ctx, s, contCreateH, &wire.ContCreate{Name: name})
		if errors.Is(err, pdc.ErrExists) {
			return "exists: " + err.Error(), nil
		}
		return answerOf(resp, err, decodeAs(&wire.ContReply{}))
	}
}

// readStageList lists the staged records of the default namespace.
var readStageList = readUsing(stageListH, func(*Service) *wire.StageListReq { return &wire.StageListReq{Version: wire.StageVersion} },
	func() func([]byte) (string, error) { return decodeAs(&wire.StageList{}) })

// readOpen opens the object k(s) names, and renders the item's answer.
func readOpen(k func(s *Service) wire.ObjKey) storeRead {
	return func(ctx context.Context, s *Service) (string, error) {
		resp, err := callCtx(ctx, s, objOpenH, &wire.ObjBatch{Opens: []wire.ObjKey{k(s)}})
		if err != nil {
			return "", err
		}
		var res wire.ObjResults
		if err := res.Unmarshal(resp.Header); err != nil {
			return "", err
		}
		r := res.Items[0]
		return answerOf(&rpc.Response{Header: r.Meta.Marshal(nil)}, r.Code.Err(), decodeAs(&wire.ObjectMeta{}))
	}
}

func readMemberCheck(cont, obj func(s *Service) uint64) storeRead {
	return readUsing(objMembersH, func(s *Service) *wire.Members {
		return &wire.Members{Version: wire.MembersVersion, ContID: cont(s), ObjIDs: []uint64{obj(s)}, Check: true}
	}, func() func([]byte) (string, error) { return decodeAs(&wire.MembersReply{}) })
}

func readTagQuery(q string) storeRead {
	return func(ctx context.Context, s *Service) (string, error) {
		resp, err := callCtx(ctx, s, tagQueryH, &wire.TagQuery{Query: q, Step: uint32(tagindex.StepScan)})
		if err != nil {
			return "", err
		}
		var res wire.TagQueryResult
		if err := res.Unmarshal(resp.Header); err != nil {
			return "", err
		}
		ids, _, err := wire.ParseQueryPayload(&res, resp.Payload[0])
		return fmt.Sprint(ids), err
	}
}

func readRegion(obj func(s *Service) uint64) storeRead {
	return readUsing(regionQueryH, func(s *Service) *wire.RegionReq {
		return &wire.RegionReq{Obj: obj(s), Off: []uint64{0}, Size: []uint64{4}}
	}, func() func([]byte) (string, error) { return decodeAs(&wire.RegionPieces{}) })
}

func readRegions(obj func(s *Service) uint64) storeRead {
	return readUsing(regionQueryAllH, func(s *Service) *wire.RegionBatch {
		return &wire.RegionBatch{Items: []wire.RegionReq{{Obj: obj(s), Off: []uint64{0}, Size: []uint64{4}}}}
	}, func() func([]byte) (string, error) { return decodeAs(&wire.RegionLocatedAll{}) })
}

// readPlace places a write of [0, 4) of obj on one of cands and renders
// where it goes. A write over a placed region goes in place, to the
// region's server, with no commit of its own: its answer is a read of
// the region map.
func readPlace(obj func(s *Service) uint64, cands ...uint64) storeRead {
	return readUsing(regionPlaceH, func(s *Service) *wire.RegionBatch {
		return &wire.RegionBatch{Items: []wire.RegionReq{{Obj: obj(s), Off: []uint64{0}, Size: []uint64{4}, Candidates: cands, Elem: 4}}}
	}, func() func([]byte) (string, error) { return decodeAs(&wire.RegionLocatedAll{}) })
}

// Writes that find what they change gone answer "not found", a read of
// its absence: set dims, a tag put (in its item's result), a container's
// lifetime change.
func writeSetDims(obj func(s *Service) uint64) storeRead {
	return func(ctx context.Context, s *Service) (string, error) {
		resp, err := s.objSetDims(ctx, setDimsReq(obj(s), 8))
		return answerOf(resp, err, decodeRaw)
	}
}

func writeTagPut(kind uint32, id func(s *Service) uint64, name string) storeRead {
	return readUsing(tagPutH, func(s *Service) *wire.TagBatch {
		return &wire.TagBatch{Puts: []wire.TagPut{{Kind: kind, ID: id(s), Name: name, Type: 1, Value: []byte{1, 0, 0, 0}}}}
	}, func() func([]byte) (string, error) { return decodeAs(&wire.TagResults{}) })
}

func writeLifetime(cont string) storeRead {
	return readUsing(contLifetimeH, func(*Service) *wire.ContCreate { return &wire.ContCreate{Name: cont, Lifetime: 1} },
		func() func([]byte) (string, error) { return decodeRaw })
}

func readStageLookup(path string) storeRead {
	return readUsing(stageLookupH, func(*Service) *wire.StageKey {
		return &wire.StageKey{Version: wire.StageVersion, Path: path}
	}, func() func([]byte) (string, error) { return decodeAs(&wire.StageRecord{}) })
}

func removeStaged(q wire.StageRemoveReq) storeChange {
	return func(s *Service) error {
		q.Version = wire.StageVersion
		_, err := call(s, stageRemoveH, &q)
		return err
	}
}

func produceStaged(path string, crc uint32) storeChange {
	return func(s *Service) error { _, err := produceCRC(s, path, crc); return err }
}

// The objects and containers the steps below act on, by name: 0 if
// there is none (a read then asks about no object).
func objNamed(name string) func(s *Service) uint64 {
	return func(s *Service) uint64 {
		m, _, err := s.resolveObj(&wire.ObjKey{Name: name})
		if err != nil {
			return 0
		}
		return m.ID
	}
}

func contNamed(name string) func(s *Service) uint64 {
	return func(s *Service) uint64 {
		m, err := s.resolveCont(&wire.ContKey{Name: name})
		if err != nil {
			return 0
		}
		return m.ID
	}
}

// A change of the steps below, sent as client "c".
type storeChange func(s *Service) error

func putTagOn(kind uint32, id func(s *Service) uint64, name string, v byte) storeChange {
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

func deleteTagOf(kind uint32, id func(s *Service) uint64, name string) storeChange {
	return func(s *Service) error {
		_, err := call(s, tagDeleteH, &wire.TagKey{Kind: kind, ID: id(s), Name: name})
		return err
	}
}

func deleteObjNamed(name string) storeChange {
	return func(s *Service) error { _, err := call(s, objDeleteH, &wire.ObjKey{Name: name}); return err }
}

func createContNamed(name string) storeChange {
	return func(s *Service) error { _, err := call(s, contCreateH, &wire.ContCreate{Name: name}); return err }
}

func deleteContNamed(name string) storeChange {
	return func(s *Service) error { _, err := call(s, contDeleteH, &wire.ContKey{Name: name}); return err }
}

func addMember(cont, obj func(s *Service) uint64) storeChange {
	return func(s *Service) error {
		_, err := call(s, objMembersH, &wire.Members{Version: wire.MembersVersion, ContID: cont(s), ObjIDs: []uint64{obj(s)}})
		return err
	}
}

func growDims(obj func(s *Service) uint64) storeChange {
	return func(s *Service) error {
		_, err := s.objSetDims(context.Background(), setDimsReq(obj(s), 8))
		return err
	}
}

// setupAll makes, on a working store, what a step's change acts on.
func setupAll(fs ...storeChange) func(t *testing.T, s *Service) {
	return func(t *testing.T, s *Service) {
		t.Helper()
		for _, f := range fs {
			if err := f(s); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func createObjNamed(name string) storeChange {
	return func(s *Service) error {
		got, err := createItems(s, objCreate(name, 4))
		if err == nil && got[0].Code != wire.CodeOK {
			err = errors.New(got[0].Message)
		}
		return err
	}
}

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
	a, c, one := objNamed("a"), contNamed("c"), func(*Service) uint64 { return 1 }
	// aID is the id of object "a" before the step's change, for reads
	// that ask about it once it may be deleted.
	var aID uint64
	wasA := func(*Service) uint64 { return aID }
	steps := []struct {
		name   string
		setup  func(t *testing.T, s *Service)
		change storeChange
		reads  map[string]storeRead
	}{
		{"object tag put", setupAll(createObjNamed("a")), putTagOn(kindObject, a, "k", 7), map[string]storeRead{
			"tag get":   readTagGet(kindObject, a, "k"),
			"tag list":  readTagList(kindObject, a),
			"tag query": readTagQuery("k=*"),
		}},
		{"object tag overwritten", setupAll(createObjNamed("a"), putTagOn(kindObject, a, "k", 1)), putTagOn(kindObject, a, "k", 2), map[string]storeRead{
			"tag get": readTagGet(kindObject, a, "k"),
		}},
		{"object tag delete", setupAll(createObjNamed("a"), putTagOn(kindObject, a, "k", 1)), deleteTagOf(kindObject, a, "k"), map[string]storeRead{
			"tag get":  readTagGet(kindObject, a, "k"),
			"tag list": readTagList(kindObject, a),
		}},
		{"container tag put", setupAll(createContNamed("c")), putTagOn(kindContainer, c, "k", 7), map[string]storeRead{
			"tag get":  readTagGet(kindContainer, c, "k"),
			"tag list": readTagList(kindContainer, c),
		}},
		{"object delete", setupAll(createObjNamed("a"), putTagOn(kindObject, a, "k", 1)), deleteObjNamed("a"), map[string]storeRead{
			// Asked by the id the object had: found after the power
			// loss, unless the delete was durable.
			"tag get of its tag": readTagGet(kindObject, wasA, "k"),
			"object list":        readObjList(one),
			// Writes to it answer "not found" as reads do.
			"set dims":     writeSetDims(wasA),
			"tag put":      writeTagPut(kindObject, wasA, "j"),
			"region place": readPlace(wasA, 0),
		}},
		{"object create", setupAll(createObjNamed("a")), createObjNamed("b"), map[string]storeRead{
			"object list": readObjList(one),
		}},
		{"set dims", setupAll(createObjNamed("a")), growDims(a), map[string]storeRead{
			"object list": readObjList(one),
		}},
		{"container create", setupAll(createObjNamed("a")), createContNamed("c"), map[string]storeRead{
			"container list": readContList,
		}},
		{"container delete", setupAll(createContNamed("c")), deleteContNamed("c"), map[string]storeRead{
			"container list":  readContList,
			"lifetime change": writeLifetime("c"),
		}},
		{"membership added", setupAll(createObjNamed("a"), createContNamed("c")), addMember(c, a), map[string]storeRead{
			"membership check": readMemberCheck(c, a),
			"object list":      readObjList(c),
		}},
		{"region placed", setupAll(createObjNamed("a")), func(s *Service) error {
			batch := wire.RegionBatch{Items: []wire.RegionReq{{Obj: a(s), Off: []uint64{0}, Size: []uint64{4}, Candidates: []uint64{0}, Elem: 4}}}
			_, err := call(s, regionPlaceH, &batch)
			return err
		}, map[string]storeRead{
			"region query":         readRegion(a),
			"region query of many": readRegions(a),
			// On another server if the placement is lost.
			"placed again": readPlace(a, 1),
		}},
		{"staged record removal", setupAll(produceStaged("p", 1)), removeStaged(wire.StageRemoveReq{Path: "p"}), map[string]storeRead{
			"lookup":  readStageLookup("p"),
			"listing": readStageList,
		}},
		{"staged records removed by prefix", setupAll(produceStaged("d/p", 1)), removeStaged(wire.StageRemoveReq{Prefix: "d/"}), map[string]storeRead{
			"lookup": readStageLookup("d/p"),
		}},
	}
	ctx := context.Background()
	for _, st := range steps {
		for name, rd := range st.reads {
			t.Run(st.name+"/"+name, func(t *testing.T) {
				mem := vfs.NewMem()
				fsys := vfs.NewFaulty(mem)
				s := openSyncOn(t, fsys)
				st.setup(t, s)
				aID = a(s)
				remove := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Err: syscall.EIO})
				if err := st.change(s); !errors.Is(err, metastore.ErrUnsynced) {
					remove()
					crash(s)
					t.Fatalf("the change with its fsync failed: %v, want an error wrapping ErrUnsynced", err)
				}
				got, err := rd(ctx, s)
				if !errors.Is(err, metastore.ErrUnsynced) {
					t.Errorf("while the store cannot sync: answered %q, %v; want an error wrapping ErrUnsynced", got, err)
				}
				remove()
				got, err = rd(ctx, s)
				if err != nil {
					crash(s)
					t.Fatalf("once syncs work: %v", err)
				}
				crashed := mem.CrashClone() // power loss right after the answer
				crash(s)
				s = openSyncOn(t, crashed)
				defer s.Close()
				after, err := rd(ctx, s)
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

// A read must not answer what a change still in its fsync made (or, for
// a delete, leave out what it removed): the change is applied, so
// visible, before its fsync returns, and a power loss during the fsync
// takes it back after the read answered. Each read runs during the
// change's fsync with a context already done: a read that must wait for
// the fsync fails at once instead, so whatever it answers, it answers
// during the fsync, without a timer. The power-loss image, taken then,
// must lack the change (else the fsync held was not the change's); a
// read that answered during the fsync must answer what the image answers.
// A read that waits answers once the fsync is done. Before, each read
// below answered the change during its fsync; so did a membership change,
// a tag delete and a staged record's removal sent again while their first
// copy was in its fsync, which found nothing to do and answered as if it
// were made, and a container create finding the container, which answered
// its record (a lifetime, a mark of being deleted) at once. (obj_list
// fails at once with a context done once it lists a member, so it is
// probed here only where it lists none.) Reads that hold lifeMu,
// which a delete holds through its fsync, wait for it already, and are
// not among them. A region query, and a write placed in place, waited
// for a placement on the regions' lock, which the placement held through
// its fsync; they now wait for the placement of their object alone.
func TestReadsWaitForChangesInTheirFsync(t *testing.T) {
	a, c, one := objNamed("a"), contNamed("c"), func(*Service) uint64 { return 1 }
	var aID, cID uint64 // as they were before the change
	wasA := func(*Service) uint64 { return aID }
	wasC := func(*Service) uint64 { return cID }
	byName := func(name string) func(*Service) wire.ObjKey {
		return func(*Service) wire.ObjKey { return wire.ObjKey{Name: name} }
	}
	byID := func(id func(*Service) uint64) func(*Service) wire.ObjKey {
		return func(s *Service) wire.ObjKey { return wire.ObjKey{ID: id(s)} }
	}
	contByName := func(s *Service) wire.ContKey { return wire.ContKey{Name: "c"} }
	contByID := func(s *Service) wire.ContKey { return wire.ContKey{ID: cID} }
	steps := []struct {
		name   string
		setup  func(t *testing.T, s *Service)
		change storeChange
		reads  map[string]storeRead
	}{
		{"object tag put", setupAll(createObjNamed("a")), putTagOn(kindObject, a, "k", 7), map[string]storeRead{
			"tag get":   readTagGet(kindObject, a, "k"),
			"tag list":  readTagList(kindObject, a),
			"tag query": readTagQuery("k=*"),
		}},
		{"object tag delete", setupAll(createObjNamed("a"), putTagOn(kindObject, a, "k", 1)), deleteTagOf(kindObject, a, "k"), map[string]storeRead{
			"tag get":  readTagGet(kindObject, a, "k"),
			"tag list": readTagList(kindObject, a),
		}},
		{"container tag put", setupAll(createContNamed("c")), putTagOn(kindContainer, c, "k", 7), map[string]storeRead{
			"tag get": readTagGet(kindContainer, c, "k"),
		}},
		{"object delete", setupAll(createObjNamed("a")), deleteObjNamed("a"), map[string]storeRead{
			"open by name":       readOpen(byName("a")),
			"open by id":         readOpen(byID(wasA)),
			"object list":        readObjList(one),
			"page of members":    readObjPage(one, false),
			"page of member ids": readObjPage(one, true),
			// Writes to it, which wait on lifeMu.
			"set dims":     writeSetDims(wasA),
			"tag put":      writeTagPut(kindObject, wasA, "j"),
			"region place": readPlace(wasA, 0),
		}},
		{"container delete", setupAll(createContNamed("c")), deleteContNamed("c"), map[string]storeRead{
			"container get by name": readContGet(contByName),
			"container get by id":   readContGet(contByID),
			"container list":        readContList,
			"page of containers":    readContPage,
			"lifetime change":       writeLifetime("c"),
		}},
		{"container marked as being deleted", setupAll(createContNamed("c")), func(s *Service) error {
			_, err := call(s, contDeletingH, &wire.ContKey{Name: "c"})
			return err
		}, map[string]storeRead{
			"container get":               readContGet(contByName),
			"container create finding it": readContCreate("c"),
		}},
		{"container lifetime set", setupAll(createContNamed("c")), func(s *Service) error {
			_, err := call(s, contLifetimeH, &wire.ContCreate{Name: "c", Lifetime: 1})
			return err
		}, map[string]storeRead{
			"container get":               readContGet(contByName),
			"container create finding it": readContCreate("c"),
		}},
		{"membership added", setupAll(createObjNamed("a"), createContNamed("c")), addMember(c, a), map[string]storeRead{
			"membership check": readMemberCheck(wasC, a),
			"page of members":  readObjPage(wasC, false),
			// The same request sent again, which finds nothing to do.
			"sent again": readUsing(objMembersH, func(s *Service) *wire.Members {
				return &wire.Members{Version: wire.MembersVersion, ContID: cID, ObjIDs: []uint64{aID}}
			}, func() func([]byte) (string, error) { return decodeAs(&wire.MembersReply{}) }),
		}},
		{"staged record removal", setupAll(produceStaged("p", 1)), removeStaged(wire.StageRemoveReq{Path: "p"}), map[string]storeRead{
			"lookup":  readStageLookup("p"),
			"listing": readStageList,
			"sent again": readUsing(stageRemoveH, func(*Service) *wire.StageRemoveReq {
				return &wire.StageRemoveReq{Version: wire.StageVersion, Path: "p"}
			}, func() func([]byte) (string, error) { return decodeAs(&wire.StageRemoved{}) }),
		}},
		{"staged records removed by prefix", setupAll(produceStaged("d/p", 1)), removeStaged(wire.StageRemoveReq{Prefix: "d/"}), map[string]storeRead{
			"lookup": readStageLookup("d/p"),
		}},
		{"region placed", setupAll(createObjNamed("a")), placeOn(a, 0), map[string]storeRead{
			"region query":         readRegion(a),
			"region query of many": readRegions(a),
			// On another server if the placement is lost.
			"placed again": readPlace(a, 1),
		}},
		{"object tag delete sent again", setupAll(createObjNamed("a"), putTagOn(kindObject, a, "k", 1)), deleteTagOf(kindObject, a, "k"), map[string]storeRead{
			"tag delete": readUsing(tagDeleteH, func(s *Service) *wire.TagKey { return &wire.TagKey{Kind: kindObject, ID: aID, Name: "k"} },
				func() func([]byte) (string, error) { return decodeRaw }),
		}},
	}
	for _, st := range steps {
		for name, rd := range st.reads {
			t.Run(st.name+"/"+name, func(t *testing.T) {
				mem := vfs.NewMem()
				fsys := vfs.NewFaulty(mem)
				s := openSyncOn(t, fsys)
				st.setup(t, s)
				aID, cID = a(s), c(s)
				syncing, release := holdWALSync(fsys)
				changed := make(chan error, 1)
				go func() { changed <- st.change(s) }()
				<-syncing
				done, cancel := context.WithCancel(context.Background())
				cancel()
				early, earlyErr := rd(done, s)
				type answer struct {
					got string
					err error
				}
				late := make(chan answer, 1)
				go func() {
					got, err := rd(context.Background(), s)
					late <- answer{got, err}
				}()
				crashed := mem.CrashClone() // power loss now, during the change's fsync
				close(release)
				if err := <-changed; err != nil {
					t.Fatalf("the change: %v", err)
				}
				after := <-late
				if after.err != nil {
					t.Fatalf("a read that waited for the change's fsync: %v", after.err)
				}
				fsys.OnOp(nil)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openSyncOn(t, crashed)
				defer s.Close()
				lost, err := rd(context.Background(), s)
				if err != nil {
					t.Fatalf("after a power loss during the change's fsync: %v", err)
				}
				if lost == after.got {
					t.Fatalf("the power-loss image answers as after the change (%s): it was not taken during the change's fsync", lost)
				}
				switch {
				case earlyErr == nil && early != lost:
					t.Fatalf("during the change's fsync the read answered\n\t%s\nand after a power loss then\n\t%s", early, lost)
				case earlyErr != nil && !errors.Is(earlyErr, context.Canceled):
					t.Fatalf("during the change's fsync the read failed with %v; want it to wait for the fsync (context canceled)", earlyErr)
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
func objOpenH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.objOpen
}
func contListH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.contList
}
func contPageH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.contPage
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
func contLifetimeH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.contLifetime
}
func regionQueryAllH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.regionQueryAll
}
func stageLookupH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.stageLookup
}
func stageListH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.stageList
}

// A read gives up at its deadline while the store makes what it read
// durable. Once a sync has failed, a read settles the store: a commit of
// its own, on a new log once pebble has flushed, which on a disk that
// then stalls does not return. Each read here runs after a change whose
// fsync failed, on a disk whose every sync then stalls; once the read has
// the store sync (the stall's first sync), its context is canceled, and
// it must fail with the context's error. Before, each waited for the
// disk, past its deadline, for as long as the disk stalled (here until
// the test released it); a staged record's lookup and a tag query's fence
// ran inline on their connection, which waited with them.
func TestReadsGiveUpWhileTheStoreSettlesOnAStalledDisk(t *testing.T) {
	a := objNamed("a")
	tagPut := putTagOn(kindObject, a, "k", 2)
	tagged := setupAll(createObjNamed("a"), putTagOn(kindObject, a, "k", 1))
	produce := func(s *Service) error { _, err := produceCRC(s, "p", 2); return err }
	cases := []struct {
		name   string
		open   func(t *testing.T, fsys vfs.FS) *Service
		setup  func(t *testing.T, s *Service)
		change storeChange
		read   storeRead
	}{
		{"tag get", openSyncOn, tagged, tagPut, readTagGet(kindObject, a, "k")},
		{"tag get of a missing tag", openSyncOn, tagged, tagPut, readTagGet(kindObject, a, "none")},
		{"tag list", openSyncOn, tagged, tagPut, readTagList(kindObject, a)},
		{"open", openSyncOn, tagged, tagPut, readOpen(func(*Service) wire.ObjKey { return wire.ObjKey{Name: "a"} })},
		{"container list", openSyncOn, tagged, tagPut, readContList},
		{"tag query", openSyncOn, tagged, tagPut, readTagQuery("k=*")},
		{"staged record lookup", openSyncOn, setupAll(func(s *Service) error { _, err := produceCRC(s, "p", 1); return err }), produce,
			func(ctx context.Context, s *Service) (string, error) {
				resp, err := s.stageLookup(ctx, stageReq(&wire.StageKey{Version: wire.StageVersion, Path: "p"}))
				return answerOf(resp, err, decodeAs(&wire.StageRecord{}))
			}},
		{"fence of the tag index", openSyncIndexedOn, tagged, tagPut,
			func(ctx context.Context, s *Service) (string, error) {
				resp, err := s.indexFence(ctx, &rpc.Request{Method: wire.MethodIndexFence})
				return answerOf(resp, err, decodeAs(&wire.IndexFenceReply{}))
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fsys := vfs.NewFaulty(mem)
			s := c.open(t, fsys)
			c.setup(t, s)
			remove := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Path: walPath, Err: syscall.EIO})
			if err := c.change(s); !errors.Is(err, metastore.ErrUnsynced) {
				remove()
				crash(s)
				t.Fatalf("the change with its fsync failed: %v, want an error wrapping ErrUnsynced", err)
			}
			remove()
			var first sync.Once
			stalled, release := make(chan struct{}), make(chan struct{})
			fsys.OnOp(func(op vfs.Op, _ string) {
				if op == vfs.OpSync || op == vfs.OpSyncDir {
					first.Do(func() { close(stalled) })
					<-release
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			answered := make(chan error, 1)
			go func() {
				_, err := c.read(ctx, s)
				answered <- err
			}()
			select {
			case <-stalled:
			case err := <-answered:
				cancel()
				close(release)
				crash(s)
				t.Fatalf("the read answered (%v) without syncing the store after a failed sync", err)
			}
			cancel()
			select {
			case err := <-answered:
				if !errors.Is(err, context.Canceled) && !errors.Is(err, pdc.ErrCanceled) {
					t.Errorf("canceled while the disk stalls: %v; want the context's error", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("canceled, the read still waits for the stalled disk after 10s")
				close(release)
				<-answered
				release = nil
			}
			if release != nil {
				close(release)
			}
			fsys.OnOp(nil)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// openSyncIndexedOn is openSyncOn with the tag index on, as the first of
// two metadata servers, the other down: a tag change has index entries to
// deliver there, which its outbox holds if its sync failed.
func openSyncIndexedOn(t *testing.T, fsys vfs.FS) *Service {
	t.Helper()
	s, err := Open(Config{Dir: "meta", CheckpointDir: "checkpoints", FS: fsys, LogBytes: memLogBytes, Durability: metastore.DurabilitySync, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.SetPlacement(0, 2)
	s.MovesDone()
	c := &testCluster{t: t, svcs: []*Service{s}, down: map[int]bool{1: true}}
	if err := s.StartIndex(context.Background(), fakePeers{c}); err != nil {
		t.Fatal(err)
	}
	s.SetReady()
	return s
}
