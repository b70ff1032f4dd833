package wire_test

import (
	"testing"

	"github.com/pdcgo/pdc/internal/wire"
)

// TestItemResults reads the three shapes of per-item results the same way.
func TestItemResults(t *testing.T) {
	type item struct {
		code wire.Code
		msg  string
	}
	want := []item{{wire.CodeOK, ""}, {wire.CodeNotFound, "nf"}, {wire.CodeExists, "ex"}}
	for _, tc := range []struct {
		name string
		r    wire.ItemResults
	}{
		{"ObjResults", &wire.ObjResults{Items: []wire.ObjResult{{}, {Code: wire.CodeNotFound, Message: "nf"}, {Code: wire.CodeExists, Message: "ex"}}}},
		{"DataResults", &wire.DataResults{Items: []wire.DataResult{{}, {Code: wire.CodeNotFound, Message: "nf"}, {Code: wire.CodeExists, Message: "ex"}}}},
		{"RegionLocatedAll", &wire.RegionLocatedAll{Items: []wire.RegionLocated{{}, {Code: wire.CodeNotFound, Message: "nf"}, {Code: wire.CodeExists, Message: "ex"}}}},
		{"TagResults", &wire.TagResults{Codes: []uint64{0, uint64(wire.CodeNotFound), uint64(wire.CodeExists)}, Messages: []string{"", "nf", "ex"}}},
	} {
		// Through the wire and back, as a caller sees them.
		back := tc.r.(wire.Message)
		enc := back.Marshal(nil)
		if err := back.Unmarshal(enc); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.r.Len() != len(want) {
			t.Fatalf("%s: Len %d, want %d", tc.name, tc.r.Len(), len(want))
		}
		for i, w := range want {
			if c, m := tc.r.Item(i); c != w.code || m != w.msg {
				t.Errorf("%s: item %d is (%v, %q), want (%v, %q)", tc.name, i, c, m, w.code, w.msg)
			}
		}
	}
	// Messages may be left out; a code past uint32 is Internal.
	short := &wire.TagResults{Codes: []uint64{0, 1 << 40}}
	if c, m := short.Item(1); c != wire.CodeInternal || m != "" {
		t.Errorf("TagResults without messages: item 1 is (%v, %q)", c, m)
	}
}
