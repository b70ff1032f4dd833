package metaserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/outbox"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/postings"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

// Send delivers entries to the metadata server of the given index and
// returns once they are stored there.
type Send func(ctx context.Context, index int, kvs *wire.KVBatch) error

// keyOwner returns the placement key that decides which server holds a
// store key, and false for keys that stay local ('S', 'V').
func keyOwner(k []byte) (uint32, bool) {
	if len(k) == 0 {
		return 0, false
	}
	switch k[0] {
	case 'C', 'F':
		return placement.Key(string(k[1:]), 0), true
	case 'f':
		// A staged record of a namespace is placed by its path alone.
		if path, ok := stagePathOfKey(k); ok {
			return placement.Key(string(path), 0), true
		}
	case 'c', 'o', 'G', 'K':
		if len(k) == 9 {
			return placement.KeyOf(binary.BigEndian.Uint64(k[1:])), true
		}
	case 'O':
		if i := bytes.IndexByte(k[1:], 0); i >= 0 && len(k) >= 1+i+1+4 {
			ts := binary.BigEndian.Uint32(k[1+i+1:])
			return placement.Key(string(k[1:1+i]), ts), true
		}
	case 'M':
		if len(k) == 17 {
			return placement.KeyOf(binary.BigEndian.Uint64(k[9:])), true
		}
	case 'm':
		if len(k) == 17 {
			return placement.KeyOf(binary.BigEndian.Uint64(k[1:9])), true
		}
	case 'R':
		if len(k) == 17 {
			return placement.KeyOf(binary.BigEndian.Uint64(k[1:])), true
		}
	case 'T':
		if len(k) >= 10 {
			return placement.KeyOf(binary.BigEndian.Uint64(k[2:])), true
		}
	}
	return 0, false
}

// keyDest returns the index, among count metadata servers, of the server
// that holds a store key, and false for keys that stay local ('S', 'V',
// 'D', 'L'). Index entries go to the server of their DART partition,
// outbox records with their object.
func keyDest(k []byte, count int) (int, bool) {
	if len(k) == 0 {
		return 0, false
	}
	switch k[0] {
	case tagindex.Prefix0:
		o, err := tagindex.For(count).EntryOwner(k)
		return o, err == nil
	case 'Q':
		if len(k) == 17 {
			return placement.OwnerOfID(binary.BigEndian.Uint64(k[9:]), count), true
		}
		return 0, false
	}
	pk, ok := keyOwner(k)
	if !ok {
		return 0, false
	}
	return placement.Owner(pk, count), true
}

// migrateBatch is how many entries go in one import request, and
// migrateBytes about how many bytes, well under the frame header limit.
const (
	migrateBatch = 4096
	migrateBytes = 256 << 10
)

// MoveForeign sends every entry this server no longer owns (the cluster's
// metadata server count changed) to its owner, then deletes it here. It
// returns how many entries moved.
func (s *Service) MoveForeign(ctx context.Context, send Send) (int, error) {
	return moveFrom(ctx, s.st, s.ix.post, int(s.index.Load()), int(s.count.Load()), send, true, s)
}

// Adopt opens the store in dir, left by a server of a larger cluster that
// no longer exists, sends every entry to its owner (this server included),
// and renames dir out of the way.
func (s *Service) Adopt(ctx context.Context, dir string, send Send) (int, error) {
	// Opening it replays its own log, so nothing it acknowledged is missed.
	fsys := vfs.OrDefault(s.cfg.FS)
	st, err := metastore.Open(metastore.Options{Dir: dir, FS: fsys, Durability: metastore.DurabilityProcess, CacheBytes: 8 << 20, Logger: s.log})
	if err != nil {
		return 0, fmt.Errorf("adopt metadata store %s: %w", dir, err)
	}
	post, err := postings.Open(st.DB(), st.CommitPebble, prefixIndexLog, prefixIndexRuns, postings.Options{Logger: s.log})
	if err != nil {
		st.Close()
		return 0, fmt.Errorf("adopt metadata store %s: %w", dir, err)
	}
	n, err := moveFrom(ctx, st, post, -1, int(s.count.Load()), send, false, s)
	post.Close()
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("adopt metadata store %s: %w", dir, err)
	}
	done := adoptedName(fsys, dir, time.Now())
	if err := fsys.Rename(dir, done); err != nil {
		return n, fmt.Errorf("adopt metadata store %s: %w", dir, err)
	}
	// Without this a crash could bring dir back; adopting it again would
	// be harmless (imports are idempotent) but slow a restart.
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		return n, fmt.Errorf("adopt metadata store %s: %w", dir, err)
	}
	return n, nil
}

// adoptedName returns the name an adopted store in dir is renamed to: one
// no other adopted store has. A store of the same rank can be adopted,
// recreated by a server of that rank and adopted again within a second
// when starts are killed in a row (the slots kill test found it: the
// rename then failed on the first one's directory and the server exited).
func adoptedName(fsys vfs.FS, dir string, now time.Time) string {
	base := fmt.Sprintf("%s.adopted-%s", dir, now.UTC().Format("20060102T150405Z"))
	name := base
	for i := 2; ; i++ {
		if _, err := fsys.Stat(name); err != nil {
			return name // free, or the rename will say what is wrong
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

// moveFrom sends entries of from and of its tag index (post) whose owner
// is not self to their owners; with self -1 every entry moves, those owned
// here being applied locally.
func moveFrom(ctx context.Context, from *metastore.Store, post *postings.Store, self, count int, send Send, deleteMoved bool, s *Service) (int, error) {
	if count <= 0 {
		return 0, fmt.Errorf("move metadata: placement unknown: %w", pdc.ErrUnavailable)
	}
	m := &mover{ctx: ctx, from: from, post: post, self: self, count: count, send: send, deleteMoved: deleteMoved, s: s,
		pending: map[int]*wire.KVBatch{}, pendingBytes: map[int]int{}}
	if err := m.moveIndex(); err != nil {
		return m.moved, err
	}
	records, marks, err := m.moveKeys()
	if err != nil {
		return m.moved, err
	}
	for owner := range m.pending {
		if err := m.flush(owner); err != nil {
			return m.moved, err
		}
	}
	sendNow := func(owner int, k, v []byte) error {
		b := &wire.KVBatch{Keys: [][]byte{{'S'}, k}, Values: [][]byte{binary.BigEndian.AppendUint64(nil, from.HighWater()), v}}
		if err := m.deliver(owner, b); err != nil {
			return fmt.Errorf("move outbox record %x to metadata server %d: %w", k, owner, err)
		}
		return nil
	}
	for _, r := range records {
		n, err := moveRecord(r[0], r[1], marks[string(r[0][1:9])], self, count, sendNow, deleteMoved, from)
		m.moved += n
		if err != nil {
			return m.moved, err
		}
	}
	return m.moved, nil
}

// mover is one moveFrom: the entries gathered by owner, sent in batches.
type mover struct {
	ctx          context.Context
	from         *metastore.Store
	post         *postings.Store
	self, count  int
	send         Send
	deleteMoved  bool
	s            *Service
	pending      map[int]*wire.KVBatch
	pendingBytes map[int]int
	moved        int
}

// deliver imports b here or sends it to its owner.
func (m *mover) deliver(owner int, b *wire.KVBatch) error {
	if owner == int(m.s.index.Load()) {
		return m.s.importKVs(b)
	}
	return m.send(m.ctx, owner, b)
}

// flush delivers what is gathered for owner and, if the move deletes,
// deletes it here.
func (m *mover) flush(owner int) error {
	b := m.pending[owner]
	if b == nil || len(b.Keys) == 0 {
		return nil
	}
	if err := m.deliver(owner, b); err != nil {
		return fmt.Errorf("move %d entries to metadata server %d: %w", len(b.Keys), owner, err)
	}
	if m.deleteMoved {
		if err := m.deleteHere(b.Keys[1:]); err != nil { // not the high-water mark
			return err
		}
	}
	m.moved += len(b.Keys) - 1
	delete(m.pending, owner)
	delete(m.pendingBytes, owner)
	return nil
}

// deleteHere deletes moved keys from the store and its tag index.
func (m *mover) deleteHere(keys [][]byte) error {
	var err error
	del := m.from.NewBatch()
	var ixDel postings.Ops
	for _, k := range keys {
		if k[0] == tagindex.Prefix0 {
			ixDel.Delete(k)
		} else {
			del.Delete(k)
		}
	}
	if !del.Empty() {
		err = m.from.Commit(del)
		// Objects' keys left the store: none is known to exist.
		m.s.live.forgetAll()
	}
	del.Close()
	if err == nil {
		err = m.post.Apply(&ixDel)
	}
	return err
}

// add gathers k and v for owner, and flushes once a batch is full.
func (m *mover) add(owner int, k, v []byte) error {
	b := m.pending[owner]
	if b == nil {
		// First, the source's id high-water mark: ids of objects it
		// deleted must not be handed out again by the new owner.
		b = &wire.KVBatch{Keys: [][]byte{{'S'}}, Values: [][]byte{binary.BigEndian.AppendUint64(nil, m.from.HighWater())}}
		m.pending[owner] = b
	}
	b.Keys = append(b.Keys, append([]byte(nil), k...))
	b.Values = append(b.Values, append([]byte{}, v...))
	m.pendingBytes[owner] += len(k) + len(v)
	if len(b.Keys) > migrateBatch || m.pendingBytes[owner] > migrateBytes {
		return m.flush(owner)
	}
	return nil
}

// moveIndex gathers the index entries, each for the server of its term
// under the new count.
func (m *mover) moveIndex() error {
	part := tagindex.For(m.count)
	return m.post.Range(nil, nil, func(k, v []byte) error {
		owner, err := part.EntryOwner(k)
		if err != nil {
			m.s.log.Error("dropping a malformed tag index entry", "entry", fmt.Sprintf("%.60q", k), "err", err)
			return nil
		}
		if owner == m.self {
			return nil
		}
		return m.add(owner, k, v)
	})
}

// moveKeys gathers the store's entries for their owners, and returns the
// outbox records, which move last, each on its own (moveRecord), with the
// marks of their parts already applied: dest -> the count it was an index
// among, by record.
func (m *mover) moveKeys() (records [][2][]byte, marks map[string]map[int]int, err error) {
	marks = map[string]map[int]int{}
	it, err := m.from.NewIter(nil, nil)
	if err != nil {
		return nil, nil, err
	}
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		k := it.Key()
		var v []byte
		switch {
		case k[0] == outbox.RecordPrefix && len(k) == 17:
			if v, err = it.ValueAndErr(); err == nil {
				records = append(records, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			}
		case k[0] == outbox.MarkPrefix && len(k) == 13:
			if v, err = it.ValueAndErr(); err != nil {
				break
			}
			if _, d, n, ok := outbox.DecodeMark(k, v); ok {
				seq := string(k[1:9])
				if marks[seq] == nil {
					marks[seq] = map[int]int{}
				}
				marks[seq][d] = n
			}
		default:
			owner, ok := keyDest(k, m.count)
			if !ok || owner == m.self {
				continue
			}
			if v, err = it.ValueAndErr(); err == nil {
				err = m.add(owner, k, v)
			}
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return records, marks, err
}

// moveRecord moves the parts of outbox record k whose objects now belong
// to other servers: a record holds the changes of one commit, of objects
// that may now have different owners, and every pending change of an
// object must follow it. Dictionary entries, which name no object, go with
// the first part. Parts go in pieces of at most migrateBytes, each its own
// record at the receiver, sent at once; only once all are sent is the
// record rewritten (the part that stays, under the same key, so it keeps
// its place in this server's order) or deleted. A crash midway sends some
// pieces again at the next start, which applies the same changes twice:
// harmless. It returns how many pieces it sent.
//
// Entries of a part that its server applied already (marks: destination
// -> the count it was an index among) are left out: the move takes that
// server's entries to their new servers, perhaps with newer changes of
// the same entries, which these would undo.
func moveRecord(k, v []byte, marks map[int]int, self, count int, sendNow func(owner int, k, v []byte) error, deleteMoved bool, from *metastore.Store) (int, error) {
	ops, err := recordOps(v)
	if err != nil {
		return 0, fmt.Errorf("outbox record %x: %w", k, err)
	}
	parts := map[int]*postings.Ops{}
	var order []int
	var dict postings.Ops
	_ = ops.Each(func(ek, _ []byte, _ bool, rec []byte) error {
		for d, n := range marks {
			if o, err := tagindex.For(n).EntryOwnerOf(ek); err == nil && o == d {
				return nil
			}
		}
		id, ok := tagindex.EntryObject(ek)
		if !ok {
			dict.AppendRecord(rec)
			return nil
		}
		owner := placement.OwnerOfID(id, count)
		if parts[owner] == nil {
			parts[owner] = &postings.Ops{}
			order = append(order, owner)
		}
		parts[owner].AppendRecord(rec)
		return nil
	})
	if dict.Len() > 0 {
		if len(order) == 0 {
			order = append(order, max(self, 0))
			parts[order[0]] = &postings.Ops{}
		}
		parts[order[0]].Append(&dict)
	}
	if len(order) == 1 && order[0] == self && len(marks) == 0 {
		return 0, nil
	}
	sent := 0
	for _, owner := range order {
		if owner == self {
			continue
		}
		for _, piece := range outbox.Chunks(parts[owner], migrateBytes) {
			m := wire.IndexOps{Version: wire.IndexOpsPacked, Packed: piece.Bytes()}
			sent++
			if err := sendNow(owner, k, m.Marshal(nil)); err != nil {
				return sent, err
			}
		}
	}
	if !deleteMoved {
		return sent, nil
	}
	b := from.NewBatch()
	defer b.Close()
	if p := parts[self]; p != nil {
		m := wire.IndexOps{Version: wire.IndexOpsPacked, Packed: p.Bytes()}
		b.Set(k, m.Marshal(nil))
	} else {
		b.Delete(k)
	}
	seq := binary.BigEndian.Uint64(k[1:9])
	for d := range marks {
		b.Delete(outbox.MarkKey(seq, d))
	}
	return sent, from.Commit(b)
}

// KeepIDsAbove makes every id this server hands out from now on have a
// sequence number above seq, durably. At start, seq is the highest one
// among the ids whose data files the data servers hold: a store put back
// from a checkpoint would otherwise hand out again the ids of objects
// created after it, whose files are still there, and a new object would
// read an old one's bytes instead of zeros (ids are never reused, 0016).
func (s *Service) KeepIDsAbove(seq uint32) error { return s.st.RaiseSeq(seq) }

// importKVs stores entries moved here, keeping later ids above theirs.
func (s *Service) importKVs(b *wire.KVBatch) error {
	batch := s.st.NewBatch()
	defer batch.Close()
	var ix postings.Ops
	for i, k := range b.Keys {
		if len(k) == 1 && k[0] == 'S' && len(b.Values[i]) == 8 {
			s.st.ObserveSeq(uint32(min(binary.BigEndian.Uint64(b.Values[i]), 1<<32-1)))
			continue
		}
		if _, ok := keyDest(k, max(int(s.count.Load()), 1)); !ok {
			return fmt.Errorf("import: key %q is not movable metadata: %w", k, pdc.ErrInvalid)
		}
		if (k[0] == 'o' || k[0] == 'c') && len(k) == 9 {
			s.st.ObserveSeq(placement.SeqOf(binary.BigEndian.Uint64(k[1:])))
		}
		if k[0] == 'Q' {
			// An outbox record follows its object: it is delivered here,
			// after this server's own records, in the order it arrives.
			k = outbox.RecordKey(s.ix.ob.NextSeq(), binary.BigEndian.Uint64(k[9:]))
		}
		if k[0] == tagindex.Prefix0 {
			if err := tagindex.CheckEntry(k); err != nil {
				return fmt.Errorf("import: %w", err)
			}
			ix.Set(k, b.Values[i])
			continue
		}
		batch.Set(k, b.Values[i])
	}
	// Reserve the observed ids on disk before acknowledging.
	if _, err := s.st.NextSeq(); err != nil {
		return err
	}
	staged := s.ix.post.Stage(batch.Pebble(), &ix)
	if err := s.st.Commit(batch); err != nil {
		s.ix.post.Abandon(staged)
		return err
	}
	s.ix.post.Publish(staged)
	return nil
}

func (s *Service) importRPC(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if s.ready.Load() {
		// Moves happen only while the cluster starts, before any client
		// is served: an import now could overwrite newer changes.
		return nil, fmt.Errorf("metadata imports are accepted only while the cluster starts: %w", pdc.ErrInvalid)
	}
	var b wire.KVBatch
	if err := decode(req, &b); err != nil {
		return nil, err
	}
	if err := s.importKVs(&b); err != nil {
		return nil, err
	}
	return &rpc.Response{}, nil
}
