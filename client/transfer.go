package client

import (
	"context"
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/transfer"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// Region transfers are package transfer's engine; this file is their
// public face. Transfer, Access and TransferStatus are the engine's own
// types, so that a batch of transfers goes to it as it is, with no
// wrapper per region and no copy of the slice (see
// docs/design/0020-transfer-engine.md).

// Access says which way a transfer moves bytes (pdc_access_t).
type Access = transfer.Access

// Accesses.
const (
	Read  = transfer.Read  // PDC_READ: object to buffer
	Write = transfer.Write // PDC_WRITE: buffer to object
)

// TransferStatus is pdc_transfer_status_t.
type TransferStatus = transfer.Status

// Transfer states.
const (
	TransferComplete = transfer.Complete
	TransferPending  = transfer.Pending
	TransferNotFound = transfer.NotFound
)

// Transfer moves one region between a buffer and an object, asynchronously
// (PDC's region transfer): Start registers it with the data servers
// (PDCregion_transfer_start), Wait returns once the bytes are stored
// (write) or in the buffer (read), Status says where it stands without
// waiting, Close releases it, Err says how it ended. A buffer must not
// change until its transfer is waited.
type Transfer = transfer.Transfer

// NewTransfer describes a transfer (PDCregion_transfer_create). local is
// the part of buf that takes part, in a buffer shaped as local's end in
// every dimension (HDF5's memory space: a 1-D local region is size[0]
// elements from element off[0]); remote is the part of the object (the
// file space), which must lie inside its dims. Both hold the same number of
// elements, matched in row-major order.
func (o *Object) NewTransfer(ctx context.Context, buf []byte, access Access, local, remote region.Box) (*Transfer, error) {
	return transfer.New(ctx, &o.x, buf, access, local, remote)
}

// StartAll starts transfers together (PDCregion_transfer_start_all): the
// parts of all of them go in one request per data server, writes first.
// Transfers of objects with POSIX consistency are done when it returns.
func (c *Client) StartAll(ctx context.Context, ts []*Transfer) error { return c.xfer.StartAll(ctx, ts) }

// WaitAll waits for transfers together (PDCregion_transfer_wait_all): one
// request per data server. Its error joins those of the transfers that
// failed, whether in this wait or an earlier one.
func (c *Client) WaitAll(ctx context.Context, ts []*Transfer) error { return c.xfer.WaitAll(ctx, ts) }

// Flush fsyncs the object's data on the data servers written since the
// last flush (PDCobj_flush_start), after waiting for transfers under way.
func (o *Object) Flush(ctx context.Context) error { return o.x.Flush(ctx) }

// LaneBytes reports the region bytes this client has written and read
// through shared-memory lanes (see WithRegionTransport); the rest went on
// its connections.
func (c *Client) LaneBytes() (written, read int64) { return c.xfer.LaneBytes() }

// spreadNew fixes where a new object's data will live.
func (c *Client) spreadNew(p *wire.ObjectProps, key uint32) {
	sp, ok := placement.NewSpread(key, p.Dims, region.Type(p.Type).Size(), len(c.dataServers()))
	if !ok {
		return
	}
	p.Spread, p.Home, p.Block = sp.Over, sp.Home, sp.Block
}

func (o *Object) elem() int { return max(o.meta().Props.Type.Size(), 1) }

func mulOK(a, b uint64) (uint64, bool) {
	if a != 0 && b > ^uint64(0)/a {
		return 0, false
	}
	return a * b, true
}

// StartWrite starts writing buf, box's elements in row-major order, to the
// object's box.
func (o *Object) StartWrite(ctx context.Context, box region.Box, buf []byte) (*Transfer, error) {
	return o.startWhole(ctx, Write, box, buf)
}

// StartRead starts reading the object's box into buf, in row-major order.
func (o *Object) StartRead(ctx context.Context, box region.Box, buf []byte) (*Transfer, error) {
	return o.startWhole(ctx, Read, box, buf)
}

func (o *Object) startWhole(ctx context.Context, a Access, box region.Box, buf []byte) (*Transfer, error) {
	t, err := o.newWhole(ctx, a, box, buf)
	if err != nil {
		return nil, err
	}
	if err := t.Start(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// newWhole is a transfer of the object's box from or into all of buf.
func (o *Object) newWhole(ctx context.Context, a Access, box region.Box, buf []byte) (*Transfer, error) {
	elem := uint64(o.elem())
	if box.Check() == nil && uint64(len(buf)) != box.Volume()*elem {
		return nil, fmt.Errorf("object %q: region %v is %d bytes, the buffer %d: %w", o.meta().Name, box, box.Volume()*elem, len(buf), pdc.ErrInvalid)
	}
	return o.NewTransfer(ctx, buf, a, region.Shape(uint64(len(buf))/elem), box)
}

// Write writes buf, box's elements in row-major order, to the object's box
// and returns once it is stored.
func (o *Object) Write(ctx context.Context, box region.Box, buf []byte) error {
	return o.transferNow(ctx, Write, box, buf)
}

// Read reads the object's box into buf, in row-major order. Parts never
// written read as zeros.
func (o *Object) Read(ctx context.Context, box region.Box, buf []byte) error {
	return o.transferNow(ctx, Read, box, buf)
}

// transferNow is a whole-region transfer that returns once done: one
// request per data server (Transfer.Do), not a start and then a wait.
func (o *Object) transferNow(ctx context.Context, a Access, box region.Box, buf []byte) error {
	t, err := o.newWhole(ctx, a, box, buf)
	if err != nil {
		return err
	}
	return t.Do(ctx)
}

// PutData writes the whole object from data (PDCobj_put_data).
func (o *Object) PutData(ctx context.Context, data []byte) error {
	return o.Write(ctx, region.Shape(o.meta().Props.Dims...), data)
}

// GetData reads the whole object (PDCobj_get_data).
func (o *Object) GetData(ctx context.Context) ([]byte, error) {
	box := region.Shape(o.meta().Props.Dims...)
	n, ok := mulOK(box.Volume(), uint64(o.elem()))
	if !ok || n > 1<<40 {
		return nil, fmt.Errorf("object %q: %v is too large to read whole: %w", o.meta().Name, box, pdc.ErrTooLarge)
	}
	buf := make([]byte, n)
	return buf, o.Read(ctx, box, buf)
}
