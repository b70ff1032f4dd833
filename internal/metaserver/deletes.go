package metaserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Deletes of objects, one or a container's: the records, their tags,
// region maps and memberships go in one batch per page, and the
// tombstones that make the data servers drop the data follow once the
// delete is durable (0016).

func (s *objects) objDelete(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.ObjKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	if err := s.lifeMu.Lock(ctx); err != nil {
		return nil, fmt.Errorf("delete object: %w", err)
	}
	m, ident, err := s.resolveObj(&k)
	if err == nil {
		err = s.deleteObjs(ctx, []*wire.ObjectMeta{m}, [][]byte{ident}, nil)
	} else {
		// Deleted perhaps by this request's first copy, whose sync failed.
		err = s.notFoundDurably(err)
	}
	s.lifeMu.Unlock()
	if err != nil {
		return nil, err
	}
	// Answered once the data servers refuse the object (gone.go).
	s.tombs.await(ctx, []uint64{m.ID})
	return &rpc.Response{}, nil
}

// membership is an object's membership of a container.
type membership struct{ cont, obj uint64 }

// deleteObjs removes objects with their tags, their memberships (and their
// index entries), and the added memberships in unlink, in one commit. The
// caller holds lifeMu.
func (s *objects) deleteObjs(ctx context.Context, ms []*wire.ObjectMeta, idents [][]byte, unlink []membership) error {
	b := s.st.NewBatch()
	defer b.Close()
	var touched []uint64 // recorded only with sync durability (touching)
	if s.touches.on {
		touched = make([]uint64, 0, 2*len(ms)+2*len(unlink))
		for _, m := range ms {
			touched = append(touched, m.ID, nameSubject('o', m.Name, m.Props.TimeStep))
		}
		for _, u := range unlink {
			touched = append(touched, u.cont, u.obj)
		}
	}
	err := s.commitChanges(ctx, b, touched, func() ([]tagChange, error) {
		for _, u := range unlink {
			b.Delete(keyMember(u.cont, u.obj))
			b.Delete(keyAdded(u.obj, u.cont))
		}
		return s.deleteObjsBatch(b, ms, idents)
	})
	ids := make([]uint64, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	// Forgotten whatever the error: a commit whose sync failed is applied
	// all the same.
	if len(ids) > 0 {
		s.live.forget(ids)
	}
	what := func(err error) error {
		if len(ms) == 0 {
			return fmt.Errorf("remove %d memberships: %w", len(unlink), err)
		}
		return fmt.Errorf("delete %d objects: %w", len(ms), err)
	}
	unsynced := errors.Is(err, metastore.ErrUnsynced)
	if err != nil && !unsynced && !errors.Is(err, errCommitted) {
		return what(err) // nothing was applied
	}
	// Applied: the state in memory follows the store whatever the error.
	for _, id := range ids {
		s.opens.forget(id)
	}
	s.regions.forget(ids)
	s.cuts.forget(ids)
	// The objects are deleted: their data goes from the data servers,
	// now or, for those that cannot be reached, later (gone.go), or, if
	// the delete may not survive a crash, once it is durable. The caller
	// holds lifeMu: the push waits for no data server here.
	if unsynced {
		s.tombs.hold(ids)
	} else {
		s.tombs.added(ids)
	}
	if err != nil {
		return what(err)
	}
	return nil
}

// deleteObjsBatch adds the deletes of the objects' keys to b and returns
// the deletions of their tags for the index (none with the index off).
//
// One iterator finds what each object has: a delete of thousands (a page
// of a container being deleted) costs a seek per kind of key and object,
// not an iterator each, and a range deletion only for a kind the object
// has, not three for every object. Every writer of an object's tags,
// region maps and memberships holds lifeMu for reading and checks that
// the object exists, and the caller holds it for writing: nothing lands
// between the look and the commit.
func (s *objects) deleteObjsBatch(b metastore.Batch, ms []*wire.ObjectMeta, idents [][]byte) ([]tagChange, error) {
	it, err := s.st.NewIter(nil, nil)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	// has reports whether a key with prefix p exists, leaving it there.
	// Bounded to p: an unbounded seek past a prefix steps over every
	// deleted key after it, and a page deletes thousands.
	has := func(p []byte) bool {
		it.SetBounds(p, prefixEnd(p))
		return it.First()
	}
	var changes []tagChange
	for i, m := range ms {
		b.Delete(keyObj(idents[i]))
		b.Delete(keyObjID(m.ID))
		b.Delete(keyMember(m.ContID, m.ID))
		// The containers it was added to.
		if ap := addedPrefix(m.ID); has(ap) {
			for ; it.Valid(); it.Next() {
				b.Delete(keyMember(binary.BigEndian.Uint64(it.Key()[len(ap):]), m.ID))
			}
			b.DeleteRange(ap, prefixEnd(ap))
		}
		if tp := tagPrefix(kindObject, m.ID); has(tp) {
			for ; s.ix.on && it.Valid(); it.Next() {
				v, err := it.ValueAndErr()
				if err != nil {
					return nil, err
				}
				var tv wire.TagValue
				if err := tv.Unmarshal(v); err != nil {
					return nil, fmt.Errorf("tag %q of object %d: stored value: %w", it.Key()[len(tp):], m.ID, err)
				}
				changes = append(changes, tagChange{id: m.ID, key: string(it.Key()[len(tp):]), old: &tv})
			}
			b.DeleteRange(tp, prefixEnd(tp))
		}
		if rp := regionPrefix(m.ID); has(rp) {
			b.DeleteRange(rp, prefixEnd(rp))
		}
		if err := it.Error(); err != nil {
			return nil, fmt.Errorf("object %q: %w", m.Name, err)
		}
		// Its pending dims cut, if any: nothing is left to cut, and one
		// left behind would be pushed until every data server applied it.
		b.Delete(keyCut(m.ID))
		b.Set(keyGone(m.ID), []byte{goneVersion})
	}
	return changes, nil
}

func (s *objects) objDeleteCont(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	var a wire.IDArg
	if err := decode(req, &a); err != nil {
		return nil, err
	}
	if err := s.lifeMu.Lock(ctx); err != nil {
		return nil, fmt.Errorf("delete container %d: %w", a.ID, err)
	}
	unlocked := false
	defer func() {
		if !unlocked {
			s.lifeMu.Unlock()
		}
	}()
	if n, ex := s.opens.openIn(a.ID); n > 0 && !a.Force {
		return nil, fmt.Errorf("container %d has %d open objects here (object %d among them): close them first: %w", a.ID, n, ex, pdc.ErrInvalid)
	}
	// The objects whose home it is go; those added to it stay in their
	// homes and only lose this membership.
	var ms []*wire.ObjectMeta
	var idents [][]byte
	var unlink []membership
	err := s.scan(memberPrefix(a.ID), func(k, _ []byte) error {
		id := binary.BigEndian.Uint64(k[9:])
		m, ident, err := s.loadObjByID(id)
		if errors.Is(err, pdc.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(ms)+len(unlink) == limits.MaxBatchItems {
			// One commit of all would have no bound: clients that page
			// purge (obj_purge).
			return fmt.Errorf("container %d has more than %d members here to delete in one obj_delete_cont; delete it with a client that pages (obj_purge): %w", a.ID, limits.MaxBatchItems, pdc.ErrTooLarge)
		}
		if m.ContID != a.ID {
			unlink = append(unlink, membership{a.ID, id})
			return nil
		}
		ms, idents = append(ms, m), append(idents, ident)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ms) > 0 || len(unlink) > 0 {
		if err := s.deleteObjs(ctx, ms, idents, unlink); err != nil {
			return nil, err
		}
	} else if err := s.st.Settle(); err != nil {
		// Deleted perhaps by this request's first copy, whose sync failed.
		return nil, err
	}
	s.lifeMu.Unlock()
	unlocked = true
	ids := make([]uint64, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	s.tombs.await(ctx, ids)
	return rpc.Respond(&wire.Count{N: uint64(len(ms))}), nil
}
