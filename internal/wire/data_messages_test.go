package wire_test

import (
	"slices"
	"testing"

	"github.com/pdcgo/pdc/internal/wire"
)

// The items of a DataStart share one slab for their packed fields: no
// item's slices may reach into another's, whatever the items' shapes,
// and appending to one must not change its neighbour.
func TestDataStartItemsDoNotShareSlices(t *testing.T) {
	in := wire.DataStart{Items: []wire.DataItem{
		{Obj: 1, Off: []uint64{0}, Size: []uint64{4096}, Dims: []uint64{1 << 20}},
		{Obj: 2, Off: []uint64{4096}, Size: []uint64{4096}, Dims: []uint64{1 << 20}},
		// Wider than the first: the slab, sized by the first, runs out.
		{Obj: 3, Off: []uint64{1, 2, 3}, Size: []uint64{4, 5, 6}, Dims: []uint64{7, 8, 9}},
		{Obj: 4, Off: []uint64{8192}, Size: []uint64{1 << 40}, Dims: []uint64{1 << 41}},
		{Obj: 5}, // no packed fields at all
		{Obj: 6, Off: []uint64{12288}, Size: []uint64{1}, Dims: []uint64{1 << 20}},
	}}
	var out wire.DataStart
	if err := out.Unmarshal(in.Marshal(nil)); err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != len(in.Items) {
		t.Fatalf("%d items, want %d", len(out.Items), len(in.Items))
	}
	for i := range out.Items {
		a, b := in.Items[i], out.Items[i]
		if !slices.Equal(a.Off, b.Off) || !slices.Equal(a.Size, b.Size) || !slices.Equal(a.Dims, b.Dims) {
			t.Fatalf("item %d: got %+v, want %+v", i, b, a)
		}
	}
	// Appending to one item's slices must leave every other item alone.
	for i := range out.Items {
		it := &out.Items[i]
		it.Off = append(it.Off, 99)
		it.Size = append(it.Size, 99)
		it.Dims = append(it.Dims, 99)
	}
	for i := range out.Items {
		a, b := in.Items[i], out.Items[i]
		if !slices.Equal(a.Off, b.Off[:len(b.Off)-1]) || !slices.Equal(a.Size, b.Size[:len(b.Size)-1]) || !slices.Equal(a.Dims, b.Dims[:len(b.Dims)-1]) {
			t.Fatalf("item %d after appends: got %+v, want %+v plus 99 each", i, b, a)
		}
	}
}

// A packed field sent twice (proto allows it; both parts count) lands
// whole, slab or not.
func TestDataItemRepeatedPackedField(t *testing.T) {
	one := wire.DataItem{Obj: 1, Off: []uint64{1, 2}, Size: []uint64{3}, Dims: []uint64{4}}
	two := wire.DataItem{Off: []uint64{5}}
	b := one.Marshal(nil)
	b = two.Marshal(b) // field 3 again, plus zero-valued fields omitted
	item := append([]byte{0x0a, byte(len(b))}, b...)
	msg := append(slices.Clone(item), item...)
	var out wire.DataStart
	if err := out.Unmarshal(msg); err != nil {
		t.Fatal(err)
	}
	for i, it := range out.Items {
		if !slices.Equal(it.Off, []uint64{1, 2, 5}) || !slices.Equal(it.Size, []uint64{3}) {
			t.Fatalf("item %d: %+v, want Off [1 2 5] Size [3]", i, it)
		}
	}
}

// Decoding the answer of a wait for thousands of small transfers
// allocates the items once, not once per item.
func TestDataResultsUnmarshalAllocs(t *testing.T) {
	var m wire.DataResults
	for range 1000 {
		m.Items = append(m.Items, wire.DataResult{Size: 4096})
	}
	b := m.Marshal(nil)
	var got wire.DataResults
	allocs := testing.AllocsPerRun(20, func() {
		if err := got.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
	})
	if len(got.Items) != 1000 || got.Items[999].Size != 4096 {
		t.Fatalf("decoded %d items", len(got.Items))
	}
	if allocs > 2 {
		t.Fatalf("decoding 1000 results made %.0f allocations, want at most 2", allocs)
	}
}
