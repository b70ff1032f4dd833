package wire

import "google.golang.org/protobuf/encoding/protowire"

// Messages of deleted objects and the data scrub (docs/design/0016).

// IDList is a list of object ids: the objects a metadata server is asked
// about (MethodObjGone) and the ones it answers are gone, or the objects
// a data server must forget (MethodDataGone).
type IDList struct {
	IDs []uint64 // 1
}

func (m *IDList) Marshal(b []byte) []byte { return putPackedUints(b, 1, m.IDs) }

func (m *IDList) Unmarshal(b []byte) error {
	*m = IDList{}
	f := fields{b: b, msg: "IDList"}
	for f.next() {
		if f.num == 1 {
			m.IDs = f.packedUints(m.IDs)
		}
	}
	return f.err
}

// ScrubReq asks a data server to scrub its store (MethodDataScrub).
type ScrubReq struct {
	// Remove deletes the files of objects whose metadata is gone.
	Remove bool // 1
	// Verify checks every stored block against its checksum.
	Verify bool // 2
	// Max bounds the orphans and corrupt blocks listed (0: a default).
	Max uint32 // 3
}

func (m *ScrubReq) Marshal(b []byte) []byte {
	b = putBool(b, 1, m.Remove)
	b = putBool(b, 2, m.Verify)
	return putUint(b, 3, uint64(m.Max))
}

func (m *ScrubReq) Unmarshal(b []byte) error {
	*m = ScrubReq{}
	f := fields{b: b, msg: "ScrubReq"}
	for f.next() {
		switch f.num {
		case 1:
			m.Remove = f.bool()
		case 2:
			m.Verify = f.bool()
		case 3:
			m.Max = f.uint32()
		}
	}
	return f.err
}

// ScrubOrphan is an object whose files a data server holds and whose
// metadata is gone.
type ScrubOrphan struct {
	ID      uint64   // 1
	Paths   []string // 2
	Bytes   uint64   // 3: disk space its files take
	Removed bool     // 4
}

func (m *ScrubOrphan) Marshal(b []byte) []byte {
	b = putUint(b, 1, m.ID)
	for _, p := range m.Paths {
		b = putStringAlways(b, 2, p)
	}
	b = putUint(b, 3, m.Bytes)
	return putBool(b, 4, m.Removed)
}

func (m *ScrubOrphan) Unmarshal(b []byte) error {
	*m = ScrubOrphan{}
	f := fields{b: b, msg: "ScrubOrphan"}
	for f.next() {
		switch f.num {
		case 1:
			m.ID = f.uint64()
		case 2:
			m.Paths = append(m.Paths, f.string())
		case 3:
			m.Bytes = f.uint64()
		case 4:
			m.Removed = f.bool()
		}
	}
	return f.err
}

// ScrubBad is a stored block that fails its checksum (or cannot be read).
type ScrubBad struct {
	ID     uint64 // 1
	Path   string // 2
	Block  uint64 // 3: block number in its area (the data, or a region's payload)
	Offset uint64 // 4: file offset of the block
	// First and Last are the object coordinates of the first and last
	// element the block holds; Region is the written region holding it
	// (by-region storage), empty by offset.
	First, Last []uint64 // 5, 6
	RegionOff   []uint64 // 7
	RegionSize  []uint64 // 8
	Message     string   // 9
}

func (m *ScrubBad) Marshal(b []byte) []byte {
	b = putUint(b, 1, m.ID)
	b = putString(b, 2, m.Path)
	b = putUint(b, 3, m.Block)
	b = putUint(b, 4, m.Offset)
	b = putPackedUints(b, 5, m.First)
	b = putPackedUints(b, 6, m.Last)
	b = putPackedUints(b, 7, m.RegionOff)
	b = putPackedUints(b, 8, m.RegionSize)
	return putString(b, 9, m.Message)
}

func (m *ScrubBad) Unmarshal(b []byte) error {
	*m = ScrubBad{}
	f := fields{b: b, msg: "ScrubBad"}
	for f.next() {
		switch f.num {
		case 1:
			m.ID = f.uint64()
		case 2:
			m.Path = f.string()
		case 3:
			m.Block = f.uint64()
		case 4:
			m.Offset = f.uint64()
		case 5:
			m.First = f.packedUints(m.First)
		case 6:
			m.Last = f.packedUints(m.Last)
		case 7:
			m.RegionOff = f.packedUints(m.RegionOff)
		case 8:
			m.RegionSize = f.packedUints(m.RegionSize)
		case 9:
			m.Message = f.string()
		}
	}
	return f.err
}

// ScrubReport is what a data server's scrub found. The lists hold at most
// the request's Max entries each; the counts are complete.
type ScrubReport struct {
	Objects  uint64        // 1: objects with files
	Bytes    uint64        // 2: disk space of their files
	Orphans  []ScrubOrphan // 3
	Corrupt  []ScrubBad    // 4
	NOrphans uint64        // 5
	NCorrupt uint64        // 6
	Verified uint64        // 7: blocks checked
	Errors   []string      // 8: what could not be checked, and why
}

func (m *ScrubReport) Marshal(b []byte) []byte {
	b = putUint(b, 1, m.Objects)
	b = putUint(b, 2, m.Bytes)
	for i := range m.Orphans {
		b = putMsg(b, 3, &m.Orphans[i])
	}
	for i := range m.Corrupt {
		b = putMsg(b, 4, &m.Corrupt[i])
	}
	b = putUint(b, 5, m.NOrphans)
	b = putUint(b, 6, m.NCorrupt)
	b = putUint(b, 7, m.Verified)
	for _, e := range m.Errors {
		b = putStringAlways(b, 8, e)
	}
	return b
}

func (m *ScrubReport) Unmarshal(b []byte) error {
	*m = ScrubReport{}
	f := fields{b: b, msg: "ScrubReport"}
	for f.next() {
		switch f.num {
		case 1:
			m.Objects = f.uint64()
		case 2:
			m.Bytes = f.uint64()
		case 3:
			m.Orphans = append(m.Orphans, ScrubOrphan{})
			f.sub(&m.Orphans[len(m.Orphans)-1])
		case 4:
			m.Corrupt = append(m.Corrupt, ScrubBad{})
			f.sub(&m.Corrupt[len(m.Corrupt)-1])
		case 5:
			m.NOrphans = f.uint64()
		case 6:
			m.NCorrupt = f.uint64()
		case 7:
			m.Verified = f.uint64()
		case 8:
			m.Errors = append(m.Errors, f.string())
		}
	}
	return f.err
}

// putStringAlways appends a string field even when empty: an element of
// a repeated field.
func putStringAlways(b []byte, n protowire.Number, v string) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, v)
}
