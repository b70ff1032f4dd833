package durable_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// A transfer started on a data server that then dies is waited for once
// the server is back, restarted: the wait goes to the new server, which
// never heard of the transfer. Its ids are numbered afresh there, and the
// transfers this client started on the new server took the same numbers:
// the wait must fail, not be answered with another transfer's result (a
// read with another region's bytes, a write "stored" that never was).
func TestWaitAfterTheDataServerRestarted(t *testing.T) {
	const size = 1
	tmpdir := e2e.Up(t, size)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "wait-restart", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const cols = 1024
	o, err := ct.CreateObject(ctx, "x", client.ObjectProps{Dims: []uint64{2, cols}, Type: region.Int32})
	if err != nil {
		t.Fatal(err)
	}
	row := func(r uint64) region.Box { return region.Box{Off: []uint64{r, 0}, Size: []uint64{1, cols}} }
	rows := [2][]byte{make([]byte, 4*cols), make([]byte, 4*cols)}
	for r := range rows {
		for i := range cols {
			binary.LittleEndian.PutUint32(rows[r][4*i:], uint32(r*1_000_000+i+1))
		}
		if err := o.Write(ctx, row(uint64(r)), rows[r]); err != nil {
			t.Fatal(err)
		}
	}
	// Row 0 is read, the read started: its answer (the transfer's id) is
	// in before the server dies. A read waited for on the connection the
	// start went on makes sure of it without collecting r0 (a Status
	// would take r0's result if the server had done it, and r0 would
	// then rightly succeed).
	got := make([]byte, 4*cols)
	r0, err := o.StartRead(ctx, row(0), got)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Read(ctx, row(1), make([]byte, 4*cols)); err != nil {
		t.Fatal(err)
	}
	killRank(t, tmpdir, 0)
	clitest.RestartServer(t, ctx, tmpdir, datadir, 0, size)
	// The client goes on with the new server: reads of row 1.
	var others []*client.Transfer
	for range 32 {
		var tr *client.Transfer
		for attempt := 0; ; attempt++ {
			tr, err = o.StartRead(ctx, row(1), make([]byte, 4*cols))
			if err == nil || attempt > 0 || !errors.Is(err, pdc.ErrUnavailable) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, tr)
	}
	// A read waited for on the connection the starts went on: once it is
	// answered, the new server has registered every start before it, and
	// has given their ids (r0's among them) to them.
	if err := o.Read(ctx, row(1), make([]byte, 4*cols)); err != nil {
		t.Fatal(err)
	}
	err = r0.Wait(ctx)
	if err == nil && !bytes.Equal(got, rows[0]) {
		t.Fatalf("a read started before its data server restarted was answered after, with no error, with other bytes (row 1's: %v)", bytes.Equal(got, rows[1]))
	}
	if err == nil {
		t.Fatal("a read started before its data server restarted was answered by the new server")
	}
	t.Logf("the wait: %v", err)
	for i, tr := range others {
		if err := tr.Wait(ctx); err != nil {
			t.Fatalf("read %d of row 1, started on the new server: %v", i, err)
		}
	}
}

// The status of a write started before its data server restarted, asked
// after, is not the status of another write the new server numbered the
// same: it ends unavailable, and the other write is not taken from its
// own wait.
func TestStatusAfterTheDataServerRestarted(t *testing.T) {
	const size = 1
	tmpdir := e2e.Up(t, size)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "status-restart", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const cols = 1024
	o, err := ct.CreateObject(ctx, "x", client.ObjectProps{Dims: []uint64{2, cols}, Type: region.Int32})
	if err != nil {
		t.Fatal(err)
	}
	row := func(r uint64) region.Box { return region.Box{Off: []uint64{r, 0}, Size: []uint64{1, cols}} }
	// A few transfers first: the write's id is not the new server's first.
	for range 8 {
		if err := o.Write(ctx, row(1), make([]byte, 4*cols)); err != nil {
			t.Fatal(err)
		}
	}
	w0, err := o.StartWrite(ctx, row(0), make([]byte, 4*cols))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	killRank(t, tmpdir, 0)
	clitest.RestartServer(t, ctx, tmpdir, datadir, 0, size)
	// The client's first call finds the server restarted; the next go to
	// the new one.
	if err := o.Read(ctx, row(1), make([]byte, 4*cols)); err != nil && !errors.Is(err, pdc.ErrUnavailable) {
		t.Fatal(err)
	}
	var others []*client.Transfer
	for range 32 {
		tr, err := o.StartWrite(ctx, row(1), make([]byte, 4*cols))
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, tr)
	}
	time.Sleep(200 * time.Millisecond) // they are on the new server
	st, err := w0.Status(ctx)
	if err == nil {
		t.Fatalf("the status of a write started before its data server restarted, asked after: %v, no error", st)
	}
	t.Logf("the status: %v", err)
	for i, tr := range others {
		if err := tr.Wait(ctx); err != nil {
			t.Fatalf("write %d of row 1, started on the new server: %v", i, err)
		}
	}
}

// One wait of transfers of both instances of a data server: a read
// started before the server restarted and reads started after. The first
// ends unavailable; the others are waited for on the new server and read
// their own bytes. (The wait used to cut its chunks before it set aside
// the parts of the old instance, and then sliced the shorter list with
// them: it panicked, or gave a part another's result.)
func TestWaitAllAcrossADataServerRestart(t *testing.T) {
	const size = 1
	tmpdir := e2e.Up(t, size)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "waitall-restart", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const cols = 1024
	o, err := ct.CreateObject(ctx, "x", client.ObjectProps{Dims: []uint64{2, cols}, Type: region.Int32})
	if err != nil {
		t.Fatal(err)
	}
	row := func(r uint64) region.Box { return region.Box{Off: []uint64{r, 0}, Size: []uint64{1, cols}} }
	rows := [2][]byte{make([]byte, 4*cols), make([]byte, 4*cols)}
	for r := range rows {
		for i := range cols {
			binary.LittleEndian.PutUint32(rows[r][4*i:], uint32(r*1_000_000+i+1))
		}
		if err := o.Write(ctx, row(uint64(r)), rows[r]); err != nil {
			t.Fatal(err)
		}
	}
	r0, err := o.StartRead(ctx, row(0), make([]byte, 4*cols))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r0.Status(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // its start is answered
	killRank(t, tmpdir, 0)
	clitest.RestartServer(t, ctx, tmpdir, datadir, 0, size)
	all := []*client.Transfer{r0}
	var bufs [][]byte
	for range 4 {
		buf := make([]byte, 4*cols)
		var tr *client.Transfer
		for attempt := 0; ; attempt++ {
			tr, err = o.StartRead(ctx, row(1), buf)
			if err == nil || attempt > 0 || !errors.Is(err, pdc.ErrUnavailable) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, tr)
		bufs = append(bufs, buf)
	}
	err = c.WaitAll(ctx, all)
	if !errors.Is(err, pdc.ErrUnavailable) {
		t.Fatalf("a wait of a read started before its data server restarted, with reads started after: %v, want unavailable", err)
	}
	t.Logf("the wait: %v", err)
	if werr := r0.Wait(ctx); !errors.Is(werr, pdc.ErrUnavailable) {
		t.Fatalf("the read started before the restart: %v, want unavailable", werr)
	}
	for i, tr := range all[1:] {
		if err := tr.Wait(ctx); err != nil {
			t.Fatalf("read %d of row 1, started on the new server: %v", i, err)
		}
		if !bytes.Equal(bufs[i], rows[1]) {
			t.Fatalf("read %d of row 1, started on the new server, read other bytes", i)
		}
	}
}
