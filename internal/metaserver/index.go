package metaserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/outbox"
	"github.com/pdcgo/pdc/internal/postings"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// The DART index, this server's side of it (docs/design/0007-search-dart.md).
//
// Every change of an object tag changes index entries, which live on the
// servers that own their terms. Those of this server's own partition are
// written in the tag's own batch. The others go, in the same batch, into
// this server's outbox ('Q' keys), which delivers them in order to their
// servers until acknowledged; the change is acknowledged to the client once
// every server concerned has been tried once (normally: has applied it).
// A crash between the commit and the delivery loses nothing: the outbox is
// read back at start and delivered before this server serves clients.

// indexConfigVersion is the format version of the 'D' record: version,
// then flags. Version 1 kept each entry as a pebble key ('X'); version 2
// keeps them in postings runs ('Y', 'Z'); version 3 has, in suffix-tree
// mode, no reversed texts (U) and no suffix tree entry for a whole text
// (W). A store of an older version is reindexed at start.
const indexConfigVersion = 3

// The prefixes of the index's postings store: its log and its runs.
const (
	prefixIndexLog  = 'Y'
	prefixIndexRuns = 'Z'
)

const (
	indexOn     = 1 << 0
	indexSuffix = 1 << 1
)

// keyIndexConfig records how the index in this store was built.
var keyIndexConfig = []byte{'D'}

// Peers reaches the other metadata servers by their index.
type Peers interface {
	// Call sends a request to the metadata server of the given index and
	// waits for its answer.
	Call(ctx context.Context, index int, m wire.Method, hdr []byte) error
}

// indexer turns tag changes into index operations.
type indexer struct {
	on, suffix bool

	// mu orders tag changes of this server: reading a tag's old value,
	// building its operations, taking outbox sequence numbers and
	// applying the batch happen under it, so that the index sees the
	// changes in the order the store does.
	mu sync.Mutex
	// dict holds keys whose dictionary entries are written or queued;
	// they are never deleted, so they need writing once per process.
	dict map[string]struct{}  // guarded by mu
	ew   tagindex.EntryWriter // guarded by mu

	ob *outbox.Outbox
	// post holds this server's part of the index.
	post *postings.Store
}

// maxDictCache bounds the keys remembered in indexer.dict.
const maxDictCache = 1 << 16

// tagChange is one change of an object tag: old and new are nil for none.
type tagChange struct {
	id       uint64
	key      string
	old, new *wire.TagValue
}

func sameValue(a, b *wire.TagValue) bool {
	return a != nil && b != nil && a.Type == b.Type && bytes.Equal(a.Value, b.Value)
}

// firstOfKey reports whether c sets a value of a key whose dictionary
// entries this process has not written or queued yet, and counts them as
// written: they go with c. The caller holds mu, and forgets the key if
// the commit fails.
func (ix *indexer) firstOfKey(c *tagChange) bool {
	if c.new == nil || sameValue(c.old, c.new) {
		return false
	}
	if _, ok := ix.dict[c.key]; ok {
		return false
	}
	if len(ix.dict) >= maxDictCache {
		clear(ix.dict)
	}
	ix.dict[c.key] = struct{}{}
	return true
}

// forget drops keys from the keys whose dictionary entries are written:
// the commit that was to write them failed. The caller holds mu.
func (ix *indexer) forget(keys []string) {
	for _, k := range keys {
		delete(ix.dict, k)
	}
}

// changeOps gives out the index operations of one change, and with
// withDict the dictionary entries of its key if it sets a value.
func changeOps(w *tagindex.EntryWriter, c *tagChange, suffix, withDict bool, out tagindex.Sink) {
	if sameValue(c.old, c.new) {
		return
	}
	if c.old != nil {
		v := tagindex.ValueOf(region.Type(c.old.Type), c.old.Value)
		w.Write(out, c.key, c.old.Type, c.old.Value, v, c.id, suffix, true)
	}
	if c.new != nil {
		v := tagindex.ValueOf(region.Type(c.new.Type), c.new.Value)
		w.Write(out, c.key, c.new.Type, c.new.Value, v, c.id, suffix, false)
		if withDict {
			for _, op := range tagindex.DictEntries(c.key, suffix) {
				out.Set(op.Key, op.Value)
			}
		}
	}
}

// changeRecord encodes the outbox record of changes whose entries for
// server self of count (none if count is 0) are applied with them: the
// changes themselves, about a fifth of the bytes of their entries, which
// go through the store's log and memtable and are flushed as tombstones.
// Loading the record builds the entries again (recordOps).
func changeRecord(changes []wire.TagChange, suffix bool, count, self int) []byte {
	m := wire.IndexOps{Version: wire.IndexOpsChanges, Suffix: suffix, Changes: changes}
	if count > 0 {
		m.Count, m.Self = uint32(count), uint32(self)
	}
	size := 16
	for i := range changes {
		c := &changes[i]
		size += 24 + len(c.Key)
		for _, v := range []*wire.TagValue{c.Old, c.New} {
			if v != nil {
				size += 8 + len(v.Value)
			}
		}
	}
	return m.Marshal(make([]byte, 0, size))
}

// changeRecordOps returns the index operations of an outbox record of tag
// changes (changeRecord): every entry of the changes but those of the
// server that applied them with the changes, with the dictionary entries
// of the changes that carried them: what the commit queued.
func changeRecordOps(m *wire.IndexOps) (postings.Ops, error) {
	var out recordSink
	if m.Count > 0 {
		if m.Count > outbox.MaxMarkCount || m.Self >= m.Count {
			return postings.Ops{}, fmt.Errorf("outbox record for %d metadata servers but server %d: %w", m.Count, m.Self, pdc.ErrInvalid)
		}
		out.part, out.self = tagindex.For(int(m.Count)), int(m.Self)
	}
	var w tagindex.EntryWriter
	for i := range m.Changes {
		c := &m.Changes[i]
		changeOps(&w, &tagChange{id: c.ID, key: c.Key, old: c.Old, new: c.New}, m.Suffix, c.Dict, &out)
	}
	return out.ops, nil
}

// recordSink keeps the index operations that are not for server self of
// part (all of them without part).
type recordSink struct {
	part *tagindex.Partition
	self int
	ops  postings.Ops
}

func (r *recordSink) keep(k []byte) bool {
	if r.part == nil {
		return true
	}
	o, err := r.part.EntryOwnerOf(k)
	return err != nil || o != r.self // a malformed one is dropped with a log line when split
}

func (r *recordSink) Set(k, v []byte) {
	if r.keep(k) {
		r.ops.Set(k, v)
	}
}

func (r *recordSink) Delete(k []byte) {
	if r.keep(k) {
		r.ops.Delete(k)
	}
}

// router sends each index operation to this server's part (local) or to
// the outbox, already split by destination (byDest); without a partition
// (while starting) all go to the outbox unsplit (rest).
type router struct {
	part   *tagindex.Partition
	self   int
	local  postings.Ops
	byDest []postings.Ops
	rest   postings.Ops
}

func (r *router) to(k []byte) *postings.Ops {
	if r.part == nil {
		return &r.rest
	}
	o, err := r.part.EntryOwnerOf(k)
	switch {
	case err != nil:
		return &r.rest // cannot happen: the layout made it
	case o == r.self:
		return &r.local
	}
	return &r.byDest[o]
}

func (r *router) Set(k, v []byte) { r.to(k).Set(k, v) }
func (r *router) Delete(k []byte) { r.to(k).Delete(k) }

// indexChanges adds the index operations of changes to b: those this
// server holds as one record of its postings log, returned staged (to
// publish once b is committed), the others as outbox records, which it
// returns (to be released with outbox.release once b is committed). The
// caller holds ix.mu; without placement (while starting) every operation
// goes to the outbox. If b does not commit, the caller abandons the
// staged entries, drops the records and forgets the keys.
func (s *core) indexChanges(b metastore.Batch, changes []tagChange) indexed {
	ix := &s.ix
	count, self := int(s.count.Load()), int(s.index.Load())
	var part *tagindex.Partition
	if count > 0 {
		part = tagindex.For(count)
	}
	rt := router{part: part, self: self}
	// About the bytes of the entries, so that the buffers grow once, and
	// not much more: big buffers are cleared when allocated.
	size := 0
	for i := range changes {
		for _, v := range []*wire.TagValue{changes[i].old, changes[i].new} {
			if v != nil {
				size += entriesSize(len(changes[i].key), len(v.Value), ix.suffix)
			}
		}
	}
	if part != nil {
		rt.byDest = make([]postings.Ops, count)
		for i := range rt.byDest {
			rt.byDest[i].Grow(size / count)
		}
		rt.local.Grow(size / count)
	} else {
		rt.rest.Grow(size)
	}
	// The changes, for the outbox record: each with whether its key's
	// dictionary entries go with it, so that a load builds them once.
	rec := make([]wire.TagChange, 0, len(changes))
	var keys []string
	for i := range changes {
		c := &changes[i]
		if sameValue(c.old, c.new) {
			continue
		}
		dict := ix.firstOfKey(c)
		if dict {
			keys = append(keys, c.key)
		}
		changeOps(&ix.ew, c, ix.suffix, dict, &rt)
		rec = append(rec, wire.TagChange{ID: c.id, Key: c.key, Old: c.old, New: c.new, Dict: dict})
	}
	local := &rt.local
	// One record for the whole commit: the outbox delivers its parts by
	// destination, and a move splits it by object (migrate.go).
	n := rt.rest.Len()
	for i := range rt.byDest {
		n += rt.byDest[i].Len()
	}
	var recs []*outbox.Record
	if n > 0 {
		var r *outbox.Record
		if rt.rest.Len() == 0 {
			r = ix.ob.AddSplit(rt.byDest)
		} else {
			// Without placement (rt.rest) there is nothing else.
			r = ix.ob.Add(&rt.rest)
		}
		b.Set(outbox.RecordKey(r.Seq(), 0), changeRecord(rec, ix.suffix, count, self))
		recs = append(recs, r)
	}
	return indexed{recs: recs, local: ix.post.Stage(b.Pebble(), local), keys: keys}
}

// indexed is what indexChanges made of a commit's changes.
type indexed struct {
	recs  []*outbox.Record // outbox records, to release once committed
	local *postings.Staged // this server's entries, to publish once committed
	keys  []string         // keys whose dictionary entries go first with it
}

// entriesSize is about the bytes, as postings.Ops, of the index entries of
// a tag with a key of k bytes and a value of n: a K and a V entry, and in
// suffix-tree mode a W entry for each suffix, each holding its term, the
// key, an object id and a few bytes more.
func entriesSize(k, n int, suffix bool) int {
	if !suffix || n > tagindex.MaxSuffixText {
		// K, V and U, or K, V and L.
		return 3 * (2*n + 2*k + 24)
	}
	return (n+1)*(k+22) + n*(n+3)/2 + n
}

func addOp(ops *postings.Ops, key, value []byte, del bool) {
	if del {
		ops.Delete(key)
	} else {
		ops.Set(key, value)
	}
}

// commitChanges commits b, which holds tag changes, with their index
// operations, and waits until the change is durable. The operations for
// other servers are delivered by the outbox after the reply; queries find
// them because clients fence the outboxes first (indexFence). Only while
// the outbox's backlog is over its bound does the writer wait until every
// other server concerned has been tried once. The caller holds lifeMu (read or
// write) but not ix.mu; build adds the tag writes to b and returns the
// changes, under ix.mu, so that it reads old values in commit order.
// touched are the subjects the change touches (touching), recorded until
// its commit returned (not while it waits for deliveries).
func (s *core) commitChanges(ctx context.Context, b metastore.Batch, touched []uint64, build func() ([]tagChange, error)) error {
	tc := s.touches.begin(touched...)
	defer func() { s.touches.end(tc) }()
	if !s.ix.on {
		if _, err := build(); err != nil {
			return err
		}
		if b.Empty() {
			return nil
		}
		return s.st.Commit(b)
	}
	s.ix.mu.Lock()
	changes, err := build()
	if err != nil {
		s.ix.mu.Unlock()
		return err
	}
	ixd := s.indexChanges(b, changes)
	recs := ixd.recs
	if b.Empty() {
		s.ix.mu.Unlock()
		return nil
	}
	wait, err := s.st.CommitApply(b)
	if err != nil {
		s.ix.post.Abandon(ixd.local)
		s.ix.ob.Drop(recs)
		s.ix.forget(ixd.keys)
		s.ix.mu.Unlock()
		return err
	}
	// Under ix.mu: this server's entries change in commit order.
	s.ix.post.Publish(ixd.local)
	var held uint64 // without records: the bound of those held before
	if len(recs) == 0 {
		held = s.ix.ob.Next()
	}
	s.ix.mu.Unlock()
	// Delivered only once durable here: an index entry must never name a
	// tag that a crash could still take back. A record whose sync failed
	// stays in the store (if it outlives a crash, the next start delivers
	// it) and is held: it is delivered, in its order, once a later change
	// is durable, which makes it durable too. The next put of its keys
	// writes their dictionary entries again.
	err = wait()
	s.touches.end(tc)
	tc = nil
	if err != nil {
		s.ix.ob.Hold(recs)
		s.ix.mu.Lock()
		s.ix.forget(ixd.keys)
		s.ix.mu.Unlock()
		return err
	}
	if len(recs) == 0 {
		// Records held, their sync failed, before this change are
		// durable now, and this is acknowledged: it may be the put sent
		// again of one of them, which changes nothing for the index.
		s.ix.ob.ReleaseHeld(held)
		return nil
	}
	s.ix.ob.Release(recs)
	if !s.ix.ob.Overloaded() {
		return nil
	}
	if err := s.ix.ob.WaitTried(ctx, recs); err != nil {
		return fmt.Errorf("%w (%w)", err, errCommitted)
	}
	return nil
}

// errCommitted marks an error of commitChanges that came once its commit
// was durable: the change is made, and what follows from it (a delete's
// tombstones) must happen all the same.
var errCommitted = errors.New("the change is made")

// indexFence answers once every tag change this server acknowledged before
// the request has its index entries delivered to their servers, naming
// the servers they could not be delivered to: a client fences every
// metadata server before an indexed query, so that it finds every tag
// acknowledged before it, from any process, or knows which servers would
// not have them.
func (s *core) indexFence(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if !s.ix.on {
		return &rpc.Response{}, nil
	}
	if !s.awaitReady() {
		return nil, fmt.Errorf("metadata server is still starting after %v: %w", startupWait, pdc.ErrUnavailable)
	}
	if s.ix.ob.Holds() {
		// Changes applied whose sync failed hold their index updates
		// until a later change is durable (outbox.Hold). One acknowledged
		// since may stand on such a change without making one of its own
		// here: a container delete sent again finds its first copy's
		// purge done. So the fence makes them durable and delivers them,
		// and the index shows what the tags show. While the log still
		// fails they stay held: an index entry must never name a change
		// a crash may take back.
		s.ix.mu.Lock()
		held := s.ix.ob.Next()
		s.ix.mu.Unlock()
		// Within ctx: settling is a commit, which a stalled disk keeps
		// from returning.
		if err := s.st.SettleContext(ctx); err == nil {
			s.ix.ob.ReleaseHeld(held)
		}
	}
	undelivered, err := s.ix.ob.Fence(ctx)
	if err != nil {
		return nil, err
	}
	rep := wire.IndexFenceReply{Undelivered: make([]uint64, len(undelivered))}
	for i, d := range undelivered {
		rep.Undelivered[i] = uint64(d)
	}
	return &rpc.Response{Header: rep.Marshal(nil)}, nil
}

// openIndex checks how the store's index was built. A store whose index
// was built otherwise (another suffix-tree mode, or with the index off) or
// that has none is reindexed: its entries and outbox are dropped and every
// object tag it holds is queued again. Every server of a cluster is started
// with the same settings, so every server rebuilds at once and the index
// ends up complete.
func (s *core) openIndex() error {
	var want byte
	if s.ix.on {
		want |= indexOn
		if s.ix.suffix {
			want |= indexSuffix
		}
	}
	cfg := []byte{indexConfigVersion, want}
	got, ok, err := s.st.Get(keyIndexConfig)
	if err != nil {
		return fmt.Errorf("metadata store %s: read the index settings: %w", s.st.Dir(), err)
	}
	if ok && len(got) == 2 && got[0] > indexConfigVersion {
		return fmt.Errorf("metadata store %s: index format version %d; this build reads version %d: %w", s.st.Dir(), got[0], indexConfigVersion, pdc.ErrVersion)
	}
	if ok && bytes.Equal(got, cfg) {
		return nil
	}
	tp := tagPrefix(kindObject, 0)[:2]
	hasTags := false
	if err := s.scan(tp, func(_, _ []byte) error { hasTags = true; return errStop }); err != nil && err != errStop {
		return err
	}
	if err := s.ix.post.Reset(); err != nil {
		return fmt.Errorf("metadata store %s: reset the index: %w", s.st.Dir(), err)
	}
	rebuild := s.ix.on && hasTags
	b := s.st.NewBatch()
	defer b.Close()
	// Entries of index format 1, one pebble key each.
	b.DeleteRange([]byte{tagindex.Prefix0}, []byte{tagindex.Prefix0 + 1})
	b.DeleteRange([]byte{'Q'}, []byte{'R'})
	b.DeleteRange([]byte{'q'}, []byte{'r'})
	if !rebuild {
		b.Set(keyIndexConfig, cfg)
	}
	if err := s.st.Commit(b); err != nil {
		return fmt.Errorf("metadata store %s: reset the index: %w", s.st.Dir(), err)
	}
	if !rebuild {
		return nil
	}
	s.log.Info("rebuilding this server's part of the tag index", "suffix tree", s.ix.suffix, "was", fmt.Sprintf("%x", got))
	if err := s.reindexAll(); err != nil {
		return err
	}
	// Recorded only once every tag is queued: a start that stops during
	// the rebuild (killed, or a commit failed) leaves the old record, and
	// the next start rebuilds again.
	b2 := s.st.NewBatch()
	defer b2.Close()
	b2.Set(keyIndexConfig, cfg)
	if err := s.st.Commit(b2); err != nil {
		return fmt.Errorf("metadata store %s: record the rebuilt index: %w", s.st.Dir(), err)
	}
	return nil
}

var errStop = fmt.Errorf("stop")

// reindexAll queues the index entries of every object tag of the store.
func (s *core) reindexAll() error {
	tp := tagPrefix(kindObject, 0)[:2]
	var changes []tagChange
	n := 0
	flush := func() error {
		if len(changes) == 0 {
			return nil
		}
		b := s.st.NewBatch()
		defer b.Close()
		s.ix.mu.Lock()
		ixd := s.indexChanges(b, changes)
		err := s.st.Commit(b)
		if err == nil {
			s.ix.post.Publish(ixd.local)
		} else {
			s.ix.post.Abandon(ixd.local)
			s.ix.forget(ixd.keys)
		}
		s.ix.mu.Unlock()
		if err != nil {
			s.ix.ob.Drop(ixd.recs)
			return err
		}
		s.ix.ob.Release(ixd.recs)
		n += len(changes)
		changes = changes[:0]
		return nil
	}
	err := s.scan(tp, func(k, v []byte) error {
		if len(k) < 10 {
			return nil
		}
		var tv wire.TagValue
		if err := tv.Unmarshal(v); err != nil {
			return err
		}
		changes = append(changes, tagChange{id: binary.BigEndian.Uint64(k[2:10]), key: string(k[10:]), new: &tv})
		if len(changes) >= 4096 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("rebuild the tag index: %w", err)
	}
	s.log.Info("queued the tag index entries of this server's tags", "tags", n)
	return nil
}

// indexApply applies index operations sent by another server (its outbox)
// or by a client (explicit DART insert and delete).
func (s *core) indexApply(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if s.count.Load() == 0 || !(s.moved.Load() || s.ready.Load()) {
		return nil, fmt.Errorf("metadata server is still starting: %w", pdc.ErrUnavailable)
	}
	// Packed aliases the request: Apply copies what it keeps.
	var m wire.IndexOps
	if err := decode(req, &m); err != nil {
		return nil, err
	}
	ops, err := opsOfRecord(&m, s.entryCheck())
	if err != nil {
		return nil, err
	}
	if err := s.ix.post.Apply(&ops); err != nil {
		return nil, err
	}
	return &rpc.Response{}, nil
}

// opsOfRecord returns the changes of a batch of index operations or an
// outbox record, of either version, each passed to check if it is set.
func opsOfRecord(m *wire.IndexOps, check func(k, v []byte, del bool) error) (postings.Ops, error) {
	switch m.Version {
	case tagindex.EntryVersion:
		var ops postings.Ops
		for i, op := range m.Ops {
			if check != nil {
				if err := check(op.Key, op.Value, op.Del); err != nil {
					return postings.Ops{}, fmt.Errorf("index change %d: %w", i, err)
				}
			}
			addOp(&ops, op.Key, op.Value, op.Del)
		}
		return ops, nil
	case wire.IndexOpsPacked:
		return postings.ParseOpsChecked(m.Packed, check)
	}
	return postings.Ops{}, fmt.Errorf("index operations of version %d; this server applies versions %d and %d: %w",
		m.Version, tagindex.EntryVersion, wire.IndexOpsPacked, pdc.ErrVersion)
}

// entryCheck returns a check that an index change is a well-formed entry
// of this server's partition.
func (s *core) entryCheck() func(k, v []byte, del bool) error {
	count, self := int(s.count.Load()), int(s.index.Load())
	part := tagindex.For(count)
	return func(k, v []byte, del bool) error {
		if err := tagindex.CheckEntry(k); err != nil {
			return err
		}
		o, err := part.EntryOwnerOf(k)
		if err != nil {
			return err
		}
		if o != self {
			return fmt.Errorf("entry %.60q belongs to metadata server %d of %d, not to this one (%d): %w",
				k, o, count, self, pdc.ErrInvalid)
		}
		if !del && (len(v) == 0 || v[0] != tagindex.EntryVersion) {
			return fmt.Errorf("entry %.60q of unknown version: %w", k, pdc.ErrVersion)
		}
		return nil
	}
}
