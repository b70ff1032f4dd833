// Staged files' records (docs/design/0008): the messages are generated
// from messages.wire.

package wire

// StageVersion is the version of the staging requests (StageBatch,
// StageKey, StageListReq, StageRemoveReq) this build speaks: 2 added
// namespaces, 3 small files carried in their records (StageFormatInline),
// 4 the produce a removal of a path removes (StageRemoveReq.Record), 5
// the produces a removal of a prefix removes (StageRemoveReq.Produces): a
// server before either would remove any record of the path (or under the
// prefix), a later produce included, and refuses the version instead.
// A request of version 0 comes from a client before namespaces and is
// served in the default namespace; a server serves the versions from
// StageVersionNamespaces to its own, and refuses any other with
// pdc.ErrVersion. Answers to older clients may carry the fields they do
// not know (a record's Format and Data): they skip them, and fetch.
const StageVersion = 5

// StageVersionNamespaces is the first StageVersion with namespaces.
const StageVersionNamespaces = 2

// StageFormatInline is the first StageRecord Format (the StageVersion of
// the producer) whose Data may carry the file. Records written before
// have no Format (0): they describe the file only, and a consume fetches
// it from its owner.
const StageFormatInline = 3

// StageInlineMax bounds Data: the largest file a record may carry. A
// producer inlines files up to its own limit (at most this); a metadata
// server refuses more.
const StageInlineMax = 64 << 10

// Inline reports whether the record carries the whole file in Data. A
// record of format StageFormatInline whose Data is shorter than Size
// (empty) describes a file too large to carry.
func (m *StageRecord) Inline() bool {
	return m.Format >= StageFormatInline && uint64(len(m.Data)) == m.Size
}

// StageProduces names the produces of records (StageRemoveReq.Produces):
// a removal of what a listing answered.
func StageProduces(records []StageRecord) []StageProduce {
	out := make([]StageProduce, len(records))
	for i := range records {
		r := &records[i]
		out[i] = StageProduce{Path: r.Path, Record: r.Version, Produced: r.Produced}
	}
	return out
}
