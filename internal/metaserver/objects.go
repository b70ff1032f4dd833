package metaserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// objects serves the object methods: creating, opening, listing and
// deleting objects, and their memberships of containers.
type objects struct {
	*core
	// claims holds the identities of objects being created.
	claims claims
	// unsure holds the creates applied but not acknowledged.
	unsure unsureCreates
	// opens counts each client's opens of objects.
	opens openTable
	// tombs pushes deleted objects' tombstones to the data servers.
	tombs tombs
	// cuts orders the pending cuts of shrinks (cut.go).
	cuts cuts
	// dimsCommits counts the set dims commits that have not returned:
	// applied, and visible, before their fsync is done. dimsMu is held
	// for writing around each: an open that may have read one reads
	// again under it for reading (objOpen), so waits for that commit
	// only, not for lifeMu's other holders, and up to its deadline.
	dimsCommits atomic.Int32
	dimsMu      rwLock
	// regions forgets the region maps of deleted objects.
	regions *regions
}

func newObjects(c *core, r *regions) *objects {
	o := &objects{core: c, regions: r}
	o.claims.creating = map[string]chan struct{}{}
	o.unsure.recs = map[string][]byte{}
	o.opens.init()
	o.tombs.init(c)
	o.cuts.init()
	return o
}

// claims holds the identities of objects being created, so that two
// concurrent creates of one identity cannot both succeed while their
// commits (and fsyncs) run outside the lock. Only the claims hold mu: the
// store lookups of concurrent creates run side by side.
type claims struct {
	mu sync.Mutex
	// creating maps each identity claimed to the channel its release
	// closes, made by the first create that waits for it (nil until
	// then, so that a claim no one waits for allocates nothing). Guarded
	// by mu.
	creating map[string]chan struct{}
}

// claim claims the identities of c's items still to create. One that
// another create has claimed is waited for, until that create lets go
// or ctx ends: its commit may be in its fsync, and "exists" then would
// answer an object that a power loss could take back. Once it let go, the
// store shows what it made (refuseStored). Claims are taken in key order,
// so no two creates can wait for each other's. An item whose identity an
// earlier item of c claimed is refused.
func (cl *claims) claim(ctx context.Context, c *creation) error {
	last := ""
	cl.mu.Lock()
	for _, i := range c.order {
		if c.metas[i] == nil {
			continue
		}
		ident := string(c.keys[i][1:])
		if ident == last {
			c.refuse(i, fmt.Errorf("object %q: %w", c.metas[i].Name, pdc.ErrExists))
			continue
		}
		for {
			busy, claimed := cl.creating[ident]
			if !claimed {
				break
			}
			if busy == nil {
				busy = make(chan struct{})
				cl.creating[ident] = busy
			}
			cl.mu.Unlock()
			select {
			case <-busy:
			case <-ctx.Done():
				return fmt.Errorf("object %q: wait for another create of it: %w", c.metas[i].Name, ctx.Err())
			}
			cl.mu.Lock()
		}
		cl.creating[ident] = nil
		c.idents[i], last = ident, ident
	}
	cl.mu.Unlock()
	return nil
}

// release gives up the claims on idents ("" claims nothing), and wakes
// the creates waiting for them.
func (cl *claims) release(idents []string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, id := range idents {
		if id == "" {
			continue
		}
		if busy := cl.creating[id]; busy != nil {
			close(busy)
		}
		delete(cl.creating, id)
	}
}

// unsureCreates remembers the objects whose create was applied but whose
// sync failed, by identity, with the record committed. The client was
// told the create failed, and may send it again: that retry must not find
// the object it made as someone else's and answer "exists". A create of
// the same record (same container and properties) takes the object over,
// makes it durable with its own commit, and answers with its id. Held in
// memory only: after a restart a create that survived is an object like
// any other.
type unsureCreates struct {
	mu   sync.Mutex
	recs map[string][]byte // identity -> its record as committed; guarded by mu
}

// maxUnsure bounds the creates remembered; past it the set starts over,
// and a retry of a create forgotten answers "exists".
const maxUnsure = 1 << 16

func (u *unsureCreates) add(ident string, rec []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.recs) >= maxUnsure {
		clear(u.recs)
	}
	u.recs[ident] = rec
}

func (u *unsureCreates) get(ident string) []byte {
	u.mu.Lock()
	rec := u.recs[ident]
	u.mu.Unlock()
	return rec
}

// empty reports whether no create is remembered: the usual case, in
// which a create that succeeds has nothing to forget.
func (u *unsureCreates) empty() bool {
	u.mu.Lock()
	n := len(u.recs)
	u.mu.Unlock()
	return n == 0
}

// remove forgets ident: its create is acknowledged now, or made anew after
// the object its entry names was deleted.
func (u *unsureCreates) remove(ident string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.recs, ident)
}

func (s *core) loadObjByID(id uint64) (*wire.ObjectMeta, []byte, error) {
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
func (s *core) objExists(id uint64) error {
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

func (s *core) loadObj(ident []byte) (*wire.ObjectMeta, []byte, error) {
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
func (s *core) resolveObj(k *wire.ObjKey) (*wire.ObjectMeta, []byte, error) {
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

func (s *objects) objCreate(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var b wire.ObjBatch
	if err := decode(req, &b); err != nil {
		return nil, err
	}
	if len(b.Creates) == 0 || len(b.Creates) > limits.MaxBatchItems {
		return nil, fmt.Errorf("create batch of %d objects; want 1 to %d: %w", len(b.Creates), limits.MaxBatchItems, pdc.ErrInvalid)
	}
	// The slices are made here, not in a constructor: those of a small
	// batch then live on this function's stack.
	n := len(b.Creates)
	out := wire.ObjResults{Items: make([]wire.ObjResult, n)}
	c := creation{
		s:      s,
		out:    &out, // a pointer: the answer escapes, the rest need not
		metas:  make([]*wire.ObjectMeta, n),
		idents: make([]string, n),
		keys:   make([][]byte, n),
		order:  make([]int, n),
	}
	c.sortKeys(b.Creates)
	// Check each item, then claim its identity so that no concurrent
	// create of it can pass the existence check while this one commits
	// (a create of it under way is waited for), then check that the
	// store does not hold it yet. The check comes after the claim: a
	// create that held the claim before committed before it let go, so
	// the store shows it. Only the claims hold the lock: the store
	// lookups of concurrent creates run side by side.
	c.check(b.Creates)
	err := s.claims.claim(ctx, &c)
	defer s.claims.release(c.idents)
	if err != nil {
		return nil, fmt.Errorf("create %d objects: %w", n, err)
	}
	// The set is passed, not reached through c: reached through c, the
	// mutex's leaking receiver sends c's slices, made on this stack for a
	// small batch, to the heap.
	if err := c.refuseStored(&s.unsure); err != nil {
		return nil, err
	}
	if err := c.commit(&s.unsure); err != nil {
		return nil, err
	}
	for i, m := range c.metas {
		if m != nil {
			// The client knows the rest of the record: it sent it.
			c.out.Items[i] = wire.ObjResult{Meta: wire.ObjectMeta{ID: m.ID, CreatedUnix: m.CreatedUnix}}
			s.opens.open(req.Client, m.ID, m.ContID)
			s.live.add(m.ID, c.gen)
		}
	}
	return rpc.Respond(&out), nil
}

// creation is one batch of creates under way. Its items are taken in the
// order of their keys (order): one iterator seeking forward checks them
// all, and the batch's keys go into the memtable in order.
type creation struct {
	s      *objects
	out    *wire.ObjResults
	metas  []*wire.ObjectMeta // by item: the record to create, nil once refused
	idents []string           // by item: the identity claimed, or ""
	taken  map[int]bool       // items that take over an unsure create (unsureCreates); nil if none
	keys   [][]byte           // by item: its record's key
	order  []int              // the items in key order
	gen    uint64             // the live set's generation before the commit
	// stored: an item was refused because the store holds its identity
	// (refuseStored).
	stored bool
}

// sortKeys makes the record keys of creates and sorts the items by them.
func (c *creation) sortKeys(creates []wire.ObjCreate) {
	for i := range creates {
		c.order[i] = i
		p := &creates[i].Props
		c.keys[i] = keyObj(identity(creates[i].Name, p.TimeStep, p.UserID, p.AppName))
	}
	slices.SortFunc(c.order, func(x, y int) int { return bytes.Compare(c.keys[x], c.keys[y]) })
}

// refuse answers item i with err and drops it from the batch.
func (c *creation) refuse(i int, err error) {
	c.out.Items[i] = result(nil, err)
	c.metas[i] = nil
}

// check validates each item and makes the record it would create.
func (c *creation) check(creates []wire.ObjCreate) {
	now := time.Now().UnixNano()
	for _, i := range c.order {
		m, err := c.s.prepareCreate(&creates[i], now)
		if err != nil {
			c.refuse(i, err)
			continue
		}
		c.metas[i] = m
	}
}

// refuseStored refuses the items the store already holds. A prefix seek
// (the whole key is the prefix) consults each table's bloom filter, so a
// new identity, the usual case, reads no table blocks.
func (c *creation) refuseStored(unsure *unsureCreates) error {
	it, err := c.s.st.NewIter([]byte{'O'}, []byte{'P'})
	if err != nil {
		return err
	}
	defer it.Close()
	for _, i := range c.order {
		if m := c.metas[i]; m != nil && it.SeekPrefixGE(c.keys[i]) && bytes.Equal(it.Key(), c.keys[i]) {
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			if old := unsure.takeOver(c.idents[i], *m, v); old != nil {
				if c.taken == nil {
					c.taken = map[int]bool{} // rare: made only when needed
				}
				c.metas[i], c.taken[i] = old, true
				continue
			}
			p := &m.Props
			c.refuse(i, fmt.Errorf("object %q (time step %d, user %d, app %q) already exists: %w",
				m.Name, p.TimeStep, p.UserID, p.AppName, pdc.ErrExists))
			c.stored = true
		}
	}
	return nil
}

// takeOver returns the object that item m, whose identity ident the store
// holds with record stored, takes over: that of a create sent before and
// answered with an error though applied (unsureCreates), or nil. The
// stored record must be the one that create committed (nothing changed
// it since) and m must ask for the same: another create of the identity,
// or one with other properties, finds the object as it is.
func (u *unsureCreates) takeOver(ident string, m wire.ObjectMeta, stored []byte) *wire.ObjectMeta {
	rec := u.get(ident)
	if rec == nil || !bytes.Equal(rec, stored) {
		return nil
	}
	old := new(wire.ObjectMeta)
	if err := old.Unmarshal(rec); err != nil {
		return nil
	}
	m.ID, m.CreatedUnix = old.ID, old.CreatedUnix
	if !bytes.Equal(m.Marshal(nil), rec) {
		return nil
	}
	return old
}

// commit gives the items left their ids and commits their records, id
// keys and memberships in one batch.
func (c *creation) commit(unsure *unsureCreates) error {
	n, taken := 0, 0
	for i, m := range c.metas {
		switch {
		case m == nil:
		case c.taken[i]:
			taken++
		default:
			n++
		}
	}
	// Reads that hand out an object wait for its commit, and a data
	// server asking about its id hears it was never created until then
	// (inFlight). An object taken over needs no entry: the commit that
	// applied it failed its sync, and this one, a commit after it, first
	// makes it durable.
	var seq uint32
	var f *flight
	if n > 0 {
		var err error
		if f, err = c.s.creates.begin(c.s.st, n); err != nil {
			return err
		}
		defer c.s.creates.end(f)
		seq = f.first
		c.s.fresh.add(seq, n)
	}
	// Each kind of key is added in order: the memtable inserts a batch's
	// keys one after another starting from where the last one went, so a
	// sorted run costs a step per key instead of a search from the top.
	batch := c.s.st.NewBatch()
	defer batch.Close()
	made := c.order[:0:0]
	for _, i := range c.order {
		if m := c.metas[i]; m != nil {
			// An object taken over keeps its id; its keys are written
			// again as they are, so that this commit's sync covers it.
			if !c.taken[i] {
				m.ID = placement.ID(placement.Key(m.Name, m.Props.TimeStep), seq)
				seq++
			}
			batch.Set(c.keys[i], m.Marshal(nil))
			made = append(made, i)
		}
	}
	slices.SortFunc(made, func(x, y int) int {
		a, b := c.metas[x], c.metas[y]
		return cmp.Or(cmp.Compare(a.ContID, b.ContID), cmp.Compare(a.ID, b.ID))
	})
	for _, i := range made {
		batch.Set(keyObjID(c.metas[i].ID), c.keys[i][1:]) // the identity
	}
	for _, i := range made {
		batch.Set(keyMember(c.metas[i].ContID, c.metas[i].ID), nil)
	}
	c.gen = c.s.live.generation()
	if len(made) == 0 {
		if c.stored {
			// "Exists" may stand on a create whose sync failed (another
			// client's, or this one's with other properties): answered
			// once that create is durable, as a commit here would make
			// it.
			if err := c.s.st.Settle(); err != nil {
				return fmt.Errorf("create %d objects: %w", len(c.metas), err)
			}
		}
		return nil
	}
	err := c.s.st.Commit(batch)
	switch {
	case err == nil:
		if !unsure.empty() {
			for _, i := range made {
				unsure.remove(c.idents[i])
			}
		}
	case errors.Is(err, metastore.ErrUnsynced):
		// Made, but the client hears it failed: a retry takes it over.
		for _, i := range made {
			unsure.add(c.idents[i], c.metas[i].Marshal(nil))
		}
	}
	if err != nil {
		return fmt.Errorf("create %d objects: %w", n+taken, err)
	}
	return nil
}

// prepareCreate validates c and returns the record it would create.
func (s *objects) prepareCreate(c *wire.ObjCreate, now int64) (*wire.ObjectMeta, error) {
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

func (s *objects) objOpen(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var b wire.ObjBatch
	if err := decode(req, &b); err != nil {
		return nil, err
	}
	if len(b.Opens) == 0 || len(b.Opens) > limits.MaxBatchItems {
		return nil, fmt.Errorf("open batch of %d objects; want 1 to %d: %w", len(b.Opens), limits.MaxBatchItems, pdc.ErrInvalid)
	}
	// The records handed out are durable: a set dims whose fsync failed
	// or is still under way is applied but may be lost in a crash, and a
	// data server that confirms a shrink's dims with an open (Peek), or a
	// client writing through the dims it opened, would cut the rows past
	// it, which a crash would then bring back under the old dims, empty.
	out := s.resolveOpens(&b)
	if s.dimsCommits.Load() > 0 {
		// A set dims may be in its fsync with a record read here: read
		// again once it is done. Rare; opens otherwise take no lock.
		if err := s.dimsMu.ReadLock(ctx); err != nil {
			return nil, fmt.Errorf("open %d objects: wait for a set dims in its fsync: %w", len(b.Opens), err)
		}
		out = s.resolveOpens(&b)
		s.dimsMu.ReadUnlock()
	}
	// An object whose create is in its fsync likewise: a crash would take
	// it back, after the client wrote to it, tagged it, or handed its id
	// on. Rare too: opens otherwise load one counter.
	for i := range out.Items {
		if r := &out.Items[i]; r.Code == wire.CodeOK {
			if err := s.creates.wait(ctx, r.Meta.ID); err != nil {
				return nil, fmt.Errorf("open %d objects: wait for the create of object %q to be durable: %w", len(b.Opens), r.Meta.Name, err)
			}
		}
	}
	// An object not found may be one whose delete is in its fsync, which
	// a crash could take back: answered once the delete returned.
	var missing []uint64
	for i := range out.Items {
		if r := &out.Items[i]; r.Code == wire.CodeNotFound {
			k := &b.Opens[i]
			if k.ID != 0 {
				missing = append(missing, k.ID)
			} else {
				missing = append(missing, nameSubject('o', k.Name, k.TimeStep))
			}
		}
	}
	// Read before the looks above, a record is one whose commit returned:
	// durable, or its sync failed, which Settle makes up for (at once
	// unless a sync failed and no commit has made up for it).
	if err := s.readDurably(ctx, func() string { return fmt.Sprintf("open %d objects", len(b.Opens)) }, nil, missing...); err != nil {
		return nil, err
	}
	for i := range out.Items {
		if r := &out.Items[i]; r.Code == wire.CodeOK && !b.Opens[i].Peek {
			s.opens.open(req.Client, r.Meta.ID, r.Meta.ContID)
		}
	}
	return rpc.Respond(&out), nil
}

// resolveOpens looks up the objects of an open batch, in order, until the
// answer holds openReplyBytes.
func (s *objects) resolveOpens(b *wire.ObjBatch) wire.ObjResults {
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
	}
	return out
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

func (s *objects) objClose(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var a wire.IDArg
	if err := decode(req, &a); err != nil {
		return nil, err
	}
	s.opens.close(req.Client, a.ID)
	return &rpc.Response{}, nil
}

// objCloseAll releases every open of the calling client: it is closing,
// and a container delete right after its Close (by another process, say)
// must not find its objects still open while its connections wind down.
func (s *objects) objCloseAll(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	s.opens.endSession(req.Client)
	return &rpc.Response{}, nil
}

func (s *objects) objList(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
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
	// As obj_page: no member while its create is in its fsync, nor what
	// a change whose fsync failed made (a create, a delete, a set dims,
	// a membership), until a commit made it durable.
	for i := range out.Items {
		if err := s.creates.wait(ctx, out.Items[i].ID); err != nil {
			return nil, fmt.Errorf("container %d: list members: %w", a.ID, err)
		}
	}
	if err := s.scanDurably(ctx, func() string { return fmt.Sprintf("container %d: list members", a.ID) }); err != nil {
		return nil, err
	}
	return rpc.Respond(&out), nil
}

func (s *objects) objOpenCount(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
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
