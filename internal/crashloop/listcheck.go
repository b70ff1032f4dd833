package crashloop

import (
	"slices"
)

// The check of container listings. A listing walks each metadata
// server's members in pages and is no snapshot: an object created or
// deleted meanwhile may be listed or not, and one there for the whole
// walk is listed once (docs/design/0017). That is, per object name, a
// read of which incarnation exists (listed: that one, with the dims
// listed; not listed: none) at some moment of the walk: a listing is
// checked as such an open of each object operated on in the cycle, and
// directly against what was read back for the others, which held it all
// through the cycle.

// checkList checks listing o: an open of each object of scope, handed to
// add for the object's history, and the objects with nothing pending
// directly. Objects with operations pending that are not in scope are
// left out.
func (c *Checker) checkList(cycle int, o *op, scope map[string]*liveObj, add func(name string, obs *op)) {
	c.Stats.Lists++
	violation := func(missed bool, format string, args ...any) {
		if missed {
			c.Stats.Lost++
		} else {
			c.Stats.Corrupt++
		}
		c.Stats.Where["list"]++
		c.problem("cycle %d: p%d#%d list [%d, %d]: "+format, append([]any{cycle, o.proc, o.n, o.call, o.ret}, args...)...)
	}
	listed := map[string][]Listed{}
	for _, l := range o.listed {
		s := c.objs[l.Name]
		switch {
		case s == nil:
			violation(false, "listed %s id %#x, which no operation of the loop named", l.Name, l.ID)
			continue
		case slices.ContainsFunc(listed[l.Name], func(m Listed) bool { return m.ID == l.ID }):
			violation(false, "listed %s id %#x twice", l.Name, l.ID)
			continue
		}
		if name, ok := c.ids[l.ID]; ok && name != l.Name {
			violation(false, "listed %s id %#x, the id of %s", l.Name, l.ID, name)
			continue
		}
		listed[l.Name] = append(listed[l.Name], l)
	}
	for _, name := range sortedKeys(c.objs) {
		s := c.objs[name]
		ls := listed[name]
		if scope[name] != nil {
			obs := func(found bool, id uint64, dims []uint64) *op {
				return &op{proc: o.proc, n: o.n, kind: kindOpen, obj: name, call: o.call, ret: o.ret, acked: true,
					found: found, id: id, dims: dims, listing: true}
			}
			if len(ls) == 0 {
				add(name, obs(false, 0, nil))
			}
			for _, l := range ls {
				c.ids[l.ID] = name
				add(name, obs(true, l.ID, l.Dims))
			}
			continue
		}
		if len(s.pending) > 0 || s.props == nil {
			continue
		}
		// Unchanged all through the cycle.
		switch {
		case !s.exists && len(ls) > 0:
			violation(false, "listed %s id %#x, which did not exist all through the cycle", name, ls[0].ID)
		case s.exists && len(ls) == 0:
			violation(true, "did not list %s id %#x, which existed all through the cycle", name, s.id)
		case s.exists && (len(ls) > 1 || ls[0].ID != s.id || !slices.Equal(ls[0].Dims, s.dims)):
			violation(false, "listed %s as %+v; it was id %#x, dims %v all through the cycle", name, ls, s.id, s.dims)
		}
	}
}
