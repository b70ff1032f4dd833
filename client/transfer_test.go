package client_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// An object's Close whose context has ended fails, and a later Close still
// waits for the transfers under way: the read lands in its buffer before
// the second Close returns.
func TestObjectCloseAgainAfterItsContextEnded(t *testing.T) {
	_, _, ctx, ct := placeSetup(t, 1, "reclose")
	const n = 1 << 16
	o, err := ct.CreateObject(ctx, "o", client.ObjectProps{Dims: []uint64{n}, Type: region.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte{7}, n)
	if err := o.Write(ctx, region.Shape(n), want); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	rd, err := o.StartRead(ctx, region.Shape(n), got)
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := o.Close(gone); err == nil {
		t.Fatal("close under an ended context succeeded")
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		st, err := rd.Status(ctx)
		t.Fatalf("the read was not done when Close returned (status %v %v)", st, err)
	}
}
