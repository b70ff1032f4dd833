package clienttest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/client/clienttest"
	"github.com/pdcgo/pdc/region"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A cluster of two serves region I/O, loses one server to Stop with a
// clear error, and restarted on its directory still holds what was
// written.
func TestStartStopRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tc := clienttest.Start(t, clienttest.Options{Servers: 2, Staging: true})
	for rank := range 2 {
		if st, err := os.Stat(tc.ProducerDir(rank)); err != nil || !st.IsDir() {
			t.Fatalf("producer dir of rank %d: %v", rank, err)
		}
	}
	c := tc.Connect(t)
	if n := len(c.Servers()); n != 2 {
		t.Fatalf("client sees %d servers, want 2", n)
	}
	ct, _, err := c.CreateContainer(ctx, "c", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := ct.CreateObject(ctx, "o", client.ObjectProps{Dims: []uint64{1 << 16}, Type: region.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("pdc!"), 1<<14)
	box := region.Shape(1 << 16)
	if err := obj.Write(ctx, box, want); err != nil {
		t.Fatal(err)
	}
	if err := tc.Stop(1); err != nil {
		t.Fatalf("rank 1 stopped with %v", err)
	}
	if _, err := c.Ping(ctx, 1); !errors.Is(err, pdc.ErrUnavailable) {
		t.Fatalf("ping of a stopped server: got %v, want pdc.ErrUnavailable", err)
	}
	if err := tc.StopAll(); err != nil {
		t.Fatal(err)
	}
	again := clienttest.Start(t, clienttest.Options{Servers: 2, Dir: tc.Dir()})
	c2 := again.Connect(t)
	o2, err := c2.OpenObject(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := o2.Read(ctx, box, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the restarted cluster reads back other bytes")
	}
}

// Hosts name the servers' hosts, one per server; a mismatch is refused
// before anything starts.
func TestHosts(t *testing.T) {
	tc := clienttest.Start(t, clienttest.Options{Hosts: []string{"node-a", "node-b"}, Staging: true})
	c := tc.Connect(t)
	for rank, want := range []string{"node-a", "node-b"} {
		if got := c.Servers()[rank].Host; got != want {
			t.Errorf("rank %d reports host %q, want %q", rank, got, want)
		}
	}
	if got := tc.ProducerDir(1); got != tc.Dir()+"/prod-node-b" {
		t.Errorf("producer dir of node-b: %s", got)
	}
}
