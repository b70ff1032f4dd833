package crashloop

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/pdcgo/pdc/region"
)

// objCheck is the check of one object name's history in one cycle.
type objCheck struct {
	c     *Checker
	cycle int
	s     *objState
	// hist is the cycle's operations, then the read-back's.
	hist, back []*op
	// label names the object in problems.
	label string
}

// nameValue is the value of the name's register for incarnation id:
// unknown ids are those of creates not acknowledged.
func (v *objCheck) nameValue(id uint64, known map[uint64]bool) uint64 {
	if known[id] {
		return id
	}
	return placeholder
}

// existence checks the name's creates, deletes and opens as one
// register of the incarnation that exists (0: none).
func (v *objCheck) existence() {
	c, s := v.c, v.s
	known := map[uint64]bool{}
	ex := reg{}
	switch {
	case s.exists && s.id != 0:
		ex.init, known[s.id] = state{v: s.id}, true
	case s.exists:
		ex.init = state{v: placeholder}
	}
	for _, o := range v.hist {
		if o.kind == kindCreate && o.acked && o.id != 0 {
			known[o.id] = true
		}
	}
	for _, o := range v.hist {
		switch {
		case o.kind == kindCreate && o.acked:
			ex.add(o, regCreate, v.nameValue(o.id, known))
		case o.kind == kindCreate:
			ex.add(o, regCreate, placeholder)
		case o.kind == kindDelete:
			ex.add(o, regDelete, v.nameValue(o.id, known))
		case o.kind == kindOpen && o.found:
			ex.add(o, regRead, v.nameValue(o.id, known))
		case o.kind == kindOpen:
			ex.add(o, regRead, 0)
		}
	}
	if !c.checkReg(&ex) {
		c.Stats.Lost++
		c.Stats.Where["existence"]++
		c.problem("cycle %d: object %s: existence not linearizable:\n%s", v.cycle, v.label,
			describe(v.hist, func(o *op) bool { return o.kind == kindCreate || o.kind == kindOpen || o.kind == kindDelete }))
	}
}

// incarnations returns the ids of the incarnations operated on, in the
// order of their first operation.
func (v *objCheck) incarnations() []uint64 {
	var ids []uint64
	for _, o := range v.hist {
		if o.kind == kindCreate || (o.kind == kindOpen && !o.found) {
			continue
		}
		if !slices.Contains(ids, o.id) {
			ids = append(ids, o.id)
		}
	}
	return ids
}

// inc is one incarnation of an object name in a cycle: its operations,
// and the state its registers start the cycle in.
type inc struct {
	id    uint64
	ops   []int // indexes of v.hist
	dims  []uint64
	cells []state
	tags  map[string]uint64
}

// incarnation returns incarnation id: as read back before if it is the
// one that existed then, else new (created in the cycle).
func (v *objCheck) incarnation(id uint64) *inc {
	s := v.s
	in := &inc{id: id}
	for i, o := range v.hist {
		if o.id == id && o.kind != kindCreate && (o.kind != kindOpen || o.found) {
			in.ops = append(in.ops, i)
		}
	}
	if s.exists && s.id == id && s.cells != nil {
		in.dims, in.cells, in.tags = s.dims, s.cells, s.tags
		return in
	}
	in.dims, in.cells, in.tags = s.props.Dims, freshCells(s.props), map[string]uint64{}
	return in
}

// freshCells are the cells of a new incarnation: zeros, those past its
// dims out.
func freshCells(props *ObjProps) []state {
	span := spanDims(props)
	cells := make([]state, region.Shape(span...).Volume())
	for i := range cells {
		cells[i].out = outside(span, props.Dims, uint64(i))
	}
	return cells
}

// pin takes the read-back as the state the next cycle starts from.
func (v *objCheck) pin() {
	s := v.s
	var open, read *op
	for _, o := range v.back {
		switch {
		case o.listing:
		case o.kind == kindOpen:
			open = o
		case o.kind == kindRead:
			read = o
		}
	}
	if open == nil {
		return
	}
	if !open.found {
		s.exists, s.id, s.cells, s.tags = false, 0, nil, map[string]uint64{}
		return
	}
	s.exists = true
	if s.props == nil {
		return
	}
	if open.id != s.id {
		s.tags, s.cells = map[string]uint64{}, nil
	}
	s.id = open.id
	s.dims = s.props.Dims
	if len(open.dims) == len(s.dims) {
		s.dims = open.dims
	}
	for _, o := range v.back {
		if o.kind == kindGetTag {
			s.tags[o.tag] = o.wid
		}
	}
	cells := v.backCells(read)
	if cells == nil {
		v.c.Stats.Corrupt++
		v.c.problem("cycle %d: object %s exists but was not read back whole", v.cycle, v.label)
		return
	}
	s.cells = cells
}

// backCells are the cells the read-back read, those past its dims out;
// nil if it did not read them whole.
func (v *objCheck) backCells(read *op) []state {
	span := spanDims(v.s.props)
	n := region.Shape(span...).Volume()
	if read == nil || !fits(span, *read.box) || uint64(len(read.vals)) != read.box.Volume() {
		return nil
	}
	if !slices.Equal(read.box.Off, make([]uint64, len(span))) {
		return nil
	}
	cells := make([]state, n)
	k := 0
	forCells(span, *read.box, func(cell uint64) {
		wid, _ := decodeCell(read.vals[k], cell)
		cells[cell].v = wid
		k++
	})
	for i := range cells {
		if outside(span, read.box.Size, uint64(i)) {
			cells[i].out = true
			if !v.c.strict {
				cells[i].ghost = anyGhost
			}
		}
	}
	return cells
}

// fits reports whether box lies within dims.
func fits(dims []uint64, box region.Box) bool {
	if len(box.Off) != len(dims) || len(box.Size) != len(dims) {
		return false
	}
	for i, d := range dims {
		if box.Off[i] > d || box.Size[i] > d-box.Off[i] {
			return false
		}
	}
	return true
}

// tags checks each tag of incarnation in as a register.
func (v *objCheck) tags(in *inc) {
	c := v.c
	tags := map[string]*reg{}
	tagReg := func(t string) *reg {
		r := tags[t]
		if r == nil {
			r = &reg{init: state{v: in.tags[t]}}
			tags[t] = r
		}
		return r
	}
	for _, i := range in.ops {
		o := v.hist[i]
		switch o.kind {
		case kindPutTag:
			tagReg(o.tag).add(o, regWrite, o.wid)
		case kindDelTag:
			tagReg(o.tag).add(o, regWrite, 0)
		case kindGetTag:
			if o.wid == 0 {
				// Not found: the tag, or the object through a handle
				// to it once deleted.
				tagReg(o.tag).add(o, regAbsent, 0)
			} else {
				tagReg(o.tag).add(o, regRead, o.wid)
			}
		case kindSearch:
			tagReg(o.tag).addMatch(o)
		}
	}
	for _, t := range sortedKeys(tags) {
		r := tags[t]
		for _, i := range in.ops {
			if o := v.hist[i]; o.kind == kindDelete {
				r.add(o, regKill, 0)
			}
		}
		if !c.checkReg(r) {
			// The searches' fault, if the tag's history passes without
			// them.
			where := "tag"
			if plain := r.without(regMatch); len(plain.ops) < len(r.ops) && plain.check() != porcupine.Illegal {
				where = "search"
			}
			c.Stats.Lost++
			c.Stats.Where[where]++
			c.problem("cycle %d: object %s id %#x: tag %s not linearizable (%s):\n%s", v.cycle, v.label, in.id, t, where,
				describe(v.hist, func(o *op) bool { return o.id == in.id && (o.tag == t || o.kind == kindDelete) }))
		}
	}
}

// dims checks the first dim of incarnation in as a register: set by set
// dims, read by opens.
func (v *objCheck) dims(in *inc) {
	c := v.c
	r := reg{init: state{v: dimsValue(in.dims)}}
	reads := 0
	for _, i := range in.ops {
		o := v.hist[i]
		switch {
		case o.kind == kindSetDims && len(o.dims) > 0:
			r.add(o, regWrite, dimsValue(o.dims))
		case o.kind == kindOpen && len(o.dims) > 0:
			r.add(o, regRead, dimsValue(o.dims))
			reads++
		case o.kind == kindDelete:
			r.add(o, regKill, 0)
		}
	}
	if reads == 0 {
		return
	}
	if !c.checkReg(&r) {
		c.Stats.Lost++
		c.Stats.Where["dims"]++
		c.problem("cycle %d: object %s id %#x: dims not linearizable (from %v):\n%s", v.cycle, v.label, in.id, in.dims,
			describe(v.hist, func(o *op) bool {
				return o.id == in.id && (o.kind == kindSetDims || o.kind == kindOpen || o.kind == kindDelete)
			}))
	}
}

// touch is one operation on a cell: a write of val, a read that saw val,
// a set dims that cut the cell (val 1) or not (0), a delete; op indexes
// the history.
type touch struct {
	op  int
	val uint64
}

// cells checks each cell of incarnation in as a register.
func (v *objCheck) cells(in *inc) {
	per, backVals := v.touches(in)
	v.checkCells(in, per, backVals)
}

// where is the stats key of the object's cells.
func (v *objCheck) where() string {
	return fmt.Sprintf("partition %d storage %d", v.s.props.Partition, v.s.props.Storage)
}

// touches returns, per cell of incarnation in, the operations on it and
// what each read saw there, and the read-back's value per cell if it read
// this incarnation. A read of a value no write put in its cell is counted
// corrupt here.
func (v *objCheck) touches(in *inc) (per [][]touch, backVals []uint64) {
	c, span := v.c, spanDims(v.s.props)
	n := uint64(len(in.cells))
	per = make([][]touch, n)
	for _, i := range in.ops {
		o := v.hist[i]
		switch o.kind {
		case kindWrite:
			if !fits(span, *o.box) {
				c.Stats.Corrupt++
				c.problem("cycle %d: object %s: %s is outside %v", v.cycle, v.label, o, span)
				continue
			}
			forCells(span, *o.box, func(cell uint64) { per[cell] = append(per[cell], touch{i, o.wid}) })
		case kindSetDims, kindDelete:
			// A delete cuts every cell; a set dims those outside them.
			cut := func(uint64) bool { return true }
			if o.kind == kindSetDims && len(o.dims) == len(span) {
				cut = func(cell uint64) bool { return outside(span, o.dims, cell) }
			}
			for cell := range per {
				per[cell] = append(per[cell], touch{i, b2u(cut(uint64(cell)))})
			}
		case kindRead:
			if uint64(len(o.vals)) != o.box.Volume() || !fits(span, *o.box) {
				c.Stats.Corrupt++
				c.problem("cycle %d: object %s: %s returned %d values (dims span %v)", v.cycle, v.label, o, len(o.vals), span)
				continue
			}
			k := 0
			back := slices.Contains(v.back, o)
			if back {
				backVals = make([]uint64, n)
			}
			forCells(span, *o.box, func(cell uint64) {
				val := o.vals[k]
				k++
				wid, ok := decodeCell(val, cell)
				if !ok {
					c.Stats.Corrupt++
					c.Stats.Where[v.where()]++
					c.problem("cycle %d: object %s cell %d: %s read %#x, which no write put in this cell", v.cycle, v.label, cell, o, val)
					return
				}
				per[cell] = append(per[cell], touch{i, wid})
				if back {
					backVals[cell] = wid
				}
			})
		}
	}
	return per, backVals
}

// checkCells checks each cell's touches as a register; cells with the
// same history are one check.
func (v *objCheck) checkCells(in *inc, per [][]touch, backVals []uint64) {
	c, hist, where := v.c, v.hist, v.where()
	seen := map[string]bool{}
	var key strings.Builder
	for cell := range per {
		if len(per[cell]) == 0 {
			continue
		}
		init := in.cells[cell]
		key.Reset()
		key.WriteString(strconv.FormatUint(init.v, 16))
		if init.out {
			key.WriteByte('x')
		}
		if init.ghost != 0 {
			key.WriteString("g" + strconv.FormatUint(init.ghost, 16))
		}
		for _, t := range per[cell] {
			key.WriteByte(' ')
			key.WriteString(strconv.Itoa(t.op))
			if k := hist[t.op].kind; k == kindRead || k == kindSetDims || k == kindDelete {
				key.WriteByte('=')
				key.WriteString(strconv.FormatUint(t.val, 16))
			}
		}
		k := key.String()
		if ok, done := seen[k]; done {
			if !ok {
				c.countCell(backVals, uint64(cell))
				c.Stats.Where[where]++
			}
			continue
		}
		r := reg{init: init, strict: c.strict}
		for _, t := range per[cell] {
			o := hist[t.op]
			switch o.kind {
			case kindWrite:
				r.add(o, regWrite, t.val)
			case kindRead:
				r.add(o, regRead, t.val)
			case kindSetDims:
				r.add(o, regCut, t.val)
			case kindDelete:
				r.add(o, regKill, 0)
			}
		}
		ok := c.checkReg(&r)
		seen[k] = ok
		if !ok {
			c.countCell(backVals, uint64(cell))
			c.Stats.Where[where]++
			c.problem("cycle %d: object %s id %#x cell %d (read back before as %#x, out %v) not linearizable:\n%s",
				v.cycle, v.label, in.id, cell, init.v, init.out, describeCell(hist, per[cell]))
		}
	}
}

// describeCell lists a cell's touches, with what each read saw.
func describeCell(hist []*op, ts []touch) string {
	var lines []string
	for _, t := range ts {
		o := hist[t.op]
		l := "  " + o.String()
		switch o.kind {
		case kindRead:
			l += fmt.Sprintf(" saw %#x", t.val)
		case kindSetDims:
			if t.val == 1 {
				l += " (cuts it)"
			}
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}
