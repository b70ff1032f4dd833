// Search messages: kvtag queries and the DART index. The messages are
// generated from messages.wire; their constants and payloads are here.

package wire

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pdcgo/pdc"
)

// Flags of a TagQueryResult.
const (
	// QuerySawText: a tag whose key matched held text (a range query
	// over keys that hold only text is an error).
	QuerySawText = 1 << 0
	// QuerySawNumber: a tag whose key matched held a number.
	QuerySawNumber = 1 << 1
)

// IndexOpsPacked is the IndexOps version whose changes are Packed.
const IndexOpsPacked = 2

// IndexOpsChanges is the IndexOps version of an outbox record that holds
// tag changes (Changes) instead of index changes.
const IndexOpsChanges = 3

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
