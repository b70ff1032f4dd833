package metaserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

func (s *Service) loadObjByID(id uint64) (*wire.ObjectMeta, []byte, error) {
	if err := s.owns(placement.KeyOf(id), "object %d", id); err != nil {
		return nil, nil, err
	}
	ident, ok, err := s.st.Get(keyObjID(id))
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, fmt.Errorf("object %d: %w", id, pdc.ErrNotFound)
	}
	return s.loadObj(ident)
}

// objExists checks that object id exists, without reading its record: its
// id key is written and deleted in the same batches as the record.
func (s *Service) objExists(id uint64) error {
	if err := s.owns(placement.KeyOf(id), "object %d", id); err != nil {
		return err
	}
	known, gen := s.live.has(id)
	if known {
		return nil
	}
	_, ok, err := s.st.Get(keyObjID(id))
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("object %d: %w", id, pdc.ErrNotFound)
	}
	s.live.add(id, gen)
	return nil
}

func (s *Service) loadObj(ident []byte) (*wire.ObjectMeta, []byte, error) {
	v, ok, err := s.st.Get(keyObj(ident))
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, fmt.Errorf("object %q: %w", identName(ident), pdc.ErrNotFound)
	}
	var m wire.ObjectMeta
	if err := m.Unmarshal(v); err != nil {
		return nil, nil, fmt.Errorf("object %q: stored record: %w", identName(ident), err)
	}
	return &m, ident, nil
}

func identName(ident []byte) string {
	for i, c := range ident {
		if c == 0 {
			return string(ident[:i])
		}
	}
	return string(ident)
}

// resolveObj finds the object k names.
func (s *Service) resolveObj(k *wire.ObjKey) (*wire.ObjectMeta, []byte, error) {
	if k.ID != 0 {
		return s.loadObjByID(k.ID)
	}
	if err := checkName("object", k.Name, MaxNameLen); err != nil {
		return nil, nil, err
	}
	if err := s.owns(placement.Key(k.Name, k.TimeStep), "object %q", k.Name); err != nil {
		return nil, nil, err
	}
	if k.Exact {
		return s.loadObj(identity(k.Name, k.TimeStep, k.UserID, k.AppName))
	}
	var found []wire.ObjectMeta
	var idents [][]byte
	err := s.scan(keyObj(namePrefix(k.Name, k.TimeStep)), func(key, v []byte) error {
		var m wire.ObjectMeta
		if err := m.Unmarshal(v); err != nil {
			return err
		}
		found = append(found, m)
		idents = append(idents, append([]byte(nil), key[1:]...))
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	switch len(found) {
	case 0:
		return nil, nil, fmt.Errorf("object %q (time step %d): %w", k.Name, k.TimeStep, pdc.ErrNotFound)
	case 1:
		return &found[0], idents[0], nil
	}
	return nil, nil, fmt.Errorf("object %q (time step %d): %d objects have this name, with different user ids or app names; open it with both: %w",
		k.Name, k.TimeStep, len(found), pdc.ErrInvalid)
}

func result(m *wire.ObjectMeta, err error) wire.ObjResult {
	if err != nil {
		return wire.ObjResult{Code: wire.CodeOf(err), Message: err.Error()}
	}
	return wire.ObjResult{Meta: *m}
}

func (s *Service) objCreate(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var b wire.ObjBatch
	if err := decode(req, &b); err != nil {
		return nil, err
	}
	if len(b.Creates) == 0 || len(b.Creates) > limits.MaxBatchItems {
		return nil, fmt.Errorf("create batch of %d objects; want 1 to %d: %w", len(b.Creates), limits.MaxBatchItems, pdc.ErrInvalid)
	}
	out := wire.ObjResults{Items: make([]wire.ObjResult, len(b.Creates))}
	metas := make([]*wire.ObjectMeta, len(b.Creates))
	idents := make([]string, len(b.Creates))
	now := time.Now().UnixNano()

	// Check each item, then claim its identity so that no concurrent
	// create of it can pass the existence check while this one commits,
	// then check that the store does not hold it yet. The check comes after
	// the claim: a create that held the claim before committed before it
	// let go, so the store shows it. Only the claims hold createMu: the
	// store lookups of concurrent creates run side by side.
	//
	// One iterator, seeking forward through the sorted identities, checks
	// them all: a point lookup per item costs an iterator each. A prefix
	// seek (the whole key is the prefix) consults each table's bloom
	// filter, so a new identity, the usual case, reads no table blocks.
	order := make([]int, len(b.Creates))
	keys := make([][]byte, len(b.Creates))
	for i := range b.Creates {
		order[i] = i
		c := &b.Creates[i]
		keys[i] = keyObj(identity(c.Name, c.Props.TimeStep, c.Props.UserID, c.Props.AppName))
	}
	slices.SortFunc(order, func(x, y int) int { return bytes.Compare(keys[x], keys[y]) })
	for _, i := range order {
		m, err := s.prepareCreate(&b.Creates[i], now)
		if err != nil {
			out.Items[i] = result(nil, err)
			continue
		}
		metas[i] = m
	}
	s.createMu.Lock()
	for _, i := range order {
		if metas[i] == nil {
			continue
		}
		ident := string(keys[i][1:])
		if _, busy := s.creating[ident]; busy {
			out.Items[i] = result(nil, fmt.Errorf("object %q: %w", metas[i].Name, pdc.ErrExists))
			metas[i] = nil
			continue
		}
		s.creating[ident] = struct{}{}
		idents[i] = ident
	}
	s.createMu.Unlock()
	defer func() {
		s.createMu.Lock()
		for _, id := range idents {
			if id != "" {
				delete(s.creating, id)
			}
		}
		s.createMu.Unlock()
	}()
	it, err := s.st.NewIter([]byte{'O'}, []byte{'P'})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for _, i := range order {
		if m := metas[i]; m != nil && it.SeekPrefixGE(keys[i]) && bytes.Equal(it.Key(), keys[i]) {
			p := &m.Props
			out.Items[i] = result(nil, fmt.Errorf("object %q (time step %d, user %d, app %q) already exists: %w",
				m.Name, p.TimeStep, p.UserID, p.AppName, pdc.ErrExists))
			metas[i] = nil
		}
	}

	n := 0
	for _, m := range metas {
		if m != nil {
			n++
		}
	}
	var seq uint32
	if n > 0 {
		var err error
		if seq, err = s.st.NextSeqs(n); err != nil {
			return nil, err
		}
		s.fresh.add(seq, n)
	}
	// Each kind of key is added in order: the memtable inserts a batch's
	// keys one after another starting from where the last one went, so a
	// sorted run costs a step per key instead of a search from the top.
	batch := s.st.NewBatch()
	defer batch.Close()
	made := order[:0:0]
	for _, i := range order {
		if m := metas[i]; m != nil {
			m.ID = placement.ID(placement.Key(m.Name, m.Props.TimeStep), seq)
			seq++
			batch.Set(keys[i], m.Marshal(nil))
			made = append(made, i)
		}
	}
	slices.SortFunc(made, func(x, y int) int {
		a, b := metas[x], metas[y]
		return cmp.Or(cmp.Compare(a.ContID, b.ContID), cmp.Compare(a.ID, b.ID))
	})
	for _, i := range made {
		batch.Set(keyObjID(metas[i].ID), keys[i][1:]) // the identity
	}
	for _, i := range made {
		batch.Set(keyMember(metas[i].ContID, metas[i].ID), nil)
	}
	gen := s.live.generation()
	if n > 0 {
		if err := s.st.Commit(batch); err != nil {
			return nil, fmt.Errorf("create %d objects: %w", n, err)
		}
	}
	for i, m := range metas {
		if m != nil {
			// The client knows the rest of the record: it sent it.
			out.Items[i] = wire.ObjResult{Meta: wire.ObjectMeta{ID: m.ID, CreatedUnix: m.CreatedUnix}}
			s.opens.open(req.Client, m.ID, m.ContID)
			s.live.add(m.ID, gen)
		}
	}
	return rpc.Respond(&out), nil
}

// prepareCreate validates c and returns the record it would create.
func (s *Service) prepareCreate(c *wire.ObjCreate, now int64) (*wire.ObjectMeta, error) {
	if err := checkNewName("object", c.Name, MaxNameLen); err != nil {
		return nil, err
	}
	if c.ContID == 0 {
		return nil, fmt.Errorf("object %q: no container given: %w", c.Name, pdc.ErrInvalid)
	}
	if err := checkProps(c.Name, &c.Props); err != nil {
		return nil, err
	}
	if err := s.owns(placement.Key(c.Name, c.Props.TimeStep), "object %q", c.Name); err != nil {
		return nil, err
	}
	return &wire.ObjectMeta{Name: c.Name, ContID: c.ContID, Props: c.Props, CreatedUnix: now}, nil
}

func (s *Service) objOpen(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var b wire.ObjBatch
	if err := decode(req, &b); err != nil {
		return nil, err
	}
	if len(b.Opens) == 0 || len(b.Opens) > limits.MaxBatchItems {
		return nil, fmt.Errorf("open batch of %d objects; want 1 to %d: %w", len(b.Opens), limits.MaxBatchItems, pdc.ErrInvalid)
	}
	out := wire.ObjResults{Items: make([]wire.ObjResult, len(b.Opens))}
	size := 0
	for i := range b.Opens {
		if i > 0 && size >= openReplyBytes {
			// The rest would not fit a reply (a record may be ~70 KiB):
			// the client asks again for the items not answered.
			out.Items = out.Items[:i]
			break
		}
		m, _, err := s.resolveObj(&b.Opens[i])
		out.Items[i] = result(m, err)
		size += resultSize(&out.Items[i])
		if err == nil && !b.Opens[i].Peek {
			s.opens.open(req.Client, m.ID, m.ContID)
		}
	}
	return rpc.Respond(&out), nil
}

// openReplyBytes bounds the answer of an open batch: it answers the items
// in order until this many bytes, then leaves the rest for the client to
// send again.
const openReplyBytes = 512 << 10

// resultSize is about how many bytes r takes in an answer.
func resultSize(r *wire.ObjResult) int {
	p := &r.Meta.Props
	return len(r.Message) + len(r.Meta.Name) + len(p.AppName) + len(p.DataLoc) + len(p.Tags) + 10*len(p.Dims) + 64
}

func (s *Service) objClose(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var a wire.IDArg
	if err := decode(req, &a); err != nil {
		return nil, err
	}
	s.opens.close(req.Client, a.ID)
	return &rpc.Response{}, nil
}

func (s *Service) objList(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	var a wire.IDArg
	if err := decode(req, &a); err != nil {
		return nil, err
	}
	// Clients that page use obj_page; this one answers older clients, in
	// one reply, as long as it stays within what they accept.
	var out wire.ObjList
	size := 0
	err := s.scan(memberPrefix(a.ID), func(k, _ []byte) error {
		id := binary.BigEndian.Uint64(k[9:])
		m, n, err := s.loadObjRaw(id)
		if errors.Is(err, pdc.ErrNotFound) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return err
		}
		if size += n + 8; size > legacyReplyBytes {
			return fmt.Errorf("container %d has more members here than one obj_list reply holds; list it with a client that pages (obj_page): %w", a.ID, pdc.ErrTooLarge)
		}
		out.Items = append(out.Items, *m)
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	return rpc.Respond(&out), nil
}

func (s *Service) objDelete(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.ObjKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	s.updateMu.Lock()
	m, ident, err := s.resolveObj(&k)
	if err == nil {
		err = s.deleteObjs(ctx, []*wire.ObjectMeta{m}, [][]byte{ident}, nil)
	}
	s.updateMu.Unlock()
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
// caller holds updateMu.
func (s *Service) deleteObjs(ctx context.Context, ms []*wire.ObjectMeta, idents [][]byte, unlink []membership) error {
	b := s.st.NewBatch()
	defer b.Close()
	err := s.commitChanges(ctx, b, func() ([]tagChange, error) {
		for _, u := range unlink {
			b.Delete(keyMember(u.cont, u.obj))
			b.Delete(keyAdded(u.obj, u.cont))
		}
		return s.deleteObjsBatch(b, ms, idents)
	})
	// Forgotten whatever the error: a commit whose sync failed is applied
	// all the same.
	if len(ms) > 0 {
		gone := make([]uint64, len(ms))
		for i, m := range ms {
			gone[i] = m.ID
		}
		s.live.forget(gone)
	}
	if err != nil {
		if len(ms) == 0 {
			return fmt.Errorf("remove %d memberships: %w", len(unlink), err)
		}
		return fmt.Errorf("delete %d objects: %w", len(ms), err)
	}
	s.regionMu.Lock()
	ids := make([]uint64, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
		s.opens.forget(m.ID)
		delete(s.regions.lastSeq, m.ID)
		delete(s.regions.maps, m.ID)
	}
	s.regionMu.Unlock()
	// The objects are deleted: their data goes from the data servers,
	// now or, for those that cannot be reached, later (gone.go). The
	// caller holds updateMu: the push waits for no data server here.
	s.tombs.added(ids)
	return nil
}

// deleteObjsBatch adds the deletes of the objects' keys to b and returns
// the deletions of their tags for the index (none with the index off).
//
// One iterator finds what each object has: a delete of thousands (a page
// of a container being deleted) costs a seek per kind of key and object,
// not an iterator each, and a range deletion only for a kind the object
// has, not three for every object. Every writer of an object's tags,
// region maps and memberships holds updateMu for reading and checks that
// the object exists, and the caller holds it for writing: nothing lands
// between the look and the commit.
func (s *Service) deleteObjsBatch(b metastore.Batch, ms []*wire.ObjectMeta, idents [][]byte) ([]tagChange, error) {
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
		b.Set(keyGone(m.ID), []byte{goneVersion})
	}
	return changes, nil
}

func (s *Service) objDeleteCont(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	var a wire.IDArg
	if err := decode(req, &a); err != nil {
		return nil, err
	}
	s.updateMu.Lock()
	unlocked := false
	defer func() {
		if !unlocked {
			s.updateMu.Unlock()
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
	}
	s.updateMu.Unlock()
	unlocked = true
	ids := make([]uint64, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	s.tombs.await(ctx, ids)
	return rpc.Respond(&wire.Count{N: uint64(len(ms))}), nil
}

// errList is the failures of several items, on one line: a server's
// message goes on one line of a C program's stderr.
type errList []error

func (l errList) Error() string {
	s := make([]string, len(l))
	for i, err := range l {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (l errList) Unwrap() []error { return l }

// maxMemberErrors bounds the items a refused membership request names.
const maxMemberErrors = 3

// objMembers adds objects held here to a container as members by
// reference, or removes such memberships. It checks every item first and
// changes nothing if one fails: an object that does not exist (or is not
// held here), removing an object from its home container, or removing a
// membership that does not exist. Adding a member again changes nothing.
// The container is the client's to check: it is held by its own server.
func (s *Service) objMembers(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.Members
	if err := decode(req, &m); err != nil {
		return nil, err
	}
	if m.Version != wire.MembersVersion {
		return nil, fmt.Errorf("membership request of version %d; this server speaks version %d: %w", m.Version, wire.MembersVersion, pdc.ErrVersion)
	}
	if m.ContID == 0 {
		return nil, fmt.Errorf("membership request names no container: %w", pdc.ErrInvalid)
	}
	if len(m.ObjIDs) == 0 || len(m.ObjIDs) > limits.MaxBatchItems {
		return nil, fmt.Errorf("membership request for %d objects; want 1 to %d: %w", len(m.ObjIDs), limits.MaxBatchItems, pdc.ErrInvalid)
	}
	// A write lock would wait for tag writes; deletes take it, so no
	// object can go between its check and the commit.
	s.updateMu.RLock()
	defer s.updateMu.RUnlock()
	var errs errList
	bad := 0
	fail := func(err error) {
		if bad++; bad <= maxMemberErrors {
			errs = append(errs, err)
		}
	}
	var change []uint64
	seen := make(map[uint64]struct{}, len(m.ObjIDs))
	for _, id := range m.ObjIDs {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if id == 0 {
			fail(fmt.Errorf("object id 0 names no object: %w", pdc.ErrInvalid))
			continue
		}
		o, _, err := s.loadObjByID(id)
		if err != nil {
			fail(err)
			continue
		}
		if o.ContID == m.ContID {
			if m.Remove {
				fail(fmt.Errorf("object %q (id %d) was created in container %d, its home, and cannot be removed from it: delete the object instead: %w",
					o.Name, id, m.ContID, pdc.ErrInvalid))
			}
			continue // a member already
		}
		_, member, err := s.st.Get(keyAdded(id, m.ContID))
		switch {
		case err != nil:
			fail(err)
		case m.Remove && !member:
			fail(fmt.Errorf("object %q (id %d) is not a member of container %d: %w", o.Name, id, m.ContID, pdc.ErrNotFound))
		case m.Remove == member:
			change = append(change, id)
		}
	}
	if bad > 0 {
		var err error = errs
		if bad > maxMemberErrors {
			err = fmt.Errorf("%w (and %d more)", err, bad-maxMemberErrors)
		}
		return nil, err
	}
	out := wire.MembersReply{Version: wire.MembersVersion, Changed: uint64(len(change))}
	if m.Check || len(change) == 0 {
		return rpc.Respond(&out), nil
	}
	b := s.st.NewBatch()
	defer b.Close()
	for _, id := range change {
		if m.Remove {
			b.Delete(keyMember(m.ContID, id))
			b.Delete(keyAdded(id, m.ContID))
		} else {
			b.Set(keyMember(m.ContID, id), nil)
			b.Set(keyAdded(id, m.ContID), nil)
		}
	}
	if err := s.st.Commit(b); err != nil {
		return nil, fmt.Errorf("container %d: change %d memberships: %w", m.ContID, len(change), err)
	}
	return rpc.Respond(&out), nil
}

func (s *Service) objOpenCount(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	var a wire.IDArg
	if err := decode(req, &a); err != nil {
		return nil, err
	}
	n, _ := s.opens.openIn(a.ID)
	return rpc.Respond(&wire.Count{N: uint64(n)}), nil
}

func (s *Service) objSetDims(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var d wire.SetDims
	if err := decode(req, &d); err != nil {
		return nil, err
	}
	s.updateMu.Lock()
	defer s.updateMu.Unlock()
	m, ident, err := s.loadObjByID(d.ID)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("set dims of object %q", m.Name)
	if len(d.Dims) != len(m.Props.Dims) {
		return nil, fmt.Errorf("%s: %d dims given, the object has %d: %w", what, len(d.Dims), len(m.Props.Dims), pdc.ErrInvalid)
	}
	if err := checkDims(what, d.Dims, region.Type(m.Props.Type).Size()); err != nil {
		return nil, err
	}
	m.Props.Dims = d.Dims
	m.DimsVersion++
	b := s.st.NewBatch()
	defer b.Close()
	b.Set(keyObj(ident), m.Marshal(nil))
	if err := s.st.Commit(b); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return rpc.Respond(m), nil
}
