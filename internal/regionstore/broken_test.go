package regionstore

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

	"github.com/pdcgo/pdc/region"
)

// What a by-offset write from a broken stream stored before the break is
// in the file like any other element: a shrink of the dims drops it, so
// it reads as zeros when they grow back, and a view reads what a read
// does.
func TestBrokenWriteFromDroppedByShrink(t *testing.T) {
	s := openStore(t, t.TempDir(), false)
	defer func() { _ = s.Close() }()
	l := Layout{Dims: []uint64{100, 4096}, Elem: 1, Mode: ByOffset}
	box := region.Box{Off: []uint64{60, 0}, Size: []uint64{40, 4096}}
	stored := region.Box{Off: []uint64{60, 0}, Size: []uint64{2, 4096}}
	broken := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte{9}, 2*4096)), iotest.ErrReader(errBroken))
	if err := s.WriteFrom(1, l, box, broken, make([]byte, 4096)); err == nil {
		t.Fatal("a write from a broken stream succeeded")
	}
	got := make([]byte, 2*4096)
	if err := s.Read(1, l, stored, got); err != nil {
		t.Fatal(err)
	}
	if v := viewBytes(t, s, 1, l, stored); !bytes.Equal(v, got) {
		t.Errorf("a view of the rows stored before the break differs from a read of them")
	}
	small := l
	small.Dims = []uint64{50, 4096}
	if err := s.Read(1, small, region.Shape(1, 4096), make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if err := s.Read(1, l, stored, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, make([]byte, len(got))) {
		t.Errorf("rows 60-61, outside dims shrunk to 50 and grown back, read %d... and not zeros", got[0])
	}
}
