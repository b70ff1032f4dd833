package regionstore

import (
	"syscall"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A cut is durable once acknowledged, whatever Options.Sync says: the
// metadata server forgets it then. One that relaid the file out and
// failed only to fsync the directory after the rename, pushed again,
// fsynced the new file and was acknowledged with the rename still not
// durable: a power loss brought the old file back, uncut, under the older
// version, and a regrow read the dropped rows back.
func TestCutAgainAfterItsDirectorySyncFailed(t *testing.T) {
	for _, sync := range []bool{false, true} {
		mem := vfs.NewMem()
		fsys := vfs.NewFaulty(mem)
		s, err := Open(Options{Dir: faultDir, FS: fsys, Sync: sync})
		if err != nil {
			t.Fatal(err)
		}
		full := Layout{Dims: []uint64{27, 68}, Elem: 8, Mode: ByOffset, Version: 1}
		data := make([]byte, 27*68*8)
		for i := range data {
			data[i] = byte(i%251 + 1)
		}
		if err := s.Write(7, full, region.Shape(27, 68), data); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(7); err != nil {
			t.Fatal(err)
		}
		fsys.Inject(vfs.Rule{Ops: vfs.OpSyncDir, Count: 1, Err: syscall.EIO})
		if err := s.Cut(7, []uint64{2, 38}, 2); err == nil {
			t.Fatalf("sync=%v: a cut whose directory fsync failed succeeded", sync)
		}
		fsys.Clear()
		if err := s.Cut(7, []uint64{2, 38}, 2); err != nil {
			t.Fatalf("sync=%v: the cut pushed again: %v", sync, err)
		}
		// Acknowledged: a power loss now.
		s2, err := Open(Options{Dir: faultDir, FS: mem.CrashClone(), Sync: sync})
		if err != nil {
			t.Fatal(err)
		}
		regrow := Layout{Dims: []uint64{27, 38}, Elem: 8, Mode: ByOffset, Version: 3}
		got := make([]byte, 27*38*8)
		if err := s2.Read(7, regrow, region.Shape(27, 38), got); err != nil {
			t.Fatalf("sync=%v: %v", sync, err)
		}
		for j, b := range got {
			row, col := j/(38*8), j%(38*8)
			want := byte(0)
			if row < 2 {
				want = data[row*68*8+col]
			}
			if b != want {
				t.Fatalf("sync=%v: after the cut acknowledged and a power loss, then a regrow: row %d col %d reads %d, want %d", sync, row, col/8, b, want)
			}
		}
		_ = s2.Close()
		_ = s.Close()
	}
}

// So is a flush: a write whose relayout's directory fsync failed, then
// flushed, must survive a power loss.
func TestFlushAfterARelayoutsDirectorySyncFailed(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s, err := Open(Options{Dir: faultDir, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	one := region.Box{Off: []uint64{1, 1}, Size: []uint64{1, 1}}
	v := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	if err := s.Write(7, Layout{Dims: []uint64{4, 68}, Elem: 8, Mode: ByOffset, Version: 1}, one, v); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(7); err != nil {
		t.Fatal(err)
	}
	wide := Layout{Dims: []uint64{4, 80}, Elem: 8, Mode: ByOffset, Version: 2}
	fsys.Inject(vfs.Rule{Ops: vfs.OpSyncDir, Count: 1, Err: syscall.EIO})
	if err := s.Write(7, wide, one, v); err == nil {
		t.Fatal("a write whose relayout's directory fsync failed succeeded")
	}
	fsys.Clear()
	w := []byte{9, 9, 9, 9, 9, 9, 9, 9}
	at := region.Box{Off: []uint64{2, 70}, Size: []uint64{1, 1}}
	if err := s.Write(7, wide, at, w); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(7); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Options{Dir: faultDir, FS: mem.CrashClone()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got := make([]byte, 8)
	if err := s2.Read(7, wide, at, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(w) {
		t.Fatalf("a flushed write after a relayout whose directory fsync failed reads %v after a power loss, want %v", got, w)
	}
}
