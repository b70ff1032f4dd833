package postings

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/pdcgo/pdc"
)

// OpsVersion is the format version of encoded Ops, their first byte.
const OpsVersion = 1

const (
	recSet = 0
	recDel = 1
)

// Ops is a batch of changes, encoded: the version byte, then one record
// per change, set (0), key length, key, value length, value, or delete
// (1), key length, key. Runs and their blocks hold the same records.
// Later changes of a key in one batch win.
type Ops struct {
	b []byte
	n int
}

// Set adds a change that sets k to v.
func (o *Ops) Set(k, v []byte) {
	o.start()
	// Built in a local and stored once: each store of the slice into o
	// is a write barrier while the GC marks.
	b := append(o.b, recSet)
	b = binary.AppendUvarint(b, uint64(len(k)))
	b = append(b, k...)
	b = binary.AppendUvarint(b, uint64(len(v)))
	o.b = append(b, v...)
	o.n++
}

// Delete adds a change that deletes k.
func (o *Ops) Delete(k []byte) {
	o.start()
	b := append(o.b, recDel)
	b = binary.AppendUvarint(b, uint64(len(k)))
	o.b = append(b, k...)
	o.n++
}

func (o *Ops) start() {
	if len(o.b) == 0 {
		o.b = append(o.b, OpsVersion)
	}
}

// Grow makes room for n more bytes of changes.
func (o *Ops) Grow(n int) { o.b = slices.Grow(o.b, n) }

// Len is the number of changes.
func (o *Ops) Len() int { return o.n }

// Bytes returns the encoding (empty for no changes). It aliases o.
func (o *Ops) Bytes() []byte {
	if o.n == 0 {
		return nil
	}
	return o.b
}

// Reset empties o, keeping its memory.
func (o *Ops) Reset() { o.b, o.n = o.b[:0], 0 }

// Append adds every change of p to o.
func (o *Ops) Append(p *Ops) {
	if p.n == 0 {
		return
	}
	o.start()
	o.b = append(o.b, p.b[1:]...)
	o.n += p.n
}

// AppendRecord adds one encoded record, as Each hands it out.
func (o *Ops) AppendRecord(rec []byte) {
	o.start()
	o.b = append(o.b, rec...)
	o.n++
}

var errRecord = errors.New("malformed index record")

// ParseOps checks an encoding made by Ops and returns it as Ops, aliasing
// b. An empty b is no changes.
func ParseOps(b []byte) (Ops, error) { return ParseOpsChecked(b, nil) }

// ParseOpsChecked is ParseOps that also calls check, if set, with every
// change, in the same pass: its error, with the change's index, is
// ParseOpsChecked's.
func ParseOpsChecked(b []byte, check func(k, v []byte, del bool) error) (Ops, error) {
	if len(b) == 0 {
		return Ops{}, nil
	}
	if b[0] != OpsVersion {
		return Ops{}, fmt.Errorf("index changes of version %d; this build reads version %d: %w", b[0], OpsVersion, pdc.ErrVersion)
	}
	n := 0
	for off := 1; off < len(b); n++ {
		k, v, del, next, ok := readRec(b, off)
		if !ok {
			return Ops{}, fmt.Errorf("index changes: record %d at byte %d: %w: %w", n, off, errRecord, pdc.ErrInvalid)
		}
		if check != nil {
			if err := check(k, v, del); err != nil {
				return Ops{}, fmt.Errorf("index change %d: %w", n, err)
			}
		}
		off = next
	}
	return Ops{b: b, n: n}, nil
}

// Each calls fn for every change in order; rec is the change's encoded
// record (for AppendRecord). The slices alias o.
func (o *Ops) Each(fn func(k, v []byte, del bool, rec []byte) error) error {
	for off := 1; off < len(o.b); {
		k, v, del, next, ok := readRec(o.b, off)
		if !ok {
			return errRecord
		}
		if err := fn(k, v, del, o.b[off:next]); err != nil {
			return err
		}
		off = next
	}
	return nil
}

// readRec decodes the record at b[off:].
func readRec(b []byte, off int) (k, v []byte, del bool, next int, ok bool) {
	if off >= len(b) {
		return nil, nil, false, 0, false
	}
	tag := b[off]
	off++
	if tag != recSet && tag != recDel {
		return nil, nil, false, 0, false
	}
	kl, n := binary.Uvarint(b[off:])
	if n <= 0 || kl > uint64(len(b)-off-n) {
		return nil, nil, false, 0, false
	}
	off += n
	k = b[off : off+int(kl) : off+int(kl)]
	off += int(kl)
	if tag == recDel {
		return k, nil, true, off, true
	}
	vl, n := binary.Uvarint(b[off:])
	if n <= 0 || vl > uint64(len(b)-off-n) {
		return nil, nil, false, 0, false
	}
	off += n
	v = b[off : off+int(vl) : off+int(vl)]
	return k, v, false, off + int(vl), true
}
