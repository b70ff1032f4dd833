package dataserver

import (
	"testing"

	"github.com/pdcgo/pdc/internal/wire"
)

// A start is confirmed with the metadata server only when its dims may
// cut data stored under other dims: a shrink or a relayout newer than
// seen, or any change since create after a restart.
func TestMayCut(t *testing.T) {
	s := &Service{}
	s.mu.layouts = map[uint64]layoutSeen{1: {version: 3, dims: []uint64{12, 64}}}
	item := func(obj, version uint64, dims ...uint64) wire.DataItem {
		return wire.DataItem{Obj: obj, DimsVersion: version, Dims: dims}
	}
	cases := []struct {
		name  string
		it    wire.DataItem
		floor uint64
		want  bool
	}{
		{"dims of a new object", item(2, 0, 16, 64), 0, false},
		{"a version seen", item(1, 3, 12, 64), 0, false},
		{"an older version (refused anyway)", item(1, 2, 1, 64), 0, false},
		{"a newer grow", item(1, 4, 24, 64), 0, false},
		{"a newer shrink", item(1, 4, 1, 64), 0, true},
		{"a newer relayout", item(1, 4, 12, 32), 0, true},
		{"none seen, version of the files", item(2, 5, 8, 64), 5, false},
		{"none seen, newer than the files", item(2, 6, 8, 64), 5, true},
		{"none seen, no files", item(2, 1, 8, 64), 0, true},
	}
	for _, tc := range cases {
		if got := s.mayCutLocked(tc.it, tc.floor); got != tc.want {
			t.Errorf("%s: mayCut %v, want %v", tc.name, got, tc.want)
		}
	}
}
