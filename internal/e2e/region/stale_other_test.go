package region_test

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

// TestStaleOtherObjectKeepsWritesInOrder: a start that writes a region of
// one object together with a write or read of another object whose dims
// are out of date is refused as stale as a whole, and sent again when its
// answer is collected. A later start that writes the same region of the
// first object, at the same dims version, went out without waiting for
// that answer: stored first, it was then overwritten by the earlier write
// sent again, and the client read back its first write with no error.
func TestStaleOtherObjectKeepsWritesInOrder(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	ctx := e2e.Ctx(t, 2*time.Minute)
	a, b := e2e.Connect(t, tmpdir), e2e.Connect(t, tmpdir)
	ct, _, err := a.CreateContainer(ctx, "staleother", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	fill := func(n uint64, v int32) []byte {
		buf := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(v))
		}
		return buf
	}
	dims := []uint64{16, 64}
	whole := region.Shape(dims...)
	for _, companion := range []client.Access{client.Write, client.Read} {
		name := companion.String()
		oa, err := ct.CreateObject(ctx, name+"-a", client.ObjectProps{Dims: dims, Type: region.Int32})
		if err != nil {
			t.Fatal(err)
		}
		oy, err := ct.CreateObject(ctx, name+"-y", client.ObjectProps{Dims: dims, Type: region.Int32})
		if err != nil {
			t.Fatal(err)
		}
		// Another client grows y and reads it, so that the data server
		// knows y's new dims; a's handle of y keeps the old ones.
		by, err := b.OpenObject(ctx, name+"-y")
		if err != nil {
			t.Fatal(err)
		}
		if err := by.SetDims(ctx, []uint64{dims[0] + 8, dims[1]}); err != nil {
			t.Fatal(err)
		}
		if err := by.Read(ctx, whole, make([]byte, 4*whole.Volume())); err != nil {
			t.Fatal(err)
		}
		first, err := oa.NewTransfer(ctx, fill(whole.Volume(), 2), client.Write, region.Shape(whole.Volume()), whole)
		if err != nil {
			t.Fatal(err)
		}
		stale, err := oy.NewTransfer(ctx, fill(1, 4), companion, region.Shape(1), region.Shape(1, 1))
		if err != nil {
			t.Fatal(err)
		}
		// One start on the one data server, refused for y.
		if err := a.StartAll(ctx, []*client.Transfer{first, stale}); err != nil {
			t.Fatal(err)
		}
		second, err := oa.NewTransfer(ctx, fill(whole.Volume(), 3), client.Write, region.Shape(whole.Volume()), whole)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.StartAll(ctx, []*client.Transfer{second}); err != nil {
			t.Fatal(err)
		}
		if err := a.WaitAll(ctx, []*client.Transfer{second, first, stale}); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4*whole.Volume())
		ba, err := b.OpenObject(ctx, name+"-a")
		if err != nil {
			t.Fatal(err)
		}
		if err := ba.Read(ctx, whole, got); err != nil {
			t.Fatal(err)
		}
		if want := fill(whole.Volume(), 3); !bytes.Equal(got, want) {
			n := 0
			for i := 0; i < len(got); i += 4 {
				if !bytes.Equal(got[i:i+4], want[i:i+4]) {
					n++
				}
			}
			t.Errorf("stale %s of another object: %d of %d elements do not hold the second write (the first: %v)", name, n, whole.Volume(), got[:4])
		}
	}
}
