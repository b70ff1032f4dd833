package regionstore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A write cut short by a full disk inside a block it covers in part
// leaves that block neither old nor new. The block's other bytes were
// acknowledged before and the failed write never touched them: they must
// still read back, without a checksum error.
func TestShortWriteKeepsRestOfBlock(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			fsys := vfs.NewFaulty(mem)
			s, err := Open(Options{Dir: faultDir, FS: fsys})
			if err != nil {
				t.Fatal(err)
			}
			l := Layout{Dims: []uint64{2 * blockSizeU()}, Elem: 1, Mode: mode}
			data := randData(rand.New(rand.NewPCG(1, 2)), int(2*blockSize))
			if err := s.Write(7, l, region.Shape(l.Dims...), data); err != nil {
				t.Fatal(err)
			}
			// Bytes [2048, 3072) of block 0: the pending slot's record,
			// then the data, cut short.
			var ops []string
			fsys.OnOp(func(op vfs.Op, path string) { ops = append(ops, op.String()) })
			box := region.Box{Off: []uint64{blockSizeU() / 2}, Size: []uint64{blockSizeU() / 4}}
			remove := fsys.Inject(vfs.Rule{Ops: vfs.OpWrite, After: 1, Count: 1, Err: syscall.ENOSPC, Short: true})
			err = s.Write(7, l, box, bytes.Repeat([]byte{0xEE}, int(box.Size[0])))
			remove()
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("write under a short ENOSPC: %v (ops %v)", err, ops)
			}
			check := func(s *Store, when string) {
				t.Helper()
				got := make([]byte, blockSize/2)
				if err := s.Read(7, l, region.Box{Off: []uint64{0}, Size: []uint64{uint64(len(got))}}, got); err != nil {
					t.Fatalf("%s: read of acknowledged bytes beside a short write in their block: %v", when, err)
				}
				if !bytes.Equal(got, data[:len(got)]) {
					t.Fatalf("%s: acknowledged bytes beside a short write in their block changed", when)
				}
			}
			check(s, "at once")
			crashed := mem.Clone()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for when, fs := range map[string]vfs.FS{"reopened": mem, "after a crash": crashed} {
				s, err := Open(Options{Dir: faultDir, FS: fs})
				if err != nil {
					t.Fatal(err)
				}
				check(s, when)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// What a by-offset Write stored before it failed part way is in the file
// like any other element, as for a broken WriteFrom: a shrink of the dims
// below it drops it, so it reads as zeros when they grow back.
func TestFailedWriteDroppedByShrink(t *testing.T) {
	fsys := vfs.NewFaulty(vfs.NewMem())
	s, err := Open(Options{Dir: faultDir, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	const row = 1 << 20
	l := Layout{Dims: []uint64{8, row}, Elem: 1, Mode: ByOffset}
	if err := s.Write(7, l, region.Box{Off: []uint64{0, 0}, Size: []uint64{2, row}}, bytes.Repeat([]byte{1}, 2*row)); err != nil {
		t.Fatal(err)
	}
	// Rows 2-7 go in groups of 1 MiB (a slot record and two pwrites
	// each): the first group, row 2, is stored, the second fails.
	remove := fsys.Inject(vfs.Rule{Ops: vfs.OpWrite, Path: ".off", After: 4, Count: 1, Err: syscall.ENOSPC})
	err = s.Write(7, l, region.Box{Off: []uint64{2, 0}, Size: []uint64{6, row}}, bytes.Repeat([]byte{9}, 6*row))
	remove()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write under ENOSPC: %v", err)
	}
	got := make([]byte, row)
	rowBox := region.Box{Off: []uint64{2, 0}, Size: []uint64{1, row}}
	if err := s.Read(7, l, rowBox, got); err != nil || got[0] != 9 {
		t.Fatalf("row 2, stored before the failure: %v, byte 0 is %d; want 9 (the case needs the first group stored)", err, got[0])
	}
	small := l
	small.Dims = []uint64{2, row}
	if err := s.Read(7, small, region.Box{Off: []uint64{0, 0}, Size: []uint64{1, row}}, got); err != nil {
		t.Fatal(err)
	}
	if err := s.Read(7, l, rowBox, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, make([]byte, row)) {
		t.Errorf("row 2, outside dims shrunk to 2 rows and grown back, reads %d... and not zeros", got[0])
	}
}

// TestStoreFaults at every write of the workload in turn, each cut short
// by a full disk, three in a row: the store's own repairs (settle) meet
// the fault too, and what they could not write must reach the file's
// table at the next flush, or a clean reopen reads acknowledged bytes as
// corrupt.
func TestShortWritesAtEveryPoint(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		path := ".off"
		if mode == ByRegion {
			path = ".reg"
		}
		for after := range 60 {
			for _, sync := range []bool{false, true} {
				name := fmt.Sprintf("%s/after%d/sync=%v", mode, after, sync)
				storeFaultCase(t, name, mode, sync, vfs.Rule{Ops: vfs.OpWrite, Path: path, After: after, Count: 3, Err: syscall.ENOSPC, Short: true})
			}
		}
	}
}
