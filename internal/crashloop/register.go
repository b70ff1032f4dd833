package crashloop

import (
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// The registers the checker hands to porcupine, one per cell, tag, first
// dim or object name, and their sequential model.

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
	regMatch         // of a tag: a search saw its value match spec (in.v 1) or not (0)
	regAbsent        // of a tag: a read found no tag, or no object
)

type regIn struct {
	op    int
	acked bool
	v     uint64
	// spec and tag are a search's (regMatch).
	spec *SearchSpec
	tag  string
}

// seesValue reports whether a read in could have seen value v.
func (in regIn) seesValue(v uint64) bool {
	switch in.op {
	case regRead:
		return in.v == v
	case regAbsent:
		return v == 0
	case regMatch:
		return in.spec.match(in.tag, v) == (in.v == 1)
	}
	return false
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
	case regAbsent:
		return s.dead || s.v == 0, s
	case regMatch:
		// A deleted object's tags match nothing.
		return (!s.dead && in.spec.match(in.tag, s.v)) == (in.v == 1), s
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
	r.ops = append(r.ops, porcupine.Operation{ClientId: o.proc, Input: regIn{op: kind, acked: o.acked, v: v}, Call: o.call, Return: o.ret})
}

// addMatch adds search observation o (a read of whether the tag's value
// matched).
func (r *reg) addMatch(o *op) {
	in := regIn{op: regMatch, acked: true, v: b2u(o.found), spec: o.spec, tag: o.tag}
	r.ops = append(r.ops, porcupine.Operation{ClientId: o.proc, Input: in, Call: o.call, Return: o.ret})
}

// without is r without its operations of kind.
func (r *reg) without(kind int) *reg {
	n := *r
	n.ops = slices.DeleteFunc(slices.Clone(r.ops), func(o porcupine.Operation) bool { return o.Input.(regIn).op == kind })
	return &n
}

// checkTimeout bounds the check of one register; one not decided by
// then is counted (Stats.Undecided), not taken as a violation.
const checkTimeout = 10 * time.Second

// check reports whether the history is linearizable, or that it could
// not tell in time. Updates that never returned may be linearized after
// every read, which is "never took effect". Before the check:
//   - A write or create whose value no read returned (nor could have: a
//     search sees whether a value matched) and that was not
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
	var matches []regIn
	for _, o := range r.ops {
		switch in := o.Input.(regIn); in.op {
		case regRead:
			seen[in.v] = true
		case regAbsent:
			seen[0] = true
		case regMatch:
			matches = append(matches, in)
		}
	}
	// A search sees a value it could have matched, or not matched.
	for _, o := range r.ops {
		if in := o.Input.(regIn); (in.op == regWrite || in.op == regCreate) && !seen[in.v] {
			seen[in.v] = slices.ContainsFunc(matches, func(m regIn) bool { return m.seesValue(in.v) })
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
