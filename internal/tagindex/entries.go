package tagindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// Index entry layout. Every entry key starts with 'X' and a tree byte; the
// first component after it is the entry's term, which decides the server
// that holds it (Partition.Owner), but for tree L, which lives on server 0.
// Strings are escaped so that they sort as the strings do and end with a
// terminator (appendEsc).
//
//	X K key  'n' f64(8) type(1) raw id(8)   numeric tag value (sorted by value)
//	X K key  's' text id(8)                  text tag value
//	X V text key id(8)                       text values, for exact and prefix
//	X U reversed-text key id(8)              suffix queries on values (without
//	                                         suffix-tree mode)
//	X W suffix key id(8)                     every suffix but the whole text (V
//	                                         has that), of a text of up to
//	                                         MaxSuffixText bytes (suffix-tree mode)
//	X L key id(8)  -> version, text          longer texts, for infix queries
//	X S suffix key                           key dictionary: every suffix of
//	                                         a key (the key alone without
//	                                         suffix-tree mode)
//	X R reversed-key                         suffix queries on keys
//
// Entry values are EntryVersion (one byte), followed by the text for L.
// K, V, U, W and L entries belong to one object's tag and are deleted with
// it. S and R name keys, not objects: they are never deleted (a key no
// object holds any more is found in the dictionary and then matches
// nothing at its K server), so they are bounded by the key vocabulary.
const (
	Prefix0 = 'X'

	TreeKey     = 'K'
	TreeValue   = 'V'
	TreeRevVal  = 'U'
	TreeSufVal  = 'W'
	TreeLongVal = 'L'
	TreeSufKey  = 'S'
	TreeRevKey  = 'R'

	classNum  = 'n'
	classText = 's'

	// EntryVersion is the format version of index entries, their first
	// value byte and the Version of every batch of index operations.
	EntryVersion = 1

	// MaxSuffixText is the longest text whose every suffix is indexed;
	// longer texts go to tree L, which infix queries scan on server 0.
	MaxSuffixText = 256
)

// Op is one change to the index: set Key to Value, or delete Key.
type Op struct {
	Key   []byte
	Value []byte
	Del   bool
}

// appendEsc appends s escaped (0x00 -> 0x00 0xff) and terminated (0x00 0x01),
// which keeps the order of strings and makes every escaped string a prefix
// only of the escapings of its extensions.
func appendEsc(b []byte, s string) []byte {
	b = appendEscPrefix(b, s)
	return append(b, 0, 1)
}

// appendEscPrefix appends s escaped without the terminator: the key prefix
// of every string that begins with s.
func appendEscPrefix(b []byte, s string) []byte {
	if strings.IndexByte(s, 0) < 0 {
		return append(b, s...) // nothing to escape, the usual case
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			b = append(b, 0, 0xff)
		} else {
			b = append(b, s[i])
		}
	}
	return b
}

var errEntry = errors.New("malformed index entry")

// readEsc reads an escaped, terminated string.
func readEsc(b []byte) (string, []byte, error) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			return "", nil, errEntry
		}
		switch b[i+1] {
		case 1:
			return string(out), b[i+2:], nil
		case 0xff:
			out = append(out, 0)
			i++
		default:
			return "", nil, errEntry
		}
	}
	return "", nil, errEntry
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// sortableFloat encodes f so that byte order is numeric order (NaN last,
// -0 as +0).
func sortableFloat(f float64) uint64 {
	if f == 0 {
		f = 0
	}
	bits := math.Float64bits(f)
	if bits&(1<<63) != 0 {
		return ^bits
	}
	return bits | 1<<63
}

func treeKey(tree byte) []byte { return []byte{Prefix0, tree} }

// KeyPrefix is the prefix of K entries of key.
func KeyPrefix(key string) []byte { return appendEsc(treeKey(TreeKey), key) }

// NumBound is the K-entry key prefix of numbers of key at n: every K entry
// of a number equal to n (as a float64) starts with it.
func NumBound(key string, n *Number) []byte {
	b := append(KeyPrefix(key), classNum)
	return binary.BigEndian.AppendUint64(b, sortableFloat(n.Float64()))
}

// NumPrefix is the prefix of the numeric K entries of key.
func NumPrefix(key string) []byte { return append(KeyPrefix(key), classNum) }

// TextPrefix is the prefix of the text K entries of key with text
// beginning with lit; with exact, of text equal to lit.
func TextPrefix(key, lit string, exact bool) []byte {
	b := append(KeyPrefix(key), classText)
	if exact {
		return appendEsc(b, lit)
	}
	return appendEscPrefix(b, lit)
}

// TreePrefix is the prefix of entries of tree whose term begins with lit,
// or, with exact, whose term is lit.
func TreePrefix(tree byte, lit string, exact bool) []byte {
	if exact {
		return appendEsc(treeKey(tree), lit)
	}
	return appendEscPrefix(treeKey(tree), lit)
}

func version() []byte { return []byte{EntryVersion} }

// Sink receives index changes; the slices it is given are valid only
// during the call.
type Sink interface {
	Set(k, v []byte)
	Delete(k []byte)
}

// opsSink collects changes as Ops.
type opsSink struct{ ops []Op }

func (o *opsSink) Set(k, v []byte) {
	o.ops = append(o.ops, Op{Key: bytes.Clone(k), Value: bytes.Clone(v)})
}
func (o *opsSink) Delete(k []byte) { o.ops = append(o.ops, Op{Key: bytes.Clone(k), Del: true}) }

// ObjectEntries returns the entries of one object's tag: set, or with del
// the deletions of exactly those keys.
func ObjectEntries(key string, typ int32, raw []byte, v Value, id uint64, suffixMode, del bool) []Op {
	var o opsSink
	WriteObjectEntries(&o, key, typ, raw, v, id, suffixMode, del)
	return o.ops
}

// entryVersion is the value of every entry but L's; sinks copy it.
var entryVersion = []byte{EntryVersion}

// WriteObjectEntries gives s the entries of one object's tag, as
// ObjectEntries returns them, building each in one buffer.
func WriteObjectEntries(s Sink, key string, typ int32, raw []byte, v Value, id uint64, suffixMode, del bool) {
	var w EntryWriter
	w.Write(s, key, typ, raw, v, id, suffixMode, del)
}

// EntryWriter is WriteObjectEntries with a buffer kept from one tag to the
// next: a bulk put builds millions of entries. Its zero value is ready;
// it is not safe for concurrent use.
type EntryWriter struct{ buf []byte }

// Write gives s the entries of one object's tag, as WriteObjectEntries.
func (w *EntryWriter) Write(s Sink, key string, typ int32, raw []byte, v Value, id uint64, suffixMode, del bool) {
	emit := func(k, val []byte) {
		if del {
			s.Delete(k)
		} else {
			s.Set(k, val)
		}
	}
	b := w.buf[:0]
	defer func() { w.buf = b[:0] }()
	if v.Num != nil {
		b = append(b, Prefix0, TreeKey)
		b = appendEsc(b, key)
		b = append(b, classNum)
		b = binary.BigEndian.AppendUint64(b, sortableFloat(v.Num.Float64()))
		b = append(b, byte(typ))
		b = append(b, raw...)
		b = binary.BigEndian.AppendUint64(b, id)
		emit(b, entryVersion)
		return
	}
	b = append(b, Prefix0, TreeKey)
	b = appendEsc(b, key)
	b = append(b, classText)
	b = appendEsc(b, v.Text)
	b = binary.BigEndian.AppendUint64(b, id)
	emit(b, entryVersion)
	// The key and id end every V, U and W entry.
	b = appendEsc(append(b[:0], Prefix0, TreeValue), v.Text)
	b = binary.BigEndian.AppendUint64(appendEsc(b, key), id)
	emit(b, entryVersion)
	if !suffixMode {
		b = appendEscReversed(append(b[:0], Prefix0, TreeRevVal), v.Text)
		b = binary.BigEndian.AppendUint64(appendEsc(b, key), id)
		emit(b, entryVersion)
		return
	}
	// With suffix trees, a suffix query looks up its literal as a whole
	// suffix (W) or whole text (V), and an infix query as a prefix of
	// either: no reversed text (U), no W entry for the whole text.
	if len(v.Text) > MaxSuffixText {
		b = appendEsc(append(b[:0], Prefix0, TreeLongVal), key)
		b = binary.BigEndian.AppendUint64(b, id)
		emit(b, append(append([]byte(nil), EntryVersion), v.Text...))
		return
	}
	for i := 1; i < len(v.Text); i++ {
		b = appendEsc(append(b[:0], Prefix0, TreeSufVal), v.Text[i:])
		b = binary.BigEndian.AppendUint64(appendEsc(b, key), id)
		emit(b, entryVersion)
	}
}

// appendEscReversed appends s with its bytes reversed, escaped and
// terminated, as appendEsc(b, reverse(s)).
func appendEscReversed(b []byte, s string) []byte {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == 0 {
			b = append(b, 0, 0xff)
		} else {
			b = append(b, s[i])
		}
	}
	return append(b, 0, 1)
}

// DictEntries returns the key-dictionary entries of key. They are only ever
// set (see the layout).
func DictEntries(key string, suffixMode bool) []Op {
	ops := []Op{{Key: TreePrefix(TreeRevKey, reverse(key), true), Value: version()}}
	n := 1
	if suffixMode {
		n = len(key)
	}
	for i := range n {
		ops = append(ops, Op{Key: append(TreePrefix(TreeSufKey, key[i:], true), appendEsc(nil, key)...), Value: version()})
	}
	return ops
}

// Term returns the term of an index entry key, which decides its server;
// long is true for tree L, which lives on server 0.
func Term(k []byte) (term string, long bool, err error) {
	if len(k) < 2 || k[0] != Prefix0 {
		return "", false, fmt.Errorf("%w: %q", errEntry, k)
	}
	switch k[1] {
	case TreeKey, TreeValue, TreeRevVal, TreeSufVal, TreeSufKey, TreeRevKey:
	case TreeLongVal:
		return "", true, nil
	default:
		return "", false, fmt.Errorf("%w: unknown tree %q", errEntry, k[1])
	}
	t, _, err := readEsc(k[2:])
	return t, false, err
}

// EntryOwner returns the index, among p's servers, of the server that holds
// the index entry k.
func (p *Partition) EntryOwner(k []byte) (int, error) {
	term, long, err := Term(k)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", err, pdc.ErrInvalid)
	}
	if long {
		return 0, nil
	}
	return p.Owner(term), nil
}

// EntryOwnerOf is EntryOwner without building the term: it reads only the
// term's first two bytes, which decide the server, and allocates nothing.
func (p *Partition) EntryOwnerOf(k []byte) (int, error) {
	if len(k) < 2 || k[0] != Prefix0 {
		return 0, fmt.Errorf("%w: %.60q: %w", errEntry, k, pdc.ErrInvalid)
	}
	switch k[1] {
	case TreeKey, TreeValue, TreeRevVal, TreeSufVal, TreeSufKey, TreeRevKey:
	case TreeLongVal:
		return 0, nil
	default:
		return 0, fmt.Errorf("%w: unknown tree %q: %w", errEntry, k[1], pdc.ErrInvalid)
	}
	// The first two bytes of the escaped term, unescaped.
	var term [2]byte
	n := 0
	for i := 2; n < 2; i++ {
		if i >= len(k) {
			return 0, fmt.Errorf("%w: %.60q: %w", errEntry, k, pdc.ErrInvalid)
		}
		if k[i] != 0 {
			term[n] = k[i]
			n++
			continue
		}
		if i+1 >= len(k) {
			return 0, fmt.Errorf("%w: %.60q: %w", errEntry, k, pdc.ErrInvalid)
		}
		if k[i+1] == 1 {
			break // the term ends
		}
		if k[i+1] != 0xff {
			return 0, fmt.Errorf("%w: %.60q: %w", errEntry, k, pdc.ErrInvalid)
		}
		term[n] = 0
		n++
		i++
	}
	switch n {
	case 0:
		return p.ownerOfCell(0), nil
	case 1:
		return p.ownerOfCell(int(term[0]) << 8), nil
	}
	return p.ownerOfCell(int(term[0])<<8 | int(term[1])), nil
}

// skipEsc returns what follows the escaped, terminated string at the start
// of b.
func skipEsc(b []byte) ([]byte, bool) {
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			continue
		}
		if i+1 >= len(b) {
			return nil, false
		}
		switch b[i+1] {
		case 1:
			return b[i+2:], true
		case 0xff:
			i++
		default:
			return nil, false
		}
	}
	return nil, false
}

// CheckEntry checks that k is a well-formed index entry key, every part of
// it, without allocating: entries that come from the network are checked
// before they are stored, so that no query meets one it cannot decode.
func CheckEntry(k []byte) error {
	bad := func() error { return fmt.Errorf("%w: %.60q: %w", errEntry, k, pdc.ErrInvalid) }
	if len(k) < 2 || k[0] != Prefix0 {
		return bad()
	}
	rest, ok := skipEsc(k[2:])
	if !ok {
		return bad()
	}
	switch k[1] {
	case TreeKey:
		if len(rest) < 1 {
			return bad()
		}
		class := rest[0]
		rest = rest[1:]
		switch class {
		case classNum:
			if len(rest) < 8+1+8 || ValueOf(region.Type(int8(rest[8])), rest[9:len(rest)-8]).Num == nil {
				return bad()
			}
			return nil
		case classText:
			if rest, ok = skipEsc(rest); !ok || len(rest) != 8 {
				return bad()
			}
			return nil
		}
		return bad()
	case TreeValue, TreeRevVal, TreeSufVal:
		if rest, ok = skipEsc(rest); !ok || len(rest) != 8 {
			return bad()
		}
	case TreeLongVal:
		if len(rest) != 8 {
			return bad()
		}
	case TreeSufKey:
		if rest, ok = skipEsc(rest); !ok || len(rest) != 0 {
			return bad()
		}
	case TreeRevKey:
		if len(rest) != 0 {
			return bad()
		}
	default:
		return bad()
	}
	return nil
}

// EntryObject returns the object id of a per-object entry (trees K, V,
// U, W, L: the key's last eight bytes), and false for dictionary entries.
func EntryObject(k []byte) (uint64, bool) {
	if len(k) < 2+8 || k[0] != Prefix0 {
		return 0, false
	}
	switch k[1] {
	case TreeKey, TreeValue, TreeRevVal, TreeSufVal, TreeLongVal:
		return binary.BigEndian.Uint64(k[len(k)-8:]), true
	}
	return 0, false
}

// Entry is a decoded per-object index entry (trees K, V, U, W, L).
type Entry struct {
	Key  string
	ID   uint64
	Val  Value  // K entries: the value; L entries: the text
	Term string // V, U, W: the term (text, reversed text, suffix)
}

// DecodeEntry decodes a K, V, U, W or L entry; val is the stored value
// (only L entries use it).
func DecodeEntry(k, val []byte) (Entry, error) {
	if len(k) < 2+8 || k[0] != Prefix0 {
		return Entry{}, errEntry
	}
	tree := k[1]
	rest := k[2:]
	idOf := func(b []byte) (uint64, error) {
		if len(b) != 8 {
			return 0, errEntry
		}
		return binary.BigEndian.Uint64(b), nil
	}
	var e Entry
	var err error
	switch tree {
	case TreeKey:
		if e.Key, rest, err = readEsc(rest); err != nil || len(rest) < 1 {
			return Entry{}, errEntry
		}
		class := rest[0]
		rest = rest[1:]
		switch class {
		case classNum:
			if len(rest) < 8+1+8 {
				return Entry{}, errEntry
			}
			typ := int32(int8(rest[8]))
			raw := rest[9 : len(rest)-8]
			e.Val = ValueOf(region.Type(typ), raw)
			if e.Val.Num == nil {
				return Entry{}, errEntry
			}
			e.ID, err = idOf(rest[len(rest)-8:])
		case classText:
			var text string
			if text, rest, err = readEsc(rest); err != nil {
				return Entry{}, errEntry
			}
			e.Val = Value{Text: text}
			e.ID, err = idOf(rest)
		default:
			return Entry{}, errEntry
		}
	case TreeValue, TreeRevVal, TreeSufVal:
		if e.Term, rest, err = readEsc(rest); err != nil {
			return Entry{}, errEntry
		}
		if e.Key, rest, err = readEsc(rest); err != nil {
			return Entry{}, errEntry
		}
		e.ID, err = idOf(rest)
	case TreeLongVal:
		if e.Key, rest, err = readEsc(rest); err != nil {
			return Entry{}, errEntry
		}
		e.ID, err = idOf(rest)
		if len(val) < 1 {
			return Entry{}, errEntry
		}
		e.Val = Value{Text: string(val[1:])}
	default:
		return Entry{}, errEntry
	}
	if err != nil {
		return Entry{}, errEntry
	}
	return e, nil
}

// DecodeDict decodes an S entry (suffix, key) or an R entry (reversed key,
// "") .
func DecodeDict(k []byte) (term, key string, err error) {
	if len(k) < 2 || k[0] != Prefix0 {
		return "", "", errEntry
	}
	switch k[1] {
	case TreeSufKey:
		term, rest, err := readEsc(k[2:])
		if err != nil {
			return "", "", err
		}
		key, rest, err = readEsc(rest)
		if err != nil || len(rest) != 0 {
			return "", "", errEntry
		}
		return term, key, nil
	case TreeRevKey:
		term, rest, err := readEsc(k[2:])
		if err != nil || len(rest) != 0 {
			return "", "", errEntry
		}
		return term, reverse(term), nil
	}
	return "", "", errEntry
}

// Reverse returns s with its bytes in reverse order.
func Reverse(s string) string { return reverse(s) }
