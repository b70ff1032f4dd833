package regionstore

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// A cut that fails part way (EIO at any one of its operations), pushed
// again by the metadata server, which keeps a cut until a push is
// acknowledged, must leave the file with the cut's dims and every kept
// element as it was, after a close and reopen too, and the dropped rows
// reading as zeros after a regrow. So must a write or a read carrying
// the cut's dims that fails part way, before the cut is pushed.
func TestCutFailsPartWayThenAgain(t *testing.T) {
	type step struct {
		name      string
		full, cut []uint64
		regrow    []uint64
		keepRows  uint64
		keepCols  uint64
		fullCols  uint64
	}
	steps := []step{
		// 27x68 of 8 bytes: the new end falls inside a block.
		{name: "shrink", full: []uint64{27, 68}, cut: []uint64{5, 68}, regrow: []uint64{27, 68}, keepRows: 5, keepCols: 68, fullCols: 68},
		{name: "relayout", full: []uint64{27, 68}, cut: []uint64{2, 38}, regrow: []uint64{27, 38}, keepRows: 2, keepCols: 38, fullCols: 68},
	}
	for _, mode := range []Mode{ByOffset, ByRegion} {
		for _, st := range steps {
			for _, by := range []string{"cut", "write", "read"} {
				for k := 0; ; k++ {
					name := fmt.Sprintf("%s/%s/%s/fault at op %d", mode, st.name, by, k)
					mem := vfs.NewMem()
					fsys := vfs.NewFaulty(mem)
					s, err := Open(Options{Dir: faultDir, FS: fsys})
					if err != nil {
						t.Fatal(err)
					}
					full := Layout{Dims: st.full, Elem: 8, Mode: mode, Version: 1}
					data := make([]byte, st.full[0]*st.full[1]*8)
					for i := range data {
						data[i] = byte(i%251 + 1)
					}
					if err := s.Write(7, full, region.Shape(st.full...), data); err != nil {
						t.Fatal(err)
					}
					if err := s.Flush(7); err != nil {
						t.Fatal(err)
					}
					fsys.Inject(vfs.Rule{Ops: vfs.OpAll, After: k, Count: 1, Err: syscall.EIO, Short: true})
					kept := Layout{Dims: st.cut, Elem: 8, Mode: mode, Version: 2}
					one := region.Box{Off: []uint64{0, 0}, Size: []uint64{1, 1}}
					var first error
					switch by {
					case "cut":
						first = s.Cut(7, st.cut, 2)
					case "write":
						first = s.Write(7, kept, one, data[:8])
					case "read":
						first = s.Read(7, kept, one, make([]byte, 8))
					}
					injected := len(fsys.Injected()) > 0
					fsys.Clear()
					if err := s.Cut(7, st.cut, 2); err != nil {
						t.Fatalf("%s: the cut pushed again (the first: %v): %v", name, first, err)
					}
					if err := s.Close(); err != nil {
						t.Fatalf("%s: close: %v", name, err)
					}
					s, err = Open(Options{Dir: faultDir, FS: mem})
					if err != nil {
						t.Fatal(err)
					}
					got := make([]byte, st.keepRows*st.keepCols*8)
					if err := s.Read(7, kept, region.Shape(st.cut...), got); err != nil {
						t.Fatalf("%s (the first push: %v): read of what the cut keeps: %v", name, first, err)
					}
					for j, b := range got {
						row, col := uint64(j)/(st.keepCols*8), uint64(j)%(st.keepCols*8)
						if want := data[row*st.fullCols*8+col]; b != want {
							t.Fatalf("%s (the first push: %v): row %d col %d reads %d, want %d", name, first, row, col/8, b, want)
						}
					}
					regrow := Layout{Dims: st.regrow, Elem: 8, Mode: mode, Version: 3}
					got = make([]byte, st.regrow[0]*st.regrow[1]*8)
					if err := s.Read(7, regrow, region.Shape(st.regrow...), got); err != nil {
						t.Fatalf("%s: read after a regrow: %v", name, err)
					}
					for j, b := range got[st.keepRows*st.regrow[1]*8:] {
						if b != 0 {
							t.Fatalf("%s (the first push: %v): after a regrow, byte %d past the kept rows reads %d, want 0", name, first, j, b)
						}
					}
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					if !injected {
						break
					}
				}
			}
		}
	}
}
