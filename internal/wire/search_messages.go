// Search messages: kvtag queries and the DART index. Field numbers are the
// protocol: never renumber or reuse them.

package wire

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pdcgo/pdc"
)

// TagQuery asks one metadata server one step of a kvtag query (see
// tagindex.Step): Step 0 scans its tags; the others use its part of the
// index.
type TagQuery struct {
	Query string   // 1: the query text (tagindex.Parse)
	Step  uint32   // 2: tagindex.Step
	Terms []string // 3: keys for the by-key step
	Names bool     // 4: scan: return the objects' names too
	// NoSuffix: the client planned without suffix trees. A server whose
	// layout differs for the step answers Unsupported rather than
	// looking in the wrong place.
	NoSuffix bool // 5
}

func (m *TagQuery) Marshal(b []byte) []byte {
	b = putString(b, 1, m.Query)
	b = putUint(b, 2, uint64(m.Step))
	b = putStrings(b, 3, m.Terms)
	b = putBool(b, 4, m.Names)
	b = putBool(b, 5, m.NoSuffix)
	return b
}

func (m *TagQuery) Unmarshal(b []byte) error {
	*m = TagQuery{}
	f := fields{b: b, msg: "TagQuery"}
	for f.next() {
		switch f.num {
		case 1:
			m.Query = f.string()
		case 2:
			m.Step = f.uint32()
		case 3:
			m.Terms = append(m.Terms, f.string())
		case 4:
			m.Names = f.bool()
		case 5:
			m.NoSuffix = f.bool()
		}
	}
	return f.err
}

// Flags of a TagQueryResult.
const (
	// QuerySawText: a tag whose key matched held text (a range query
	// over keys that hold only text is an error).
	QuerySawText = 1 << 0
	// QuerySawNumber: a tag whose key matched held a number.
	QuerySawNumber = 1 << 1
)

// TagQueryResult answers a TagQuery. Its lists travel in the payload,
// which a large result would make too long for a header: Count object ids
// (8 bytes each, little-endian, ascending), then Strings strings (each a
// uvarint length and the bytes): the objects' names for a scan that asked
// for them, or the keys of the keys step.
type TagQueryResult struct {
	Count       uint64 // 1: ids in the payload
	Strings     uint64 // 2: strings after them
	Flags       uint32 // 3: QuerySaw*
	Unsupported bool   // 4: this server keeps no index for the step (fall back to a scan)
}

func (m *TagQueryResult) Marshal(b []byte) []byte {
	b = putUint(b, 1, m.Count)
	b = putUint(b, 2, m.Strings)
	b = putUint(b, 3, uint64(m.Flags))
	b = putBool(b, 4, m.Unsupported)
	return b
}

func (m *TagQueryResult) Unmarshal(b []byte) error {
	*m = TagQueryResult{}
	f := fields{b: b, msg: "TagQueryResult"}
	for f.next() {
		switch f.num {
		case 1:
			m.Count = f.uint64()
		case 2:
			m.Strings = f.uint64()
		case 3:
			m.Flags = f.uint32()
		case 4:
			m.Unsupported = f.bool()
		}
	}
	return f.err
}

// IndexOp sets or deletes one index entry (tagindex.Op).
type IndexOp struct {
	Key   []byte // 1
	Value []byte // 2: starts with the entry format version
	Del   bool   // 3
}

func (m *IndexOp) Marshal(b []byte) []byte {
	b = putBytes(b, 1, m.Key)
	b = putBytes(b, 2, m.Value)
	b = putBool(b, 3, m.Del)
	return b
}

func (m *IndexOp) Unmarshal(b []byte) error {
	*m = IndexOp{}
	f := fields{b: b, msg: "IndexOp"}
	for f.next() {
		switch f.num {
		case 1:
			m.Key = f.bytes()
		case 2:
			m.Value = f.bytes()
		case 3:
			m.Del = f.bool()
		}
	}
	return f.err
}

// IndexOps is a batch of index changes, applied in order and atomically by
// the server that holds their entries; also the record of an index update
// waiting in a metadata server's outbox.
type IndexOps struct {
	// Version 1 (tagindex.EntryVersion): the changes are Ops. Version 2
	// (IndexOpsPacked): they are Packed.
	Version uint32    // 1
	Ops     []IndexOp // 2
	Object  uint64    // 3: outbox records of version 1: the object whose tag they index
	// Packed holds the changes encoded as postings.Ops (one buffer, no
	// message per change). Unlike other bytes fields it aliases the
	// buffer Unmarshal decodes, which is the size of the payload: the
	// receiver copies what it keeps.
	Packed []byte // 4

	// Version 3 (IndexOpsChanges), outbox records only: the tag changes
	// themselves, a fifth of their entries' bytes. Their entries are
	// built again when the record is loaded: in suffix-tree mode if
	// Suffix, split among Count metadata servers (0: not split), without
	// those of server Self, which applied them with the changes.
	Changes []TagChange // 5
	Suffix  bool        // 6
	Count   uint32      // 7
	Self    uint32      // 8
}

// IndexOpsPacked is the IndexOps version whose changes are Packed.
const IndexOpsPacked = 2

// IndexOpsChanges is the IndexOps version of an outbox record that holds
// tag changes (Changes) instead of index changes.
const IndexOpsChanges = 3

// TagChange is one change of an object's tag: Old and New are nil for
// none. With Dict, the dictionary entries of Key go with it.
type TagChange struct {
	ID       uint64    // 1
	Key      string    // 2
	Old, New *TagValue // 3, 4
	Dict     bool      // 5
}

func (m *TagChange) Marshal(b []byte) []byte {
	b = putUint(b, 1, m.ID)
	b = putString(b, 2, m.Key)
	if m.Old != nil {
		b = putMsg(b, 3, m.Old)
	}
	if m.New != nil {
		b = putMsg(b, 4, m.New)
	}
	b = putBool(b, 5, m.Dict)
	return b
}

func (m *TagChange) Unmarshal(b []byte) error {
	*m = TagChange{}
	f := fields{b: b, msg: "TagChange"}
	for f.next() {
		switch f.num {
		case 1:
			m.ID = f.uint64()
		case 2:
			m.Key = f.string()
		case 3:
			m.Old = &TagValue{}
			f.sub(m.Old)
		case 4:
			m.New = &TagValue{}
			f.sub(m.New)
		case 5:
			m.Dict = f.bool()
		}
	}
	return f.err
}

func (m *IndexOps) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Version))
	for i := range m.Ops {
		b = putMsg(b, 2, &m.Ops[i])
	}
	b = putUint(b, 3, m.Object)
	b = putBytes(b, 4, m.Packed)
	for i := range m.Changes {
		b = putMsg(b, 5, &m.Changes[i])
	}
	b = putBool(b, 6, m.Suffix)
	b = putUint(b, 7, uint64(m.Count))
	b = putUint(b, 8, uint64(m.Self))
	return b
}

func (m *IndexOps) Unmarshal(b []byte) error {
	*m = IndexOps{}
	f := fields{b: b, msg: "IndexOps"}
	if n := f.count(2); n > 0 {
		m.Ops = make([]IndexOp, 0, n)
	}
	if n := f.count(5); n > 0 {
		m.Changes = make([]TagChange, 0, n)
	}
	for f.next() {
		switch f.num {
		case 1:
			m.Version = f.uint32()
		case 2:
			var x IndexOp
			f.sub(&x)
			m.Ops = append(m.Ops, x)
		case 3:
			m.Object = f.uint64()
		case 4:
			m.Packed = f.alias()
		case 5:
			var x TagChange
			f.sub(&x)
			m.Changes = append(m.Changes, x)
		case 6:
			m.Suffix = f.bool()
		case 7:
			m.Count = f.uint32()
		case 8:
			m.Self = f.uint32()
		}
	}
	return f.err
}

// putStrings appends a repeated string field, each element (empty ones
// too) as one field.
func putStrings(b []byte, n protowire.Number, ss []string) []byte {
	for _, s := range ss {
		b = protowire.AppendTag(b, n, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	return b
}

// AppendQueryPayload appends the payload of a TagQueryResult: ids, then
// strs.
func AppendQueryPayload(b []byte, ids []uint64, strs []string) []byte {
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint64(b, id)
	}
	for _, s := range strs {
		b = protowire.AppendString(b, s)
	}
	return b
}

// ParseQueryPayload reads the payload of r. Counts are checked against the
// payload's length before anything is allocated.
func ParseQueryPayload(r *TagQueryResult, p []byte) (ids []uint64, strs []string, err error) {
	if r.Count > uint64(len(p))/8 || r.Strings > uint64(len(p)) {
		return nil, nil, fmt.Errorf("query result: %d ids and %d strings in %d bytes: %w", r.Count, r.Strings, len(p), pdc.ErrProtocol)
	}
	ids = make([]uint64, r.Count)
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(p[8*i:])
	}
	p = p[8*r.Count:]
	if r.Strings > 0 {
		strs = make([]string, 0, r.Strings)
	}
	for range r.Strings {
		s, n := protowire.ConsumeBytes(p)
		if n < 0 {
			return nil, nil, fmt.Errorf("query result: string %d: %v: %w", len(strs), protowire.ParseError(n), pdc.ErrProtocol)
		}
		// One encoding per payload: a length in more bytes than it needs
		// (80 00 for 0) is refused, as no encoder of ours writes it.
		if n != protowire.SizeBytes(len(s)) {
			return nil, nil, fmt.Errorf("query result: string %d: length in %d bytes, not %d: %w", len(strs), n-len(s), protowire.SizeVarint(uint64(len(s))), pdc.ErrProtocol)
		}
		strs = append(strs, string(s))
		p = p[n:]
	}
	if len(p) != 0 {
		return nil, nil, fmt.Errorf("query result: %d bytes after its lists: %w", len(p), pdc.ErrProtocol)
	}
	return ids, strs, nil
}
