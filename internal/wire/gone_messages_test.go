package wire_test

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/wire"
)

// goneSamples are values of the deleted-object and scrub messages, each
// type's fullest last.
var goneSamples = []wire.Message{
	&wire.IDList{},
	&wire.IDList{IDs: []uint64{1}},
	&wire.IDList{IDs: []uint64{0, math.MaxUint64, 1 << 40}},
	&wire.GoneIDs{},
	&wire.GoneIDs{Never: []uint64{1}},
	&wire.GoneIDs{IDs: []uint64{0, math.MaxUint64, 1 << 40}, Never: []uint64{1 << 40}},
	&wire.ScrubReq{},
	&wire.ScrubReq{Remove: true},
	&wire.ScrubReq{Remove: true, Verify: true, Max: math.MaxUint32},
	&wire.ScrubOrphan{},
	&wire.ScrubOrphan{ID: 7, Paths: []string{"", "/d/0000000000000007.off"}, Bytes: 4096, Removed: true},
	&wire.ScrubBad{},
	&wire.ScrubBad{ID: math.MaxUint64, Path: "/d/x.reg", Block: 3, Offset: 1 << 33, First: []uint64{0, 0}, Last: []uint64{0, 1023},
		RegionOff: []uint64{4, 0}, RegionSize: []uint64{8, 1024}, Message: "block 3: crc 1, stored 2: pdc: stored data is corrupt"},
	&wire.ScrubReport{},
	&wire.ScrubReport{Objects: 3, Bytes: 1 << 30, Orphans: []wire.ScrubOrphan{{}, {ID: 2, Paths: []string{"p"}}},
		Corrupt: []wire.ScrubBad{{ID: 1, First: []uint64{1}}, {}}, NOrphans: 2, NCorrupt: 5, Verified: 100,
		Errors: []string{"", strings.Repeat("e", 300)}},
}

func TestGoneMessagesRoundTrip(t *testing.T) {
	for _, v := range goneSamples {
		b := v.Marshal(nil)
		m := reflect.New(reflect.TypeOf(v).Elem()).Interface().(wire.Message)
		if err := m.Unmarshal(b); err != nil {
			t.Fatalf("%T %+v: %v", v, v, err)
		}
		if !reflect.DeepEqual(normal(m), normal(v)) {
			t.Fatalf("%T round trip:\n got %+v\nwant %+v", v, m, v)
		}
		if p := v.Marshal([]byte("prefix")); !bytes.Equal(p[6:], b) {
			t.Fatalf("%T: Marshal does not append", v)
		}
		// Every prefix of the encoding fails cleanly or decodes.
		for i := range b {
			_ = m.Unmarshal(b[:i])
		}
	}
}

// normal makes empty slices nil, as decoding leaves them.
func normal(m wire.Message) wire.Message {
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Slice && f.Len() == 0 {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return m
}

func FuzzGoneMessages(f *testing.F) {
	for _, v := range goneSamples {
		f.Add(v.Marshal(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []wire.Message{new(wire.IDList), new(wire.GoneIDs), new(wire.ScrubReq), new(wire.ScrubOrphan), new(wire.ScrubBad), new(wire.ScrubReport)} {
			if m.Unmarshal(b) != nil {
				continue
			}
			// What decodes encodes to something that decodes the same.
			again := reflect.New(reflect.TypeOf(m).Elem()).Interface().(wire.Message)
			if err := again.Unmarshal(m.Marshal(nil)); err != nil || !reflect.DeepEqual(normal(again), normal(m)) {
				t.Fatalf("%T: %+v re-encoded decodes as %+v (%v)", m, m, again, err)
			}
		}
	})
}

// A data server of a build before GoneIDs reads MethodObjGone's answer as
// an IDList: it sees every id GoneIDs names, Never among them, as gone.
func TestGoneIDsReadAsIDList(t *testing.T) {
	g := wire.GoneIDs{IDs: []uint64{3, 1 << 40, 9}, Never: []uint64{1 << 40}}
	var old wire.IDList
	if err := old.Unmarshal(g.Marshal(nil)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(old.IDs, g.IDs) {
		t.Fatalf("read as an IDList: %v, want %v", old.IDs, g.IDs)
	}
	var back wire.GoneIDs
	if err := back.Unmarshal((&wire.IDList{IDs: g.IDs}).Marshal(nil)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.IDs, g.IDs) || back.Never != nil {
		t.Fatalf("an IDList read as GoneIDs: %+v", back)
	}
}
