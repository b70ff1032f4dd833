package crashloop

import (
	"slices"
)

// The check of tag searches. A search is a read of every tag of every
// object at once; the checker reads it, per incarnation and tag it may
// have seen, as a read of that tag's register that tells whether its
// value matched (the incarnation is among the hits) or not. Each is a
// projection of the one read, so a search that is linearizable as a
// whole passes, and one that cannot be placed anywhere for one tag
// fails. The DART index promises that much: a search fences every
// metadata server first, so it sees every tag change acknowledged before
// it began (docs/design/0007, "Consistency"), and a scan reads the tags
// themselves.
//
// A hit tells that some tag of the incarnation matched, which is a read
// of one register when one tag alone could have: the values are unique
// (each names its put), so a search for one value or for values of one
// key always is. A search whose hit more than one tag could explain
// observes nothing of it.
//
// Objects with no operation in the cycle hold what the last read-back
// found all through it: searches are checked against that directly.

// idTag names one register of tags: an incarnation's tag.
type idTag struct {
	id  uint64
	tag string
}

// liveObj is what the searches of a cycle may see of an object operated
// on in it.
type liveObj struct {
	// ids are its incarnations: the one read back before, if it exists,
	// and every one operated on.
	ids []uint64
	// vals are, per incarnation and tag, the values it may hold: as read
	// back before, and every one put.
	vals map[idTag][]uint64
	// deleted is, per incarnation, when the first delete of it began.
	deleted map[uint64]int64
}

// liveScope returns the liveObj of each object whose operations are
// hist.
func (c *Checker) liveScope(hists map[string][]*op) map[string]*liveObj {
	scope := map[string]*liveObj{}
	for name, hist := range hists {
		s := c.obj(name)
		lo := &liveObj{vals: map[idTag][]uint64{}, deleted: map[uint64]int64{}}
		if s.exists && s.id != 0 {
			lo.ids = append(lo.ids, s.id)
			if s.cells != nil { // else it starts without tags (objCheck.incarnation)
				for t, v := range s.tags {
					if v != 0 {
						lo.vals[idTag{s.id, t}] = []uint64{v}
					}
				}
			}
		}
		for _, o := range hist {
			if o.id == 0 || o.kind == kindSearch {
				continue
			}
			if !slices.Contains(lo.ids, o.id) {
				lo.ids = append(lo.ids, o.id)
			}
			switch o.kind {
			case kindPutTag:
				k := idTag{o.id, o.tag}
				lo.vals[k] = append(lo.vals[k], o.wid)
			case kindDelete:
				if t, ok := lo.deleted[o.id]; !ok || o.call < t {
					lo.deleted[o.id] = o.call
				}
			}
		}
		scope[name] = lo
	}
	return scope
}

// checkSearch checks search o: against the objects of scope, by handing
// add an observation per register (for the object's history), and
// against the objects with nothing pending directly. Objects with
// operations pending that are not in scope (their read-back failed) are
// left out.
func (c *Checker) checkSearch(cycle int, o *op, scope map[string]*liveObj, add func(name string, obs *op)) {
	c.Stats.Searches++
	spec := o.spec
	if spec == nil {
		return
	}
	hits := map[uint64]bool{}
	for _, id := range o.hits {
		hits[id] = true
	}
	violation := func(missed bool, format string, args ...any) {
		if missed {
			c.Stats.Lost++
		} else {
			c.Stats.Corrupt++
		}
		c.Stats.Where["search"]++
		c.problem("cycle %d: %s: "+format, append([]any{cycle, o}, args...)...)
	}
	if spec.Names && len(o.names) != len(o.hits) {
		violation(false, "asked for names, got %d for %d hits", len(o.names), len(o.hits))
	}
	var others []uint64 // hits of objects in scope, of incarnations not in it
	for i, id := range o.hits {
		name, ok := c.ids[id]
		if !ok {
			violation(false, "found id %#x, which no operation of the loop named", id)
			continue
		}
		if spec.Names && i < len(o.names) {
			// The names come from the objects' owners after the search:
			// none for an object deleted meanwhile.
			lo := scope[name]
			var began int64 = -1
			if lo != nil {
				if t, ok := lo.deleted[id]; ok {
					began = t
				}
			}
			switch got := o.names[i]; {
			case got == "" && (began < 0 || began > o.ret):
				violation(false, "found object %s id %#x without its name, and no delete of it had begun", name, id)
			case got != "" && got != name:
				violation(false, "found object %s id %#x named %q", name, id, got)
			}
		}

		s := c.objs[name]
		switch {
		case scope[name] != nil:
			if !slices.Contains(scope[name].ids, id) {
				others = append(others, id)
			}
		case len(s.pending) > 0:
		case !s.exists || s.id != id:
			violation(false, "found object %s id %#x, which did not exist all through the cycle (it was deleted before)", name, id)
		}
	}
	for _, name := range sortedKeys(c.objs) {
		s := c.objs[name]
		lo := scope[name]
		if lo == nil {
			if len(s.pending) > 0 || !s.exists || s.id == 0 || s.props == nil {
				continue
			}
			// Unchanged all through the cycle.
			want := false
			for _, t := range tagNames {
				want = want || spec.match(t, s.tags[t])
			}
			if want != hits[s.id] {
				violation(want, "object %s id %#x, unchanged all through the cycle with tags %v, found %v", name, s.id, s.tags, hits[s.id])
			}
			continue
		}
		ids := lo.ids
		for _, id := range others {
			if c.ids[id] == name {
				ids = append(slices.Clone(ids), id)
			}
		}
		for _, id := range ids {
			found := hits[id]
			var could []string // the tags whose values could match
			for _, t := range tagNames {
				if slices.ContainsFunc(lo.vals[idTag{id, t}], func(v uint64) bool { return spec.match(t, v) }) {
					could = append(could, t)
				}
			}
			switch {
			case !found:
				for _, t := range could {
					add(name, o.observe(name, id, t, false))
				}
			case len(could) == 1:
				add(name, o.observe(name, id, could[0], true))
			case len(could) == 0:
				violation(false, "found object %s id %#x, none of whose tags held or was given a value that matches", name, id)
			}
		}
	}
}

// observe is search o's observation of incarnation id of object name's
// tag: whether its value matched.
func (o *op) observe(name string, id uint64, tag string, found bool) *op {
	return &op{proc: o.proc, n: o.n, kind: kindSearch, obj: name, tag: tag, call: o.call, ret: o.ret, acked: true,
		id: id, found: found, spec: o.spec}
}
