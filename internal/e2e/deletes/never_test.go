package deletes_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// An object id is predictable: a client can write to an object's id
// before the object is created. The data server asks the metadata server
// about the id, which has never handed it out; the write is refused
// (pdc.ErrNotFound), and once the object is really created it writes and
// reads as any other. The data server used to be told "gone" and to keep
// refusing the object as deleted for as long as it ran.
func TestWriteBeforeCreateDoesNotBuryTheObject(t *testing.T) {
	tmpdir := e2e.Up(t, 1)
	ctx := e2e.Ctx(t, 2*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "early", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{4, 256}
	props := client.ObjectProps{Dims: dims, Type: region.Uint8, Partition: client.ObjectStatic, Storage: client.StorageByOffset}
	probe, err := ct.CreateObject(ctx, "probe", props)
	if err != nil {
		t.Fatal(err)
	}
	// The one metadata server hands out sequence numbers in order: the
	// next object created gets the next one.
	const name = "target"
	guess := placement.ID(placement.Key(name, 0), placement.SeqOf(probe.ID())+1)

	list, err := cluster.ReadList(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := cluster.SecretIn(tmpdir)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := rpc.Dial(ctx, list.Servers[0].Addr, rpc.DialOptions{Secret: secret, ClientName: "guesser"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	early := bytes.Repeat([]byte{0xee}, 256)
	start := wire.DataStart{Wait: true, Items: []wire.DataItem{{
		Obj: guess, Write: true, Off: []uint64{0, 0}, Size: []uint64{1, 256}, Dims: dims, Elem: 1,
	}}}
	rep, err := conn.Call(ctx, wire.MethodDataStart, start.Marshal(nil), [][]byte{early}, nil)
	if err == nil {
		var res wire.DataResults
		if err = res.Unmarshal(rep.Header); err == nil && len(res.Items) == 1 && res.Items[0].Code != wire.CodeOK {
			err = res.Items[0].Code.Err()
		}
	}
	t.Logf("the write to object %d before its create: %v", guess, err)
	if !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("a write to object %d before it was created: %v, want pdc.ErrNotFound", guess, err)
	}

	o, err := ct.CreateObject(ctx, name, props)
	if err != nil {
		t.Fatal(err)
	}
	if o.ID() != guess {
		t.Fatalf("object %q got id %d, the test guessed %d: it proves nothing", name, o.ID(), guess)
	}
	whole := region.Shape(dims...)
	want := make([]byte, whole.Volume())
	for i := range want {
		want[i] = byte(i*7 + 1)
	}
	if err := o.Write(ctx, whole, want); err != nil {
		t.Fatalf("write object %q (id %d), created after a write to its id was refused: %v", name, o.ID(), err)
	}
	got := make([]byte, len(want))
	if err := o.Read(ctx, whole, got); err != nil {
		t.Fatalf("read object %q (id %d): %v", name, o.ID(), err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("object %q reads back other bytes than were written", name)
	}
}
