package regionstore

import (
	"testing"

	"github.com/pdcgo/pdc/region"
)

// TestStatsCountObjectsWithFiles checks the objects and bytes Stats
// reports through writes, deletes (of objects loaded, never loaded since
// Open, and never written) and a reopen.
func TestStatsCountObjectsWithFiles(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, false)
	want := func(s *Store, objects int64, written uint64) {
		t.Helper()
		if st := s.Stats(); st.Objects != objects || st.WrittenBytes != written {
			t.Fatalf("Stats %+v, want %d objects and %d bytes written", st, objects, written)
		}
	}
	want(s, 0, 0)
	for i, mode := range []Mode{ByOffset, ByRegion, ByOffset} {
		l := Layout{Dims: []uint64{16}, Elem: 4, Mode: mode}
		for range 2 { // the second write makes no new object
			if err := s.Write(uint64(i+1), l, region.Shape(16), make([]byte, 64)); err != nil {
				t.Fatal(err)
			}
		}
	}
	want(s, 3, 3*2*64)
	if err := s.Delete(3); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(99); err != nil { // never written: no files
		t.Fatal(err)
	}
	want(s, 2, 3*2*64)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, false)
	want(s, 2, 0)
	if err := s.Delete(1); err != nil { // untouched since Open
		t.Fatal(err)
	}
	want(s, 1, 0)
	if _, err := s.Bytes(2); err != nil {
		t.Fatal(err)
	}
	l := Layout{Dims: []uint64{16}, Elem: 4, Mode: ByRegion}
	if err := s.Read(2, l, region.Shape(16), make([]byte, 64)); err != nil { // loads it
		t.Fatal(err)
	}
	if err := s.Delete(2); err != nil {
		t.Fatal(err)
	}
	want(s, 0, 0)
}
