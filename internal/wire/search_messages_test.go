package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

func TestQueryPayloadRoundTrip(t *testing.T) {
	ids := []uint64{1, 1 << 40, ^uint64(0)}
	strs := []string{"", "name", string(bytes.Repeat([]byte{0xff}, 300))}
	p := wire.AppendQueryPayload(nil, ids, strs)
	r := wire.TagQueryResult{Count: 3, Strings: 3}
	gotIDs, gotStrs, err := wire.ParseQueryPayload(&r, p)
	if err != nil || !slices.Equal(gotIDs, ids) || !slices.Equal(gotStrs, strs) {
		t.Fatalf("round trip: %v %q %v", gotIDs, gotStrs, err)
	}
	for _, bad := range []wire.TagQueryResult{{Count: 4, Strings: 3}, {Count: 3, Strings: 4}, {Count: 3, Strings: 2}, {Count: 1 << 62}} {
		if _, _, err := wire.ParseQueryPayload(&bad, p); !errors.Is(err, pdc.ErrProtocol) {
			t.Errorf("counts %+v: %v", bad, err)
		}
	}
}

// FuzzQueryPayload: never panics, fails only with ErrProtocol, and what it
// accepts re-encodes to the same bytes.
func FuzzQueryPayload(f *testing.F) {
	f.Add(uint64(1), uint64(1), wire.AppendQueryPayload(nil, []uint64{7}, []string{"x"}))
	f.Add(uint64(0), uint64(0), []byte{})
	f.Add(uint64(2), uint64(0), make([]byte, 16))
	f.Fuzz(func(t *testing.T, count, strs uint64, p []byte) {
		r := wire.TagQueryResult{Count: count, Strings: strs}
		ids, ss, err := wire.ParseQueryPayload(&r, p)
		if err != nil {
			if !errors.Is(err, pdc.ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		if got := wire.AppendQueryPayload(nil, ids, ss); !bytes.Equal(got, p) {
			t.Fatalf("re-encoded % x, was % x", got, p)
		}
	})
}

func TestQueryResultParse(t *testing.T) {
	p := binary.LittleEndian.AppendUint64(nil, 5)
	p = binary.LittleEndian.AppendUint64(p, 1<<40)
	p = append(p, 1, 2, 3, 4, 5, 6, 7, 8)
	idx, vals, err := wire.ParseQueryResult(&wire.DataQueryResult{Hits: 2, Selection: true, ValueSize: 4}, p)
	if err != nil || !slices.Equal(idx, []uint64{5, 1 << 40}) || !bytes.Equal(vals, []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("parse: %v %v %v", idx, vals, err)
	}
	if idx, vals, err := wire.ParseQueryResult(&wire.DataQueryResult{Hits: 9}, nil); err != nil || idx != nil || vals != nil {
		t.Fatalf("count only: %v %v %v", idx, vals, err)
	}
	for _, bad := range []wire.DataQueryResult{{Hits: 3, Selection: true, ValueSize: 4}, {Hits: 2, Selection: true}, {Hits: 2, ValueSize: 12},
		{Hits: 1 << 62, Selection: true, ValueSize: 1 << 30}, {Hits: 2}} {
		if _, _, err := wire.ParseQueryResult(&bad, p); !errors.Is(err, pdc.ErrProtocol) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// FuzzQueryResult: never panics, fails only with ErrProtocol, and what it
// accepts accounts for every payload byte.
func FuzzQueryResult(f *testing.F) {
	f.Add(uint64(1), true, uint32(4), make([]byte, 12))
	f.Add(uint64(0), false, uint32(0), []byte{})
	f.Add(uint64(3), true, uint32(0), make([]byte, 24))
	f.Fuzz(func(t *testing.T, hits uint64, sel bool, vs uint32, p []byte) {
		r := wire.DataQueryResult{Hits: hits, Selection: sel, ValueSize: vs}
		idx, vals, err := wire.ParseQueryResult(&r, p)
		if err != nil {
			if !errors.Is(err, pdc.ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		if uint64(len(idx))*8+uint64(len(vals)) != uint64(len(p)) {
			t.Fatalf("%d indices and %d value bytes from %d bytes", len(idx), len(vals), len(p))
		}
	})
}
