package client_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// startedRead makes an object of 64 KiB in ct, writes it, and starts a
// read of all of it into got.
func startedRead(t *testing.T, ctx context.Context, ct *client.Container) (o *client.Object, rd *client.Transfer, got, want []byte) {
	t.Helper()
	const n = 1 << 16
	o, err := ct.CreateObject(ctx, "o", client.ObjectProps{Dims: []uint64{n}, Type: region.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	want = bytes.Repeat([]byte{7}, n)
	if err := o.Write(ctx, region.Shape(n), want); err != nil {
		t.Fatal(err)
	}
	got = make([]byte, n)
	if rd, err = o.StartRead(ctx, region.Shape(n), got); err != nil {
		t.Fatal(err)
	}
	return o, rd, got, want
}

// An object's Close whose context has ended fails, and a later Close still
// waits for the transfers under way: the read lands in its buffer before
// the second Close returns.
func TestObjectCloseAgainAfterItsContextEnded(t *testing.T) {
	_, _, ctx, ct := placeSetup(t, 1, "reclose")
	o, rd, got, want := startedRead(t, ctx, ct)
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

// A transfer that failed can be started again (the data server says so:
// "start it again"), and its second run reports how that run ended, not
// the first run's error.
func TestRestartedTransferReportsItsOwnEnd(t *testing.T) {
	srv, c, ctx, ct := placeSetup(t, 1, "restart")
	other := srv.connect(t)
	dims := []uint64{64, 1024}
	o, err := ct.CreateObject(ctx, "o", client.ObjectProps{Dims: dims, Type: region.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.PutData(ctx, make([]byte, dims[0]*dims[1])); err != nil {
		t.Fatal(err)
	}
	rows := region.Box{Off: []uint64{50, 0}, Size: []uint64{10, dims[1]}}
	got := make([]byte, rows.Volume())
	rd, err := o.NewTransfer(ctx, got, client.Read, region.Shape(rows.Volume()), rows)
	if err != nil {
		t.Fatal(err)
	}
	// Another client shrinks the object under the read, and writes with
	// the new dims, so that the data server knows them.
	ob, err := other.OpenObject(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	first := region.Box{Off: []uint64{0, 0}, Size: []uint64{1, dims[1]}}
	setDims := func(d []uint64) {
		t.Helper()
		if err := ob.SetDims(ctx, d); err != nil {
			t.Fatal(err)
		}
		if err := ob.Write(ctx, first, make([]byte, dims[1])); err != nil {
			t.Fatal(err)
		}
	}
	setDims([]uint64{40, dims[1]})
	if err := rd.Start(ctx); err != nil {
		t.Fatal(err)
	}
	failed := rd.Wait(ctx)
	if failed == nil {
		t.Fatal("a read of rows cut off by another client succeeded")
	}
	// Waited again, it fails again, alone or with others.
	if err := rd.Wait(ctx); err == nil || err.Error() != failed.Error() {
		t.Fatalf("second wait of the failed read: %v, want %v", err, failed)
	}
	if err := c.WaitAll(ctx, []*client.Transfer{rd, rd}); err == nil || err.Error() != failed.Error() {
		t.Fatalf("wait_all of the failed read, listed twice: %v, want %v", err, failed)
	}
	// The object grows back, the rows are written again, and the read
	// starts again.
	setDims(dims)
	want := bytes.Repeat([]byte{9}, int(rows.Volume()))
	if err := ob.Write(ctx, rows, want); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Dims(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rd.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rd.Wait(ctx); err != nil {
		t.Fatalf("the read started again: %v", err)
	}
	if err := rd.Err(); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the read started again: error %v, bytes equal %v", err, bytes.Equal(got, want))
	}
}

// A transfer listed twice in one WaitAll is waited once: the wait does
// not fail because the data server had already answered it.
func TestWaitAllListingATransferTwice(t *testing.T) {
	_, c, ctx, ct := placeSetup(t, 1, "twice")
	_, rd, got, want := startedRead(t, ctx, ct)
	if err := c.WaitAll(ctx, []*client.Transfer{rd, rd}); err != nil {
		t.Fatal(err)
	}
	if err := rd.Err(); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read: error %v, bytes equal %v", err, bytes.Equal(got, want))
	}
}

// A transfer listed twice in one StartAll is refused, as starting a
// started transfer is: it would be registered twice on its data server,
// which would keep the copy never waited until the client goes.
func TestStartAllListingATransferTwice(t *testing.T) {
	_, c, ctx, ct := placeSetup(t, 1, "twice")
	const n = 1 << 16
	o, err := ct.CreateObject(ctx, "o", client.ObjectProps{Dims: []uint64{n}, Type: region.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, n)
	rd, err := o.NewTransfer(ctx, buf, client.Read, region.Shape(n), region.Shape(n))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartAll(ctx, []*client.Transfer{rd, rd}); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("start_all listing a transfer twice: %v, want %v", err, pdc.ErrInvalid)
	}
	if err := c.StartAll(ctx, []*client.Transfer{rd}); err != nil {
		t.Fatal(err)
	}
	if err := rd.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}
