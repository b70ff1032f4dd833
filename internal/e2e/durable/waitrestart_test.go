package durable_test

import (
	"bytes"
	"context"
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
	rc := newRestartCase(t, "wait-restart", true)
	ctx := rc.ctx
	// Row 0 is read, the read started: its answer (the transfer's id) is
	// in before the server dies, and r0 is not collected (a Status would
	// take r0's result if the server had done it, and r0 would then
	// rightly succeed).
	got := make([]byte, 4*restartCols)
	r0, err := rc.o.StartRead(ctx, row(0), got)
	if err != nil {
		t.Fatal(err)
	}
	rc.settled(t)
	rc.restart(t)
	// The client goes on with the new server: reads of row 1, given ids
	// there (r0's among them) once settled.
	var others []*client.Transfer
	for range 32 {
		others = append(others, rc.startRead(t, 1, make([]byte, 4*restartCols)))
	}
	rc.settled(t)
	err = r0.Wait(ctx)
	if err == nil && !bytes.Equal(got, rc.rows[0]) {
		t.Fatalf("a read started before its data server restarted was answered after, with no error, with other bytes (row 1's: %v)", bytes.Equal(got, rc.rows[1]))
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
	rc := newRestartCase(t, "status-restart", false)
	ctx, o, cols := rc.ctx, rc.o, restartCols
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
	rc.settled(t)
	rc.restart(t)
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
	rc.settled(t) // they are on the new server
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
	rc := newRestartCase(t, "waitall-restart", true)
	ctx := rc.ctx
	r0, err := rc.o.StartRead(ctx, row(0), make([]byte, 4*restartCols))
	if err != nil {
		t.Fatal(err)
	}
	rc.settled(t) // its start is answered, r0 not collected
	rc.restart(t)
	all := []*client.Transfer{r0}
	var bufs [][]byte
	for range 4 {
		buf := make([]byte, 4*restartCols)
		all = append(all, rc.startRead(t, 1, buf))
		bufs = append(bufs, buf)
	}
	err = rc.c.WaitAll(ctx, all)
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
		if !bytes.Equal(bufs[i], rc.rows[1]) {
			t.Fatalf("read %d of row 1, started on the new server, read other bytes", i)
		}
	}
}

// restartCase is the cluster of one server these tests restart, and an
// object of two rows of cols int32s, each row written with its own values
// (rows) when written is set.
type restartCase struct {
	ctx             context.Context
	tmpdir, datadir string
	c               *client.Client
	o               *client.Object
	rows            [2][]byte
}

const restartCols = 1024

func newRestartCase(t *testing.T, name string, written bool) *restartCase {
	t.Helper()
	rc := &restartCase{tmpdir: e2e.Up(t, 1)}
	rc.datadir = e2e.ServerDataDir(t, rc.tmpdir)
	rc.ctx = e2e.Ctx(t, time.Minute)
	rc.c = e2e.Connect(t, rc.tmpdir)
	ct, _, err := rc.c.CreateContainer(rc.ctx, name, client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	if rc.o, err = ct.CreateObject(rc.ctx, "x", client.ObjectProps{Dims: []uint64{2, restartCols}, Type: region.Int32}); err != nil {
		t.Fatal(err)
	}
	for r := range rc.rows {
		rc.rows[r] = make([]byte, 4*restartCols)
		for i := range restartCols {
			binary.LittleEndian.PutUint32(rc.rows[r][4*i:], uint32(r*1_000_000+i+1))
		}
		if written {
			if err := rc.o.Write(rc.ctx, row(uint64(r)), rc.rows[r]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return rc
}

func row(r uint64) region.Box { return region.Box{Off: []uint64{r, 0}, Size: []uint64{1, restartCols}} }

// settled returns once every start sent before it is answered: a read
// waited for on the connection the starts went on, which (unlike a Status)
// collects none of them.
func (rc *restartCase) settled(t *testing.T) {
	t.Helper()
	if err := rc.o.Read(rc.ctx, row(1), make([]byte, 4*restartCols)); err != nil {
		t.Fatal(err)
	}
}

// restart kills the server and starts it again in place.
func (rc *restartCase) restart(t *testing.T) {
	t.Helper()
	killRank(t, rc.tmpdir, 0)
	clitest.RestartServer(t, rc.ctx, rc.tmpdir, rc.datadir, 0, 1)
}

// startRead starts a read of row r on the new server, trying again once
// if the first call is the one that finds the old server gone.
func (rc *restartCase) startRead(t *testing.T, r uint64, buf []byte) *client.Transfer {
	t.Helper()
	for attempt := 0; ; attempt++ {
		tr, err := rc.o.StartRead(rc.ctx, row(r), buf)
		if err == nil {
			return tr
		}
		if attempt > 0 || !errors.Is(err, pdc.ErrUnavailable) {
			t.Fatal(err)
		}
	}
}
