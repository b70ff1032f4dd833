package crashloop

import (
	"strings"
	"testing"

	"github.com/pdcgo/pdc/region"
)

// hist builds op logs by hand: a process's records in order.
type hist struct {
	proc int
	n    uint64
	recs []Record
}

func (h *hist) inv(t int64, r Record) uint64 {
	h.n++
	r.Proc, r.Op, r.Ev, r.T = h.proc, h.n, evInvoke, t
	h.recs = append(h.recs, r)
	return h.n
}

func (h *hist) ok(op uint64, t int64, r Record) {
	r.Proc, r.Op, r.Ev, r.T = h.proc, op, evOK, t
	h.recs = append(h.recs, r)
}

var (
	dims4 = []uint64{4}
	all4  = region.Shape(4)
)

func vals(wid uint64, cells ...uint64) []uint64 {
	out := make([]uint64, len(cells))
	for i, c := range cells {
		if wid != 0 {
			out[i] = cellValue(wid, c)
		}
	}
	return out
}

// write logs an acknowledged (ack > 0) or unacknowledged write of box.
func (h *hist) write(call, ack int64, box region.Box, wid uint64) {
	n := h.inv(call, Record{Kind: kindWrite, Obj: "o", Box: &box, WID: wid})
	if ack > 0 {
		h.ok(n, ack, Record{})
	}
}

func (h *hist) read(call, ret int64, box region.Box, v []uint64) {
	n := h.inv(call, Record{Kind: kindRead, Obj: "o", Box: &box})
	h.ok(n, ret, Record{Vals: v})
}

// readBack is the driver's read-back of object o: it exists, tag t0 is
// tag, cells are v.
func readBack(t0 int64, tag uint64, v []uint64) []Record {
	h := &hist{proc: 15}
	n := h.inv(t0, Record{Kind: kindOpen, Obj: "o"})
	h.ok(n, t0+1, Record{Found: true})
	n = h.inv(t0+2, Record{Kind: kindGetTag, Obj: "o", Tag: "t0"})
	h.ok(n, t0+3, Record{WID: tag})
	h.read(t0+4, t0+5, all4, v)
	return h.recs
}

// check runs one cycle: a create of o at time 1-2, the worker's records,
// then the read-back.
func check(t *testing.T, c *Checker, cycle int, work func(h *hist), back []Record) Stats {
	t.Helper()
	h := &hist{proc: 0}
	props := map[string]*ObjProps{"o": {Dims: dims4}}
	if cycle == 1 {
		n := h.inv(1, Record{Kind: kindCreate, Obj: "o", Props: props["o"], WID: 1})
		h.ok(n, 2, Record{})
	}
	work(h)
	c.Add(cycle, [][]Record{h.recs}, props)
	c.Verify(cycle, back)
	return c.Stats
}

func TestCheckerAcceptsWhatLinearizes(t *testing.T) {
	w1, w2, w3 := writeID(1, 0, 1), writeID(1, 0, 2), writeID(1, 1, 1)
	cases := []struct {
		name string
		work func(h *hist)
		back []uint64
	}{
		{"nothing written reads zeros", func(h *hist) {}, vals(0, 0, 1, 2, 3)},
		{"the last acknowledged write", func(h *hist) {
			h.write(10, 20, all4, w1)
			h.write(30, 40, all4, w2)
		}, vals(w2, 0, 1, 2, 3)},
		{"an unacknowledged write that took effect", func(h *hist) {
			h.write(10, 20, all4, w1)
			h.write(30, 0, all4, w2)
		}, vals(w2, 0, 1, 2, 3)},
		{"an unacknowledged write that did not", func(h *hist) {
			h.write(10, 20, all4, w1)
			h.write(30, 0, all4, w2)
		}, vals(w1, 0, 1, 2, 3)},
		{"an unacknowledged write torn between cells", func(h *hist) {
			h.write(10, 20, all4, w1)
			h.write(30, 0, all4, w2)
		}, append(vals(w2, 0, 1), vals(w1, 2, 3)...)},
		{"concurrent writes in either order", func(h *hist) {
			h.write(10, 40, all4, w1)
			h.write(20, 30, region.Box{Off: []uint64{2}, Size: []uint64{2}}, w3)
		}, append(vals(w1, 0, 1), vals(w1, 2, 3)...)},
		{"a worker's read of a concurrent write", func(h *hist) {
			h.write(10, 20, all4, w1)
			h.write(30, 50, all4, w2)
			h.read(35, 40, all4, vals(w1, 0, 1, 2, 3))
		}, vals(w2, 0, 1, 2, 3)},
		{"an unacknowledged write seen mid-cycle, overwritten", func(h *hist) {
			h.write(10, 0, all4, w1)
			h.read(35, 40, all4, vals(w1, 0, 1, 2, 3))
			h.write(50, 60, all4, w2)
		}, vals(w2, 0, 1, 2, 3)},
	}
	for _, tc := range cases {
		c := newChecker()
		st := check(t, c, 1, tc.work, readBack(1000, 0, tc.back))
		if st.Violations() != 0 {
			t.Errorf("%s: %d violations: %s", tc.name, st.Violations(), strings.Join(c.Problems, "\n"))
		}
	}
}

func TestCheckerFindsLostZeroedCorrupt(t *testing.T) {
	w1, w2 := writeID(1, 0, 1), writeID(1, 0, 2)
	cases := []struct {
		name                  string
		work                  func(h *hist)
		back                  []uint64
		lost, zeroed, corrupt int
	}{
		{"zeros after an acknowledged write", func(h *hist) {
			h.write(10, 20, all4, w1)
		}, append(vals(w1, 0, 1), 0, 0), 0, 2, 0},
		{"an older value after an acknowledged overwrite", func(h *hist) {
			h.write(10, 20, all4, w1)
			h.write(30, 40, all4, w2)
		}, append(vals(w2, 0, 1, 2), vals(w1, 3)...), 1, 0, 0},
		{"a value from another cell", func(h *hist) {
			h.write(10, 20, all4, w1)
		}, []uint64{cellValue(w1, 0), cellValue(w1, 0), cellValue(w1, 2), cellValue(w1, 3)}, 0, 0, 1},
		{"a worker's stale read", func(h *hist) {
			h.write(10, 20, all4, w1)
			h.write(30, 40, all4, w2)
			h.read(50, 60, all4, vals(w1, 0, 1, 2, 3))
		}, vals(w2, 0, 1, 2, 3), 4, 0, 0},
		{"zeros read by a worker after an acknowledged write", func(h *hist) {
			h.write(10, 20, all4, w1)
			h.read(50, 60, all4, vals(0, 0, 1, 2, 3))
		}, vals(w1, 0, 1, 2, 3), 4, 0, 0},
	}
	for _, tc := range cases {
		c := newChecker()
		st := check(t, c, 1, tc.work, readBack(1000, 0, tc.back))
		if st.Lost != tc.lost || st.Zeroed != tc.zeroed || st.Corrupt != tc.corrupt {
			t.Errorf("%s: lost %d, zeroed %d, corrupt %d; want %d, %d, %d", tc.name, st.Lost, st.Zeroed, st.Corrupt, tc.lost, tc.zeroed, tc.corrupt)
		}
		if len(c.Problems) == 0 {
			t.Errorf("%s: no problem described", tc.name)
		}
	}
}

// The next cycle starts from the values read back: data that changes
// between cycles with nothing written is caught, and so is a tag or an
// object lost across a restart.
func TestCheckerCarriesStateAcrossCycles(t *testing.T) {
	w1 := writeID(1, 0, 1)
	c := newChecker()
	st := check(t, c, 1, func(h *hist) {
		h.write(10, 20, all4, w1)
		n := h.inv(30, Record{Kind: kindPutTag, Obj: "o", Tag: "t0", WID: w1})
		h.ok(n, 40, Record{})
	}, readBack(1000, w1, vals(w1, 0, 1, 2, 3)))
	if st.Violations() != 0 || st.AckedWrites != 1 || st.AckedTags != 1 || st.AckedCreates != 1 {
		t.Fatalf("cycle 1: %+v\n%s", st, strings.Join(c.Problems, "\n"))
	}
	if got := c.Catalog(); len(got) != 1 || got[0] != "o" {
		t.Fatalf("catalog %v", got)
	}
	// Cycle 2: nothing written, one cell back at zero, the tag gone.
	st = check(t, c, 2, func(h *hist) {
		h.read(2000, 2001, region.Box{Off: []uint64{0}, Size: []uint64{1}}, vals(w1, 0))
	}, readBack(3000, 0, append(vals(w1, 0, 1, 2), 0)))
	if st.Zeroed != 1 || st.Lost != 1 || st.Where["tag"] != 1 {
		t.Fatalf("cycle 2: %+v\n%s", st, strings.Join(c.Problems, "\n"))
	}
	// Cycle 3: the object is gone.
	h := &hist{proc: 15}
	n := h.inv(4000, Record{Kind: kindOpen, Obj: "o"})
	h.ok(n, 4001, Record{Found: false})
	c.Add(3, nil, nil)
	c.Verify(3, h.recs)
	if c.Stats.Where["existence"] != 1 {
		t.Fatalf("cycle 3: %+v\n%s", c.Stats, strings.Join(c.Problems, "\n"))
	}
}

// A log cut by its writer's death mid-line reads up to the last whole
// line.
func TestReadLogDropsTornLine(t *testing.T) {
	path := t.TempDir() + "/w.log"
	l, err := createLog(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	n, err := l.invoke(Record{Kind: kindWrite, Obj: "o", Box: &all4, WID: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.done(n, Record{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.f.WriteString(`{"p":3,"op":2,"ev":"in`); err != nil {
		t.Fatal(err)
	}
	l.close()
	recs, err := readLog(path)
	if err != nil || len(recs) != 2 || recs[0].Proc != 3 || recs[1].Ev != evOK || recs[0].Box.Volume() != 4 {
		t.Fatalf("got %+v, %v", recs, err)
	}
}

// opOn logs an operation through a handle to incarnation id of o, acked
// at ack if ack > 0.
func (h *hist) opOn(call, ack int64, r Record, ok Record) {
	r.Obj = "o"
	n := h.inv(call, r)
	if ack > 0 {
		h.ok(n, ack, ok)
	}
}

// readBackID is readBack of incarnation id with the first dim rows (nil
// v: the object is not found).
func readBackID(t0 int64, id uint64, rows uint64, tag uint64, v []uint64) []Record {
	h := &hist{proc: 15}
	n := h.inv(t0, Record{Kind: kindOpen, Obj: "o"})
	if v == nil {
		h.ok(n, t0+1, Record{Found: false})
		return h.recs
	}
	h.ok(n, t0+1, Record{Found: true, ID: id, Dims: []uint64{rows}})
	n = h.inv(t0+2, Record{Kind: kindGetTag, Obj: "o", ID: id, Tag: "t0"})
	h.ok(n, t0+3, Record{WID: tag})
	box := region.Shape(rows)
	n = h.inv(t0+4, Record{Kind: kindRead, Obj: "o", ID: id, Box: &box})
	h.ok(n, t0+5, Record{Vals: v})
	return h.recs
}

// The deletes, set dims and tag deletes: what pdc promises of them
// linearizes, and what it does not is caught.
func TestCheckerDeletesAndDims(t *testing.T) {
	w1, w2 := writeID(1, 0, 1), writeID(1, 0, 2)
	const id1, id2 = 100, 200
	props := map[string]*ObjProps{"o": {Dims: dims4}}
	box := func(off, size uint64) *region.Box { return &region.Box{Off: []uint64{off}, Size: []uint64{size}} }
	created := func(h *hist, call int64, id uint64) {
		h.opOn(call, call+1, Record{Kind: kindCreate, Props: props["o"]}, Record{ID: id})
	}
	cases := []struct {
		name       string
		work       func(h *hist)
		back       []Record
		violations bool
		strict     bool // RegrowReadsZeros
	}{
		{"a delete, then a create of the same name, reads zeros", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindWrite, ID: id1, Box: &all4, WID: w1}, Record{})
			h.opOn(30, 40, Record{Kind: kindDelete, ID: id1}, Record{})
			created(h, 50, id2)
		}, readBackID(1000, id2, 4, 0, vals(0, 0, 1, 2, 3)), false, true},
		{"a write through the deleted incarnation's handle lands in the new one", func(h *hist) {
			created(h, 1, id1)
			h.opOn(30, 40, Record{Kind: kindDelete, ID: id1}, Record{})
			created(h, 50, id2)
			h.opOn(60, 70, Record{Kind: kindWrite, ID: id1, Box: &all4, WID: w1}, Record{})
		}, readBackID(1000, id2, 4, 0, vals(w1, 0, 1, 2, 3)), true, true},
		{"a write acknowledged through a handle after the delete", func(h *hist) {
			created(h, 1, id1)
			h.opOn(30, 40, Record{Kind: kindDelete, ID: id1}, Record{})
			h.opOn(60, 70, Record{Kind: kindWrite, ID: id1, Box: &all4, WID: w1}, Record{})
		}, readBackID(1000, 0, 0, 0, nil), true, true},
		{"an acknowledged delete undone", func(h *hist) {
			created(h, 1, id1)
			h.opOn(30, 40, Record{Kind: kindDelete, ID: id1}, Record{})
		}, readBackID(1000, id1, 4, 0, vals(0, 0, 1, 2, 3)), true, true},
		{"an unacknowledged delete that did not happen", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindWrite, ID: id1, Box: &all4, WID: w1}, Record{})
			h.opOn(30, 0, Record{Kind: kindDelete, ID: id1}, Record{})
		}, readBackID(1000, id1, 4, 0, vals(w1, 0, 1, 2, 3)), false, true},
		{"an unacknowledged create seen by the read-back", func(h *hist) {
			h.opOn(1, 0, Record{Kind: kindCreate, Props: props["o"]}, Record{})
		}, readBackID(1000, id1, 4, 0, vals(0, 0, 1, 2, 3)), false, true},
		{"a shrink and a regrow read zeros where it cut", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindWrite, ID: id1, Box: &all4, WID: w1}, Record{})
			h.opOn(30, 40, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{2}}, Record{})
			h.opOn(50, 60, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{8}}, Record{})
			h.opOn(70, 80, Record{Kind: kindWrite, ID: id1, Box: box(6, 1), WID: w2}, Record{})
		}, readBackID(1000, id1, 8, 0, append(append(vals(w1, 0, 1), 0, 0, 0, 0), vals(w2, 6)[0], 0)), false, true},
		{"a regrow that brings cut cells back", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindWrite, ID: id1, Box: &all4, WID: w1}, Record{})
			h.opOn(30, 40, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{2}}, Record{})
			h.opOn(50, 60, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{4}}, Record{})
		}, readBackID(1000, id1, 4, 0, vals(w1, 0, 1, 2, 3)), true, true},
		{"a regrow that brings cut cells back, allowed until it is fixed", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindWrite, ID: id1, Box: &all4, WID: w1}, Record{})
			h.opOn(30, 40, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{2}}, Record{})
			h.opOn(50, 60, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{4}}, Record{})
		}, readBackID(1000, id1, 4, 0, vals(w1, 0, 1, 2, 3)), false, false},
		{"a cell cut and regrown brings back a value older than its last", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindWrite, ID: id1, Box: &all4, WID: w1}, Record{})
			h.opOn(22, 24, Record{Kind: kindWrite, ID: id1, Box: &all4, WID: w2}, Record{})
			h.opOn(30, 40, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{2}}, Record{})
			h.opOn(50, 60, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{4}}, Record{})
		}, readBackID(1000, id1, 4, 0, append(vals(w2, 0, 1), vals(w1, 2, 3)...)), true, false},
		{"a write under newer dims cut by a client with older ones", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{8}}, Record{})
			h.opOn(30, 40, Record{Kind: kindWrite, ID: id1, Box: box(4, 4), WID: w1}, Record{})
			h.opOn(50, 60, Record{Kind: kindWrite, ID: id1, Box: box(0, 4), WID: w2}, Record{})
		}, readBackID(1000, id1, 8, 0, append(vals(w2, 0, 1, 2, 3), 0, 0, 0, 0)), true, true},
		{"a write past the dims acknowledged (older dims), not seen", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{2}}, Record{})
			h.opOn(30, 40, Record{Kind: kindWrite, ID: id1, Box: &all4, WID: w1}, Record{})
			h.opOn(50, 60, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{4}}, Record{})
		}, readBackID(1000, id1, 4, 0, append(vals(w1, 0, 1), 0, 0)), false, true},
		{"a write past the dims seen after a regrow", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{2}}, Record{})
			h.opOn(30, 40, Record{Kind: kindWrite, ID: id1, Box: &all4, WID: w1}, Record{})
			h.opOn(50, 60, Record{Kind: kindSetDims, ID: id1, Dims: []uint64{4}}, Record{})
		}, readBackID(1000, id1, 4, 0, vals(w1, 0, 1, 2, 3)), true, true},
		{"a tag deleted", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindPutTag, ID: id1, Tag: "t0", WID: w1}, Record{})
			h.opOn(30, 40, Record{Kind: kindDelTag, ID: id1, Tag: "t0"}, Record{})
		}, readBackID(1000, id1, 4, 0, vals(0, 0, 1, 2, 3)), false, true},
		{"a deleted tag back", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindPutTag, ID: id1, Tag: "t0", WID: w1}, Record{})
			h.opOn(30, 40, Record{Kind: kindDelTag, ID: id1, Tag: "t0"}, Record{})
		}, readBackID(1000, id1, 4, w1, vals(0, 0, 1, 2, 3)), true, true},
		{"a tag of the deleted incarnation on the new one", func(h *hist) {
			created(h, 1, id1)
			h.opOn(10, 20, Record{Kind: kindPutTag, ID: id1, Tag: "t0", WID: w1}, Record{})
			h.opOn(30, 40, Record{Kind: kindDelete, ID: id1}, Record{})
			created(h, 50, id2)
		}, readBackID(1000, id2, 4, w1, vals(0, 0, 1, 2, 3)), true, true},
	}
	for _, tc := range cases {
		c := newChecker()
		c.strict = tc.strict
		h := &hist{proc: 0}
		tc.work(h)
		c.Add(1, [][]Record{h.recs}, props)
		c.Verify(1, tc.back)
		if got := c.Stats.Violations() > 0; got != tc.violations {
			t.Errorf("%s: violations %v, want %v: %+v\n%s", tc.name, got, tc.violations, c.Stats, strings.Join(c.Problems, "\n"))
		}
	}
}

// A set dims that changes a trailing dim: elements keep their
// coordinates (docs/design/0006), what falls outside is cut, and a value
// moved to another coordinate is caught.
func TestCheckerTrailingDims(t *testing.T) {
	w1 := writeID(1, 0, 1)
	const id1 = 100
	props := map[string]*ObjProps{"o": {Dims: []uint64{2, 2}}} // span 4 x 3
	span := spanDims(props["o"])
	if len(span) != 2 || span[0] != 4 || span[1] != 3 {
		t.Fatalf("span %v", span)
	}
	// cells of the coordinates (row, col) in span, and the values w1 put
	// there.
	cell := func(r, c uint64) uint64 { return r*span[1] + c }
	at := func(wid uint64, rc ...[2]uint64) []uint64 {
		var out []uint64
		for _, p := range rc {
			if wid == 0 {
				out = append(out, 0)
				continue
			}
			out = append(out, cellValue(wid, cell(p[0], p[1])))
		}
		return out
	}
	back := func(dims []uint64, v []uint64) []Record {
		h := &hist{proc: 15}
		n := h.inv(1000, Record{Kind: kindOpen, Obj: "o"})
		h.ok(n, 1001, Record{Found: true, ID: id1, Dims: dims})
		box := region.Shape(dims...)
		n = h.inv(1002, Record{Kind: kindRead, Obj: "o", ID: id1, Box: &box})
		h.ok(n, 1003, Record{Vals: v})
		return h.recs
	}
	whole := region.Shape(2, 2)
	written := func(h *hist) {
		h.opOn(1, 2, Record{Kind: kindCreate, Props: props["o"]}, Record{ID: id1})
		h.opOn(10, 20, Record{Kind: kindWrite, ID: id1, Box: &whole, WID: w1}, Record{})
	}
	setDims := func(h *hist, call int64, dims ...uint64) {
		h.opOn(call, call+1, Record{Kind: kindSetDims, ID: id1, Dims: dims}, Record{})
	}
	cases := []struct {
		name       string
		work       func(h *hist)
		back       []Record
		violations bool
	}{
		{"a wider row keeps every element's coordinates", func(h *hist) {
			written(h)
			setDims(h, 30, 2, 3)
		}, back([]uint64{2, 3}, []uint64{
			at(w1, [2]uint64{0, 0})[0], at(w1, [2]uint64{0, 1})[0], 0,
			at(w1, [2]uint64{1, 0})[0], at(w1, [2]uint64{1, 1})[0], 0,
		}), false},
		{"a wider row read as the old bytes in row-major order", func(h *hist) {
			written(h)
			setDims(h, 30, 2, 3)
		}, back([]uint64{2, 3}, []uint64{
			at(w1, [2]uint64{0, 0})[0], at(w1, [2]uint64{0, 1})[0], at(w1, [2]uint64{1, 0})[0],
			at(w1, [2]uint64{1, 1})[0], 0, 0,
		}), true},
		{"a narrower row, then back, reads zeros where it cut", func(h *hist) {
			written(h)
			setDims(h, 30, 2, 1)
			setDims(h, 40, 2, 2)
		}, back([]uint64{2, 2}, []uint64{at(w1, [2]uint64{0, 0})[0], 0, at(w1, [2]uint64{1, 0})[0], 0}), false},
		{"a narrower row, then back, brings the cut column back", func(h *hist) {
			written(h)
			setDims(h, 30, 2, 1)
			setDims(h, 40, 2, 2)
		}, back([]uint64{2, 2}, at(w1, [2]uint64{0, 0}, [2]uint64{0, 1}, [2]uint64{1, 0}, [2]uint64{1, 1})), true},
		{"the dims read back are not the last set", func(h *hist) {
			written(h)
			setDims(h, 30, 2, 3)
		}, back([]uint64{2, 2}, at(w1, [2]uint64{0, 0}, [2]uint64{0, 1}, [2]uint64{1, 0}, [2]uint64{1, 1})), true},
	}
	for _, tc := range cases {
		c := newChecker()
		c.strict = true
		h := &hist{proc: 0}
		tc.work(h)
		c.Add(1, [][]Record{h.recs}, props)
		c.Verify(1, tc.back)
		if got := c.Stats.Violations() > 0; got != tc.violations {
			t.Errorf("%s: violations %v, want %v: %+v\n%s", tc.name, got, tc.violations, c.Stats, strings.Join(c.Problems, "\n"))
		}
	}
}
