package metaserver

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// targetExists checks that the object or container a tag is on exists.
// tags serves the tag methods of objects and containers, and tag queries.
// Tag writes hold lifeMu for reading, so that a tag cannot land on an
// object deleted between the check that it exists and the commit.
type tags struct {
	*core
}

func (s *core) targetExists(kind uint32, id uint64) error {
	switch kind {
	case kindObject:
		return s.objExists(id)
	case kindContainer:
		_, err := s.resolveCont(&wire.ContKey{ID: id})
		return err
	}
	return fmt.Errorf("unknown tag target kind %d: %w", kind, pdc.ErrInvalid)
}

func kindName(kind uint32) string {
	if kind == kindContainer {
		return "container"
	}
	return "object"
}

func (s *tags) tagPut(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var tb wire.TagBatch
	if err := decode(req, &tb); err != nil {
		return nil, err
	}
	if len(tb.Puts) == 0 || len(tb.Puts) > limits.MaxBatchItems {
		return nil, fmt.Errorf("tag batch of %d puts; want 1 to %d: %w", len(tb.Puts), limits.MaxBatchItems, pdc.ErrInvalid)
	}
	out := wire.TagResults{Codes: make([]uint64, len(tb.Puts)), Messages: make([]string, len(tb.Puts))}
	// Deletes of the target hold lifeMu, so a tag cannot land on an
	// object deleted between the check and the commit.
	if err := s.lifeMu.RLock(ctx); err != nil {
		return nil, fmt.Errorf("put %d tags: %w", len(tb.Puts), err)
	}
	b := s.st.NewBatch()
	defer b.Close()
	n := 0
	var targets []uint64 // recorded only with sync durability (touching)
	if s.touches.on {
		targets = make([]uint64, len(tb.Puts))
		for i := range tb.Puts {
			targets[i] = tb.Puts[i].ID
		}
	}
	err := s.commitChanges(ctx, b, targets, func() ([]tagChange, error) {
		bt := newBatchTargets(len(tb.Puts))
		var changes []tagChange
		var olds map[string]*wire.TagValue // the old values, read in one pass
		if s.ix.on {
			changes = make([]tagChange, 0, len(tb.Puts))
			var err error
			if olds, err = s.oldValues(bt, tb.Puts); err != nil {
				return nil, err
			}
		}
		// The values, in one allocation; keys and encoded values are built
		// in one buffer each, which the batch copies.
		vals := make([]wire.TagValue, len(tb.Puts))
		var key, enc []byte
		for i := range tb.Puts {
			t := &tb.Puts[i]
			err := checkTag(t)
			if err == nil {
				if terr := bt.exists(s.core, t.Kind, t.ID); terr != nil {
					err = fmt.Errorf("tag %q on %s %d: %w", t.Name, kindName(t.Kind), t.ID, terr)
				}
			}
			if err != nil {
				out.Codes[i], out.Messages[i] = uint64(wire.CodeOf(err)), err.Error()
				continue
			}
			v := &vals[i]
			*v = wire.TagValue{Type: t.Type, Value: t.Value}
			key = appendKeyTag(key[:0], byte(t.Kind), t.ID, t.Name)
			if t.Kind == kindObject && s.ix.on {
				old, seen := bt.setInBatch(tb.Puts, i, v)
				if !seen && len(olds) > 0 {
					old = olds[string(key)]
				}
				changes = append(changes, tagChange{id: t.ID, key: t.Name, old: old, new: v})
			}
			enc = v.Marshal(enc[:0])
			b.Set(key, enc)
			n++
		}
		return changes, nil
	})
	s.lifeMu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("put %d tags: %w", n, err)
	}
	// A target not found may be deleted by a delete whose sync failed,
	// which a power loss would bring back: its "not found" is answered
	// once that is durable, as a tag get's is. Out of lifeMu: settling
	// may take a commit. A commit of this batch made everything before it
	// durable already; so settling costs one load.
	var missing []uint64
	for i, c := range out.Codes {
		if c == uint64(wire.CodeNotFound) {
			missing = append(missing, tb.Puts[i].ID)
		}
	}
	if len(missing) > 0 {
		if err := s.readDurably(ctx, func() string { return fmt.Sprintf("put %d tags", len(tb.Puts)) }, nil, missing...); err != nil {
			return nil, err
		}
	}
	return rpc.Respond(&out), nil
}

// oldValues reads, for the index, the stored values of the object tags
// puts overwrite. Objects created by this process that had no tag until
// now have none to read. It runs under ix.mu (commitChanges's build does),
// so no other put on them can run in between.
func (s *tags) oldValues(bt *batchTargets, puts []wire.TagPut) (map[string]*wire.TagValue, error) {
	var keys [][]byte
	for i := range puts {
		t := &puts[i]
		if t.Kind != kindObject {
			continue
		}
		o, added := bt.object(t.ID)
		if added {
			o.fresh = s.fresh.take(placement.SeqOf(t.ID))
		}
		if !o.fresh {
			keys = append(keys, keyTag(byte(t.Kind), t.ID, t.Name))
		}
	}
	return s.loadTags(keys)
}

func (s *tags) tagGet(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.TagKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	if err := checkName("tag", k.Name, MaxTagNameLen); err != nil {
		return nil, err
	}
	v, err := s.readTag(ctx, &k)
	// The value, or its absence, may be a change whose fsync failed
	// (a put, a delete of the tag or of its target): answered once it
	// is durable. Out of lifeMu: settling may take a commit.
	if err := s.readDurably(ctx, func() string { return fmt.Sprintf("tag %q of %s %d", k.Name, kindName(k.Kind), k.ID) }, err, k.ID); err != nil {
		return nil, err
	}
	return &rpc.Response{Header: v}, nil
}

// readTag returns the stored value of the tag k names.
func (s *tags) readTag(ctx context.Context, k *wire.TagKey) ([]byte, error) {
	// Under the read lock: a delete committed between the check and the
	// read would make the tag look missing on an object that had it.
	if err := s.lifeMu.ReadLock(ctx); err != nil {
		return nil, fmt.Errorf("tag %q of %s %d: %w", k.Name, kindName(k.Kind), k.ID, err)
	}
	defer s.lifeMu.ReadUnlock()
	if err := s.targetExists(k.Kind, k.ID); err != nil {
		return nil, fmt.Errorf("tag %q: %w", k.Name, err)
	}
	v, ok, err := s.st.Get(keyTag(byte(k.Kind), k.ID, k.Name))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("tag %q of %s %d: %w", k.Name, kindName(k.Kind), k.ID, pdc.ErrNotFound)
	}
	return v, nil
}

func (s *tags) tagDelete(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.TagKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	if err := checkName("tag", k.Name, MaxTagNameLen); err != nil {
		return nil, err
	}
	if err := s.lifeMu.RLock(ctx); err != nil {
		return nil, fmt.Errorf("delete tag %q of %s %d: %w", k.Name, kindName(k.Kind), k.ID, err)
	}
	defer s.lifeMu.RUnlock()
	if err := s.targetExists(k.Kind, k.ID); err != nil {
		// Its target deleted perhaps by a delete whose sync failed.
		return nil, s.notFoundDurably(fmt.Errorf("tag %q: %w", k.Name, err))
	}
	key := keyTag(byte(k.Kind), k.ID, k.Name)
	b := s.st.NewBatch()
	defer b.Close()
	err := s.commitChanges(ctx, b, []uint64{k.ID}, func() ([]tagChange, error) {
		old, err := s.loadTag(key)
		if err != nil {
			return nil, err
		}
		if old == nil {
			return nil, fmt.Errorf("tag %q of %s %d: %w", k.Name, kindName(k.Kind), k.ID, pdc.ErrNotFound)
		}
		b.Delete(key)
		if k.Kind != kindObject {
			return nil, nil
		}
		return []tagChange{{id: k.ID, key: k.Name, old: old}}, nil
	})
	if err != nil {
		// Deleted perhaps by this request's first copy, still in its
		// fsync or whose sync failed.
		return nil, s.readDurably(ctx, func() string { return fmt.Sprintf("delete tag %q of %s %d", k.Name, kindName(k.Kind), k.ID) }, err, k.ID)
	}
	return &rpc.Response{}, nil
}

// loadTag returns the stored value of a tag, or nil.
func (s *core) loadTag(key []byte) (*wire.TagValue, error) {
	raw, ok, err := s.st.Get(key)
	if err != nil || !ok {
		return nil, err
	}
	var v wire.TagValue
	if err := v.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("tag %q: stored value: %w", key[10:], err)
	}
	return &v, nil
}

// loadTags returns the stored values of the tags that exist among keys.
// One iterator seeking in key order costs much less than a lookup each.
func (s *core) loadTags(keys [][]byte) (map[string]*wire.TagValue, error) {
	out := map[string]*wire.TagValue{}
	if len(keys) == 0 {
		return out, nil
	}
	if len(keys) == 1 {
		v, err := s.loadTag(keys[0])
		if v != nil {
			out[string(keys[0])] = v
		}
		return out, err
	}
	slices.SortFunc(keys, bytes.Compare)
	it, err := s.st.NewIter(keys[0], prefixEnd(keys[len(keys)-1]))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	// The iterator stays on the first stored key at or after the key
	// sought last: a key it is already past is not stored, and one a few
	// steps on is reached by stepping. Seeking every key searches the
	// memtable's skiplist from its top each time.
	valid := it.SeekGE(keys[0])
	for _, k := range keys {
		for steps := 0; valid && bytes.Compare(it.Key(), k) < 0; steps++ {
			if steps == 4 {
				valid = it.SeekGE(k)
				break
			}
			valid = it.Next()
		}
		if !valid || !bytes.Equal(it.Key(), k) {
			continue
		}
		raw, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		var v wire.TagValue
		if err := v.Unmarshal(raw); err != nil {
			return nil, fmt.Errorf("tag %q: stored value: %w", k[10:], err)
		}
		out[string(k)] = &v
	}
	return out, it.Error()
}

func (s *tags) tagList(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.TagKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	out, err := s.readTagNames(ctx, &k)
	// As in tagGet: no name of a change whose fsync failed.
	if err := s.readDurably(ctx, func() string { return fmt.Sprintf("tags of %s %d", kindName(k.Kind), k.ID) }, err, k.ID); err != nil {
		return nil, err
	}
	return rpc.Respond(out), nil
}

// readTagNames returns the names of the tags of the target k names.
func (s *tags) readTagNames(ctx context.Context, k *wire.TagKey) (*wire.TagNames, error) {
	if err := s.lifeMu.ReadLock(ctx); err != nil { // as in readTag
		return nil, fmt.Errorf("tags of %s %d: %w", kindName(k.Kind), k.ID, err)
	}
	defer s.lifeMu.ReadUnlock()
	if err := s.targetExists(k.Kind, k.ID); err != nil {
		return nil, err
	}
	var out wire.TagNames
	p := tagPrefix(byte(k.Kind), k.ID)
	err := s.scan(p, func(key, _ []byte) error {
		out.Names = append(out.Names, string(key[len(p):]))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// batchTargets keeps, while a tag batch is built, what it learned of its
// targets: whether each exists (a batch usually puts several tags on each
// object) and, for the index, which values the batch set on each object
// before, which the store does not show yet. Objects are found by id in
// one map; their puts are chained, so that a put finds an earlier one of
// the same name without hashing names.
type batchTargets struct {
	idx   map[uint64]int32 // object id -> objs index
	objs  []batchObject
	prev  []int32          // by put: the object's previous put set in the batch, or -1
	vals  []*wire.TagValue // by put: the value it set, once set
	conts map[uint64]error // containers checked

	lastID  uint64 // the object found last, at objs[lastIdx]
	lastIdx int32
}

type batchObject struct {
	checked, fresh bool
	err            error
	last           int32 // the last put set on it, or -1
	puts           int   // puts set on it
	// byName indexes its puts by name once they are many: chains are
	// for the few tags a batch usually puts on one object.
	byName map[string]int32
}

func newBatchTargets(puts int) *batchTargets {
	return &batchTargets{idx: make(map[uint64]int32, puts/2), objs: make([]batchObject, 0, puts/2)}
}

// object returns the state of object id, and whether it was added now.
func (bt *batchTargets) object(id uint64) (*batchObject, bool) {
	// A batch usually puts an object's tags one after another.
	if len(bt.objs) > 0 && bt.lastID == id {
		return &bt.objs[bt.lastIdx], false
	}
	i, ok := bt.idx[id]
	if !ok {
		i = int32(len(bt.objs))
		bt.idx[id] = i
		bt.objs = append(bt.objs, batchObject{last: -1})
	}
	bt.lastID, bt.lastIdx = id, i
	return &bt.objs[i], !ok
}

// exists checks once per target that it exists.
func (bt *batchTargets) exists(s *core, kind uint32, id uint64) error {
	if kind != kindObject {
		if bt.conts == nil {
			bt.conts = map[uint64]error{}
		}
		err, ok := bt.conts[id]
		if !ok {
			err = s.targetExists(kind, id)
			bt.conts[id] = err
		}
		return err
	}
	o, _ := bt.object(id)
	if !o.checked {
		o.checked, o.err = true, s.targetExists(kind, id)
	}
	return o.err
}

// manyPuts is the number of puts on one object from which they are
// indexed by name.
const manyPuts = 8

// setInBatch records that put i of puts (an object tag) sets v, and
// returns the value an earlier put of the batch set on the same tag.
func (bt *batchTargets) setInBatch(puts []wire.TagPut, i int, v *wire.TagValue) (old *wire.TagValue, seen bool) {
	if bt.prev == nil {
		bt.prev, bt.vals = make([]int32, len(puts)), make([]*wire.TagValue, len(puts))
	}
	t := &puts[i]
	o, _ := bt.object(t.ID)
	if o.byName != nil {
		if j, ok := o.byName[t.Name]; ok {
			old, seen = bt.vals[j], true
		}
	} else {
		for j := o.last; j >= 0; j = bt.prev[j] {
			if puts[j].Name == t.Name {
				old, seen = bt.vals[j], true
				break
			}
		}
	}
	bt.prev[i], bt.vals[i] = o.last, v
	o.last = int32(i)
	o.puts++
	switch {
	case o.byName != nil:
		o.byName[t.Name] = int32(i)
	case o.puts >= manyPuts:
		o.byName = make(map[string]int32, o.puts)
		// Oldest first, so that the latest put of a name wins.
		var chain []int32
		for j := o.last; j >= 0; j = bt.prev[j] {
			chain = append(chain, j)
		}
		for k := len(chain) - 1; k >= 0; k-- {
			o.byName[puts[chain[k]].Name] = chain[k]
		}
	}
	return old, seen
}
