package wire_test

import (
	"bytes"
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
