package regionstore

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/region"
)

// A cut pushed by the metadata server (Cut) drops what lies past a
// shrink that no call carried, so that a later regrow reads zeros there,
// also after a crash; dims older than the object's are ignored, and an
// object without files gets none.
func TestCutBeforeRegrow(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, false)
			full := Layout{Dims: []uint64{27, 64}, Elem: 8, Mode: mode, Version: 1}
			data := make([]byte, 27*64*8)
			for i := range data {
				data[i] = byte(i%251 + 1)
			}
			if err := s.Write(7, full, region.Shape(27, 64), data); err != nil {
				t.Fatal(err)
			}
			if err := s.Cut(7, []uint64{8, 64}, 2); err != nil {
				t.Fatal(err)
			}
			// Older dims than the cut's change nothing.
			if err := s.Cut(7, []uint64{1, 64}, 1); err != nil {
				t.Fatal(err)
			}
			if err := s.Cut(9, []uint64{1, 64}, 3); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(s.path(9, ".off")); !os.IsNotExist(err) {
				t.Fatalf("a cut of an object without files made one: %v", err)
			}
			crash(s)
			s = openStore(t, dir, false)
			defer s.Close()
			if v, err := s.Version(7); err != nil || v != 2 {
				t.Fatalf("version after the cut and a crash: %d, %v; want 2", v, err)
			}
			regrow := Layout{Dims: []uint64{26, 64}, Elem: 8, Mode: mode, Version: 3}
			got := make([]byte, 26*64*8)
			if err := s.Read(7, regrow, region.Shape(26, 64), got); err != nil {
				t.Fatal(err)
			}
			for i, b := range got {
				want := byte(0)
				if i < 8*64*8 {
					want = data[i]
				}
				if b != want {
					t.Fatalf("byte %d (row %d) reads %d, want %d", i, i/(64*8), b, want)
				}
			}
		})
	}
}
