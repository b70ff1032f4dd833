package postings

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
	"sync"
)

// run is a sorted run in memory: records in key order, one per key.
type run struct {
	data []byte   // records
	offs []uint32 // where each record starts, in key order
	age  uint64   // precedence: of two runs holding a key, the older has the lower age
	logs []uint64 // sequence numbers of the log records it holds
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func (r *run) key(i int) []byte {
	k, _, _, _, _ := readRec(r.data, int(r.offs[i]))
	return k
}

// seek returns the first record whose key is at least k.
func (r *run) seek(k []byte) int {
	if len(k) == 0 {
		return 0
	}
	lo, hi := 0, len(r.offs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(r.key(m), k) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// prefix8 is the first eight bytes of k, zero-padded, big-endian: it
// orders keys as bytes.Compare does wherever two prefixes differ, and a
// sort compares it first to keep most comparisons to one instruction.
func prefix8(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var p [8]byte
	copy(p[:], k)
	return binary.BigEndian.Uint64(p[:])
}

// ent is a record of a batch being sorted.
type ent struct {
	pfx        uint64
	off, end   uint32 // the record
	koff, kend uint32 // its key
}

// sortEnts sorts records of b by key, and records of one key in batch
// order. A radix sort on the eight-byte prefixes does most of it, stable,
// so records are still in batch order within a prefix; only runs of equal
// prefixes need comparing whole keys.
func sortEnts(ents []ent, b []byte) {
	tmp := getEnts(len(ents))
	sortEntsAt(ents, b, 0, (*tmp)[:len(ents)])
	putEnts(tmp)
}

// entPool holds the slices that sorts use and drop: a batch of tens of
// thousands of records allocated (and cleared) two of a megabyte each.
var entPool sync.Pool // of *[]ent

// maxPooledEnts bounds the slices kept for reuse.
const maxPooledEnts = 1 << 18

func getEnts(n int) *[]ent {
	if p, ok := entPool.Get().(*[]ent); ok && cap(*p) >= n {
		*p = (*p)[:0]
		return p
	}
	s := make([]ent, 0, max(n, 1024))
	return &s
}

func putEnts(p *[]ent) {
	if cap(*p) <= maxPooledEnts {
		entPool.Put(p)
	}
}

// sortEntsAt sorts ents, whose keys all share their first depth bytes and
// are all longer than depth, by the eight bytes at depth, then each run of
// equal ones: deeper the same way while it is big and its keys are long
// enough, else by comparing whole keys. Index keys share long prefixes
// (every K entry of one tag key starts alike), which would otherwise leave
// big runs to compare.
func sortEntsAt(ents []ent, b []byte, depth int, tmp []ent) {
	if len(ents) < 2 {
		return
	}
	keyOf := func(e *ent) []byte { return b[e.koff:e.kend] }
	if depth > 0 {
		for i := range ents {
			ents[i].pfx = prefix8(keyOf(&ents[i])[depth:])
		}
	}
	src, dst := ents, tmp[:len(ents)]
	var count [256]int
	for shift := 0; shift < 64; shift += 8 {
		clear(count[:])
		for i := range src {
			count[byte(src[i].pfx>>shift)]++
		}
		if count[byte(src[0].pfx>>shift)] == len(src) {
			continue // every record has this byte: nothing to move
		}
		pos := 0
		for i, c := range count {
			count[i] = pos
			pos += c
		}
		for i := range src {
			d := byte(src[i].pfx >> shift)
			dst[count[d]] = src[i]
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &ents[0] {
		copy(ents, src)
	}
	for i := 0; i < len(ents); {
		j := i + 1
		long := int(ents[i].kend-ents[i].koff) > depth+8
		for j < len(ents) && ents[j].pfx == ents[i].pfx {
			long = long && int(ents[j].kend-ents[j].koff) > depth+8
			j++
		}
		switch {
		case j-i >= 16 && long:
			sortEntsAt(ents[i:j], b, depth+8, tmp)
		case j-i > 1:
			slices.SortFunc(ents[i:j], func(x, y ent) int {
				if c := bytes.Compare(keyOf(&x), keyOf(&y)); c != 0 {
					return c
				}
				return cmp.Compare(x.off, y.off)
			})
		}
		i = j
	}
}

// buildRun sorts the changes of ops into a run; of several changes of one
// key the last wins.
func buildRun(ops *Ops) *run {
	pe := getEnts(ops.n)
	defer putEnts(pe)
	ents := *pe
	b := ops.b
	for off := 1; off < len(b); {
		k, _, _, next, ok := readRec(b, off)
		if !ok {
			break // ParseOps or Ops made it: cannot happen
		}
		koff := off + 1 + uvarintLen(uint64(len(k)))
		ents = append(ents, ent{pfx: prefix8(k), off: uint32(off), end: uint32(next), koff: uint32(koff), kend: uint32(koff + len(k))})
		off = next
	}
	keyOf := func(e *ent) []byte { return b[e.koff:e.kend] }
	sortEnts(ents, b)
	data, offs := make([]byte, 0, len(b)), make([]uint32, 0, len(ents))
	for i := range ents {
		// The last change of a key wins: skip one whose successor has
		// the same key.
		if i+1 < len(ents) && ents[i+1].pfx == ents[i].pfx && bytes.Equal(keyOf(&ents[i+1]), keyOf(&ents[i])) {
			continue
		}
		offs = append(offs, uint32(len(data)))
		data = append(data, b[ents[i].off:ents[i].end]...)
	}
	return &run{data: data, offs: offs}
}

// cursor walks one run, in memory or on disk, over [lo, hi).
type cursor interface {
	valid() bool
	// rec returns the current record, decoded and encoded; the slices
	// stay valid after next.
	rec() (k, v []byte, del bool, raw []byte)
	next() error
	age() uint64
}

type memCursor struct {
	r   *run
	i   int
	hi  []byte
	k   []byte
	v   []byte
	del bool
	raw []byte
}

func newMemCursor(r *run, lo, hi []byte) *memCursor {
	c := &memCursor{r: r, i: r.seek(lo) - 1, hi: hi}
	_ = c.next()
	return c
}

func (c *memCursor) valid() bool { return c.k != nil }
func (c *memCursor) age() uint64 { return c.r.age }
func (c *memCursor) rec() (k, v []byte, del bool, raw []byte) {
	return c.k, c.v, c.del, c.raw
}

func (c *memCursor) next() error {
	c.i++
	c.k = nil
	if c.i >= len(c.r.offs) {
		return nil
	}
	off := int(c.r.offs[c.i])
	k, v, del, end, ok := readRec(c.r.data, off)
	if !ok || (c.hi != nil && bytes.Compare(k, c.hi) >= 0) {
		return nil
	}
	c.k, c.v, c.del, c.raw = k, v, del, c.r.data[off:end]
	return nil
}

// merger yields the records of several cursors in key order, of each key
// only the newest. It keeps each cursor's key and age beside it, so that
// the heap compares without calling the cursors.
type merger struct {
	h []mergeEnt
}

type mergeEnt struct {
	c   cursor
	k   []byte
	age uint64
}

func (m *merger) less(i, j int) bool {
	if c := bytes.Compare(m.h[i].k, m.h[j].k); c != 0 {
		return c < 0
	}
	return m.h[i].age > m.h[j].age
}

func (m *merger) down(i int) {
	n := len(m.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && m.less(r, l) {
			j = r
		}
		if !m.less(j, i) {
			return
		}
		m.h[i], m.h[j] = m.h[j], m.h[i]
		i = j
	}
}

func newMerger(cs []cursor) *merger {
	m := &merger{h: make([]mergeEnt, 0, len(cs))}
	for _, c := range cs {
		if c.valid() {
			k, _, _, _ := c.rec()
			m.h = append(m.h, mergeEnt{c: c, k: k, age: c.age()})
		}
	}
	for i := len(m.h)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	return m
}

// each calls fn with the newest record of every key in order, tombstones
// included.
func (m *merger) each(fn func(k, v []byte, del bool, raw []byte) error) error {
	for len(m.h) > 0 {
		k, v, del, raw := m.h[0].c.rec()
		if err := fn(k, v, del, raw); err != nil {
			return err
		}
		// Step past k in every cursor that holds it.
		for len(m.h) > 0 && bytes.Equal(m.h[0].k, k) {
			e := &m.h[0]
			if err := e.c.next(); err != nil {
				return err
			}
			if e.c.valid() {
				e.k, _, _, _ = e.c.rec()
			} else {
				last := len(m.h) - 1
				m.h[0] = m.h[last]
				m.h = m.h[:last]
			}
			m.down(0)
		}
	}
	return nil
}

// mergeRuns merges runs in memory into one; without keepDeletes the
// tombstones are dropped (nothing older than the runs is left).
func mergeRuns(runs []*run, keepDeletes bool) *run {
	size, n := 0, 0
	out := &run{}
	cs := make([]cursor, 0, len(runs))
	for _, r := range runs {
		size += len(r.data)
		n += len(r.offs)
		out.age = max(out.age, r.age)
		out.logs = append(out.logs, r.logs...)
		cs = append(cs, newMemCursor(r, nil, nil))
	}
	// Appended to locals, not to out's fields: each store into the heap
	// is a write barrier while the GC marks.
	data, offs := make([]byte, 0, size), make([]uint32, 0, n)
	_ = newMerger(cs).each(func(_, _ []byte, del bool, raw []byte) error {
		if del && !keepDeletes {
			return nil
		}
		offs = append(offs, uint32(len(data)))
		data = append(data, raw...)
		return nil
	})
	out.data, out.offs = data, offs
	return out
}
