package limits

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

func TestName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string // "" for valid
	}{
		{"plain", ""},
		{"with space and ünïcødé 名前", ""},
		{"", "is empty"},
		{strings.Repeat("a", MaxName+1), "over the limit"},
		{"nul\x00", "NUL"},
		{"new\nline", "control character (U+000A) at byte 3"},
		{"tab\t", "control character (U+0009)"},
		{"esc\x1b[31m", "control character (U+001B)"},
		{"del\x7f", "control character (U+007F)"},
		{"c1\u0085", "control character (U+0085)"},
		{"bad\xffutf8", "not valid UTF-8 (byte 3 is 0xff)"},
		{"cut\xe6\x97", "not valid UTF-8"},
	} {
		err := Name("object", tc.name, MaxName)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Name(%q): %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, pdc.ErrInvalid)):
			t.Errorf("Name(%q) = %v; want ErrInvalid saying %q", tc.name, err, tc.want)
		}
	}
	// Lookups accept what creates refuse, but NUL and length.
	if err := Lookup("object", "new\nline\xff", MaxName); err != nil {
		t.Errorf("Lookup refused a name with a control character: %v", err)
	}
	if err := Lookup("object", "a\x00", MaxName); err == nil {
		t.Error("Lookup accepted a NUL")
	}
	if AppName("") != nil || AppName("a\nb") == nil {
		t.Error("AppName: an empty app name is fine, a control character is not")
	}
}

func TestDims(t *testing.T) {
	for _, tc := range []struct {
		dims []uint64
		elem int
		want string
		is   error
	}{
		{[]uint64{10, 20}, 8, "", nil},
		{[]uint64{Unlimited, 1 << 20}, 8, "", nil},
		{[]uint64{1 << 60, 8}, 1, "pass 2^63 bytes", pdc.ErrOutOfRange}, // 2^63 bytes: one past int64
		{[]uint64{1<<60 - 1, 8}, 1, "", nil},
		{[]uint64{1 << 60, 8}, 2, "pass 2^63 bytes", pdc.ErrOutOfRange},
		{[]uint64{1 << 62, 2}, 1, "pass 2^63 bytes (at dim 1)", pdc.ErrOutOfRange},
		{[]uint64{math.MaxUint64 - 1}, 1, "pass 2^63", pdc.ErrOutOfRange},
		{[]uint64{1 << 32, 1 << 32}, 1, "pass 2^63", pdc.ErrOutOfRange}, // wraps to 0 in 64 bits
		{[]uint64{Unlimited, 1 << 62}, 4, "pass 2^63", pdc.ErrOutOfRange},
		{[]uint64{1 << 62, 2}, 0, "", nil}, // no type yet
		{nil, 4, "has 0 dims", pdc.ErrInvalid},
		{make([]uint64, MaxDims+1), 4, "has 33 dims", pdc.ErrInvalid},
		{[]uint64{4, 0}, 4, "dim 1 is 0", pdc.ErrInvalid},
		{[]uint64{4, Unlimited}, 4, "dim 1 is unlimited", pdc.ErrInvalid},
	} {
		err := Dims("object \"x\"", tc.dims, tc.elem)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Dims(%v, %d): %v", tc.dims, tc.elem, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.is)):
			t.Errorf("Dims(%v, %d) = %v; want %v saying %q", tc.dims, tc.elem, err, tc.is, tc.want)
		}
	}
}

func TestStorage(t *testing.T) {
	for m := uint32(0); m <= 2; m++ {
		if err := Storage("object", m); err != nil {
			t.Errorf("Storage(%d): %v", m, err)
		}
	}
	for _, m := range []uint32{3, 255, 256 + 1, math.MaxUint32} {
		if err := Storage("object", m); !errors.Is(err, pdc.ErrInvalid) || !strings.Contains(err.Error(), "unknown storage mode") {
			t.Errorf("Storage(%d) = %v", m, err)
		}
	}
}

func TestTagValue(t *testing.T) {
	for _, tc := range []struct {
		t    region.Type
		n    int
		want string
	}{
		{region.Int64, 8, ""},
		{region.Int, 4, ""},
		{region.Double, 8, ""},
		{region.Float, 4, ""},
		{region.Boolean, 1, ""},
		{region.String, 0, ""},
		{region.String, 100, ""},
		{region.Char, 7, ""},
		{region.VoidPtr, 3, ""},
		{region.Int64, 4, "a int64 value is 8 bytes, this one is 4"},
		{region.Int, 8, "a int value is 4 bytes, this one is 8"},
		{region.Double, 0, ""}, // no value at all
		{region.Uint16, 3, "is 2 bytes"},
		{region.Type(99), 1, "unknown value type 99"},
		{region.String, MaxTagValue + 1, "over the limit"},
	} {
		err := TagValue("k", tc.t, make([]byte, tc.n))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("TagValue(%v, %d bytes): %v", tc.t, tc.n, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("TagValue(%v, %d bytes) = %v; want an error saying %q", tc.t, tc.n, err, tc.want)
		}
	}
}

// An object with no dims is shapeless, with its type set or unknown (as
// PDC makes one from an unset property); one with dims needs a type.
func TestShape(t *testing.T) {
	for _, c := range []struct {
		dims []uint64
		t    region.Type
		want error
	}{
		{nil, region.Unknown, nil},
		{nil, region.Int, nil},
		{[]uint64{4}, region.Int, nil},
		{[]uint64{4}, region.Unknown, pdc.ErrInvalid},
		{nil, region.Type(99), pdc.ErrInvalid},
		{[]uint64{0}, region.Int, pdc.ErrInvalid},
	} {
		if err := Shape("object", c.dims, c.t); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("Shape(%v, %v) = %v, want %v", c.dims, c.t, err, c.want)
		}
	}
}
