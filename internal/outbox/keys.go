package outbox

import (
	"encoding/binary"

	"github.com/pdcgo/pdc/internal/postings"
)

// The outbox's keys in the server's store (one prefix byte each; see the
// metaserver's key layout).
const (
	// RecordPrefix starts a record's key, RecordKey.
	RecordPrefix = 'Q'
	// MarkPrefix starts a mark's key, MarkKey.
	MarkPrefix = 'q'
)

// RecordKey is the key of the outbox record of sequence seq, for object
// obj (0 for a record of one commit, of several objects): the object id
// lets a record follow its object to a new owner.
func RecordKey(seq, obj uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{RecordPrefix}, seq), obj)
}

// MarkKey marks that destination dest applied its whole part of outbox
// record seq; the value is the metadata server count that dest is an
// index among (MarkValue).
func MarkKey(seq uint64, dest int) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64([]byte{MarkPrefix}, seq), uint32(dest))
}

// MarkValue is the value of a mark made among count servers.
func MarkValue(count int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(count)) }

// MaxMarkCount bounds the server count a mark may name (tagindex.For
// builds a table of that size).
const MaxMarkCount = 1 << 16

// DecodeMark reads a mark (MarkKey and its value); ok is false for one
// no build wrote.
func DecodeMark(k, v []byte) (seq uint64, dest, count int, ok bool) {
	if len(k) != 13 || k[0] != MarkPrefix || len(v) != 4 {
		return 0, 0, 0, false
	}
	seq, dest, count = binary.BigEndian.Uint64(k[1:9]), int(binary.BigEndian.Uint32(k[9:])), int(binary.BigEndian.Uint32(v))
	return seq, dest, count, count >= 1 && count <= MaxMarkCount && dest < count
}

// Chunks divides ops into pieces of about max bytes or less (a piece holds
// at least one record); ops itself if it is small enough, none if empty.
func Chunks(ops *postings.Ops, max int) []postings.Ops {
	switch {
	case ops.Len() == 0:
		return nil
	case len(ops.Bytes()) <= max:
		return []postings.Ops{*ops}
	}
	var out []postings.Ops
	var cur postings.Ops
	_ = ops.Each(func(_, _ []byte, _ bool, rec []byte) error {
		if cur.Len() > 0 && len(cur.Bytes())+len(rec) > max {
			out = append(out, cur)
			cur = postings.Ops{}
		}
		cur.AppendRecord(rec)
		return nil
	})
	return append(out, cur)
}
