package regionstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
)

// A call's dims come with a version (Layout.Version), and a call with
// dims older than the newest the object was used with is refused as
// stale: applying them would cut the object back and lose what was
// written under the newer ones. The newest version has to outlive the
// process: after a restart, a client still holding old, smaller dims
// would otherwise cut acknowledged rows at its first call. So each file
// keeps it in its header page, between the header and the pending slot,
// in two slots written in turn:
//
//	at 512 and 528: magic u32 "pdim", dims version u64, CRC-32C u32 of
//	the 12 bytes before it
//
// The newest valid slot holds the version; a write goes to the other
// one, so that a write torn by power loss leaves the previous version
// readable. Builds before the slots leave the bytes zero (no slot valid:
// version 0, the dims the object was created with). By-region logs before version 3 have
// no header page and no slots: their versions stay in memory as before.
const (
	markAt    = 512
	markSlot  = 16
	markMagic = 0x6d696470 // "pdim", little-endian
)

var markSum = crc32.MakeTable(crc32.Castagnoli)

// dimsMark is a file's dims version and the slot holding it.
type dimsMark struct {
	at      int64 // file offset of the slots; 0 if the file has none
	version uint64
	slot    int // the slot holding version; -1 if none does
}

func newMark(at int64, version uint64) dimsMark {
	if version == 0 {
		return dimsMark{at: at, slot: -1}
	}
	return dimsMark{at: at, version: version, slot: 0}
}

func encodeMarkSlot(version uint64) []byte {
	b := make([]byte, 0, markSlot)
	b = binary.LittleEndian.AppendUint32(b, markMagic)
	b = binary.LittleEndian.AppendUint64(b, version)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, markSum))
}

// put writes the mark's slot 0 into a new file's header page, hdr.
func (m dimsMark) put(hdr []byte) {
	if m.at != 0 && m.version != 0 {
		copy(hdr[m.at:], encodeMarkSlot(m.version))
	}
}

// decodeMark reads the slots from a file's header page.
func decodeMark(at int64, hdr []byte) dimsMark {
	m := dimsMark{at: at, slot: -1}
	for i := range 2 {
		b := hdr[at+int64(i)*markSlot:][:markSlot]
		if binary.LittleEndian.Uint32(b) != markMagic || crc32.Checksum(b[:12], markSum) != binary.LittleEndian.Uint32(b[12:]) {
			continue
		}
		if v := binary.LittleEndian.Uint64(b[4:]); m.slot < 0 || v > m.version {
			m.version, m.slot = v, i
		}
	}
	return m
}

// loadMark reads the slots of a file.
func loadMark(f vfs.File, at int64) (dimsMark, error) {
	hdr := make([]byte, at+2*markSlot)
	if _, err := f.ReadAt(hdr[at:], at); err != nil {
		return dimsMark{}, err
	}
	return decodeMark(at, hdr), nil
}

// raise records version in the slot not holding the current one, if it
// is newer. It is in the file (in the kernel) when raise returns; durable
// also fsyncs it.
func (m *dimsMark) raise(f vfs.File, version uint64, durable bool) error {
	if m.at == 0 || version <= m.version {
		return nil
	}
	slot := 0
	if m.slot == 0 {
		slot = 1
	}
	if _, err := f.WriteAt(encodeMarkSlot(version), m.at+int64(slot)*markSlot); err != nil {
		return fmt.Errorf("dims version %d: %w", version, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("dims version %d: %w", version, err)
		}
	}
	m.version, m.slot = version, slot
	return nil
}

// stale refuses l if applying its dims to o would undo newer ones.
// Requires o.mu held, and the object loaded.
func stale(o *object, l Layout) error {
	if l.Version < o.version && needsDims(o, l.Dims) {
		return fmt.Errorf("region store: object %d: dims %v (version %d) are older than the object's (version %d): %w",
			o.id, l.Dims, l.Version, o.version, pdc.ErrStale)
	}
	return nil
}

// Version is the newest dims version object obj was used with here, as
// its files keep it: a call with older dims that changes them is refused
// as stale. 0 for an object without files, or whose files were made by a
// build that did not keep it.
func (s *Store) Version(obj uint64) (uint64, error) {
	o, err := s.object(obj)
	if err != nil {
		return 0, err
	}
	// A data server asks at every start: it must not wait for a call
	// holding the object. A version being raised meanwhile is the
	// caller's to see at its own call on the object.
	if k := o.known.Load(); k != 0 {
		return k - 1, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s.closed.Load() {
		return 0, errClosed
	}
	if err := s.load(o); err != nil {
		return 0, err
	}
	return o.version, nil
}

// mark is the dims mark of the object's file; nil if it has none.
func (o *object) mark() *dimsMark {
	switch o.mode {
	case ByOffset:
		return &o.off.mark
	case ByRegion:
		return &o.reg.mark
	}
	return nil
}

// raiseVersion makes version the object's newest dims version, in its
// file before in memory: a call that goes on to apply the version's dims
// must not leave them in the file with the older version marked. Requires
// o.mu held exclusively.
func (s *Store) raiseVersion(o *object, version uint64) error {
	if version <= o.version {
		return nil
	}
	if m := o.mark(); m != nil {
		path := o.off.pathOr(o.reg)
		err := s.withFile(path, func(f vfs.File) error { return m.raise(f, version, s.opts.Sync) })
		if err != nil {
			return fmt.Errorf("region store: object %d: %s: %w", o.id, path, err)
		}
	}
	o.version = version
	o.known.Store(version + 1)
	return nil
}
