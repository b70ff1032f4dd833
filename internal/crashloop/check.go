package crashloop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/pdcgo/pdc/region"
)

// op is one operation of the history, its outcome resolved.
type op struct {
	proc  int
	n     uint64
	kind  string
	obj   string
	box   *region.Box
	tag   string
	call  int64
	ret   int64 // for an update not acknowledged: never (math.MaxInt64)
	acked bool
	wid   uint64   // update: the value written; gettag: the value read
	found bool     // open
	vals  []uint64 // read
}

func (o *op) update() bool {
	return o.kind == kindCreate || o.kind == kindWrite || o.kind == kindPutTag
}

func (o *op) String() string {
	s := fmt.Sprintf("p%d#%d %s", o.proc, o.n, o.kind)
	if o.box != nil {
		s += fmt.Sprintf(" %v", *o.box)
	}
	if o.tag != "" {
		s += " tag " + o.tag
	}
	if o.update() || o.kind == kindGetTag {
		s += fmt.Sprintf(" wid %#x", o.wid)
	}
	if !o.acked && o.update() {
		s += " (not acknowledged)"
	}
	if o.ret == math.MaxInt64 {
		return s + fmt.Sprintf(" [%d, -]", o.call)
	}
	return s + fmt.Sprintf(" [%d, %d]", o.call, o.ret)
}

// objState is what the checker knows of one object: the values its
// registers were last read back as, and the operations since.
type objState struct {
	name    string
	props   *ObjProps // nil until a create was logged
	exists  bool      // pinned by the last read-back
	cells   []uint64  // pinned write id per cell; nil before the first read-back
	tags    map[string]uint64
	pending []*op
	touched int // cycle of the last operation on it
}

// Stats counts what was checked.
type Stats struct {
	Cycles       int
	AckedWrites  int // region writes acknowledged and checked
	AckedCreates int
	AckedTags    int
	Unacked      int // updates whose client was killed or that failed: allowed either way
	Reads        int // reads checked (clients' and the read-backs')
	Registers    int // cell, existence and tag histories checked
	Lost         int // registers read back older than an acknowledged value
	Zeroed       int // cells read back as zeros after an acknowledged write
	Corrupt      int // cells holding a value no write put there, or read errors
	// Where the violations were: "partition P storage S", "tag",
	// "existence", "read-back".
	Where map[string]int
}

// Acked is the number of acknowledged operations checked.
func (s Stats) Acked() int { return s.AckedWrites + s.AckedCreates + s.AckedTags }

// Violations is the number of violations found.
func (s Stats) Violations() int { return s.Lost + s.Zeroed + s.Corrupt }

// Checker checks the history, one cycle at a time. Not safe for concurrent
// use.
type Checker struct {
	objs     map[string]*objState
	Stats    Stats
	Problems []string // the first violations, described
}

// maxProblems bounds the violations described.
const maxProblems = 20

func newChecker() *Checker {
	return &Checker{objs: map[string]*objState{}, Stats: Stats{Where: map[string]int{}}}
}

func (c *Checker) problem(format string, args ...any) {
	if len(c.Problems) < maxProblems {
		c.Problems = append(c.Problems, fmt.Sprintf(format, args...))
	}
}

func (c *Checker) obj(name string) *objState {
	s := c.objs[name]
	if s == nil {
		s = &objState{name: name, tags: map[string]uint64{}}
		c.objs[name] = s
	}
	return s
}

// Catalog returns the objects known to exist, sorted.
func (c *Checker) Catalog() []string {
	var names []string
	for n, s := range c.objs {
		if s.exists && s.props != nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// ops pairs the records of one process's log into operations. An update
// without an acknowledgement never returns: it may take effect at any
// moment after its invocation, or never (its client is dead, and so are
// all servers before the read-back that follows; see reg.check). A read
// without one is dropped, as it observed nothing.
func ops(recs []Record) []*op {
	byN := map[uint64]*op{}
	var out []*op
	for _, r := range recs {
		if r.Ev == evInvoke {
			o := &op{proc: r.Proc, n: r.Op, kind: r.Kind, obj: r.Obj, box: r.Box, tag: r.Tag, call: r.T, ret: math.MaxInt64, wid: r.WID}
			byN[r.Op] = o
			out = append(out, o)
			continue
		}
		o := byN[r.Op]
		if o == nil || r.Ev != evOK {
			continue
		}
		o.acked, o.ret = true, r.T
		switch o.kind {
		case kindOpen:
			o.found = r.Found
		case kindRead:
			o.vals = r.Vals
		case kindGetTag:
			o.wid = r.WID
		}
	}
	return slices.DeleteFunc(out, func(o *op) bool { return !o.update() && !o.acked })
}

// Add takes the logs of one cycle's clients.
func (c *Checker) Add(cycle int, logs [][]Record, props map[string]*ObjProps) {
	for _, recs := range logs {
		for _, o := range ops(recs) {
			s := c.obj(o.obj)
			if p := props[o.obj]; p != nil && s.props == nil {
				s.props = p
			}
			s.pending = append(s.pending, o)
			s.touched = cycle
		}
	}
}

// Touched returns the objects operated on in cycle, and up to extra
// others picked by r, so that untouched data is read back now and then.
func (c *Checker) Touched(cycle, extra int, r *rand.Rand) []string {
	var touched, others []string
	for n, s := range c.objs {
		switch {
		case s.touched == cycle || len(s.pending) > 0:
			touched = append(touched, n)
		case s.exists:
			others = append(others, n)
		}
	}
	sort.Strings(touched)
	sort.Strings(others)
	r.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	return append(touched, others[:min(extra, len(others))]...)
}

// Verify checks the objects read back in a cycle's read-back log: their
// pending operations with the read-back's, each register from the value
// it was read back as the cycle before. Objects whose read-back failed
// are reported and stay pending.
func (c *Checker) Verify(cycle int, readback []Record) {
	c.Stats.Cycles++
	byObj := map[string][]*op{}
	failed := map[string]string{}
	for _, o := range ops(readback) {
		byObj[o.obj] = append(byObj[o.obj], o)
	}
	// A read-back read that failed is a violation: acknowledged data
	// must read back.
	inv := map[uint64]Record{}
	for _, r := range readback {
		switch r.Ev {
		case evInvoke:
			inv[r.Op] = r
		case evFail:
			i := inv[r.Op]
			failed[i.Obj] = fmt.Sprintf("%s %s: %s", i.Kind, i.Obj, r.Err)
		}
	}
	names := make([]string, 0, len(byObj))
	for n := range byObj {
		names = append(names, n)
	}
	sort.Strings(names)
	for n := range failed {
		if _, ok := byObj[n]; !ok {
			names = append(names, n)
		}
	}
	for _, n := range names {
		s := c.obj(n)
		if msg, ok := failed[n]; ok {
			c.Stats.Corrupt++
			c.Stats.Where["read-back"]++
			c.problem("cycle %d: read-back failed: %s", cycle, msg)
			continue
		}
		c.verifyObj(cycle, s, byObj[n])
	}
}

// reg is one register's history.
type reg struct {
	init uint64
	ops  []porcupine.Operation
}

type regIn struct {
	write bool
	v     uint64
}

func (r *reg) add(o *op, write bool, v uint64) {
	r.ops = append(r.ops, porcupine.Operation{ClientId: o.proc, Input: regIn{write, v}, Call: o.call, Output: v, Return: o.ret})
}

// check reports whether the history is linearizable. Writes that never
// returned may be linearized after every read, which is "never took
// effect". One whose value no read returned is dropped first: in any
// linearization it is followed by another write or by nothing, so
// without it the rest is as valid. Without this, every write that failed
// while a server was down would multiply the orders the checker tries.
func (r *reg) check() bool {
	seen := map[uint64]bool{}
	for _, o := range r.ops {
		if !o.Input.(regIn).write {
			seen[o.Output.(uint64)] = true
		}
	}
	ops := slices.DeleteFunc(slices.Clone(r.ops), func(o porcupine.Operation) bool {
		return o.Return == math.MaxInt64 && o.Input.(regIn).write && !seen[o.Input.(regIn).v]
	})
	init := r.init
	m := porcupine.Model{
		Init: func() any { return init },
		Step: func(state, in, out any) (bool, any) {
			i := in.(regIn)
			if i.write {
				return true, i.v
			}
			return out.(uint64) == state.(uint64), state
		},
	}
	return porcupine.CheckOperations(m, ops)
}

// verifyObj checks that what the cycle's operations on object s saw
// (s.pending) and what the read-back after it found (back) are
// linearizable from what the previous read-back found: its existence,
// each tag and each cell are a register each. It then takes the
// read-back as the state the next cycle starts from.
func (c *Checker) verifyObj(cycle int, s *objState, back []*op) {
	c.countOps(s.pending, back)
	v := &objCheck{c: c, cycle: cycle, s: s, hist: append(s.pending, back...), back: back, label: s.name}
	if s.props != nil {
		v.label = fmt.Sprintf("%s (partition %d, storage %d)", s.name, s.props.Partition, s.props.Storage)
	}
	v.existence()
	v.tags()
	if s.props == nil {
		// Never created as far as the logs tell (an unacknowledged
		// create that did not happen).
		s.pending = nil
		return
	}
	v.cells()
}

// countOps adds a cycle's operations on one object to the stats.
func (c *Checker) countOps(pending, back []*op) {
	for _, o := range pending {
		switch {
		case !o.update():
			c.Stats.Reads++
		case !o.acked:
			c.Stats.Unacked++
		case o.kind == kindWrite:
			c.Stats.AckedWrites++
		case o.kind == kindCreate:
			c.Stats.AckedCreates++
		case o.kind == kindPutTag:
			c.Stats.AckedTags++
		}
	}
	c.Stats.Reads += len(back)
}

// objCheck is the check of one object's history in one cycle.
type objCheck struct {
	c     *Checker
	cycle int
	s     *objState
	// hist is the cycle's operations, then the read-back's.
	hist, back []*op
	// label names the object in problems.
	label string
}

// existence checks the object's creates and opens as one register.
func (v *objCheck) existence() {
	c, s := v.c, v.s
	ex := reg{init: b2u(s.exists)}
	for _, o := range v.hist {
		switch o.kind {
		case kindCreate:
			ex.add(o, true, 1)
		case kindOpen:
			ex.add(o, false, b2u(o.found))
		}
	}
	if !c.checkReg(&ex) {
		c.Stats.Lost++
		c.Stats.Where["existence"]++
		c.problem("cycle %d: object %s: existence not linearizable:\n%s", v.cycle, v.label, describe(v.hist, func(o *op) bool { return o.kind == kindCreate || o.kind == kindOpen }))
	}
	for _, o := range v.back {
		if o.kind == kindOpen {
			s.exists = o.found
		}
	}
}

// tags checks each tag of the object as a register.
func (v *objCheck) tags() {
	c, s := v.c, v.s
	tags := map[string]*reg{}
	tagReg := func(t string) *reg {
		r := tags[t]
		if r == nil {
			r = &reg{init: s.tags[t]}
			tags[t] = r
		}
		return r
	}
	for _, o := range v.hist {
		switch o.kind {
		case kindPutTag:
			tagReg(o.tag).add(o, true, o.wid)
		case kindGetTag:
			tagReg(o.tag).add(o, false, o.wid)
		}
	}
	for _, t := range sortedKeys(tags) {
		if !c.checkReg(tags[t]) {
			c.Stats.Lost++
			c.Stats.Where["tag"]++
			c.problem("cycle %d: object %s: tag %s not linearizable:\n%s", v.cycle, v.label, t, describe(v.hist, func(o *op) bool { return o.tag == t }))
		}
	}
	for _, o := range v.back {
		if o.kind == kindGetTag {
			s.tags[o.tag] = o.wid
		}
	}
}

// touch is one operation on a cell: a write of val, or a read that saw
// val; op indexes the history.
type touch struct {
	op  int
	val uint64
}

// cells checks each cell of the object as a register, and takes the
// read-back's values as the cells' state.
func (v *objCheck) cells() {
	c, s := v.c, v.s
	n := region.Shape(s.props.Dims...).Volume()
	if s.cells == nil {
		s.cells = make([]uint64, n)
	}
	per, backVals := v.touches(n)
	v.checkCells(per, backVals)
	s.pending = nil
	switch {
	case backVals != nil:
		s.cells = backVals
	case s.exists:
		c.Stats.Corrupt++
		c.problem("cycle %d: object %s exists but was not read back whole", v.cycle, v.label)
	}
}

// where is the stats key of the object's cells.
func (v *objCheck) where() string {
	return fmt.Sprintf("partition %d storage %d", v.s.props.Partition, v.s.props.Storage)
}

// touches returns, per cell of the object's n, the operations on it and
// what each read saw there, and the read-back's value per cell if it read
// the object whole. A read of a value no write put in its cell is counted
// corrupt here.
func (v *objCheck) touches(n uint64) (per [][]touch, backVals []uint64) {
	c, dims := v.c, v.s.props.Dims
	per = make([][]touch, n)
	for i, o := range v.hist {
		switch o.kind {
		case kindWrite:
			forCells(dims, *o.box, func(cell uint64) { per[cell] = append(per[cell], touch{i, o.wid}) })
		case kindRead:
			if uint64(len(o.vals)) != o.box.Volume() {
				c.Stats.Corrupt++
				c.problem("cycle %d: object %s: %s returned %d values", v.cycle, v.label, o, len(o.vals))
				continue
			}
			k := 0
			whole := o.box.Volume() == n && slices.Contains(v.back, o)
			if whole {
				backVals = make([]uint64, n)
			}
			forCells(dims, *o.box, func(cell uint64) {
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
				if whole {
					backVals[cell] = wid
				}
			})
		}
	}
	return per, backVals
}

// checkCells checks each cell's touches as a register; cells with the
// same history are one check.
func (v *objCheck) checkCells(per [][]touch, backVals []uint64) {
	c, s, hist, where := v.c, v.s, v.hist, v.where()
	seen := map[string]bool{}
	var key strings.Builder
	for cell := range per {
		key.Reset()
		key.WriteString(strconv.FormatUint(s.cells[cell], 16))
		for _, t := range per[cell] {
			key.WriteByte(' ')
			key.WriteString(strconv.Itoa(t.op))
			if hist[t.op].kind == kindRead {
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
		r := reg{init: s.cells[cell]}
		for _, t := range per[cell] {
			o := hist[t.op]
			r.add(o, o.kind == kindWrite, t.val)
		}
		ok := c.checkReg(&r)
		seen[k] = ok
		if !ok {
			c.countCell(backVals, uint64(cell))
			c.Stats.Where[where]++
			c.problem("cycle %d: object %s cell %d (read back before as %#x) not linearizable:\n%s", v.cycle, v.label, cell, s.cells[cell], describeCell(hist, per[cell]))
		}
	}
}

// describeCell lists a cell's touches, with what each read saw.
func describeCell(hist []*op, ts []touch) string {
	var lines []string
	for _, t := range ts {
		o := hist[t.op]
		l := "  " + o.String()
		if o.kind == kindRead {
			l += fmt.Sprintf(" saw %#x", t.val)
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// countCell classifies a cell that is not linearizable by what the
// read-back saw there: zeros or an older value.
func (c *Checker) countCell(backVals []uint64, cell uint64) {
	if backVals != nil && backVals[cell] == 0 {
		c.Stats.Zeroed++
		return
	}
	c.Stats.Lost++
}

func (c *Checker) checkReg(r *reg) bool {
	c.Stats.Registers++
	return r.check()
}

func describe(hist []*op, keep func(*op) bool) string {
	var lines []string
	for _, o := range hist {
		if keep(o) {
			l := "  " + o.String()
			if o.kind == kindOpen {
				l += fmt.Sprintf(" found %v", o.found)
			}
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
