package region_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

func TestRegionRoundTripsEveryPartition(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 2*time.Minute)
	a, b := e2e.Connect(t, tmpdir), e2e.Connect(t, tmpdir)
	ct, _, err := a.CreateContainer(ctx, "regions", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	shapes := [][]uint64{{1000}, {40, 30}, {10, 12, 14}}
	for _, p := range clitest.Partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			for _, dims := range shapes {
				name := fmt.Sprintf("%s-%s-%dd", clitest.PartName(p), st, len(dims))
				t.Run(name, func(t *testing.T) {
					o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p, Storage: st})
					if err != nil {
						t.Fatal(err)
					}
					m := clitest.NewModel(t, dims...)
					// Overlapping writes: whole object, then an inner box.
					whole := region.Shape(dims...)
					w1 := clitest.Cells(int(whole.Volume()), 1)
					if err := o.Write(ctx, whole, w1); err != nil {
						t.Fatal(err)
					}
					m.Write(whole, w1)
					inner := whole.Clone()
					for i := range inner.Size {
						inner.Off[i] = dims[i] / 4
						inner.Size[i] = dims[i] / 2
					}
					w2 := clitest.Cells(int(inner.Volume()), 100000)
					if err := o.Write(ctx, inner, w2); err != nil {
						t.Fatal(err)
					}
					m.Write(inner, w2)
					// Another client, another process's view: a skewed read
					// that straddles both writes.
					ob, err := b.OpenObject(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					skew := whole.Clone()
					for i := range skew.Size {
						skew.Off[i] = dims[i] / 3
						skew.Size[i] = dims[i] - dims[i]/3 - 1
					}
					got := make([]byte, 4*skew.Volume())
					if err := ob.Read(ctx, skew, got); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, m.Read(skew)) {
						t.Fatalf("skewed read %v differs from the model", skew)
					}
					all, err := ob.GetData(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(all, m.Data()) {
						t.Fatal("whole object differs from the model")
					}
					if err := o.Close(ctx); err != nil {
						t.Fatal(err)
					}
					if err := ob.Close(ctx); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
	_ = errors.Is
	_ = pdc.ErrInvalid
}

// TestRegionManyClientProcesses: for each partition strategy, in 1-D, 2-D
// and 3-D, with 4 server processes, 3 writer processes each write a third
// of an object; another process reads all of it back.
func TestRegionManyClientProcesses(t *testing.T) {
	tmpdir := e2e.Up(t, 4)
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "procs", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range clitest.Partitions {
		for _, dims := range [][]uint64{{3000}, {60, 50}, {30, 8, 9}} {
			name := fmt.Sprintf("%s-%dd", clitest.PartName(p), len(dims))
			if _, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: dims, Type: region.Int32, Partition: p}); err != nil {
				t.Fatal(err)
			}
			const procs = 3
			var outs []*bufio.Scanner
			var cmds []*exec.Cmd
			for r := range procs {
				cmd, out, _ := e2e.ClientProc(t, tmpdir, "region-writer", "PDC_E2E_OBJ="+name, fmt.Sprint("PDC_E2E_RANK=", r), fmt.Sprint("PDC_E2E_PROCS=", procs))
				cmds, outs = append(cmds, cmd), append(outs, out)
			}
			for i, out := range outs {
				if !out.Scan() || out.Text() != "ok" {
					t.Fatalf("%s: writer %d: %q", name, i, out.Text())
				}
				if err := cmds[i].Wait(); err != nil {
					t.Fatalf("%s: writer %d: %v", name, i, err)
				}
			}
			cmd, out, _ := e2e.ClientProc(t, tmpdir, "region-reader", "PDC_E2E_OBJ="+name)
			if !out.Scan() || out.Text() != "ok" {
				t.Fatalf("%s: reader: %q", name, out.Text())
			}
			_ = cmd.Wait()
		}
	}
}

// TestRegionBufferShapes: a 1-D buffer into 2-D and 3-D objects, a local
// region inside a larger 2-D buffer, and partial reads whose local and
// remote offsets differ.
func TestRegionBufferShapes(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "shapes", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	for _, dims := range [][]uint64{{16, 24}, {6, 7, 8}} {
		o, err := ct.CreateObject(ctx, fmt.Sprint("shape", len(dims)), client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic})
		if err != nil {
			t.Fatal(err)
		}
		whole := region.Shape(dims...)
		// A 1-D buffer of the whole object, offset by 5 elements in a
		// longer buffer.
		data := clitest.PatternOf(dims, whole)
		buf := append(make([]byte, 20), data...)
		tr, err := o.NewTransfer(ctx, buf, client.Write, clitest.Box([]uint64{5}, []uint64{whole.Volume()}), whole)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := tr.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		// Read a sub-box into the middle of a larger buffer of another
		// shape: local box 2..(2+size) in every dim of a buffer shaped
		// size+4.
		sub := whole.Clone()
		for i := range sub.Size {
			sub.Off[i], sub.Size[i] = 1, dims[i]-3
		}
		local := sub.Clone()
		for i := range local.Off {
			local.Off[i] = 2
		}
		shape := region.Shape(make([]uint64, len(dims))...)
		for i := range shape.Size {
			shape.Size[i] = local.End(i)
		}
		big := make([]byte, 4*shape.Volume())
		rd, err := o.NewTransfer(ctx, big, client.Read, local, sub)
		if err != nil {
			t.Fatal(err)
		}
		if err := rd.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rd.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, len(big))
		if err := region.Copy(want, shape, clitest.PatternOf(dims, sub), local, local, 4); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(big, want) {
			t.Fatalf("%v: sub-box read into a larger buffer differs", dims)
		}
	}
}

// TestRegionAsyncSemantics: start_all of many writes and reads, waits split
// into overlapping groups, the status sequence, POSIX consistency without
// wait, and closing an object with transfers pending.
func TestRegionAsyncSemantics(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, time.Minute)
	c, other := e2e.Connect(t, tmpdir), e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "async", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	dims := []uint64{64, 100}
	o, err := ct.CreateObject(ctx, "grid", client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic})
	if err != nil {
		t.Fatal(err)
	}
	checkStartAllOrder(ctx, t, c, o, dims)
	checkStatusSequence(ctx, t, o, dims)
	checkPipelinedStarts(ctx, t, c, ct)
	checkPOSIXVisibleWithoutWait(ctx, t, ct, other)
	checkCloseWaits(ctx, t, ct, other)
}

// checkStartAllOrder checks a start_all of row writes and reads of the
// same rows, reads listed first, runs the writes first, the status
// sequence before and after a wait, and waits in overlapping groups.
func checkStartAllOrder(ctx context.Context, t *testing.T, c *client.Client, o *client.Object, dims []uint64) {
	t.Helper()
	// Rows written one transfer each, and reads of the same rows in the
	// same start_all: writes go first, so the reads see them.
	var writes, reads []*client.Transfer
	bufs := make([][]byte, dims[0])
	for r := range dims[0] {
		b := clitest.Box([]uint64{r, 0}, []uint64{1, dims[1]})
		w, err := o.NewTransfer(ctx, clitest.PatternOf(dims, b), client.Write, region.Shape(dims[1]), b)
		if err != nil {
			t.Fatal(err)
		}
		bufs[r] = make([]byte, 4*dims[1])
		rd, err := o.NewTransfer(ctx, bufs[r], client.Read, region.Shape(dims[1]), b)
		if err != nil {
			t.Fatal(err)
		}
		writes, reads = append(writes, w), append(reads, rd)
	}
	all := append(append([]*client.Transfer{}, reads...), writes...) // reads listed first on purpose
	if st, err := all[0].Status(ctx); err != nil || st != client.TransferNotFound {
		t.Fatalf("status before start: %v %v, want not found", st, err)
	}
	if err := c.StartAll(ctx, all); err != nil {
		t.Fatal(err)
	}
	if err := all[3].Start(ctx); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("starting a started transfer: %v, want ErrInvalid", err)
	}
	// Overlapping groups: the first half, then everything.
	if err := c.WaitAll(ctx, all[:len(all)/2+7]); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAll(ctx, all); err != nil {
		t.Fatal(err)
	}
	for r := range dims[0] {
		if !bytes.Equal(bufs[r], clitest.PatternOf(dims, clitest.Box([]uint64{r, 0}, []uint64{1, dims[1]}))) {
			t.Fatalf("row %d read in the same start_all as its write differs", r)
		}
	}
	if st, err := all[0].Status(ctx); err != nil || st != client.TransferComplete {
		t.Fatalf("status after wait: %v %v, want complete", st, err)
	}
	if st, err := all[0].Status(ctx); err != nil || st != client.TransferNotFound {
		t.Fatalf("second status after wait: %v %v, want not found", st, err)
	}
}

// checkStatusSequence checks the status of a started read and of a done
// write moves to complete once, by itself, and then to not found.
func checkStatusSequence(ctx context.Context, t *testing.T, o *client.Object, dims []uint64) {
	t.Helper()
	// Status of a started transfer moves to complete once, by itself.
	b := clitest.Box([]uint64{5, 5}, []uint64{10, 10})
	got := make([]byte, 4*b.Volume())
	rd, err := o.StartRead(ctx, b, got)
	if err != nil {
		t.Fatal(err)
	}
	var st client.TransferStatus
	for st, err = rd.Status(ctx); err == nil && st == client.TransferPending; st, err = rd.Status(ctx) {
		if err := rd.Wait(ctx); err != nil { // instead of spinning
			t.Fatal(err)
		}
	}
	if err != nil || st != client.TransferComplete || !bytes.Equal(got, clitest.PatternOf(dims, b)) {
		t.Fatalf("status: %v %v; values equal: %v", st, err, bytes.Equal(got, clitest.PatternOf(dims, b)))
	}
	// A write's status, once the data server has done it: the server
	// reports a done write once and forgets it, and the transfer is
	// complete without a wait.
	wb := clitest.Box([]uint64{0, 0}, []uint64{64, 100}) // on both data servers
	wr, err := o.StartWrite(ctx, wb, clitest.PatternOf(dims, wb))
	if err != nil {
		t.Fatal(err)
	}
	// A read by the same client waits for the write it overlaps.
	if got := make([]byte, 4*wb.Volume()); o.Read(ctx, wb, got) != nil || !bytes.Equal(got, clitest.PatternOf(dims, wb)) {
		t.Fatal("a read started after a write it overlaps did not see it")
	}
	if st, err := wr.Status(ctx); err != nil || st != client.TransferComplete || wr.Err() != nil {
		t.Fatalf("status of a done write: %v %v (transfer error %v), want complete", st, err, wr.Err())
	}
	if st, err := wr.Status(ctx); err != nil || st != client.TransferNotFound {
		t.Fatalf("status of a done write, again: %v %v, want not found", st, err)
	}
}

// checkPipelinedStarts checks reads started right after the writes they
// overlap, with no wait in between, see them.
func checkPipelinedStarts(ctx context.Context, t *testing.T, c *client.Client, ct *client.Container) {
	t.Helper()
	// Starts are pipelined (Start does not wait for the server's answer):
	// rows of a fresh object written one Start each, then each row read
	// by a Start of its own, last row first, with no wait in between. Every read sees its
	// row's write, on both data servers.
	// Rows of 256 KiB, so that a write is still arriving when the read
	// after it could overtake it on another connection.
	pdims := []uint64{64, 1 << 16}
	fresh, err := ct.CreateObject(ctx, "pipelined", client.ObjectProps{Dims: pdims, Type: region.Int32, Partition: client.RegionStatic})
	if err != nil {
		t.Fatal(err)
	}
	var piped []*client.Transfer
	rowsGot := make([][]byte, pdims[0])
	for r := range pdims[0] {
		b := clitest.Box([]uint64{r, 0}, []uint64{1, pdims[1]})
		w, err := fresh.StartWrite(ctx, b, clitest.PatternOf(pdims, b))
		if err != nil {
			t.Fatal(err)
		}
		piped = append(piped, w)
	}
	for r := range pdims[0] {
		r = pdims[0] - 1 - r // the last row written is read first
		rowsGot[r] = make([]byte, 4*pdims[1])
		rd, err := fresh.StartRead(ctx, clitest.Box([]uint64{r, 0}, []uint64{1, pdims[1]}), rowsGot[r])
		if err != nil {
			t.Fatal(err)
		}
		piped = append(piped, rd)
	}
	if err := c.WaitAll(ctx, piped); err != nil {
		t.Fatal(err)
	}
	for r := range pdims[0] {
		if !bytes.Equal(rowsGot[r], clitest.PatternOf(pdims, clitest.Box([]uint64{r, 0}, []uint64{1, pdims[1]}))) {
			t.Fatalf("row %d, read by a start after the start of its write, differs", r)
		}
	}
}

// checkPOSIXVisibleWithoutWait checks a write to a POSIX object is
// visible to another client without a wait.
func checkPOSIXVisibleWithoutWait(ctx context.Context, t *testing.T, ct *client.Container, other *client.Client) {
	t.Helper()
	// POSIX consistency: start returns with the write done; another client
	// reads it without anyone waiting.
	p, err := ct.CreateObject(ctx, "posix", client.ObjectProps{Dims: []uint64{1000}, Type: region.Int32, Consistency: client.ConsistencyPOSIX})
	if err != nil {
		t.Fatal(err)
	}
	whole := region.Shape(1000)
	if _, err := p.StartWrite(ctx, whole, clitest.PatternOf([]uint64{1000}, whole)); err != nil {
		t.Fatal(err)
	}
	po, err := other.OpenObject(ctx, "posix")
	if err != nil {
		t.Fatal(err)
	}
	data, err := po.GetData(ctx)
	if err != nil || !bytes.Equal(data, clitest.PatternOf([]uint64{1000}, whole)) {
		t.Fatalf("POSIX write not visible to another client without wait: %v", err)
	}
}

// checkCloseWaits checks closing an object waits for the writes it has
// under way.
func checkCloseWaits(ctx context.Context, t *testing.T, ct *client.Container, other *client.Client) {
	t.Helper()
	// Closing an object waits for what it has under way.
	q, err := ct.CreateObject(ctx, "closing", client.ObjectProps{Dims: []uint64{1 << 16}, Type: region.Int32})
	if err != nil {
		t.Fatal(err)
	}
	big := region.Shape(1 << 16)
	if _, err := q.StartWrite(ctx, big, clitest.PatternOf([]uint64{1 << 16}, big)); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	qo, err := other.OpenObject(ctx, "closing")
	if err != nil {
		t.Fatal(err)
	}
	if data, err := qo.GetData(ctx); err != nil || !bytes.Equal(data, clitest.PatternOf([]uint64{1 << 16}, big)) {
		t.Fatalf("write started before close not all there: %v", err)
	}
}

// TestRegionBadInput: each bad request gets a clear error naming what was
// wrong, and the servers keep serving.
func TestRegionBadInput(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "bad", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	o, err := ct.CreateObject(ctx, "m", client.ObjectProps{Dims: []uint64{10, 20}, Type: region.Double})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8*200)
	cases := []struct {
		name   string
		err    error
		want   string
		action func() error
	}{
		{"outside dims", pdc.ErrOutOfRange, "outside", func() error { return o.Write(ctx, clitest.Box([]uint64{5, 0}, []uint64{6, 20}), buf[:8*120]) }},
		{"ndim mismatch", pdc.ErrInvalid, "has 1 dims", func() error { return o.Write(ctx, region.Shape(200), buf) }},
		{"zero size", pdc.ErrInvalid, "", func() error { return o.Write(ctx, clitest.Box([]uint64{0, 0}, []uint64{0, 20}), nil) }},
		{"local larger than buffer", pdc.ErrInvalid, "buffer", func() error {
			_, err := o.NewTransfer(ctx, buf[:8*10], client.Write, region.Shape(200), region.Shape(10, 20))
			return err
		}},
		{"buffer not the region's size", pdc.ErrInvalid, "buffer", func() error { return o.Write(ctx, region.Shape(10, 20), buf[:8]) }},
		{"element counts differ", pdc.ErrInvalid, "elements", func() error {
			_, err := o.NewTransfer(ctx, buf, client.Write, region.Shape(100), region.Shape(10, 20))
			return err
		}},
		{"wait before start", pdc.ErrInvalid, "not started", func() error {
			tr, err := o.NewTransfer(ctx, buf, client.Read, region.Shape(200), region.Shape(10, 20))
			if err != nil {
				return err
			}
			return tr.Wait(ctx)
		}},
	}
	for _, tc := range cases {
		err := tc.action()
		if !errors.Is(err, tc.err) || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%s: got %v, want %v mentioning %q", tc.name, err, tc.err, tc.want)
		}
		if err != nil && !bytes.Contains([]byte(err.Error()), []byte(`"m"`)) && tc.name != "zero size" {
			t.Errorf("%s: error does not name the object: %v", tc.name, err)
		}
	}
	// Never written: zeros.
	got := make([]byte, 8*200)
	for i := range got {
		got[i] = 0xee
	}
	if err := o.Read(ctx, region.Shape(10, 20), got); err != nil || !bytes.Equal(got, make([]byte, len(got))) {
		t.Fatalf("never-written object does not read as zeros: %v", err)
	}
	// A deleted object: its data is gone and a new object of the name
	// starts empty.
	if err := o.Write(ctx, region.Shape(10, 20), bytes.Repeat([]byte{1}, 8*200)); err != nil {
		t.Fatal(err)
	}
	if err := o.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenObject(ctx, "m"); !errors.Is(err, pdc.ErrNotFound) {
		t.Fatalf("open after delete: %v", err)
	}
	o2, err := ct.CreateObject(ctx, "m", client.ObjectProps{Dims: []uint64{10, 20}, Type: region.Double})
	if err != nil {
		t.Fatal(err)
	}
	if err := o2.Read(ctx, region.Shape(10, 20), got); err != nil || !bytes.Equal(got, make([]byte, len(got))) {
		t.Fatalf("recreated object is not empty: %v", err)
	}
	// Still serving.
	if err := o2.Write(ctx, region.Shape(10, 20), buf); err != nil {
		t.Fatal(err)
	}
}
