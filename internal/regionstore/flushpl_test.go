package regionstore

import (
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A flushed object survives a power loss, also in a store without Sync,
// where its file was created without a sync of the directory: Flush
// synced the file's bytes and not its name, so a by-offset object read
// back as zeros (no file) after the power loss.
func TestFlushedObjectSurvivesPowerLoss(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		mem := vfs.NewMem()
		s, err := Open(Options{Dir: "d", FS: mem})
		if err != nil {
			t.Fatal(err)
		}
		full := Layout{Dims: []uint64{27, 64}, Elem: 8, Mode: mode, Version: 1}
		data := make([]byte, 27*64*8)
		for i := range data {
			data[i] = byte(i%251 + 1)
		}
		if err := s.Write(7, full, region.Shape(27, 64), data); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(7); err != nil {
			t.Fatal(err)
		}
		crashed := mem.CrashClone()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err = Open(Options{Dir: "d", FS: crashed})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if err := s.Read(7, full, region.Shape(27, 64), got); err != nil {
			t.Fatalf("%v: read after a power loss: %v", mode, err)
		}
		for i := range got {
			if got[i] != data[i] {
				t.Errorf("%v: flushed, then a power loss: byte %d reads %d, want %d", mode, i, got[i], data[i])
				break
			}
		}
		s.Close()
	}
}
