package metaserver

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// call sends m to handler h of s, as client "c".
func call(s *Service, h func(*Service) func(context.Context, *rpc.Request) (*rpc.Response, error), m interface{ Marshal([]byte) []byte }) (*rpc.Response, error) {
	return h(s)(context.Background(), &rpc.Request{Header: m.Marshal(nil), Client: "c"})
}

// A request sent again after its first copy's commit was applied but its
// fsync failed finds nothing left to do, and its answer tells the client
// that the change is made: success, or for a delete "not found", for a
// create "exists". A power loss right after that answer must not take the
// change back. The fault is a real failed fsync of the metadata log on a
// file system in memory, which is taken away before the retry; the
// power-loss image keeps only what was fsynced. Before, each of the
// paths below answered without making the first copy's change durable,
// and the change was gone after the power loss.
func TestRetryFindingNothingToDoAnswersOnceDurable(t *testing.T) {
	type step struct {
		name string
		// setup makes, on a working store, what change acts on.
		setup func(t *testing.T, s *Service)
		// change is the request whose fsync fails, sent again.
		change func(s *Service) error
		// retry, if set, is sent again instead of change.
		retry func(s *Service) error
		// acked reports whether the retry's answer tells the client
		// that the change is made.
		acked func(err error) bool
		// made checks the change on the store opened again.
		made func(s *Service) error
	}
	okOr := func(sentinel error) func(error) bool {
		return func(err error) bool { return err == nil || errors.Is(err, sentinel) }
	}
	objGone := func(name string) func(s *Service) error {
		return func(s *Service) error {
			if m, _, err := s.resolveObj(&wire.ObjKey{Name: name}); !errors.Is(err, pdc.ErrNotFound) {
				return errors.Join(errors.New("object "+name+" is back"), err, errorIf(m != nil, "it has a record"))
			}
			return nil
		}
	}
	// purge deletes the members of container 1 as a client's container
	// delete does: a page of their ids, then a purge of them if any.
	purge := func(s *Service) error {
		resp, err := call(s, objPageH, &wire.ObjPageReq{Version: wire.PageVersion, ContID: 1, IDsOnly: true})
		if err != nil {
			return err
		}
		var p wire.ObjPage
		if err := p.Unmarshal(resp.Header); err != nil {
			return err
		}
		if len(p.IDs) == 0 {
			return nil
		}
		_, err = call(s, objPurgeH, &wire.ObjPurge{Version: wire.PageVersion, ContID: 1, IDs: p.IDs, Force: true})
		return err
	}
	var purged uint64
	steps := []step{
		{
			name:   "container's objects purged",
			setup:  func(t *testing.T, s *Service) { createOne(t, s, "a", []uint64{4}) },
			change: purge,
			acked:  okOr(nil),
			made:   objGone("a"),
		},
		{
			name:  "purge sent again",
			setup: func(t *testing.T, s *Service) { purged = createOne(t, s, "a", []uint64{4}) },
			change: func(s *Service) error {
				_, err := call(s, objPurgeH, &wire.ObjPurge{Version: wire.PageVersion, ContID: 1, IDs: []uint64{purged}, Force: true})
				return err
			},
			acked: okOr(nil),
			made:  objGone("a"),
		},
		{
			name:   "object delete",
			setup:  func(t *testing.T, s *Service) { createOne(t, s, "a", []uint64{4}) },
			change: func(s *Service) error { _, err := call(s, objDeleteH, &wire.ObjKey{Name: "a"}); return err },
			acked:  okOr(pdc.ErrNotFound),
			made:   objGone("a"),
		},
		{
			name: "tag delete",
			setup: func(t *testing.T, s *Service) {
				id := createOne(t, s, "a", []uint64{4})
				if err := tagPutErr(t, s, tagPutReq(id, "k", 1)); err != nil {
					t.Fatal(err)
				}
			},
			change: func(s *Service) error {
				m, _, err := s.resolveObj(&wire.ObjKey{Name: "a"})
				if err != nil {
					return err
				}
				_, err = call(s, tagDeleteH, &wire.TagKey{Kind: kindObject, ID: m.ID, Name: "k"})
				return err
			},
			acked: okOr(pdc.ErrNotFound),
			made: func(s *Service) error {
				m, _, err := s.resolveObj(&wire.ObjKey{Name: "a"})
				if err != nil {
					return err
				}
				if _, ok, err := s.st.Get(keyTag(kindObject, m.ID, "k")); err != nil || ok {
					return errors.Join(errorIf(ok, "tag k is back"), err)
				}
				return nil
			},
		},
		{
			name:  "object create that finds it exists",
			setup: func(t *testing.T, s *Service) { createOne(t, s, "w", []uint64{4}) }, // ids reserved ahead
			change: func(s *Service) error {
				got, err := createItems(s, objCreate("x", 4))
				if err == nil && got[0].Code != wire.CodeOK {
					err = errors.New(got[0].Message)
				}
				return err
			},
			// Not the first copy, which would take its object over and
			// commit it again: a create with other properties.
			retry: func(s *Service) error {
				got, err := createItems(s, objCreate("x", 8))
				if err != nil {
					return err
				}
				if got[0].Code == wire.CodeExists {
					return fmt.Errorf("%s: %w", got[0].Message, pdc.ErrExists)
				}
				return fmt.Errorf("code %d: %s", got[0].Code, got[0].Message)
			},
			acked: okOr(pdc.ErrExists),
			made: func(s *Service) error {
				_, _, err := s.resolveObj(&wire.ObjKey{Name: "x"})
				return err
			},
		},
		{
			name: "staged record removal",
			setup: func(t *testing.T, s *Service) {
				if _, err := produceCRC(s, "p", 1); err != nil {
					t.Fatal(err)
				}
			},
			change: func(s *Service) error {
				_, err := call(s, stageRemoveH, &wire.StageRemoveReq{Version: wire.StageVersion, Path: "p"})
				return err
			},
			acked: okOr(nil),
			made: func(s *Service) error {
				if r, err := lookupOn(s, "p"); !errors.Is(err, pdc.ErrNotFound) {
					return errors.Join(errorIf(r != nil, "the record of p is back"), err)
				}
				return nil
			},
		},
		{
			name: "container delete sent again by the client, which marks first",
			setup: func(t *testing.T, s *Service) {
				if _, err := call(s, contCreateH, &wire.ContCreate{Name: "c"}); err != nil {
					t.Fatal(err)
				}
				if _, err := call(s, contDeletingH, &wire.ContKey{Name: "c"}); err != nil {
					t.Fatal(err)
				}
			},
			change: func(s *Service) error {
				if _, err := call(s, contDeletingH, &wire.ContKey{Name: "c"}); err != nil {
					return err
				}
				_, err := call(s, contDeleteH, &wire.ContKey{Name: "c"})
				return err
			},
			acked: okOr(pdc.ErrNotFound),
			made: func(s *Service) error {
				if _, err := s.resolveCont(&wire.ContKey{Name: "c"}); !errors.Is(err, pdc.ErrNotFound) {
					return errors.Join(errors.New("container c is back"), err)
				}
				return nil
			},
		},
		{
			name: "container delete sent again by name, which gets it first",
			setup: func(t *testing.T, s *Service) {
				if _, err := call(s, contCreateH, &wire.ContCreate{Name: "c"}); err != nil {
					t.Fatal(err)
				}
			},
			change: func(s *Service) error {
				if _, err := call(s, contGetH, &wire.ContKey{Name: "c"}); err != nil {
					return err
				}
				_, err := call(s, contDeleteH, &wire.ContKey{Name: "c"})
				return err
			},
			acked: okOr(pdc.ErrNotFound),
			made: func(s *Service) error {
				if _, err := s.resolveCont(&wire.ContKey{Name: "c"}); !errors.Is(err, pdc.ErrNotFound) {
					return errors.Join(errors.New("container c is back"), err)
				}
				return nil
			},
		},
		{
			name: "container create that finds it being deleted",
			setup: func(t *testing.T, s *Service) {
				if _, err := call(s, contCreateH, &wire.ContCreate{Name: "c"}); err != nil {
					t.Fatal(err)
				}
			},
			change: func(s *Service) error { _, err := call(s, contDeletingH, &wire.ContKey{Name: "c"}); return err },
			retry:  func(s *Service) error { _, err := call(s, contCreateH, &wire.ContCreate{Name: "c"}); return err },
			acked:  okOr(pdc.ErrExists),
			made: func(s *Service) error {
				m, err := s.resolveCont(&wire.ContKey{Name: "c"})
				if err != nil {
					return err
				}
				return errorIf(!m.Deleting, "container c is no longer marked as being deleted")
			},
		},
		{
			name: "container delete",
			setup: func(t *testing.T, s *Service) {
				if _, err := call(s, contCreateH, &wire.ContCreate{Name: "c"}); err != nil {
					t.Fatal(err)
				}
			},
			change: func(s *Service) error { _, err := call(s, contDeleteH, &wire.ContKey{Name: "c"}); return err },
			acked:  okOr(pdc.ErrNotFound),
			made: func(s *Service) error {
				if _, err := s.resolveCont(&wire.ContKey{Name: "c"}); !errors.Is(err, pdc.ErrNotFound) {
					return errors.Join(errors.New("container c is back"), err)
				}
				return nil
			},
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fsys := vfs.NewFaulty(mem)
			s := openSyncOn(t, fsys)
			st.setup(t, s)
			remove := fsys.Inject(vfs.Rule{Ops: vfs.OpSync, Path: walPath, Err: syscall.EIO})
			if err := st.change(s); err == nil {
				t.Fatal("succeeded with its fsync failed")
			}
			remove()
			retry := st.retry
			if retry == nil {
				retry = st.change
			}
			err := retry(s)
			if !st.acked(err) {
				t.Fatalf("sent again once the disk works: %v", err)
			}
			crashed := mem.CrashClone() // power loss right after the answer
			crash(s)
			s = openSyncOn(t, crashed)
			defer s.Close()
			if lost := st.made(s); lost != nil {
				t.Fatalf("sent again, answered %v; after a power loss then: %v", err, lost)
			}
		})
	}
}

// walPath selects the metadata log's file (and its replacement).
const walPath = "pdc.wal"

func errorIf(cond bool, msg string) error {
	if cond {
		return errors.New(msg)
	}
	return nil
}

func objDeleteH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.objDelete
}
func tagDeleteH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.tagDelete
}
func stageRemoveH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.stageRemove
}
func contCreateH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.contCreate
}
func objPageH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.objPage
}
func objPurgeH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.objPurge
}
func contDeletingH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.contDeleting
}
func contGetH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.contGet
}
func contDeleteH(s *Service) func(context.Context, *rpc.Request) (*rpc.Response, error) {
	return s.contDelete
}
