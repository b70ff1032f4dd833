package metaserver

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// targetExists checks that the object or container a tag is on exists.
func (s *Service) targetExists(kind uint32, id uint64) error {
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

func (s *Service) tagPut(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var tb wire.TagBatch
	if err := decode(req, &tb); err != nil {
		return nil, err
	}
	if len(tb.Puts) == 0 || len(tb.Puts) > MaxBatch {
		return nil, fmt.Errorf("tag batch of %d puts; want 1 to %d: %w", len(tb.Puts), MaxBatch, pdc.ErrInvalid)
	}
	out := wire.TagResults{Codes: make([]uint64, len(tb.Puts)), Messages: make([]string, len(tb.Puts))}
	// Deletes of the target hold updateMu, so a tag cannot land on an
	// object deleted between the check and the commit.
	s.updateMu.RLock()
	defer s.updateMu.RUnlock()
	b := s.st.db.NewBatch()
	defer b.Close()
	n := 0
	err := s.commitChanges(ctx, b, func() ([]tagChange, error) {
		var changes []tagChange
		// Values set earlier in this batch, which the store does not show
		// yet, by object and tag name (which the request holds already).
		type objTag struct {
			id   uint64
			name string
		}
		var inBatch map[objTag]*wire.TagValue
		if s.ix.on {
			changes = make([]tagChange, 0, len(tb.Puts))
			inBatch = make(map[objTag]*wire.TagValue, len(tb.Puts))
		}
		// Targets checked already: a batch usually puts several tags on
		// each object. updateMu keeps them from being deleted meanwhile.
		type target struct {
			kind uint32
			id   uint64
		}
		checked := make(map[target]error, len(tb.Puts)/2)
		// The old values, read in one pass.
		var olds map[string]*wire.TagValue
		if s.ix.on {
			var keys [][]byte
			// Objects created by this process that had no tag until now
			// have no old values to read. Under ix.mu (build runs under
			// it), so no other put on them can run in between.
			fresh := make(map[uint64]bool, len(tb.Puts)/2)
			for i := range tb.Puts {
				t := &tb.Puts[i]
				if t.Kind != kindObject {
					continue
				}
				f, ok := fresh[t.ID]
				if !ok {
					f = s.fresh.take(placement.SeqOf(t.ID))
					fresh[t.ID] = f
				}
				if !f {
					keys = append(keys, keyTag(byte(t.Kind), t.ID, t.Name))
				}
			}
			var err error
			if olds, err = s.loadTags(keys); err != nil {
				return nil, err
			}
		}
		for i := range tb.Puts {
			t := &tb.Puts[i]
			err := checkTag(t)
			if err == nil {
				terr, ok := checked[target{t.Kind, t.ID}]
				if !ok {
					terr = s.targetExists(t.Kind, t.ID)
					checked[target{t.Kind, t.ID}] = terr
				}
				if terr != nil {
					err = fmt.Errorf("tag %q on %s %d: %w", t.Name, kindName(t.Kind), t.ID, terr)
				}
			}
			if err != nil {
				out.Codes[i], out.Messages[i] = uint64(wire.CodeOf(err)), err.Error()
				continue
			}
			v := &wire.TagValue{Type: t.Type, Value: t.Value}
			key := keyTag(byte(t.Kind), t.ID, t.Name)
			if t.Kind == kindObject && s.ix.on {
				old, seen := inBatch[objTag{t.ID, t.Name}]
				if !seen && len(olds) > 0 {
					old = olds[string(key)]
				}
				inBatch[objTag{t.ID, t.Name}] = v
				changes = append(changes, tagChange{id: t.ID, key: t.Name, old: old, new: v})
			}
			_ = b.Set(key, v.Marshal(nil), nil)
			n++
		}
		return changes, nil
	})
	if err != nil {
		return nil, fmt.Errorf("put %d tags: %w", n, err)
	}
	return rpc.Respond(&out), nil
}

func (s *Service) tagGet(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.TagKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	if err := checkName("tag", k.Name, MaxTagNameLen); err != nil {
		return nil, err
	}
	if err := s.targetExists(k.Kind, k.ID); err != nil {
		return nil, fmt.Errorf("tag %q: %w", k.Name, err)
	}
	v, ok, err := s.st.get(keyTag(byte(k.Kind), k.ID, k.Name))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("tag %q of %s %d: %w", k.Name, kindName(k.Kind), k.ID, pdc.ErrNotFound)
	}
	return &rpc.Response{Header: v}, nil
}

func (s *Service) tagDelete(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.TagKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
	if err := checkName("tag", k.Name, MaxTagNameLen); err != nil {
		return nil, err
	}
	s.updateMu.RLock()
	defer s.updateMu.RUnlock()
	if err := s.targetExists(k.Kind, k.ID); err != nil {
		return nil, fmt.Errorf("tag %q: %w", k.Name, err)
	}
	key := keyTag(byte(k.Kind), k.ID, k.Name)
	b := s.st.db.NewBatch()
	defer b.Close()
	err := s.commitChanges(ctx, b, func() ([]tagChange, error) {
		old, err := s.loadTag(key)
		if err != nil {
			return nil, err
		}
		if old == nil {
			return nil, fmt.Errorf("tag %q of %s %d: %w", k.Name, kindName(k.Kind), k.ID, pdc.ErrNotFound)
		}
		_ = b.Delete(key, nil)
		if k.Kind != kindObject {
			return nil, nil
		}
		return []tagChange{{id: k.ID, key: k.Name, old: old}}, nil
	})
	if err != nil {
		return nil, err
	}
	return &rpc.Response{}, nil
}

// loadTag returns the stored value of a tag, or nil.
func (s *Service) loadTag(key []byte) (*wire.TagValue, error) {
	raw, ok, err := s.st.get(key)
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
func (s *Service) loadTags(keys [][]byte) (map[string]*wire.TagValue, error) {
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
	it, err := s.st.db.NewIter(&pebble.IterOptions{LowerBound: keys[0], UpperBound: prefixEnd(keys[len(keys)-1])})
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

func (s *Service) tagList(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var k wire.TagKey
	if err := decode(req, &k); err != nil {
		return nil, err
	}
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
	return rpc.Respond(&out), nil
}
