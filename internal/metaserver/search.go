package metaserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/limits"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// MaxQueryTerms bounds the keys of one by-key request.
const MaxQueryTerms = limits.MaxQueryTerms

// tagQuery answers one step of a kvtag query (tagindex.Step).
func (s *tags) tagQuery(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	var tq wire.TagQuery
	if err := decode(req, &tq); err != nil {
		return nil, err
	}
	q, err := tagindex.Parse(tq.Query)
	if err != nil {
		return nil, err
	}
	if len(tq.Terms) > MaxQueryTerms {
		return nil, fmt.Errorf("query with %d keys; at most %d per request: %w", len(tq.Terms), MaxQueryTerms, pdc.ErrInvalid)
	}
	step := tagindex.Step(tq.Step)
	r := queryRun{s: s.core, q: q}
	switch step {
	case tagindex.StepScan:
		err = r.scan(ctx)
	case tagindex.StepKeys, tagindex.StepByKey, tagindex.StepByValue:
		// A suffix value is planned at other servers with suffix trees
		// than without: a client that planned for the other layout is
		// told so, as is one that needs suffix trees this server lacks.
		layoutDiffers := q.Value.Kind == tagindex.Suffix && step == tagindex.StepByValue && tq.NoSuffix == s.ix.suffix
		if !s.ix.on || (!s.ix.suffix && needsSuffixTree(q, step)) || layoutDiffers {
			return rpc.Respond(&wire.TagQueryResult{Unsupported: true}), nil
		}
		err = r.index(ctx, step, tq.Terms)
	default:
		return nil, fmt.Errorf("unknown query step %d: %w", tq.Step, pdc.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("query %q (%s): %w", tq.Query, step, err)
	}
	slices.Sort(r.ids)
	r.ids = slices.Compact(r.ids)
	res := wire.TagQueryResult{Count: uint64(len(r.ids)), Flags: r.flags}
	var strs []string
	switch {
	case step == tagindex.StepKeys:
		strs = r.terms
	case tq.Names && step == tagindex.StepScan:
		strs = make([]string, len(r.ids))
		for i, id := range r.ids {
			ident, _, err := s.st.Get(keyObjID(id))
			if err != nil {
				return nil, err
			}
			strs[i] = identName(ident)
		}
	}
	res.Strings = uint64(len(strs))
	// Tags and index entries of changes whose fsync failed are applied
	// (this server's entries are published before the fsync): none is
	// answered until durable.
	if err := s.scanDurably(ctx, func() string { return fmt.Sprintf("query %q (%s)", tq.Query, step) }); err != nil {
		return nil, err
	}
	return &rpc.Response{Header: res.Marshal(nil), Payload: [][]byte{wire.AppendQueryPayload(nil, r.ids, strs)}}, nil
}

// needsSuffixTree reports whether the step answers q from the suffix
// trees, which a server without suffix-tree mode does not have.
func needsSuffixTree(q *tagindex.Query, step tagindex.Step) bool {
	switch step {
	case tagindex.StepKeys:
		return q.Key.Kind == tagindex.Infix
	case tagindex.StepByValue:
		return q.Value.Kind == tagindex.Infix
	}
	return false
}

// queryRun collects the answer of one query step.
type queryRun struct {
	s     *core
	q     *tagindex.Query
	ids   []uint64
	terms []string
	flags uint32
}

// saw records the kind of value a tag whose key matches holds (for range
// queries, which fail when the keys matched hold only text).
func (r *queryRun) saw(v tagindex.Value) {
	if v.Num != nil {
		r.flags |= wire.QuerySawNumber
	} else {
		r.flags |= wire.QuerySawText
	}
}

// scan matches every object tag of this server.
func (r *queryRun) scan(ctx context.Context) error {
	p := tagPrefix(kindObject, 0)[:2]
	var tv wire.TagValue
	n := 0
	return r.s.scan(p, func(k, v []byte) error {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if len(k) < 10 {
			return nil
		}
		key := string(k[10:])
		if !r.q.Key.Match(key) {
			return nil
		}
		if err := tv.Unmarshal(v); err != nil {
			return fmt.Errorf("tag %q: stored value: %w", key, err)
		}
		val := tagindex.ValueOf(region.Type(tv.Type), tv.Value)
		r.saw(val)
		if ok, _ := r.q.MatchValue(key, val); ok {
			r.ids = append(r.ids, binary.BigEndian.Uint64(k[2:10]))
		}
		return nil
	})
}

// iter calls fn for every key in [lo, hi).
func (r *queryRun) iter(lo, hi []byte, fn func(k, v []byte) error) error {
	return r.s.ix.post.Range(lo, hi, fn)
}

func (r *queryRun) prefix(p []byte, fn func(k, v []byte) error) error {
	return r.iter(p, prefixEnd(p), fn)
}

// exists reports whether any key has prefix p.
func (r *queryRun) exists(p []byte) (bool, error) {
	found := false
	err := r.prefix(p, func(_, _ []byte) error { found = true; return errStop })
	if err == errStop {
		err = nil
	}
	return found, err
}

func (r *queryRun) index(ctx context.Context, step tagindex.Step, terms []string) error {
	q := r.q
	switch step {
	case tagindex.StepKeys:
		return r.keys()
	case tagindex.StepByKey:
		if len(terms) == 0 {
			if q.Key.Kind != tagindex.Exact && q.Key.Kind != tagindex.Prefix {
				return fmt.Errorf("a by-key step without keys needs an exact or prefix key: %w", pdc.ErrInvalid)
			}
			// The keys are in this server's dictionary: a key and its
			// prefixes of two bytes or more share a server.
			var err error
			if terms, err = r.dictKeys(tagindex.TreePrefix(tagindex.TreeSufKey, q.Key.Lit, q.Key.Kind == tagindex.Exact), true); err != nil {
				return err
			}
		}
		for i, key := range terms {
			if i%64 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			if q.Key.Match(key) {
				if err := r.byKey(key); err != nil {
					return err
				}
			}
		}
		return nil
	case tagindex.StepByValue:
		return r.byValue()
	}
	return nil
}

// keys answers the keys step: the dictionary keys matching a suffix or
// infix key pattern.
func (r *queryRun) keys() error {
	var err error
	switch r.q.Key.Kind {
	case tagindex.Suffix:
		r.terms, err = r.dictKeys(tagindex.TreePrefix(tagindex.TreeRevKey, tagindex.Reverse(r.q.Key.Lit), false), false)
	case tagindex.Infix:
		r.terms, err = r.dictKeys(tagindex.TreePrefix(tagindex.TreeSufKey, r.q.Key.Lit, false), false)
	default:
		err = fmt.Errorf("the keys step needs a suffix or infix key, not %s: %w", r.q.Key.Kind, pdc.ErrInvalid)
	}
	return err
}

// dictKeys returns the distinct keys of the S or R entries with prefix p;
// with whole, only of S entries whose term is the key itself.
func (r *queryRun) dictKeys(p []byte, whole bool) ([]string, error) {
	seen := map[string]struct{}{}
	var out []string
	err := r.prefix(p, func(k, _ []byte) error {
		term, key, err := tagindex.DecodeDict(k)
		if err != nil {
			return fmt.Errorf("index entry %q: %w", k, err)
		}
		if whole && term != key {
			return nil
		}
		if _, ok := seen[key]; !ok && r.q.Key.Match(key) {
			seen[key] = struct{}{}
			out = append(out, key)
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// byKey adds the objects whose tag key matches the query's value, from
// the K entries of key.
func (r *queryRun) byKey(key string) error {
	q := r.q
	collect := func(filter func(tagindex.Value) bool) func(k, v []byte) error {
		return func(k, v []byte) error {
			e, err := tagindex.DecodeEntry(k, v)
			if err != nil {
				return fmt.Errorf("index entry %q: %w", k, err)
			}
			if filter == nil || filter(e.Val) {
				r.ids = append(r.ids, e.ID)
			}
			return nil
		}
	}
	switch {
	case q.Range:
		// The flags say what kinds of value the key holds, as a scan's do.
		if ok, err := r.exists(tagindex.TextPrefix(key, "", false)); err != nil {
			return err
		} else if ok {
			r.flags |= wire.QuerySawText
		}
		if ok, err := r.exists(tagindex.NumPrefix(key)); err != nil || !ok {
			return err
		}
		r.flags |= wire.QuerySawNumber
		lo, hi := tagindex.NumPrefix(key), prefixEnd(tagindex.NumPrefix(key))
		if q.Lo != nil {
			lo = tagindex.NumBound(key, q.Lo)
		}
		if q.Hi != nil {
			hi = prefixEnd(tagindex.NumBound(key, q.Hi))
		}
		return r.iter(lo, hi, collect(func(v tagindex.Value) bool { ok, _ := q.MatchValue(key, v); return ok }))
	case q.Value.Kind == tagindex.Any:
		return r.prefix(tagindex.KeyPrefix(key), collect(nil))
	case q.Value.Kind == tagindex.Exact:
		if q.Eq != nil {
			b := tagindex.NumBound(key, q.Eq)
			err := r.iter(b, prefixEnd(b), collect(func(v tagindex.Value) bool { return v.Num != nil && v.Num.Cmp(q.Eq) == 0 }))
			if err != nil {
				return err
			}
		}
		return r.prefix(tagindex.TextPrefix(key, q.Value.Lit, true), collect(nil))
	case q.Value.Kind == tagindex.Prefix:
		return r.prefix(tagindex.TextPrefix(key, q.Value.Lit, false), collect(nil))
	}
	return r.prefix(tagindex.TextPrefix(key, "", false), collect(func(v tagindex.Value) bool { return q.Value.Match(v.Text) }))
}

// byValue adds the objects whose text value matches the query's value
// pattern and whose key matches its key pattern.
func (r *queryRun) byValue() error {
	q := r.q
	if q.Range || q.Eq != nil {
		return fmt.Errorf("a by-value step needs a text pattern: %w", pdc.ErrInvalid)
	}
	lit := q.Value.Lit
	add := func(k, v []byte) error {
		e, err := tagindex.DecodeEntry(k, v)
		if err != nil {
			return fmt.Errorf("index entry %q: %w", k, err)
		}
		if q.Key.Match(e.Key) {
			r.ids = append(r.ids, e.ID)
		}
		return nil
	}
	switch q.Value.Kind {
	case tagindex.Exact:
		return r.prefix(tagindex.TreePrefix(tagindex.TreeValue, lit, true), add)
	case tagindex.Prefix:
		return r.prefix(tagindex.TreePrefix(tagindex.TreeValue, lit, false), add)
	case tagindex.Suffix, tagindex.Infix:
		if q.Value.Kind == tagindex.Suffix && !r.s.ix.suffix {
			return r.prefix(tagindex.TreePrefix(tagindex.TreeRevVal, tagindex.Reverse(lit), false), add)
		}
		// In suffix-tree mode: the literal as a whole suffix (W) or text
		// (V) for a suffix query, as the start of one for an infix query.
		whole := q.Value.Kind == tagindex.Suffix
		if err := r.prefix(tagindex.TreePrefix(tagindex.TreeSufVal, lit, whole), add); err != nil {
			return err
		}
		if err := r.prefix(tagindex.TreePrefix(tagindex.TreeValue, lit, whole), add); err != nil {
			return err
		}
		// Texts too long for the suffix tree.
		match := bytes.Contains
		if whole {
			match = bytes.HasSuffix
		}
		return r.prefix([]byte{tagindex.Prefix0, tagindex.TreeLongVal}, func(k, v []byte) error {
			e, err := tagindex.DecodeEntry(k, v)
			if err != nil {
				return fmt.Errorf("index entry %q: %w", k, err)
			}
			if q.Key.Match(e.Key) && match([]byte(e.Val.Text), []byte(lit)) {
				r.ids = append(r.ids, e.ID)
			}
			return nil
		})
	}
	return fmt.Errorf("a by-value step needs a value pattern: %w", pdc.ErrInvalid)
}
