package crashloop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
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
	id    uint64   // the object's incarnation (Record.ID)
	dims  []uint64 // set dims: set; open: seen
	found bool     // open; a search's observation of one incarnation's tag
	vals  []uint64 // read
	// spec is the search (search), hits the ids it found; an
	// observation (searchcheck.go) has spec, tag, id and found.
	spec  *SearchSpec
	hits  []uint64
	names []string
	// listed is what a list found; listing marks an open that is a
	// list's observation of one object.
	listed  []Listed
	listing bool
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
	if o.listing {
		s = fmt.Sprintf("p%d#%d list (an open)", o.proc, o.n)
	}
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
	if o.kind == kindSearch {
		s += " " + o.spec.String()
		if o.obj != "" {
			s += fmt.Sprintf(" found it: %v", o.found)
		} else {
			s += fmt.Sprintf(" hits %#x", o.hits)
		}
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
	dims   []uint64  // its dims as read back
	// cells are its cells as read back, over spanDims (those outside its
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
	Searches     int // tag searches checked (clients' and the read-backs')
	Lists        int // container listings checked (clients' and the read-backs')
	Registers    int // cell, existence and tag histories checked
	Undecided    int // of those, histories the checker gave up on (checkTimeout)
	Lost         int // registers read back older than an acknowledged value
	Zeroed       int // cells read back as zeros after an acknowledged write
	Corrupt      int // cells holding a value no write put there, or read errors
	// Where the violations were: "partition P storage S", "tag",
	// "search", "list", "existence", "read-back".
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
	strict bool
	objs   map[string]*objState
	// ids names the object of every incarnation id the logs named.
	ids      map[uint64]string
	Stats    Stats
	Problems []string // the first violations, described
}

// maxProblems bounds the violations described.
const maxProblems = 20

func newChecker() *Checker {
	return &Checker{strict: RegrowReadsZeros, objs: map[string]*objState{}, ids: map[uint64]string{}, Stats: Stats{Where: map[string]int{}}}
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
				wid: r.WID, id: r.ID, dims: r.Dims, spec: r.Search}
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
		case kindSearch:
			o.hits, o.names = r.Hits, r.Names
		case kindList:
			o.listed = r.Listed
		}
	}
	return slices.DeleteFunc(out, func(o *op) bool { return !o.update() && !o.acked })
}

// Add takes the logs of one cycle's clients.
func (c *Checker) Add(cycle int, logs [][]Record, props map[string]*ObjProps) {
	var searches []*op
	for _, recs := range logs {
		for _, o := range ops(recs) {
			if o.kind == kindSearch || o.kind == kindList {
				searches = append(searches, o)
				continue
			}
			if o.id != 0 {
				c.ids[o.id] = o.obj
			}
			s := c.obj(o.obj)
			if p := props[o.obj]; p != nil && s.props == nil {
				s.props = p
			}
			s.pending = append(s.pending, o)
			s.touched = cycle
		}
	}
	// The searches, once every operation they may have seen is known.
	live := map[string][]*op{}
	for n, s := range c.objs {
		if len(s.pending) > 0 {
			live[n] = s.pending
		}
	}
	scope := c.liveScope(live)
	add := func(name string, obs *op) {
		s := c.objs[name]
		s.pending = append(s.pending, obs)
	}
	for _, o := range searches {
		if o.kind == kindList {
			c.checkList(cycle, o, scope, add)
			continue
		}
		c.checkSearch(cycle, o, scope, add)
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
	var searches []*op
	for _, o := range ops(readback) {
		if o.kind == kindSearch || o.kind == kindList {
			searches = append(searches, o)
			continue
		}
		if o.id != 0 {
			c.ids[o.id] = o.obj
		}
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
			if i.Kind == kindSearch || i.Kind == kindList {
				c.Stats.Corrupt++
				c.Stats.Where["read-back"]++
				c.problem("cycle %d: read-back %s %v failed: %s", cycle, i.Kind, i.Search, r.Err)
				continue
			}
			failed[i.Obj] = fmt.Sprintf("%s %s: %s", i.Kind, i.Obj, r.Err)
		}
	}
	// The read-back's searches, against what was read back and what the
	// cycle did.
	live := map[string][]*op{}
	for n, back := range byObj {
		if _, ok := failed[n]; !ok {
			live[n] = append(slices.Clone(c.obj(n).pending), back...)
		}
	}
	scope := c.liveScope(live)
	add := func(name string, obs *op) { byObj[name] = append(byObj[name], obs) }
	for _, o := range searches {
		if o.kind == kindList {
			c.checkList(cycle, o, scope, add)
			continue
		}
		c.checkSearch(cycle, o, scope, add)
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
		case o.kind == kindSearch || o.listing: // counted as a whole (Searches, Lists)
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
	for _, o := range back {
		if o.kind != kindSearch && !o.listing {
			c.Stats.Reads++
		}
	}
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
