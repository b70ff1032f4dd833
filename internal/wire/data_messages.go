package wire

import "google.golang.org/protobuf/encoding/protowire"

// Region transfers: the messages are generated (messages.wire); these are
// the parts of their codecs tuned by hand.

// Unmarshal is written by hand (unmarshal=custom in messages.wire): its
// items share one slab for their packed fields.
func (m *DataStart) Unmarshal(b []byte) error {
	*m = DataStart{}
	f := fields{b: b, msg: "DataStart"}
	n := f.count(1)
	if n > 0 {
		m.Items = make([]DataItem, 0, n)
	}
	// Three small slices per item were most of a data server's
	// allocations for small regions, and their GC most of its cost
	// after the syscalls: the items take them from one slab instead,
	// sized by the first item.
	var slab uintSlab
	for f.next() {
		switch f.num {
		case 1:
			var x DataItem
			raw := f.msgBytes()
			if f.err != nil {
				break
			}
			if err := x.unmarshal(raw, &slab); err != nil {
				f.err = err
				break
			}
			if len(m.Items) == 0 && n > 1 {
				slab.buf = make([]uint64, 0, (n-1)*(len(x.Off)+len(x.Size)+len(x.Dims)))
			}
			m.Items = append(m.Items, x)
		case 2:
			m.Wait = f.bool()
		case 3:
			m.Lane = f.uint64()
		}
	}
	return f.err
}

// sizeHint is the buffer a Marshal into nil allocates: an item of a 1-D
// region is about 28 bytes, of a 3-D one 44.
func (m *DataStart) sizeHint() int {
	return 16 + len(m.Items)*(20+8*len(firstDims(m.Items)))
}

func (m *DataIDs) sizeHint() int { return 8 + len(m.IDs)*4 }

func (m *DataResults) sizeHint() int { return 16 + len(m.Items)*8 + len(m.IDs)*4 }

// firstDims is the dims of the first item, for sizing.
func firstDims(items []DataItem) []uint64 {
	if len(items) == 0 {
		return nil
	}
	return items[0].Dims
}

// Transfer states, as pdc_transfer_status_t.
const (
	StateComplete uint32 = 0
	StatePending  uint32 = 1
	StateNotFound uint32 = 2
)

// uintSlab hands out capacity-capped pieces of one slice, so that the
// packed fields of many messages share an allocation; a piece never
// grows into the next.
type uintSlab struct {
	buf []uint64
}

// take returns where a packed field of f goes: dst if it has a value
// already (a field repeated), a piece of the slab if it has room for the
// field's values, else nil (packedUints allocates).
func (s *uintSlab) take(f *fields, dst []uint64) []uint64 {
	if s == nil || dst != nil || f.typ != protowire.BytesType {
		return dst
	}
	n := 0 // a varint's last byte is the one under 0x80
	for _, c := range f.raw {
		if c < 0x80 {
			n++
		}
	}
	l := len(s.buf)
	if n == 0 || cap(s.buf)-l < n {
		return dst
	}
	s.buf = s.buf[:l+n]
	return s.buf[l : l : l+n]
}
