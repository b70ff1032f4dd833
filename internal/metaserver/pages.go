package metaserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Paged listing and deleting of containers (docs/design/0017): every
// answer is bounded, in items and in bytes, whatever a container holds,
// and so is the work of every request.
const (
	// pageBytes is the byte budget of a page's answer, well under the
	// 1 MiB header a client accepts by default.
	pageBytes = 256 << 10
	// pageRecords bounds the records of one page.
	pageRecords = 4096
	// pageIDs bounds the ids of one page of ids.
	pageIDs = 16384
	// pageCount bounds the members one count request counts.
	pageCount = 1 << 18
	// legacyReplyBytes bounds the answers of the unpaged methods kept for
	// older clients (obj_list, cont_list): past it they refuse.
	legacyReplyBytes = 768 << 10
)

// checkPageVersion refuses requests of a page version this build does
// not speak.
func checkPageVersion(what string, v uint32) error {
	if v != wire.PageVersion {
		return fmt.Errorf("%s request of version %d; this server speaks version %d: %w", what, v, wire.PageVersion, pdc.ErrVersion)
	}
	return nil
}

// pageLimit is the item bound of a page: the client's, at most max.
func pageLimit(asked uint32, max int) int {
	if asked == 0 || int64(asked) > int64(max) {
		return max
	}
	return int(asked)
}

// objPage answers a page of the members of a container held here, in id
// order, resuming after the id the client names: the cursor is the
// client's, so the server keeps nothing between pages, and members
// created or deleted meanwhile are listed or not, each at most once.
func (s *objects) objPage(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	var q wire.ObjPageReq
	if err := decode(req, &q); err != nil {
		return nil, err
	}
	if err := checkPageVersion("object page", q.Version); err != nil {
		return nil, err
	}
	if q.ContID == 0 {
		return nil, fmt.Errorf("object page: no container given: %w", pdc.ErrInvalid)
	}
	out := wire.ObjPage{Version: wire.PageVersion}
	if q.After == math.MaxUint64 {
		return rpc.Respond(&out), nil
	}
	p := memberPrefix(q.ContID)
	it, err := s.st.NewIter(keyMember(q.ContID, q.After+1), prefixEnd(p))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	look, err := s.newLookup()
	if err != nil {
		return nil, err
	}
	defer look.close()
	pg := memberPage{it: it, look: look, q: &q, prefix: len(p), out: &out}
	switch {
	case q.Count:
		err = pg.count(ctx)
	case q.IDsOnly:
		err = pg.ids()
	default:
		err = pg.records(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("container %d: list members: %w", q.ContID, err)
	}
	// No member is listed while its create is in its fsync (inFlight).
	for i := range out.Items {
		if err := s.creates.wait(ctx, out.Items[i].ID); err != nil {
			return nil, fmt.Errorf("container %d: list members: %w", q.ContID, err)
		}
	}
	for _, id := range out.IDs {
		if err := s.creates.wait(ctx, id); err != nil {
			return nil, fmt.Errorf("container %d: list members: %w", q.ContID, err)
		}
	}
	// Nor what a change still in its fsync, or whose sync failed, made
	// or removed (a create, a delete, a membership), until it is
	// durable. This is also what makes a purge whose sync failed durable
	// before a container delete sent again is acknowledged: its page here
	// finds no member left, and it sends no obj_purge to this server.
	if err := s.scanDurably(ctx, func() string { return fmt.Sprintf("container %d: list members", q.ContID) }); err != nil {
		return nil, err
	}
	return rpc.Respond(&out), nil
}

// memberPage is one page of a container's members under way: the
// iterator stands on the first member after the client's cursor, and
// out.Next, set when the page ends before the members do, is the last
// member scanned.
type memberPage struct {
	it     metastore.Iter
	look   *lookup
	q      *wire.ObjPageReq
	prefix int // the length of the member keys' prefix
	out    *wire.ObjPage
}

func (pg *memberPage) member() uint64 { return binary.BigEndian.Uint64(pg.it.Key()[pg.prefix:]) }

// count counts members, without reading their records.
func (pg *memberPage) count(ctx context.Context) error {
	limit := pageLimit(pg.q.Limit, pageCount)
	var last uint64
	n := 0
	for ok := pg.it.First(); ok; ok = pg.it.Next() {
		if n == limit {
			pg.out.Next = last
			break
		}
		last = pg.member()
		n++
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	pg.out.N = uint64(n)
	return nil
}

// ids lists members' ids, and which of them were added by reference.
func (pg *memberPage) ids() error {
	limit := pageLimit(pg.q.Limit, pageIDs)
	var last uint64
	for ok := pg.it.First(); ok; ok = pg.it.Next() {
		if len(pg.out.IDs) == limit {
			pg.out.Next = last
			break
		}
		last = pg.member()
		pg.out.IDs = append(pg.out.IDs, last)
		// An added member has its reverse key; a home member has none.
		_, added, err := pg.look.get(keyAdded(last, pg.q.ContID))
		if err != nil {
			return err
		}
		if added {
			pg.out.Added = append(pg.out.Added, last)
		}
	}
	return nil
}

// records lists members' records, within the page's byte budget.
func (pg *memberPage) records(ctx context.Context) error {
	limit := pageLimit(pg.q.Limit, pageRecords)
	var last uint64
	size, n := 0, 0
	for ok := pg.it.First(); ok; ok = pg.it.Next() {
		if n == limit || size >= pageBytes {
			pg.out.Next = last
			break
		}
		last = pg.member()
		n++
		m, raw, err := pg.look.loadObj(last)
		if errors.Is(err, pdc.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return err
		}
		pg.out.Items = append(pg.out.Items, *m)
		size += raw + 8
		if n%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// loadObjRaw loads object id's record and returns it with its size in
// bytes.
func (s *core) loadObjRaw(id uint64) (*wire.ObjectMeta, int, error) {
	look, err := s.newLookup()
	if err != nil {
		return nil, 0, err
	}
	defer look.close()
	return look.loadObj(id)
}

// lookup reads keys one at a time through one iterator: a pebble Get
// makes an iterator for each key, which costs a listing of thousands more
// than the keys' reads. A prefix seek on a whole key consults each
// table's bloom filter, as Get does.
type lookup struct{ it metastore.Iter }

func (s *core) newLookup() (*lookup, error) {
	it, err := s.st.NewIter(nil, nil)
	if err != nil {
		return nil, err
	}
	return &lookup{it}, nil
}

func (l *lookup) close() { l.it.Close() }

// get returns key k's value, valid until the next get.
func (l *lookup) get(k []byte) ([]byte, bool, error) {
	if l.it.SeekPrefixGE(k) && bytes.Equal(l.it.Key(), k) {
		v, err := l.it.ValueAndErr()
		return v, err == nil, err
	}
	return nil, false, l.it.Error()
}

// loadObj loads object id's record and returns it with its size in bytes.
func (l *lookup) loadObj(id uint64) (*wire.ObjectMeta, int, error) {
	v, ok, err := l.get(keyObjID(id))
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, fmt.Errorf("object %d: %w", id, pdc.ErrNotFound)
	}
	ident := bytes.Clone(v)
	v, ok, err = l.get(keyObj(ident))
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, fmt.Errorf("object %q: %w", identName(ident), pdc.ErrNotFound)
	}
	var m wire.ObjectMeta
	if err := m.Unmarshal(v); err != nil {
		return nil, 0, fmt.Errorf("object %q: stored record: %w", identName(ident), err)
	}
	return &m, len(v), nil
}

// contPage answers a page of the containers held here, in name order,
// resuming after the name the client names.
func (s *containers) contPage(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	var q wire.ContPageReq
	if err := decode(req, &q); err != nil {
		return nil, err
	}
	if err := checkPageVersion("container page", q.Version); err != nil {
		return nil, err
	}
	lower := []byte{'C'}
	if q.After != "" {
		lower = append(keyCont(q.After), 0) // the first name after it
	}
	it, err := s.st.NewIter(lower, []byte{'D'})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := wire.ContPage{Version: wire.PageVersion}
	limit := pageLimit(q.Limit, pageRecords)
	size := 0
	last := ""
	for ok := it.First(); ok; ok = it.Next() {
		if len(out.Items) == limit || size >= pageBytes {
			out.Next = last
			break
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		var m wire.ContainerMeta
		if err := m.Unmarshal(v); err != nil {
			return nil, fmt.Errorf("container %q: stored record: %w", it.Key()[1:], err)
		}
		out.Items = append(out.Items, m)
		last = m.Name
		size += len(v) + 8
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	// No container is listed while its create is in its fsync (inFlight).
	for i := range out.Items {
		if err := s.creates.wait(ctx, out.Items[i].ID); err != nil {
			return nil, fmt.Errorf("list containers: %w", err)
		}
	}
	// Nor what a change still in its fsync, or whose sync failed, made
	// or removed, until it is durable.
	if err := s.scanDurably(ctx, func() string { return "list containers" }); err != nil {
		return nil, err
	}
	return rpc.Respond(&out), nil
}

// contDeleting marks a container as being deleted and returns its record.
// From then on it cannot be created again or opened, only deleted; a
// delete that stopped half-way (the client or a server died) is finished
// by deleting it again.
func (s *containers) contDeleting(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.ContKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	if err := s.lifeMu.Lock(ctx); err != nil {
		return nil, fmt.Errorf("container %q: mark as being deleted: %w", k.Name, err)
	}
	defer s.lifeMu.Unlock()
	m, err := s.resolveCont(&k)
	if err != nil {
		// Deleted perhaps by the delete this one is sent again after,
		// whose sync failed: a client's delete sent again marks first.
		return nil, s.notFoundDurably(err)
	}
	if m.Deleting {
		// Marked perhaps by this request's first copy, whose sync failed.
		if err := s.st.Settle(); err != nil {
			return nil, fmt.Errorf("container %q: mark as being deleted: %w", m.Name, err)
		}
		return rpc.Respond(m), nil
	}
	m.Deleting = true
	b := s.st.NewBatch()
	defer b.Close()
	b.Set(keyCont(m.Name), m.Marshal(nil))
	tc := s.touches.begin(m.ID)
	defer s.touches.end(tc)
	if err := s.st.Commit(b); err != nil {
		return nil, fmt.Errorf("container %q: mark as being deleted: %w", m.Name, err)
	}
	return rpc.Respond(m), nil
}

// objPurge deletes a page of a container's members held here: the objects
// whose home it is (the client deleted their data first) with their tags,
// index entries and region maps, and the memberships of objects added to
// it, all in one commit, so that a crash leaves each object whole or gone.
// Ids that are no longer members are skipped: a purge the client sends
// again after a crash deletes what is left.
func (s *objects) objPurge(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	var q wire.ObjPurge
	if err := decode(req, &q); err != nil {
		return nil, err
	}
	if err := checkPageVersion("purge", q.Version); err != nil {
		return nil, err
	}
	if q.ContID == 0 {
		return nil, fmt.Errorf("purge: no container given: %w", pdc.ErrInvalid)
	}
	if len(q.IDs) > limits.MaxBatchItems {
		return nil, fmt.Errorf("purge of %d objects; want at most %d: %w", len(q.IDs), limits.MaxBatchItems, pdc.ErrInvalid)
	}
	ids := slices.Clone(q.IDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if err := s.lifeMu.Lock(ctx); err != nil {
		return nil, fmt.Errorf("container %d: purge: %w", q.ContID, err)
	}
	unlocked := false
	defer func() {
		if !unlocked {
			s.lifeMu.Unlock()
		}
	}()
	var ms []*wire.ObjectMeta
	var idents [][]byte
	var unlink []membership
	for _, id := range ids {
		m, ident, err := s.loadObjByID(id)
		if errors.Is(err, pdc.ErrNotFound) {
			continue // purged before
		}
		if err != nil {
			return nil, err
		}
		if m.ContID != q.ContID {
			// Added to the container, if it still is.
			_, member, err := s.st.Get(keyAdded(id, q.ContID))
			if err != nil {
				return nil, err
			}
			if member {
				unlink = append(unlink, membership{q.ContID, id})
			}
			continue
		}
		if !q.Force && s.opens.isOpen(id) {
			return nil, fmt.Errorf("container %d: object %q (id %d) is open: close it first: %w", q.ContID, m.Name, id, pdc.ErrInvalid)
		}
		ms, idents = append(ms, m), append(idents, ident)
	}
	if len(ms) > 0 || len(unlink) > 0 {
		if err := s.deleteObjs(ctx, ms, idents, unlink); err != nil {
			return nil, fmt.Errorf("container %d: %w", q.ContID, err)
		}
	} else if err := s.st.Settle(); err != nil {
		// Purged perhaps by this request's first copy, whose sync failed.
		return nil, fmt.Errorf("container %d: %w", q.ContID, err)
	}
	s.lifeMu.Unlock()
	unlocked = true
	// Answered once the data servers refuse the objects (gone.go).
	gone := make([]uint64, len(ms))
	for i, m := range ms {
		gone[i] = m.ID
	}
	s.tombs.await(ctx, gone)
	return rpc.Respond(&wire.Count{N: uint64(len(ms))}), nil
}
