package crashloop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// Tags and tag searches. An object has up to three tags, t0 and t1 of
// text, t2 a uint64; each holds the write id of its put, as text
// (valueText) or as the number, so that a value names the one put that
// wrote it, and no two registers ever hold the same value.

// tagNames are the tags the loop puts.
var tagNames = []string{"t0", "t1", "t2"}

// numericTag reports whether tag holds numbers (a uint64), not text.
func numericTag(tag string) bool { return tag == "t2" }

// valueText is the text of write id wid as a text tag holds it: fixed
// width, so that prefixes, suffixes and infixes of it select some values
// and not others.
func valueText(wid uint64) string { return fmt.Sprintf("v%010x", wid) }

// tagValue is the value tag holds after put wid.
func tagValue(tag string, wid uint64) client.TagValue {
	if numericTag(tag) {
		return client.Uint64(wid)
	}
	return client.String(valueText(wid))
}

// tagWID returns the write id a value of tag names.
func tagWID(tag string, v client.TagValue) (uint64, error) {
	if numericTag(tag) {
		if v.Type != region.Uint64 || len(v.Value) != 8 {
			return 0, fmt.Errorf("tag %s is %v of %d bytes, not a uint64", tag, v.Type, len(v.Value))
		}
		return leUint64(v.Value), nil
	}
	s := string(v.Value)
	wid, err := strconv.ParseUint(strings.TrimPrefix(s, "v"), 16, 64)
	if v.Type != region.String || len(s) != 11 || s[0] != 'v' || err != nil || valueText(wid) != s {
		return 0, fmt.Errorf("tag %s is %v %q, not a value the loop puts", tag, v.Type, s)
	}
	return wid, nil
}

// Pattern kinds of a search's key or value, as docs/design/0007 writes
// them: any (no value, or "*"), lit, lit*, *lit, *lit*.
const (
	patAny = iota
	patExact
	patPrefix
	patSuffix
	patInfix
)

func patString(kind int, lit string) string {
	switch kind {
	case patAny:
		return "*"
	case patPrefix:
		return lit + "*"
	case patSuffix:
		return "*" + lit
	case patInfix:
		return "*" + lit + "*"
	}
	return lit
}

// patMatch is the checker's own reading of a pattern, not tagindex's, so
// that a fault there is not shared by the model.
func patMatch(kind int, lit, s string) bool {
	switch kind {
	case patAny:
		return true
	case patExact:
		return s == lit
	case patPrefix:
		return strings.HasPrefix(s, lit)
	case patSuffix:
		return strings.HasSuffix(s, lit)
	case patInfix:
		return strings.Contains(s, lit)
	}
	return false
}

// SearchSpec is a tag search (Client.Query) as a worker or the read-back
// builds it: the query text follows from it (Query), and the checker
// matches values against it (match).
type SearchSpec struct {
	KeyKind int    `json:"kk,omitempty"`
	Key     string `json:"key,omitempty"`
	// ValKind and Val are the value's pattern; a numeric Val (exact)
	// matches the numeric tags equal to it.
	ValKind int    `json:"vk,omitempty"`
	Val     string `json:"val,omitempty"`
	// Range is KEY=Lo..Hi (Hi math.MaxUint64: open), numeric tags only.
	Range bool   `json:"range,omitempty"`
	Lo    uint64 `json:"lo,omitempty"`
	Hi    uint64 `json:"hi,omitempty"`
	// Scan asks every metadata server to scan its tags (client.ScanOnly)
	// instead of the planner's choice (the DART index when it can).
	Scan bool `json:"scan,omitempty"`
	// Names asks for the objects' names too (client.WithNames).
	Names bool `json:"names,omitempty"`
}

// Query is the query text.
func (s *SearchSpec) Query() string {
	q := patString(s.KeyKind, s.Key)
	switch {
	case s.Range:
		q += fmt.Sprintf("=%d..", s.Lo)
		if s.Hi != math.MaxUint64 {
			q += strconv.FormatUint(s.Hi, 10)
		}
	case s.ValKind != patAny:
		q += "=" + patString(s.ValKind, s.Val)
	}
	return q
}

func (s *SearchSpec) String() string {
	if s.Scan {
		return fmt.Sprintf("%q (scan)", s.Query())
	}
	return fmt.Sprintf("%q", s.Query())
}

// keyMatch reports whether tag's name matches the key pattern.
func (s *SearchSpec) keyMatch(tag string) bool { return patMatch(s.KeyKind, s.Key, tag) }

// match reports whether tag, holding the value of put wid (0: absent),
// matches the search.
func (s *SearchSpec) match(tag string, wid uint64) bool {
	if wid == 0 || !s.keyMatch(tag) {
		return false
	}
	if numericTag(tag) {
		switch {
		case s.Range:
			return s.Lo <= wid && wid <= s.Hi
		case s.ValKind == patAny:
			return true
		case s.ValKind == patExact:
			n, err := strconv.ParseUint(s.Val, 10, 64)
			return err == nil && n == wid
		}
		return false // numbers never match text patterns
	}
	if s.Range {
		return false
	}
	return patMatch(s.ValKind, s.Val, valueText(wid))
}

// searchFor builds a search of one of every form around the value of put
// wid of tag: the exact value; a prefix, suffix or infix of its text;
// the exact value under a key pattern; a narrow range of numbers; or (1
// in 16) the key alone. One in five scans instead of using the index,
// one in three asks for names.
func searchFor(r *rand.Rand, tag string, wid uint64) SearchSpec {
	s := SearchSpec{KeyKind: patExact, Key: tag, Scan: r.IntN(5) == 0, Names: r.IntN(3) == 0}
	if r.IntN(16) == 0 {
		return s
	}
	if numericTag(tag) {
		dec := strconv.FormatUint(wid, 10)
		switch r.IntN(3) {
		case 0:
			s.ValKind, s.Val = patExact, dec
		case 1:
			s.Range = true
			s.Lo, s.Hi = wid-min(wid-1, r.Uint64N(1<<12)), wid+r.Uint64N(1<<12)
		default:
			// A numeric literal goes by key: the key dictionaries (S, R).
			s.ValKind, s.Val = patExact, dec
			if r.IntN(2) == 0 {
				s.KeyKind, s.Key = patPrefix, tag[:1]
			} else {
				s.KeyKind, s.Key = patSuffix, tag[1:]
			}
		}
		return s
	}
	text := valueText(wid)
	switch r.IntN(5) {
	case 0:
		s.ValKind, s.Val = patExact, text
	case 1:
		s.ValKind, s.Val = patPrefix, text[:3+r.IntN(len(text)-2)]
	case 2:
		s.ValKind, s.Val = patSuffix, text[len(text)-2-r.IntN(len(text)-2):]
	case 3:
		i := r.IntN(len(text) - 2)
		s.ValKind, s.Val = patInfix, text[i:i+2+r.IntN(len(text)-i-1)]
	default:
		// The exact value under a key pattern: the value's own entries
		// (V), whatever the key.
		s.ValKind, s.Val = patExact, text
		s.KeyKind, s.Key = []int{patPrefix, patSuffix, patInfix}[r.IntN(3)], tag[:1]
		if s.KeyKind == patSuffix {
			s.Key = tag[1:]
		}
	}
	return s
}
