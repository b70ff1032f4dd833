package regionstore

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// A shrink of the dims that ends inside a corrupt block keeps the block's
// bytes before the new end: they must still read as corrupt, not be given
// a fresh CRC that makes the damaged bytes read as good data.
func TestCutKeepsCorruptionDetected(t *testing.T) {
	s, l, data := corruptBlock0(t)
	defer func() { _ = s.Close() }()
	got := make([]byte, blockSize/2)
	box := region.Box{Off: []uint64{0}, Size: []uint64{uint64(len(got))}}
	if err := s.Read(5, l, box, got); !errors.Is(err, pdc.ErrCorrupt) {
		t.Fatalf("read of a flipped block: %v, want ErrCorrupt", err)
	}
	// Shrink to half a block: the cut rechecksums block 0.
	small := Layout{Dims: []uint64{uint64(len(got))}, Elem: 1, Mode: ByOffset, Version: 2}
	if err := s.Read(5, small, box, got); !errors.Is(err, pdc.ErrCorrupt) {
		t.Fatalf("read of a flipped block after a shrink into it: %v (byte 100 is %#x, written %#x), want ErrCorrupt",
			err, got[100], data[100])
	}
}

// A write that covers a corrupt block only in part would merge it with
// the block's other bytes and give the result a fresh CRC: the damaged
// bytes outside the write would then read as good data. It is refused,
// naming the block; a write of the whole block replaces it.
func TestPartialWriteKeepsCorruptionDetected(t *testing.T) {
	s, l, data := corruptBlock0(t)
	defer func() { _ = s.Close() }()
	// One byte of block 0, far from the flipped one.
	err := s.Write(5, l, region.Box{Off: []uint64{2000}, Size: []uint64{1}}, []byte{7})
	if !errors.Is(err, pdc.ErrCorrupt) || !strings.Contains(err.Error(), "block 0") || !strings.Contains(err.Error(), "object 5") {
		t.Fatalf("write of one byte of a corrupt block: %v, want ErrCorrupt naming object 5 and block 0", err)
	}
	got := make([]byte, 200)
	err = s.Read(5, l, region.Box{Off: []uint64{0}, Size: []uint64{200}}, got)
	if !errors.Is(err, pdc.ErrCorrupt) {
		t.Fatalf("read of a flipped byte after a write elsewhere in its block: %v (byte 100 is %#x, written %#x), want ErrCorrupt",
			err, got[100], data[100])
	}
	whole := region.Box{Off: []uint64{0}, Size: []uint64{blockSizeU()}}
	fresh := randData(rand.New(rand.NewPCG(9, 9)), int(blockSize))
	if err := s.Write(5, l, whole, fresh); err != nil {
		t.Fatalf("write of the whole corrupt block: %v", err)
	}
	back := make([]byte, blockSize)
	if err := s.Read(5, l, whole, back); err != nil || !bytes.Equal(back, fresh) {
		t.Fatalf("read of the rewritten block: %v", err)
	}
}

// corruptBlock0 stores two blocks of object 5 by offset, flips byte 100
// (in block 0) in the file, and reopens the store: the object's layout
// and what was written are returned with it.
func corruptBlock0(t *testing.T) (*Store, Layout, []byte) {
	t.Helper()
	dir := t.TempDir()
	l := Layout{Dims: []uint64{2 * blockSizeU()}, Elem: 1, Mode: ByOffset}
	s := openStore(t, dir, false)
	data := randData(rand.New(rand.NewPCG(7, 8)), int(2*blockSize))
	if err := s.Write(5, l, region.Shape(l.Dims...), data); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	flipByte(t, filepath.Join(dir, "0000000000000005.off"), offHeaderSize+tableBytes(tableFor(2*blockSize))+100)
	return openStore(t, dir, false), l, data
}
