package regionstore

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A process killed at any point of a shrink of the dims (between the cut
// of the file and the new CRC of the block the new end falls in, say)
// must not leave that block's kept bytes, acknowledged long before,
// failing their check.
func TestCrashInCutKeepsLastBlock(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s, err := Open(Options{Dir: faultDir, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{Dims: []uint64{2 * blockSizeU()}, Elem: 1, Mode: ByOffset}
	data := randData(rand.New(rand.NewPCG(5, 6)), int(2*blockSize))
	if err := s.Write(7, l, region.Shape(l.Dims...), data); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(7); err != nil {
		t.Fatal(err)
	}
	var crashes []*vfs.MemFS
	var ops []string
	fsys.OnOp(func(op vfs.Op, path string) {
		crashes = append(crashes, mem.Clone())
		ops = append(ops, op.String())
	})
	small := Layout{Dims: []uint64{blockSizeU() / 2}, Elem: 1, Mode: ByOffset, Version: 2}
	got := make([]byte, blockSize/2)
	box := region.Shape(small.Dims...)
	if err := s.Read(7, small, box, got); err != nil {
		t.Fatal(err)
	}
	fsys.OnOp(nil)
	_ = s.Close()
	if !slices.Contains(ops, vfs.OpTruncate.String()) {
		t.Fatalf("the shrink truncated nothing: %v", ops)
	}
	for i, crashed := range crashes {
		s, err = Open(Options{Dir: faultDir, FS: crashed})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Read(7, small, box, got); err != nil {
			t.Fatalf("after a crash before %s in a shrink: read of the kept part of the cut block: %v", ops[i], err)
		}
		if !bytes.Equal(got, data[:len(got)]) {
			t.Fatalf("after a crash before %s in a shrink: the kept part of the cut block changed", ops[i])
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
