package crashloop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

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
	id    uint64   // the object's incarnation (Record.ID)
	dims  []uint64 // set dims: set; open: seen
	found bool     // open
	vals  []uint64 // read
}

func (o *op) update() bool {
	switch o.kind {
	case kindCreate, kindWrite, kindPutTag, kindDelete, kindSetDims, kindDelTag:
		return true
	}
	return false
}

func (o *op) String() string {
	s := fmt.Sprintf("p%d#%d %s", o.proc, o.n, o.kind)
	if o.box != nil {
		s += fmt.Sprintf(" %v", *o.box)
	}
	if o.tag != "" {
		s += " tag " + o.tag
	}
	if o.id != 0 {
		s += fmt.Sprintf(" id %#x", o.id)
	}
	if o.dims != nil {
		s += fmt.Sprintf(" dims %v", o.dims)
	}
	if o.kind == kindWrite || o.kind == kindPutTag || o.kind == kindGetTag {
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

// objState is what the checker knows of one object name: the values its
// registers were last read back as, and the operations since. Cells,
// tags and dims belong to an incarnation of the name (its id): a create
// after a delete starts another, with no tags, its first dims and every
// cell zero, and no operation through a handle to the old one may touch
// the new one.
type objState struct {
	name   string
	props  *ObjProps // nil until a create was logged
	exists bool      // pinned by the last read-back
	id     uint64    // the incarnation read back, if it exists (0: not known)
	rows   uint64    // its first dim as read back
	// cells are its cells as read back, over spanDims (rows past its
	// dims are out); nil before the first read-back.
	cells   []state
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
	AckedDeletes int // object deletes
	AckedDims    int // set dims
	AckedTagDels int // tag deletes
	Unacked      int // updates whose client was killed or that failed: allowed either way
	Reads        int // reads checked (clients' and the read-backs')
	Registers    int // cell, existence and tag histories checked
	Undecided    int // of those, histories the checker gave up on (checkTimeout)
	Lost         int // registers read back older than an acknowledged value
	Zeroed       int // cells read back as zeros after an acknowledged write
	Corrupt      int // cells holding a value no write put there, or read errors
	// Where the violations were: "partition P storage S", "tag",
	// "existence", "read-back".
	Where map[string]int
}

// Acked is the number of acknowledged operations checked.
func (s Stats) Acked() int {
	return s.AckedWrites + s.AckedCreates + s.AckedTags + s.AckedDeletes + s.AckedDims + s.AckedTagDels
}

// Violations is the number of violations found.
func (s Stats) Violations() int { return s.Lost + s.Zeroed + s.Corrupt }

// Checker checks the history, one cycle at a time. Not safe for concurrent
// use.
type Checker struct {
	// strict is RegrowReadsZeros when the checker was made.
	strict   bool
	objs     map[string]*objState
	Stats    Stats
	Problems []string // the first violations, described
}

// maxProblems bounds the violations described.
const maxProblems = 20

func newChecker() *Checker {
	return &Checker{strict: RegrowReadsZeros, objs: map[string]*objState{}, Stats: Stats{Where: map[string]int{}}}
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
			o := &op{proc: r.Proc, n: r.Op, kind: r.Kind, obj: r.Obj, box: r.Box, tag: r.Tag, call: r.T, ret: math.MaxInt64,
				wid: r.WID, id: r.ID, dims: r.Dims}
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
		case kindCreate:
			o.id = r.ID
		case kindOpen:
			o.found, o.id, o.dims = r.Found, r.ID, r.Dims
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

// state is a register's value: a cell's write id, a tag's, an object's
// first dim, or which incarnation of an object name exists.
type state struct {
	v    uint64
	out  bool // a cell past the dims: cut by a shrink (v is 0), not writable
	dead bool // its object was deleted: no operation through it succeeds
	// ghost, unless the cut is strict (RegrowReadsZeros), is what a cell
	// held before a shrink cut it: until it is written again, a read after
	// a regrow may see it instead of zeros. anyGhost: any value of an
	// earlier write of the cell.
	ghost uint64
}

// anyGhost is the ghost of a cell past the dims when it was read back:
// what it held then is not known.
const anyGhost = math.MaxUint64

// Operations on a register.
const (
	regWrite  = iota // v := in.v (a write, tag put or delete, set dims)
	regRead          // saw in.v
	regCut           // set dims: in.v is 1 if the cell is past them (it is zeroed), 0 if not
	regKill          // the object is deleted
	regCreate        // of an object name: in.v exists, if nothing does
	regDelete        // of an object name: in.v no longer exists, if it did
)

type regIn struct {
	op    int
	acked bool
	v     uint64
}

// step is a register's model. An acknowledged write, cut or create must
// have been allowed when it took effect; one not acknowledged that was
// not allowed did nothing.
func step(s state, in regIn) (bool, state) {
	switch in.op {
	case regWrite:
		switch {
		case s.dead:
			return !in.acked, s
		case s.out:
			// A client whose dims are older than a shrink may still
			// write past it: a data server refuses only dims older
			// than a transfer brought it (docs/design/0006, "Dims
			// versions"). What it wrote there is as cut.
			if s.ghost != anyGhost && in.v != 0 {
				s.ghost = in.v
			}
			return true, s
		}
		s.v, s.ghost = in.v, 0
	case regRead:
		ghost := s.v == 0 && s.ghost != 0 && (s.ghost == in.v || (s.ghost == anyGhost && in.v < anyGhost))
		return !s.dead && (s.v == in.v || ghost), s
	case regCut:
		if s.dead {
			return !in.acked, s
		}
		if in.v == 1 {
			if s.v != 0 && s.ghost != anyGhost {
				s.ghost = s.v
			}
			s.v, s.out = 0, true
		} else {
			s.out = false
		}
	case regKill:
		s.v, s.dead = 0, true
	case regCreate:
		if s.v != 0 {
			return !in.acked, s
		}
		s.v = in.v
	case regDelete:
		if s.v != in.v {
			return !in.acked, s
		}
		s.v = 0
	}
	return true, s
}

// reg is one register's history.
type reg struct {
	init state
	ops  []porcupine.Operation
	// strict is RegrowReadsZeros: a cut leaves no ghost.
	strict bool
}

func (r *reg) add(o *op, kind int, v uint64) {
	r.ops = append(r.ops, porcupine.Operation{ClientId: o.proc, Input: regIn{kind, o.acked, v}, Call: o.call, Return: o.ret})
}

// checkTimeout bounds the check of one register; one not decided by
// then is counted (Stats.Undecided), not taken as a violation.
const checkTimeout = 10 * time.Second

// check reports whether the history is linearizable, or that it could
// not tell in time. Updates that never returned may be linearized after
// every read, which is "never took effect". Before the check:
//   - A write or create whose value no read returned and that was not
//     acknowledged is dropped: in any linearization it is followed by
//     another write, a cut, a delete or by nothing, so without it the
//     rest is as valid. Without this, every write that failed while a
//     server was down would multiply the orders the checker tries.
//   - Of the unacknowledged deletes of one incarnation (a worker tries
//     again while its server is down) only the first is kept: each may
//     take effect anywhere after its call while the incarnation lives,
//     and the first can wherever a later one can.
func (r *reg) check() porcupine.CheckResult {
	seen := map[uint64]bool{}
	for _, o := range r.ops {
		if in := o.Input.(regIn); in.op == regRead {
			seen[in.v] = true
		}
	}
	first := map[regIn]int64{}
	for _, o := range r.ops {
		in := o.Input.(regIn)
		if o.Return == math.MaxInt64 && (in.op == regKill || in.op == regDelete) {
			if t, ok := first[in]; !ok || o.Call < t {
				first[in] = o.Call
			}
		}
	}
	ops := slices.DeleteFunc(slices.Clone(r.ops), func(o porcupine.Operation) bool {
		in := o.Input.(regIn)
		if o.Return != math.MaxInt64 {
			return false
		}
		switch in.op {
		case regWrite, regCreate:
			return !seen[in.v]
		case regKill, regDelete:
			return o.Call != first[in]
		}
		return false
	})
	init := r.init
	m := porcupine.Model{
		Init: func() any { return init },
		Step: func(st, in, _ any) (bool, any) {
			ok, next := step(st.(state), in.(regIn))
			if r.strict {
				next.ghost = 0
			}
			return ok, next
		},
	}
	return porcupine.CheckOperationsTimeout(m, ops, checkTimeout)
}

// RegrowReadsZeros is whether the rows a shrink of the first dim cut read
// as zeros once the dims grow back, whatever came between. They do: a
// shrink is pushed to the data servers before its set dims answers, and a
// later set dims of the object is refused until every data server has it
// (docs/design/0006-region-io.md, "Dims versions"). Before, a data server
// learned dims only from the transfers it served, so a shrink and a
// regrow with no transfer of the object between them left the cut rows'
// old values in place (set dims 27, write every row, set dims 8 then 26:
// rows 8-25 read their old values), and the checker let a cell cut by a
// shrink read, after a regrow and before it was written again, either
// zeros or what it held before the cut. Set it to false to check a build
// from before.
var RegrowReadsZeros = true

// placeholder is the value of an object name's register for an
// incarnation whose create was not acknowledged (its id is not known
// until something opens it).
const placeholder = math.MaxUint64

// verifyObj checks that what the cycle's operations on object name s saw
// (s.pending) and what the read-back after it found (back) are
// linearizable from what the previous read-back found: which incarnation
// of the name exists, and of each incarnation operated on, each tag, the
// first dim and each cell are a register each. It then takes the
// read-back as the state the next cycle starts from.
func (c *Checker) verifyObj(cycle int, s *objState, back []*op) {
	c.countOps(s.pending, back)
	v := &objCheck{c: c, cycle: cycle, s: s, hist: append(s.pending, back...), back: back, label: s.name}
	if s.props != nil {
		v.label = fmt.Sprintf("%s (partition %d, storage %d)", s.name, s.props.Partition, s.props.Storage)
	}
	v.existence()
	if s.props == nil {
		// Never created as far as the logs tell (an unacknowledged
		// create that did not happen).
		s.pending = nil
		v.pin()
		return
	}
	for _, id := range v.incarnations() {
		in := v.incarnation(id)
		v.tags(in)
		v.dims(in)
		v.cells(in)
	}
	s.pending = nil
	v.pin()
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
		case o.kind == kindDelete:
			c.Stats.AckedDeletes++
		case o.kind == kindSetDims:
			c.Stats.AckedDims++
		case o.kind == kindDelTag:
			c.Stats.AckedTagDels++
		}
	}
	c.Stats.Reads += len(back)
}

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
	rows  uint64
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
		in.rows, in.cells, in.tags = s.rows, s.cells, s.tags
		return in
	}
	in.rows, in.cells, in.tags = s.props.Dims[0], freshCells(s.props), map[string]uint64{}
	return in
}

// freshCells are the cells of a new incarnation: zeros, those past its
// dims out.
func freshCells(props *ObjProps) []state {
	span := spanDims(props)
	cells := make([]state, region.Shape(span...).Volume())
	stride := uint64(len(cells)) / span[0]
	for i := props.Dims[0] * stride; i < uint64(len(cells)); i++ {
		cells[i].out = true
	}
	return cells
}

// pin takes the read-back as the state the next cycle starts from.
func (v *objCheck) pin() {
	s := v.s
	var open, read *op
	for _, o := range v.back {
		switch o.kind {
		case kindOpen:
			open = o
		case kindRead:
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
	s.rows = s.props.Dims[0]
	if len(open.dims) > 0 {
		s.rows = open.dims[0]
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
	stride := n / span[0]
	if read.box.Off[0] != 0 || read.box.Volume() != read.box.Size[0]*stride {
		return nil
	}
	cells := make([]state, n)
	k := 0
	forCells(span, *read.box, func(cell uint64) {
		wid, _ := decodeCell(read.vals[k], cell)
		cells[cell].v = wid
		k++
	})
	for i := read.box.Size[0] * stride; i < n; i++ {
		cells[i].out = true
		if !v.c.strict {
			cells[i].ghost = anyGhost
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
			tagReg(o.tag).add(o, regRead, o.wid)
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
			c.Stats.Lost++
			c.Stats.Where["tag"]++
			c.problem("cycle %d: object %s id %#x: tag %s not linearizable:\n%s", v.cycle, v.label, in.id, t,
				describe(v.hist, func(o *op) bool { return o.id == in.id && (o.tag == t || o.kind == kindDelete) }))
		}
	}
}

// dims checks the first dim of incarnation in as a register: set by set
// dims, read by opens.
func (v *objCheck) dims(in *inc) {
	c := v.c
	r := reg{init: state{v: in.rows}}
	reads := 0
	for _, i := range in.ops {
		o := v.hist[i]
		switch {
		case o.kind == kindSetDims && len(o.dims) > 0:
			r.add(o, regWrite, o.dims[0])
		case o.kind == kindOpen && len(o.dims) > 0:
			r.add(o, regRead, o.dims[0])
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
		c.problem("cycle %d: object %s id %#x: dims not linearizable (from %d rows):\n%s", v.cycle, v.label, in.id, in.rows,
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
	stride := n / span[0]
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
			cut := uint64(0)
			if o.kind == kindSetDims && len(o.dims) > 0 {
				cut = o.dims[0] * stride
			}
			for cell := range per {
				per[cell] = append(per[cell], touch{i, b2u(uint64(cell) >= cut)})
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

// countCell classifies a cell that is not linearizable by what the
// read-back saw there: zeros or an older value.
func (c *Checker) countCell(backVals []uint64, cell uint64) {
	if backVals != nil && backVals[cell] == 0 {
		c.Stats.Zeroed++
		return
	}
	c.Stats.Lost++
}

// checkReg checks r; a register not decided in time passes, counted.
func (c *Checker) checkReg(r *reg) bool {
	c.Stats.Registers++
	switch r.check() {
	case porcupine.Illegal:
		return false
	case porcupine.Unknown:
		c.Stats.Undecided++
	}
	return true
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
