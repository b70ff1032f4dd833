package metaserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// A create's commit is visible before its fsync returns. Nothing answered
// in that window may hand out what it made: a client that opened the
// object (or a data server that confirmed it, Peek) writes to it, tags it,
// adds it to containers, a client that got the container creates objects
// in it, and a power loss before the fsync takes the create back, leaving
// those on an object or a container that never existed.
//
// Each probe runs during the create's fsync with a context already done:
// a probe that must wait for the fsync fails at once instead, so whatever
// it answers, it answers during the fsync, without a timer. The power-loss
// image, taken then, must lack what the create made (else the fsync held
// was not the create's), so a probe that answered with it handed out what
// a crash takes back. A probe that waits answers once the fsync is done.
func TestOpenInCreatesFsyncHandsOutNoObject(t *testing.T) {
	objID := func(s *Service, name string) uint64 {
		return placement.ID(placement.Key(name, 0), uint32(s.st.HighWater()))
	}
	createObj := func(s *Service) error {
		cb := wire.ObjBatch{Creates: []wire.ObjCreate{{ContID: 1, Name: "b", Props: wire.ObjectProps{Dims: []uint64{4}, Type: 1}}}}
		_, err := s.objCreate(context.Background(), &rpc.Request{Header: cb.Marshal(nil), Client: "c"})
		return err
	}
	createCont := func(s *Service) error {
		_, err := s.contCreate(context.Background(), &rpc.Request{Header: (&wire.ContCreate{Name: "k"}).Marshal(nil), Client: "c"})
		return err
	}
	objGone := func(s *Service, id uint64) bool {
		_, _, err := s.loadObjByID(id)
		return errors.Is(err, pdc.ErrNotFound)
	}
	contGone := func(s *Service, id uint64) bool {
		_, err := s.resolveCont(&wire.ContKey{ID: id})
		return errors.Is(err, pdc.ErrNotFound)
	}
	open := func(k wire.ObjKey, client string) func(ctx context.Context, s *Service, id uint64) error {
		return func(ctx context.Context, s *Service, id uint64) error {
			if k.Name == "" {
				k.ID = id
			}
			b := wire.ObjBatch{Opens: []wire.ObjKey{k}}
			resp, err := s.objOpen(ctx, &rpc.Request{Header: b.Marshal(nil), Client: client})
			if err != nil {
				return err
			}
			var res wire.ObjResults
			if err := res.Unmarshal(resp.Header); err != nil {
				return err
			}
			if err := res.Items[0].Code.Err(); err != nil {
				return err
			}
			if got := res.Items[0].Meta.ID; got != id {
				t.Errorf("open answered object %d; the create makes %d", got, id)
			}
			return nil
		}
	}
	members := func(cont uint64, check bool) func(ctx context.Context, s *Service, id uint64) error {
		return func(ctx context.Context, s *Service, id uint64) error {
			m := wire.Members{Version: wire.MembersVersion, ContID: cont, ObjIDs: []uint64{id}, Check: check}
			_, err := s.objMembers(ctx, &rpc.Request{Header: m.Marshal(nil), Client: "c2"})
			return err
		}
	}
	contGet := func(k wire.ContKey) func(ctx context.Context, s *Service, id uint64) error {
		return func(ctx context.Context, s *Service, id uint64) error {
			if k.Name == "" {
				k.ID = id
			}
			resp, err := s.contGet(ctx, &rpc.Request{Header: k.Marshal(nil), Client: "c2"})
			if err != nil {
				return err
			}
			var m wire.ContainerMeta
			if err := m.Unmarshal(resp.Header); err != nil {
				return err
			}
			if m.ID != id {
				t.Errorf("container get answered container %d; the create makes %d", m.ID, id)
			}
			return nil
		}
	}
	// listed answers nil if a listing handed out id, else an error.
	listed := func(ids []uint64, id uint64) error {
		if slices.Contains(ids, id) {
			return nil
		}
		return fmt.Errorf("%d not listed", id)
	}
	objPage := func(idsOnly bool) func(ctx context.Context, s *Service, id uint64) error {
		return func(ctx context.Context, s *Service, id uint64) error {
			q := wire.ObjPageReq{Version: wire.PageVersion, ContID: 1, IDsOnly: idsOnly}
			resp, err := s.objPage(ctx, &rpc.Request{Header: q.Marshal(nil), Client: "c2"})
			if err != nil {
				return err
			}
			var pg wire.ObjPage
			if err := pg.Unmarshal(resp.Header); err != nil {
				return err
			}
			for _, m := range pg.Items {
				pg.IDs = append(pg.IDs, m.ID)
			}
			return listed(pg.IDs, id)
		}
	}
	contPage := func(ctx context.Context, s *Service, id uint64) error {
		q := wire.ContPageReq{Version: wire.PageVersion}
		resp, err := s.contPage(ctx, &rpc.Request{Header: q.Marshal(nil), Client: "c2"})
		if err != nil {
			return err
		}
		var pg wire.ContPage
		if err := pg.Unmarshal(resp.Header); err != nil {
			return err
		}
		var ids []uint64
		for _, m := range pg.Items {
			ids = append(ids, m.ID)
		}
		return listed(ids, id)
	}
	// createAgain answers nil if a second create of b said it exists.
	createAgain := func(ctx context.Context, s *Service, id uint64) error {
		cb := wire.ObjBatch{Creates: []wire.ObjCreate{{ContID: 1, Name: "b", Props: wire.ObjectProps{Dims: []uint64{4}, Type: 1}}}}
		resp, err := s.objCreate(ctx, &rpc.Request{Header: cb.Marshal(nil), Client: "c2"})
		if err != nil {
			return err
		}
		var res wire.ObjResults
		if err := res.Unmarshal(resp.Header); err != nil {
			return err
		}
		if r := res.Items[0]; r.Code != wire.CodeExists {
			return fmt.Errorf("a second create of b: code %d (%s), want exists", r.Code, r.Message)
		}
		return nil
	}
	tests := []struct {
		name   string
		create func(*Service) error
		id     func(*Service) uint64
		gone   func(*Service, uint64) bool
		probe  func(ctx context.Context, s *Service, id uint64) error
	}{
		{"open by name", createObj, func(s *Service) uint64 { return objID(s, "b") }, objGone, open(wire.ObjKey{Name: "b"}, "c2")},
		{"open by id", createObj, func(s *Service) uint64 { return objID(s, "b") }, objGone, open(wire.ObjKey{}, "c2")},
		{"data server peek", createObj, func(s *Service) uint64 { return objID(s, "b") }, objGone, open(wire.ObjKey{Peek: true}, "ds")},
		{"add to its home container", createObj, func(s *Service) uint64 { return objID(s, "b") }, objGone, members(1, false)},
		{"check a membership", createObj, func(s *Service) uint64 { return objID(s, "b") }, objGone, members(7, true)},
		{"container by name", createCont, func(s *Service) uint64 { return objID(s, "k") }, contGone, contGet(wire.ContKey{Name: "k"})},
		{"container by id", createCont, func(s *Service) uint64 { return objID(s, "k") }, contGone, contGet(wire.ContKey{})},
		{"create it again", createObj, func(s *Service) uint64 { return objID(s, "b") }, objGone, createAgain},
		{"page of members", createObj, func(s *Service) uint64 { return objID(s, "b") }, objGone, objPage(false)},
		{"page of member ids", createObj, func(s *Service) uint64 { return objID(s, "b") }, objGone, objPage(true)},
		{"page of containers", createCont, func(s *Service) uint64 { return objID(s, "k") }, contGone, contPage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fsys := vfs.NewFaulty(mem)
			s := openSyncOn(t, fsys)
			// A first create reserves a block of ids, with an fsync of
			// its own, so that the fsync held below is the create's.
			createOne(t, s, "a", []uint64{4})
			id := tc.id(s)
			var armed sync.Once
			syncing, release := make(chan struct{}), make(chan struct{})
			fsys.OnOp(func(op vfs.Op, _ string) {
				if op == vfs.OpSync {
					armed.Do(func() {
						close(syncing)
						<-release
					})
				}
			})
			created := make(chan error, 1)
			go func() { created <- tc.create(s) }()
			<-syncing
			done, cancel := context.WithCancel(context.Background())
			cancel()
			early := tc.probe(done, s, id)
			late := make(chan error, 1)
			go func() { late <- tc.probe(context.Background(), s, id) }()
			// Power loss now, with the create's fsync not done.
			crashed := mem.CrashClone()
			close(release)
			if err := <-created; err != nil {
				t.Fatalf("create: %v", err)
			}
			if err := <-late; err != nil {
				t.Errorf("a probe that waited for the create's fsync: %v", err)
			}
			fsys.OnOp(nil)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openSyncOn(t, crashed)
			defer s.Close()
			if !tc.gone(s, id) {
				t.Fatalf("the power-loss image holds %d: it was not taken during the create's fsync", id)
			}
			switch {
			case early == nil:
				t.Fatalf("during the create's fsync the probe answered %d; after a power loss then it does not exist", id)
			case !errors.Is(early, context.Canceled):
				t.Fatalf("during the create's fsync the probe failed with %v; want it to wait for the fsync (context canceled)", early)
			}
		})
	}
}

// A create whose fsync failed is applied, and may or may not survive a
// crash. A container get and the pages of listings must not hand out
// what it made until a commit has made it durable, as an open does not:
// while syncs fail they fail, and once they work they answer it.
func TestReadsHandOutNoUnsyncedCreate(t *testing.T) {
	ctx := context.Background()
	call := func(h func(context.Context, *rpc.Request) (*rpc.Response, error), m interface{ Marshal([]byte) []byte }) func() error {
		return func() error {
			_, err := h(ctx, &rpc.Request{Header: m.Marshal(nil), Client: "c2"})
			return err
		}
	}
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := openSyncOn(t, fsys)
	defer s.Close()
	createOne(t, s, "a", []uint64{4}) // ids are reserved ahead, in a commit of their own
	steps := []struct {
		create func() error
		reads  map[string]func() error
	}{
		{call(s.contCreate, &wire.ContCreate{Name: "k"}), map[string]func() error{
			"container get":      call(s.contGet, &wire.ContKey{Name: "k"}),
			"page of containers": call(s.contPage, &wire.ContPageReq{Version: wire.PageVersion}),
		}},
		{call(s.objCreate, &wire.ObjBatch{Creates: []wire.ObjCreate{{ContID: 1, Name: "b", Props: wire.ObjectProps{Dims: []uint64{4}, Type: 1}}}}), map[string]func() error{
			"page of members":    call(s.objPage, &wire.ObjPageReq{Version: wire.PageVersion, ContID: 1}),
			"page of member ids": call(s.objPage, &wire.ObjPageReq{Version: wire.PageVersion, ContID: 1, IDsOnly: true}),
		}},
	}
	for _, st := range steps {
		restore := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Err: syscall.EIO})
		if err := st.create(); !errors.Is(err, metastore.ErrUnsynced) {
			restore()
			t.Fatalf("a create whose fsync failed: %v, want an error wrapping ErrUnsynced", err)
		}
		for name, read := range st.reads {
			if err := read(); !errors.Is(err, metastore.ErrUnsynced) {
				t.Errorf("%s with a create not durable: %v, want an error wrapping ErrUnsynced", name, err)
			}
		}
		restore()
		for name, read := range st.reads {
			if err := read(); err != nil {
				t.Errorf("%s once syncs work again: %v", name, err)
			}
		}
		// Durable now, whatever the reads did: the next step's create
		// then meets a store with no failed sync to make up for.
		if err := s.st.Settle(); err != nil {
			t.Fatal(err)
		}
	}
}
