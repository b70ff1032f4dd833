package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// Region-dynamic and region-local transfers started one at a time, whose
// placements stay on the wire after Start returns: every write started
// before a read is seen by it, whatever the overlaps; status and close
// work on a transfer whose placement is still on the wire; and a
// placement that fails ends its transfer with an error that names the
// object, at its wait.
func TestPlacementsPipelined(t *testing.T) {
	srv, c, ctx, ct := placeSetup(t, 2, "placements")
	const n = 1 << 16
	for _, part := range []client.Partition{client.RegionDynamic, client.RegionLocal} {
		o, err := ct.CreateObject(ctx, fmt.Sprint("obj-", part), client.ObjectProps{Dims: []uint64{n}, Type: region.Uint8, Partition: part})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(part), 1))
		want := make([]byte, n)
		var ts []*client.Transfer
		for i := range 60 {
			off := r.Uint64N(n - 1)
			size := 1 + r.Uint64N(min(n-off, 8<<10))
			box := region.Box{Off: []uint64{off}, Size: []uint64{size}}
			if i%10 == 9 {
				// A read among the writes sees every write before it.
				got := make([]byte, size)
				tr, err := o.StartRead(ctx, box, got)
				if err != nil {
					t.Fatal(err)
				}
				if err := tr.Wait(ctx); err != nil {
					t.Fatalf("%v read %d: %v", part, i, err)
				}
				if !bytes.Equal(got, want[off:off+size]) {
					t.Fatalf("%v: read %d of %v does not see the writes started before it", part, i, box)
				}
				continue
			}
			data := make([]byte, size)
			for k := range data {
				data[k] = byte(r.Uint32())
			}
			tr, err := o.StartWrite(ctx, box, data)
			if err != nil {
				t.Fatal(err)
			}
			copy(want[off:], data)
			ts = append(ts, tr)
			if i == 20 {
				// Asked at once, while its placement may be on the wire.
				if st, err := tr.Status(ctx); err != nil || (st != client.TransferPending && st != client.TransferComplete) {
					t.Fatalf("%v: status of a transfer just started: %v, %v", part, st, err)
				}
			}
		}
		last := ts[len(ts)-1]
		if err := last.Close(ctx); err != nil {
			t.Fatalf("%v: close of the last write: %v", part, err)
		}
		if err := c.WaitAll(ctx, ts[:len(ts)-1]); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		if err := o.Read(ctx, region.Box{Off: []uint64{0}, Size: []uint64{n}}, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v: the object reads back differently", part)
		}

		// Deleted by another client: the placement of the next write
		// fails, and its wait says so.
		c2 := srv.connect(t)
		o2, err := c2.OpenObject(ctx, fmt.Sprint("obj-", part))
		if err != nil {
			t.Fatal(err)
		}
		if err := o2.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		tr, err := o.StartWrite(ctx, region.Box{Off: []uint64{0}, Size: []uint64{1}}, []byte{1})
		if err != nil {
			t.Fatalf("%v: start after the delete: %v", part, err)
		}
		wantErr(t, fmt.Sprint(part, ": wait for a write to a deleted object"), tr.Wait(ctx), pdc.ErrNotFound, fmt.Sprint("obj-", part))
	}
}

// A region-dynamic write moves its bytes once started, without a wait or
// any further call of its client: another client finds them. (Placements
// used to be collected only by the next call, so a program that started a
// write and computed before waiting moved nothing meanwhile.)
func TestStartedWriteMovesWithoutAWait(t *testing.T) {
	srv, _, ctx, ct := placeSetup(t, 2, "unwaited")
	reader := srv.connect(t)
	for _, part := range []client.Partition{client.RegionDynamic, client.RegionLocal} {
		name := fmt.Sprint("unwaited-", part)
		o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{4096}, Type: region.Uint8, Partition: part})
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte{7}, 1024)
		box := region.Box{Off: []uint64{1024}, Size: []uint64{1024}}
		tr, err := o.StartWrite(ctx, box, data)
		if err != nil {
			t.Fatal(err)
		}
		ro, err := reader.OpenObject(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		for !bytes.Equal(got, data) {
			if err := ctx.Err(); err != nil {
				t.Fatalf("%v: a started write never reached its data server without a wait: %v", part, err)
			}
			time.Sleep(5 * time.Millisecond)
			if err := ro.Read(ctx, box, got); err != nil {
				t.Fatal(err)
			}
		}
		if err := tr.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Closing a client with placements queued and on the wire ends them: each
// transfer's wait then returns, with its write done or with an error, and
// nothing hangs.
func TestCloseWithPlacementsQueued(t *testing.T) {
	_, c, ctx, ct := placeSetup(t, 2, "closing")
	o, err := ct.CreateObject(ctx, "closing", client.ObjectProps{Dims: []uint64{1 << 20}, Type: region.Uint8, Partition: client.RegionDynamic})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var ts []*client.Transfer
	for off := 0; off < len(buf); off += 4096 {
		tr, err := o.StartWrite(ctx, region.Box{Off: []uint64{uint64(off)}, Size: []uint64{4096}}, buf[off:off+4096])
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tr)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i, tr := range ts {
		if err := tr.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("wait %d after close: %v", i, err)
			}
			failed++
		}
	}
	t.Logf("%d of %d writes ended by the close", failed, len(ts))
	if _, err := o.StartWrite(ctx, region.Box{Off: []uint64{0}, Size: []uint64{1}}, buf[:1]); !errors.Is(err, pdc.ErrClosed) {
		t.Fatalf("start after close: %v, want %v", err, pdc.ErrClosed)
	}
}

// Writes to two objects queued together, one of them deleted meanwhile by
// another client: only that object's writes fail. The metadata server
// refuses a whole batch for one bad region, so the client places the
// batch's regions one by one then.
func TestBadPlacementFailsAlone(t *testing.T) {
	srv, _, ctx, ct := placeSetup(t, 1, "alone")
	props := client.ObjectProps{Dims: []uint64{1 << 16}, Type: region.Uint8, Partition: client.RegionDynamic}
	a, err := ct.CreateObject(ctx, "a", props)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ct.CreateObject(ctx, "b", props)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := srv.connect(t).OpenObject(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := a2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	var as, bs []*client.Transfer
	want := make([]byte, 200*64)
	for i := range 200 {
		box := region.Box{Off: []uint64{uint64(i) * 64}, Size: []uint64{64}}
		ta, err := a.StartWrite(ctx, box, make([]byte, 64))
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte{byte(i + 1)}, 64)
		copy(want[i*64:], data)
		tb, err := b.StartWrite(ctx, box, data)
		if err != nil {
			t.Fatal(err)
		}
		as, bs = append(as, ta), append(bs, tb)
	}
	for i, tb := range bs {
		if err := tb.Wait(ctx); err != nil {
			t.Fatalf("write %d to b: %v", i, err)
		}
	}
	for i, ta := range as {
		wantErr(t, fmt.Sprint("write ", i, " to the deleted a"), ta.Wait(ctx), pdc.ErrNotFound, `"a"`)
	}
	got := make([]byte, len(want))
	if err := b.Read(ctx, region.Box{Off: []uint64{0}, Size: []uint64{uint64(len(want))}}, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("b reads back differently")
	}
}

// The object's metadata may be refreshed by its caller while the placer
// starts its transfers (run with -race).
func TestRefreshWhilePlacing(t *testing.T) {
	_, c, ctx, ct := placeSetup(t, 2, "refresh")
	o, err := ct.CreateObject(ctx, "grows", client.ObjectProps{Dims: []uint64{64}, Type: region.Uint8, Partition: client.RegionDynamic})
	if err != nil {
		t.Fatal(err)
	}
	var ts []*client.Transfer
	for i := range 50 {
		if err := o.SetDims(ctx, []uint64{uint64(i+1) * 64}); err != nil {
			t.Fatal(err)
		}
		tr, err := o.StartWrite(ctx, region.Box{Off: []uint64{uint64(i) * 64}, Size: []uint64{64}}, bytes.Repeat([]byte{byte(i)}, 64))
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tr)
		if _, err := o.Dims(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitAll(ctx, ts); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 50*64)
	if err := o.Read(ctx, region.Box{Off: []uint64{0}, Size: []uint64{50 * 64}}, got); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if !bytes.Equal(got[i*64:(i+1)*64], bytes.Repeat([]byte{byte(i)}, 64)) {
			t.Fatalf("region %d reads back differently", i)
		}
	}
}

// Thousands of region-dynamic reads started one at a time, their
// placements a request each: every read gets the bytes written. (Whether
// their placements outrun a server's bound of requests in flight on one
// connection depends on timing; pdc bench io's 64 KiB reads did.)
func TestManyPlacedReads(t *testing.T) {
	_, c, ctx, ct := placeSetup(t, 1, "reads")
	const n, size = 16384, 64
	o, err := ct.CreateObject(ctx, "reads", client.ObjectProps{Dims: []uint64{n * size}, Type: region.Uint8, Partition: client.RegionDynamic})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, n*size)
	for i := range want {
		want[i] = byte(i * 7)
	}
	if err := o.Write(ctx, region.Box{Off: []uint64{0}, Size: []uint64{n * size}}, want); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n*size)
	ts := make([]*client.Transfer, n)
	for i := range ts {
		if ts[i], err = o.StartRead(ctx, region.Box{Off: []uint64{uint64(i * size)}, Size: []uint64{size}}, got[i*size:(i+1)*size]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitAll(ctx, ts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the reads differ from the writes")
	}
}

// Reads of two objects queued together, one of them deleted by another
// client: the batch that locates them answers each region alone, so only
// the deleted object's reads fail, naming it.
func TestBadLookupFailsAlone(t *testing.T) {
	srv, c, ctx, ct := placeSetup(t, 1, "lookups")
	props := client.ObjectProps{Dims: []uint64{1 << 14}, Type: region.Uint8, Partition: client.RegionLocal}
	a, err := ct.CreateObject(ctx, "a", props)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ct.CreateObject(ctx, "b", props)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 1<<14)
	for i := range want {
		want[i] = byte(i * 3)
	}
	whole := region.Box{Off: []uint64{0}, Size: []uint64{1 << 14}}
	if err := b.Write(ctx, whole, want); err != nil {
		t.Fatal(err)
	}
	a2, err := srv.connect(t).OpenObject(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := a2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	var as, bs []*client.Transfer
	for i := range 256 {
		box := region.Box{Off: []uint64{uint64(i) * 64}, Size: []uint64{64}}
		ta, err := a.StartRead(ctx, box, make([]byte, 64))
		if err != nil {
			t.Fatal(err)
		}
		tb, err := b.StartRead(ctx, box, got[i*64:(i+1)*64])
		if err != nil {
			t.Fatal(err)
		}
		as, bs = append(as, ta), append(bs, tb)
	}
	if err := c.WaitAll(ctx, bs); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("b reads back differently")
	}
	for i, ta := range as {
		wantErr(t, fmt.Sprint("read ", i, " of the deleted a"), ta.Wait(ctx), pdc.ErrNotFound, `"a"`)
	}
	// Many at once through StartAll: located together, read back whole.
	got2 := make([]byte, len(want))
	ts := make([]*client.Transfer, 256)
	for i := range ts {
		box := region.Box{Off: []uint64{uint64(i) * 64}, Size: []uint64{64}}
		if ts[i], err = b.NewTransfer(ctx, got2[i*64:(i+1)*64], client.Read, region.Box{Off: []uint64{0}, Size: []uint64{64}}, box); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.StartAll(ctx, ts); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAll(ctx, ts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got2, want) {
		t.Fatal("b reads back differently through StartAll")
	}
}

// backlog starts n writes of 1 MiB to a new object-static object, so that
// Starts made right after sit in the client's queue for a while.
func backlog(ctx context.Context, t *testing.T, c *client.Client, ct *client.Container, name string, n int) []*client.Transfer {
	t.Helper()
	o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{uint64(n) << 20}, Type: region.Uint8})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, n<<20)
	ts := make([]*client.Transfer, n)
	for i := range ts {
		box := region.Box{Off: []uint64{uint64(i) << 20}, Size: []uint64{1 << 20}}
		if ts[i], err = o.StartWrite(ctx, box, buf[i<<20:(i+1)<<20]); err != nil {
			t.Fatal(err)
		}
	}
	return ts
}

// Queued transfers keep what their Start saw: a write queued behind others
// is not overtaken by its client's own shrink of the dims; a write outside
// dims another client shrank fails alone, not the transfers sent with it;
// and a queued transfer closed at its deadline is dropped, its buffer no
// longer read.
func TestQueuedStartsKeepTheirOrder(t *testing.T) {
	srv, c, ctx, ct := placeSetup(t, 1, "queued")
	q := &queued{t: t, ctx: ctx, c: c, other: srv.connect(t), ct: ct}
	q.ownShrink()
	q.otherShrink()
	q.closedAtDeadline()
}

// queued is what TestQueuedStartsKeepTheirOrder's cases share: a client c,
// another client other, and a container whose objects they write.
type queued struct {
	t        *testing.T
	ctx      context.Context
	c, other *client.Client
	ct       *client.Container
}

var (
	queuedHigh = region.Box{Off: []uint64{1 << 15}, Size: []uint64{1 << 15}}
	queuedLow  = region.Box{Off: []uint64{0}, Size: []uint64{1 << 15}}
	queuedOnes = bytes.Repeat([]byte{1}, 1<<15)
)

func (q *queued) mk(name string) *client.Object {
	o, err := q.ct.CreateObject(q.ctx, name, client.ObjectProps{Dims: []uint64{1 << 16}, Type: region.Uint8})
	if err != nil {
		q.t.Fatal(err)
	}
	return o
}

// ownShrink: its own shrink: the write was started first, so it is done
// first.
func (q *queued) ownShrink() {
	t, ctx := q.t, q.ctx
	o := q.mk("shrunk")
	bl := backlog(ctx, t, q.c, q.ct, "backlog-1", 64)
	tr, err := o.StartWrite(ctx, queuedHigh, queuedOnes)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.SetDims(ctx, []uint64{1 << 14}); err != nil {
		t.Fatal(err)
	}
	if err := q.c.WaitAll(ctx, append(bl, tr)); err != nil {
		t.Fatalf("a write started before its client shrank the dims: %v", err)
	}
}

// otherShrink: another client's shrink: only the write now outside fails.
func (q *queued) otherShrink() {
	t, ctx := q.t, q.ctx
	x, y := q.mk("x"), q.mk("y")
	xo, err := q.other.OpenObject(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := xo.SetDims(ctx, []uint64{1 << 14}); err != nil {
		t.Fatal(err)
	}
	if err := xo.Write(ctx, region.Box{Off: []uint64{0}, Size: []uint64{16}}, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	bl := backlog(ctx, t, q.c, q.ct, "backlog-2", 64)
	tx, err := x.StartWrite(ctx, queuedHigh, queuedOnes)
	if err != nil {
		t.Fatal(err)
	}
	ty, err := y.StartWrite(ctx, queuedLow, queuedOnes)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.c.WaitAll(ctx, bl); err != nil {
		t.Fatalf("writes sent with one outside another client's new dims: %v", err)
	}
	if err := ty.Wait(ctx); err != nil {
		t.Fatalf("a write to y sent with one outside x's new dims: %v", err)
	}
	wantErr(t, "a write outside dims another client shrank", tx.Wait(ctx), pdc.ErrOutOfRange, `"x"`)
}

// closedAtDeadline: a transfer closed at its deadline while queued is
// dropped, and its buffer no longer read, or, already on its way, done.
func (q *queued) closedAtDeadline() {
	t, ctx := q.t, q.ctx
	z := q.mk("z")
	bl := backlog(ctx, t, q.c, q.ct, "backlog-3", 64)
	buf := bytes.Repeat([]byte{1}, 1<<15)
	tz, err := z.StartWrite(ctx, queuedLow, buf)
	if err != nil {
		t.Fatal(err)
	}
	gone, stop := context.WithCancel(ctx)
	stop()
	if err := tz.Close(gone); err == nil {
		t.Fatal("close under an ended context: no error")
	}
	want := make([]byte, 1<<15) // never written
	if st, err := tz.Status(ctx); err != nil {
		t.Fatal(err)
	} else if st == client.TransferNotFound {
		// Dropped: the buffer is the caller's again.
		for i := range buf {
			buf[i] = 0xff
		}
	} else {
		// Already on its way: still started, closed once done.
		if err := tz.Close(ctx); err != nil {
			t.Fatal(err)
		}
		want = queuedOnes
	}
	if err := q.c.WaitAll(ctx, bl); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 1<<15)
	if err := z.Read(ctx, queuedLow, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("z reads %x..., want %x...", got[:4], want[:4])
	}
}

// placeSetup starts n servers, connects a client and makes a container
// named name through it; it returns them with a context bounding the test.
func placeSetup(t *testing.T, n int, name string) (*servers, *client.Client, context.Context, *client.Container) {
	t.Helper()
	srv := startServers(t, t.TempDir(), n)
	c := srv.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	ct, _, err := c.CreateContainer(ctx, name, client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, ctx, ct
}
