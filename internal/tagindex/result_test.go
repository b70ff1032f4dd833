package tagindex

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/pdcgo/pdc"
)

// TestParts: the parts of a collective query merge into the union of the
// ranks' results; names travel only when asked for; a failed or malformed
// part fails the merge.
func TestParts(t *testing.T) {
	a := &Result{IDs: []uint64{1, 2}, Names: map[uint64]string{1: "one", 2: "two"}, Flags: 1, Scanned: true}
	b := &Result{IDs: []uint64{3}, Names: map[uint64]string{3: "three"}, Flags: 2, Scanned: true}
	m, anyScan, err := MergeParts([][]byte{AppendPart(nil, a, false, true), AppendPart(nil, b, false, true)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{1: "one", 2: "two", 3: "three"}
	if !slices.Equal(m.IDs, []uint64{1, 2, 3}) || !maps.Equal(m.Names, want) || m.Flags != 3 || !m.Scanned || !anyScan {
		t.Errorf("merged %+v anyScan %v, want ids 1 2 3 with names, flags 3, scanned", m, anyScan)
	}

	// Without names, and one rank on the index: not scanned as a whole.
	b.Scanned = false
	m, anyScan, err = MergeParts([][]byte{AppendPart(nil, a, false, false), AppendPart(nil, b, false, false)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Names != nil || m.Scanned || !anyScan {
		t.Errorf("merged %+v anyScan %v, want no names, not scanned, some rank scanned", m, anyScan)
	}

	if _, _, err := MergeParts([][]byte{AppendPart(nil, a, false, true), AppendPart(nil, nil, true, true)}); !errors.Is(err, pdc.ErrUnavailable) {
		t.Errorf("a failed rank: err %v, want ErrUnavailable", err)
	}
	good := AppendPart(nil, a, false, true)
	for _, p := range [][]byte{nil, good[:3], good[:len(good)-1], {0, 0, 200}} {
		if _, _, err := MergeParts([][]byte{p}); !errors.Is(err, pdc.ErrProtocol) {
			t.Errorf("part %x: err %v, want ErrProtocol", p, err)
		}
	}
}
