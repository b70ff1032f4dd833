package cli

import (
	"bytes"
	"strings"
	"testing"
)

// Tag values as the command line writes them: a bool as true or false,
// and a number past its type's range refused, not stored as +Inf or
// called "not a uint8".
func TestParseTagValue(t *testing.T) {
	for _, c := range []struct {
		in, typ string
		want    []byte
	}{
		{"true", "bool", []byte{1}},
		{"false", "bool", []byte{0}},
		{"1", "bool", []byte{1}},
		{"255", "uint8", []byte{255}},
		{"-128", "int8", []byte{0x80}},
		{"inf", "float32", []byte{0, 0, 0x80, 0x7f}},
	} {
		v, err := parseTagValue(c.in, c.typ)
		if err != nil || !bytes.Equal(v.Value, c.want) {
			t.Errorf("parseTagValue(%q, %s) = %x, %v; want %x", c.in, c.typ, v.Value, err, c.want)
		}
	}
	for _, c := range []struct{ in, typ, want string }{
		{"1e40", "float32", "out of the range of type float32"},
		{"1e400", "float64", "out of the range of type float64"},
		{"300", "uint8", "out of the range of type uint8"},
		{"99999999999999999999", "int64", "out of the range of type int64"},
		{"maybe", "bool", "true or false"},
		{"2", "bool", "true or false"},
		{"x", "int32", "not a number of type int32"},
	} {
		if v, err := parseTagValue(c.in, c.typ); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseTagValue(%q, %s) = %x, %v; want an error saying %q", c.in, c.typ, v.Value, err, c.want)
		}
	}
}
