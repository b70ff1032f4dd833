package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/client"
)

func TestParseDims(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []uint64
	}{
		{"1024x64", []uint64{1024, 64}},
		{"1024,64", []uint64{1024, 64}},
		{"7", []uint64{7}},
		{"unlimitedx3", []uint64{client.Unlimited, 3}},
		{"unlimited,3", []uint64{client.Unlimited, 3}},
	} {
		got, err := parseDims(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseDims(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "4;4", "4x", "4,x4", "3xunlimited", "18446744073709551615"} {
		if got, err := parseDims(in); err == nil {
			t.Errorf("parseDims(%q) = %v, want an error", in, got)
		} else if !strings.Contains(err.Error(), in) {
			t.Errorf("parseDims(%q): %v does not name the input", in, err)
		}
	}
}
