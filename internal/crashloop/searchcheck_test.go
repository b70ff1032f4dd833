package crashloop

import (
	"strings"
	"testing"
)

// search logs a search of spec at [call, ret] that found hits.
func (h *hist) search(call, ret int64, spec SearchSpec, hits ...uint64) {
	n := h.inv(call, Record{Kind: kindSearch, Search: &spec})
	h.ok(n, ret, Record{Hits: hits})
}

// What a search may and may not answer, given the tag puts, tag deletes
// and object deletes around it.
func TestCheckerSearches(t *testing.T) {
	w1, w2 := writeID(1, 0, 1), writeID(1, 0, 2)
	const id1, id2 = 100, 200
	props := map[string]*ObjProps{"o": {Dims: dims4}}
	exact := func(wid uint64) SearchSpec {
		return SearchSpec{KeyKind: patExact, Key: "t0", ValKind: patExact, Val: valueText(wid)}
	}
	prefix := SearchSpec{KeyKind: patExact, Key: "t0", ValKind: patPrefix, Val: valueText(w1)[:8]}
	keyOnly := SearchSpec{KeyKind: patExact, Key: "t0"}
	byKeyPattern := SearchSpec{KeyKind: patPrefix, Key: "t", ValKind: patExact, Val: valueText(w1)}
	numeric := SearchSpec{KeyKind: patExact, Key: "t2", Range: true, Lo: w1 - 1, Hi: w1 + 1}
	created := func(h *hist, call int64, id uint64) {
		h.opOn(call, call+1, Record{Kind: kindCreate, Props: props["o"]}, Record{ID: id})
	}
	put := func(h *hist, call, ack int64, tag string, wid uint64) {
		h.opOn(call, ack, Record{Kind: kindPutTag, ID: id1, Tag: tag, WID: wid}, Record{})
	}
	zeros := vals(0, 0, 1, 2, 3)
	cases := []struct {
		name       string
		work       func(h *hist)
		back       []Record
		violations bool
	}{
		{"an acknowledged put found", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 20, "t0", w1)
			h.search(30, 40, exact(w1), id1)
			h.search(30, 40, prefix, id1)
			h.search(30, 40, keyOnly, id1)
			h.search(30, 40, byKeyPattern, id1)
			h.search(30, 40, exact(w2))
		}, readBackID(1000, id1, 4, w1, zeros), false},
		{"an acknowledged put not found", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 20, "t0", w1)
			h.search(30, 40, exact(w1))
		}, readBackID(1000, id1, 4, w1, zeros), true},
		{"an acknowledged put not found by its prefix", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 20, "t0", w1)
			h.search(30, 40, prefix)
		}, readBackID(1000, id1, 4, w1, zeros), true},
		{"an acknowledged put not found under a key pattern", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 20, "t0", w1)
			h.search(30, 40, byKeyPattern)
		}, readBackID(1000, id1, 4, w1, zeros), true},
		{"a number not found in its range", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 20, "t2", w1)
			h.search(30, 40, numeric)
		}, readBackID(1000, id1, 4, 0, zeros), true},
		{"a search concurrent with the put, either way", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 40, "t0", w1)
			h.search(20, 30, exact(w1))
			h.search(25, 35, exact(w1), id1)
		}, readBackID(1000, id1, 4, w1, zeros), false},
		{"found, then not found, with nothing in between", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 0, "t0", w1)
			h.search(20, 30, exact(w1), id1)
			h.search(40, 50, exact(w1))
		}, readBackID(1000, id1, 4, w1, zeros), true},
		{"an unacknowledged put found", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 0, "t0", w1)
			h.search(20, 30, exact(w1), id1)
		}, readBackID(1000, id1, 4, w1, zeros), false},
		{"an unacknowledged put found, then not read back", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 0, "t0", w1)
			h.search(20, 30, exact(w1), id1)
		}, readBackID(1000, id1, 4, 0, zeros), true},
		{"an overwritten value found", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 20, "t0", w1)
			put(h, 30, 40, "t0", w2)
			h.search(50, 60, exact(w1), id1)
		}, readBackID(1000, id1, 4, w2, zeros), true},
		{"a deleted tag found", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 20, "t0", w1)
			h.opOn(30, 40, Record{Kind: kindDelTag, ID: id1, Tag: "t0"}, Record{})
			h.search(50, 60, keyOnly, id1)
		}, readBackID(1000, id1, 4, 0, zeros), true},
		{"a deleted object found", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 20, "t0", w1)
			h.opOn(30, 40, Record{Kind: kindDelete, ID: id1}, Record{})
			h.search(50, 60, exact(w1), id1)
		}, readBackID(1000, 0, 0, 0, nil), true},
		{"an object found while its delete runs", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 20, "t0", w1)
			h.opOn(30, 60, Record{Kind: kindDelete, ID: id1}, Record{})
			h.search(40, 50, exact(w1), id1)
		}, readBackID(1000, 0, 0, 0, nil), false},
		{"the deleted incarnation found after a create of the same name", func(h *hist) {
			created(h, 1, id1)
			put(h, 10, 20, "t0", w1)
			h.opOn(30, 40, Record{Kind: kindDelete, ID: id1}, Record{})
			created(h, 50, id2)
			h.search(60, 70, keyOnly, id1)
		}, readBackID(1000, id2, 4, 0, zeros), true},
		{"an id no operation named", func(h *hist) {
			created(h, 1, id1)
			h.search(60, 70, keyOnly, 12345)
		}, readBackID(1000, id1, 4, 0, zeros), true},
	}
	for _, tc := range cases {
		c := newChecker()
		h := &hist{proc: 0}
		tc.work(h)
		c.Add(1, [][]Record{h.recs}, props)
		c.Verify(1, tc.back)
		if got := c.Stats.Violations() > 0; got != tc.violations {
			t.Errorf("%s: violations %v, want %v: %+v\n%s", tc.name, got, tc.violations, c.Stats, strings.Join(c.Problems, "\n"))
		}
		if tc.violations && c.Stats.Where["search"] == 0 {
			t.Errorf("%s: violations not put down to the search: %+v", tc.name, c.Stats.Where)
		}
	}
}

// An object with no operation in a cycle holds what was read back: a
// search in the next cycle, or in its read-back, must agree.
func TestCheckerSearchesOfUnchangedObjects(t *testing.T) {
	w1 := writeID(1, 0, 1)
	const id1 = 100
	props := map[string]*ObjProps{"o": {Dims: dims4}}
	exact := SearchSpec{KeyKind: patExact, Key: "t0", ValKind: patExact, Val: valueText(w1)}
	for _, tc := range []struct {
		name       string
		hits       []uint64
		back       bool // searched by the read-back, not a worker
		violations bool
	}{
		{"found", []uint64{id1}, false, false},
		{"not found", nil, false, true},
		{"found by the read-back", []uint64{id1}, true, false},
		{"not found by the read-back", nil, true, true},
	} {
		c := newChecker()
		h := &hist{proc: 0}
		h.opOn(1, 2, Record{Kind: kindCreate, Props: props["o"]}, Record{ID: id1})
		h.opOn(10, 20, Record{Kind: kindPutTag, ID: id1, Tag: "t0", WID: w1}, Record{})
		c.Add(1, [][]Record{h.recs}, props)
		c.Verify(1, readBackID(1000, id1, 4, w1, vals(0, 0, 1, 2, 3)))
		if c.Stats.Violations() != 0 {
			t.Fatalf("%s: cycle 1: %s", tc.name, strings.Join(c.Problems, "\n"))
		}
		// Cycle 2: nothing done to o.
		w := &hist{proc: 1}
		b := &hist{proc: 15}
		if tc.back {
			b.search(3000, 3001, exact, tc.hits...)
		} else {
			w.search(2000, 2001, exact, tc.hits...)
		}
		c.Add(2, [][]Record{w.recs}, props)
		c.Verify(2, b.recs)
		if got := c.Stats.Violations() > 0; got != tc.violations || c.Stats.Searches != 1 {
			t.Errorf("%s: violations %v, want %v: %+v\n%s", tc.name, got, tc.violations, c.Stats, strings.Join(c.Problems, "\n"))
		}
	}
}

// The query text of each form, and the model's match of it.
func TestSearchSpec(t *testing.T) {
	wid := uint64(0x1a2b3c4d5e)
	text := valueText(wid)
	if text != "v1a2b3c4d5e" {
		t.Fatalf("value text %q", text)
	}
	for _, tc := range []struct {
		spec  SearchSpec
		query string
		tag   string
		match bool
	}{
		{SearchSpec{KeyKind: patExact, Key: "t0", ValKind: patExact, Val: text}, "t0=v1a2b3c4d5e", "t0", true},
		{SearchSpec{KeyKind: patExact, Key: "t0", ValKind: patExact, Val: text}, "t0=v1a2b3c4d5e", "t1", false},
		{SearchSpec{KeyKind: patExact, Key: "t0", ValKind: patPrefix, Val: "v1a2"}, "t0=v1a2*", "t0", true},
		{SearchSpec{KeyKind: patExact, Key: "t0", ValKind: patSuffix, Val: "d5e"}, "t0=*d5e", "t0", true},
		{SearchSpec{KeyKind: patExact, Key: "t0", ValKind: patInfix, Val: "3c4"}, "t0=*3c4*", "t0", true},
		{SearchSpec{KeyKind: patExact, Key: "t0", ValKind: patInfix, Val: "3c5"}, "t0=*3c5*", "t0", false},
		{SearchSpec{KeyKind: patPrefix, Key: "t", ValKind: patExact, Val: text}, "t*=v1a2b3c4d5e", "t1", true},
		{SearchSpec{KeyKind: patSuffix, Key: "2", ValKind: patExact, Val: "112394521950"}, "*2=112394521950", "t2", true},
		{SearchSpec{KeyKind: patExact, Key: "t2", Range: true, Lo: wid, Hi: wid + 1}, "t2=112394521950..112394521951", "t2", true},
		{SearchSpec{KeyKind: patExact, Key: "t2", Range: true, Lo: 1, Hi: ^uint64(0)}, "t2=1..", "t2", true},
		{SearchSpec{KeyKind: patExact, Key: "t2", ValKind: patPrefix, Val: "11"}, "t2=11*", "t2", false},
		{SearchSpec{KeyKind: patExact, Key: "t1"}, "t1", "t1", true},
	} {
		if q := tc.spec.Query(); q != tc.query {
			t.Errorf("query %q, want %q", q, tc.query)
		}
		if m := tc.spec.match(tc.tag, wid); m != tc.match {
			t.Errorf("%s on %s: match %v, want %v", tc.query, tc.tag, m, tc.match)
		}
		if tc.spec.match(tc.tag, 0) {
			t.Errorf("%s matches an absent tag", tc.query)
		}
	}
}

// list logs a listing at [call, ret] that found ls.
func (h *hist) list(call, ret int64, ls ...Listed) {
	n := h.inv(call, Record{Kind: kindList})
	h.ok(n, ret, Record{Listed: ls})
}

// What a listing may and may not find, given the creates and deletes
// around it, and of an object left alone in a cycle.
func TestCheckerLists(t *testing.T) {
	const id1, id2 = 100, 200
	props := map[string]*ObjProps{"o": {Dims: dims4}}
	created := func(h *hist, call, ack int64, id uint64) {
		h.opOn(call, ack, Record{Kind: kindCreate, Props: props["o"]}, Record{ID: id})
	}
	o1 := Listed{Name: "o", ID: id1, Dims: dims4}
	cases := []struct {
		name       string
		work       func(h *hist)
		back       []Record
		violations bool
	}{
		{"listed once created", func(h *hist) {
			created(h, 1, 2, id1)
			h.list(10, 20, o1)
		}, readBackID(1000, id1, 4, 0, vals(0, 0, 1, 2, 3)), false},
		{"not listed once created", func(h *hist) {
			created(h, 1, 2, id1)
			h.list(10, 20)
		}, readBackID(1000, id1, 4, 0, vals(0, 0, 1, 2, 3)), true},
		{"listed with other dims", func(h *hist) {
			created(h, 1, 2, id1)
			h.list(10, 20, Listed{Name: "o", ID: id1, Dims: []uint64{3}})
		}, readBackID(1000, id1, 4, 0, vals(0, 0, 1, 2, 3)), true},
		{"listed after its delete", func(h *hist) {
			created(h, 1, 2, id1)
			h.opOn(10, 20, Record{Kind: kindDelete, ID: id1}, Record{})
			h.list(30, 40, o1)
		}, readBackID(1000, 0, 0, 0, nil), true},
		{"neither incarnation listed while one is deleted and the other created", func(h *hist) {
			created(h, 1, 2, id1)
			h.opOn(10, 20, Record{Kind: kindDelete, ID: id1}, Record{})
			created(h, 30, 40, id2)
			h.list(15, 35)
		}, readBackID(1000, id2, 4, 0, vals(0, 0, 1, 2, 3)), false},
		{"both incarnations listed while one is deleted and the other created", func(h *hist) {
			created(h, 1, 2, id1)
			h.opOn(10, 20, Record{Kind: kindDelete, ID: id1}, Record{})
			created(h, 30, 40, id2)
			h.list(15, 35, o1, Listed{Name: "o", ID: id2, Dims: dims4})
		}, readBackID(1000, id2, 4, 0, vals(0, 0, 1, 2, 3)), false},
		{"an object no operation named", func(h *hist) {
			created(h, 1, 2, id1)
			h.list(10, 20, o1, Listed{Name: "p", ID: 5, Dims: dims4})
		}, readBackID(1000, id1, 4, 0, vals(0, 0, 1, 2, 3)), true},
	}
	for _, tc := range cases {
		c := newChecker()
		h := &hist{proc: 0}
		tc.work(h)
		c.Add(1, [][]Record{h.recs}, props)
		c.Verify(1, tc.back)
		if got := c.Stats.Violations() > 0; got != tc.violations {
			t.Errorf("%s: violations %v, want %v: %+v\n%s", tc.name, got, tc.violations, c.Stats, strings.Join(c.Problems, "\n"))
		}
	}
	// An object left alone in cycle 2 must be listed as read back.
	for _, tc := range []struct {
		name       string
		ls         []Listed
		violations bool
	}{
		{"listed", []Listed{o1}, false},
		{"not listed", nil, true},
		{"listed with other dims", []Listed{{Name: "o", ID: id1, Dims: []uint64{5}}}, true},
	} {
		c := newChecker()
		h := &hist{proc: 0}
		created(h, 1, 2, id1)
		c.Add(1, [][]Record{h.recs}, props)
		c.Verify(1, readBackID(1000, id1, 4, 0, vals(0, 0, 1, 2, 3)))
		b := &hist{proc: 15}
		b.list(3000, 3001, tc.ls...)
		c.Add(2, nil, props)
		c.Verify(2, b.recs)
		if got := c.Stats.Violations() > 0; got != tc.violations || c.Stats.Lists != 1 {
			t.Errorf("cycle 2, %s: violations %v, want %v: %+v\n%s", tc.name, got, tc.violations, c.Stats, strings.Join(c.Problems, "\n"))
		}
	}
}
