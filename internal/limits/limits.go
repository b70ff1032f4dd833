package limits

import (
	"fmt"
	"math"
	"math/bits"
	"unicode"
	"unicode/utf8"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// Limits on what clients may store.
const (
	MaxName     = 1024    // container, object and app names, bytes
	MaxTagName  = 256     // tag names, bytes
	MaxTagValue = 1 << 16 // tag values, bytes
	// MaxQueryTerms bounds the keys of one by-key step of a tag query
	// (one request): a client with more sends several.
	MaxQueryTerms = 4096
	// MaxBatchItems bounds the items of one batch request a metadata
	// server accepts: creates or opens (ObjBatch), tag puts (TagBatch),
	// members (Members), produced files (StageBatch), regions
	// (RegionBatch), ids to purge (ObjPurge).
	MaxBatchItems = 1 << 16
	// ClientBatchItems is the most items the client puts in one batch
	// request: well under MaxBatchItems, so that a request of large items
	// also stays under its byte budget and a batch's requests pipeline.
	ClientBatchItems = 8192
	MaxDims          = region.MaxDims
	// Unlimited is PDC_SIZE_UNLIMITED: a first dim that can grow.
	Unlimited = math.MaxUint64
	// MaxObjectBytes bounds an object's size in bytes (its dims' product
	// times its element size, an unlimited first dim counted as one row):
	// offsets into it must fit in an int64, as file offsets do.
	MaxObjectBytes = math.MaxInt64
)

// Storage modes (regionstore.Mode; 0 is the default, by offset).
const (
	StorageDefault  = 0
	StorageByOffset = 1
	StorageByRegion = 2
)

// Name checks a name that something is created under: what names the kind
// ("object", "container", "tag", "app"). It must be 1 to max bytes of
// valid UTF-8 with no control characters (C0, DEL or C1).
func Name(what, name string, max int) error {
	if err := Lookup(what, name, max); err != nil {
		return err
	}
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return fmt.Errorf("%s name %q has a control character (%U) at byte %d: %w", what, name, rune(c), i, pdc.ErrInvalid)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Errorf("%s name %q is not valid UTF-8 (byte %d is %#02x): %w", what, name, i, c, pdc.ErrInvalid)
		}
		if unicode.IsControl(r) {
			return fmt.Errorf("%s name %q has a control character (%U) at byte %d: %w", what, name, r, i, pdc.ErrInvalid)
		}
		i += n
	}
	return nil
}

// Lookup checks a name used to find something: 1 to max bytes, no NUL
// (the stores end names with one).
func Lookup(what, name string, max int) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name is empty: %w", what, pdc.ErrInvalid)
	case len(name) > max:
		return fmt.Errorf("%s name %.40q... is %d bytes, over the limit of %d: %w", what, name, len(name), max, pdc.ErrInvalid)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return fmt.Errorf("%s name %q contains a NUL byte: %w", what, name, pdc.ErrInvalid)
		}
	}
	return nil
}

// AppName checks an object's app name, part of its identity: empty, or a
// name as Name wants it.
func AppName(name string) error {
	if name == "" {
		return nil
	}
	return Name("app", name, MaxName)
}

// Dims checks an object's dims: 1 to MaxDims of them, none 0, only the
// first Unlimited, and their bytes, elem each, at most MaxObjectBytes
// (an unlimited first dim counted as one). what (a string or a
// fmt.Stringer) names the object in the error. elem <= 0 skips the size
// check (the element type is not known yet).
func Dims(what any, dims []uint64, elem int) error {
	if len(dims) == 0 || len(dims) > MaxDims {
		return fmt.Errorf("%s has %d dims; want 1 to %d: %w", what, len(dims), MaxDims, pdc.ErrInvalid)
	}
	for i, d := range dims {
		if d == 0 {
			return fmt.Errorf("%s: dim %d is 0: %w", what, i, pdc.ErrInvalid)
		}
		if d == Unlimited && i > 0 {
			return fmt.Errorf("%s: dim %d is unlimited; only the first dim may be: %w", what, i, pdc.ErrInvalid)
		}
	}
	if elem <= 0 {
		return nil
	}
	total := uint64(elem)
	for i, d := range dims {
		if d == Unlimited {
			continue
		}
		hi, lo := bits.Mul64(total, d)
		if hi != 0 || lo > MaxObjectBytes {
			return fmt.Errorf("%s: dims %s of %d-byte elements pass 2^63 bytes (at dim %d), more than any object may hold: %w",
				what, formatDims(dims), elem, i, pdc.ErrOutOfRange)
		}
		total = lo
	}
	return nil
}

// Shape checks a new object's dims and element type. An object with no
// dims is shapeless: PDC creates one from a property whose dims and type
// were never set (ndim 0, PDC_UNKNOWN), and its own test programs do. It
// holds tags and metadata, and no data: region I/O on it fails. An object
// with dims needs a known type, to size its elements.
func Shape(what any, dims []uint64, t region.Type) error {
	if len(dims) == 0 && (t == region.Unknown || t.Valid()) {
		return nil
	}
	if !t.Valid() {
		return fmt.Errorf("%s: unknown element type %d: %w", what, int32(t), pdc.ErrInvalid)
	}
	return Dims(what, dims, t.Size())
}

func formatDims(dims []uint64) string {
	s := ""
	for i, d := range dims {
		if i > 0 {
			s += "x"
		}
		if d == Unlimited {
			s += "unlimited"
		} else {
			s += fmt.Sprint(d)
		}
	}
	return s
}

// Storage checks an object's storage mode.
func Storage(what any, mode uint32) error {
	if mode > StorageByRegion {
		return fmt.Errorf("%s: unknown storage mode %d (want 0 default, 1 by offset, 2 by region): %w", what, mode, pdc.ErrInvalid)
	}
	return nil
}

// TagValue checks a tag's value of type t: a known type, at most
// MaxTagValue bytes, and for a number exactly its width (an int64 is 8
// bytes) or empty (a tag with no value). Strings, chars (C text) and raw
// bytes may have any length.
func TagValue(name string, t region.Type, v []byte) error {
	if !t.Valid() {
		return fmt.Errorf("tag %q: unknown value type %d: %w", name, int32(t), pdc.ErrInvalid)
	}
	if len(v) > MaxTagValue {
		return fmt.Errorf("tag %q: value of %d bytes is over the limit of %d: %w", name, len(v), MaxTagValue, pdc.ErrTooLarge)
	}
	if FixedWidth(t) && len(v) != 0 && len(v) != t.Size() {
		return fmt.Errorf("tag %q: a %s value is %d bytes, this one is %d: %w", name, t, t.Size(), len(v), pdc.ErrInvalid)
	}
	return nil
}

// FixedWidth reports whether values of type t are one number of t.Size()
// bytes, as opposed to text or raw bytes of any length.
func FixedWidth(t region.Type) bool {
	switch t {
	case region.String, region.Char, region.VoidPtr:
		return false
	}
	return t.Valid()
}
