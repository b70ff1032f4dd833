package tagindex

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pdcgo/pdc"
)

// Result is what a query has found so far: the ids of the matching
// objects (with repeats until the client sorts them), their names where a
// scan returned them, and the servers' QuerySaw* flags.
type Result struct {
	IDs     []uint64
	Names   map[uint64]string
	Flags   uint32
	Scanned bool // found by a scan (which has the names)
}

// Add adds one answer: ids, the names of the first len(names) of them, and
// the answer's flags.
func (r *Result) Add(ids []uint64, names []string, flags uint32) {
	r.IDs = append(r.IDs, ids...)
	r.Flags |= flags
	for i, n := range names {
		if i < len(ids) {
			if r.Names == nil {
				r.Names = map[uint64]string{}
			}
			r.Names[ids[i]] = n
		}
	}
}

// A part is one rank's result of a collective query, as the ranks of a
// parallel program exchange them: a status byte (0 ok, 1 failed, 2
// scanned), the flags, the count and the ids (8 bytes each, little
// endian), then the count of names (0, or one per id) and the names.

// AppendPart appends r as a part to b; failed says this rank's query
// failed (r is then not read), names that the names are wanted.
func AppendPart(b []byte, r *Result, failed, names bool) []byte {
	if failed {
		return append(b, 1)
	}
	st := byte(0)
	if r.Scanned {
		st = 2
	}
	b = append(b, st)
	b = protowire.AppendVarint(b, uint64(r.Flags))
	b = protowire.AppendVarint(b, uint64(len(r.IDs)))
	for _, id := range r.IDs {
		b = binary.LittleEndian.AppendUint64(b, id)
	}
	if !names || r.Names == nil {
		return protowire.AppendVarint(b, 0)
	}
	b = protowire.AppendVarint(b, uint64(len(r.IDs)))
	for _, id := range r.IDs {
		b = protowire.AppendString(b, r.Names[id])
	}
	return b
}

// MergeParts merges the parts of every rank; anyScan says some rank
// scanned. The merged result counts as scanned only if every rank did. A
// part of a rank that failed fails the merge with pdc.ErrUnavailable, a
// malformed one with pdc.ErrProtocol.
func MergeParts(parts [][]byte) (m *Result, anyScan bool, err error) {
	m = &Result{Scanned: true}
	bad := fmt.Errorf("malformed part: %w", pdc.ErrProtocol)
	varint := func(p *[]byte) (uint64, bool) {
		v, n := protowire.ConsumeVarint(*p)
		if n < 0 {
			return 0, false
		}
		*p = (*p)[n:]
		return v, true
	}
	for _, p := range parts {
		if len(p) == 0 {
			return nil, false, bad
		}
		switch p[0] {
		case 1:
			return nil, false, fmt.Errorf("another rank's query failed: %w", pdc.ErrUnavailable)
		case 2:
			anyScan = true
		default:
			m.Scanned = false
		}
		p = p[1:]
		flags, ok1 := varint(&p)
		count, ok2 := varint(&p)
		if !ok1 || !ok2 || count > uint64(len(p))/8 {
			return nil, false, bad
		}
		ids := make([]uint64, count)
		for i := range ids {
			ids[i] = binary.LittleEndian.Uint64(p[8*i:])
		}
		p = p[8*count:]
		nn, ok := varint(&p)
		if !ok || (nn != 0 && nn != count) {
			return nil, false, bad
		}
		var names []string
		for range nn {
			s, n := protowire.ConsumeBytes(p)
			if n < 0 {
				return nil, false, bad
			}
			names = append(names, string(s))
			p = p[n:]
		}
		m.Add(ids, names, uint32(flags))
	}
	return m, anyScan, nil
}
