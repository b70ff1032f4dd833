package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// spreadNew fixes where a new object's data will live.
func (c *Client) spreadNew(p *wire.ObjectProps, key uint32) {
	sp, ok := placement.NewSpread(key, p.Dims, region.Type(p.Type).Size(), len(c.dataServers()))
	if !ok {
		return
	}
	p.Spread, p.Home, p.Block = sp.Over, sp.Home, sp.Block
}

// Access says which way a transfer moves bytes (pdc_access_t).
type Access int

// Accesses.
const (
	Read  Access = 1 // PDC_READ: object to buffer
	Write Access = 2 // PDC_WRITE: buffer to object
)

func (a Access) String() string {
	switch a {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return fmt.Sprintf("access(%d)", int(a))
}

// TransferStatus is pdc_transfer_status_t.
type TransferStatus int

// Transfer states.
const (
	TransferComplete TransferStatus = 0
	TransferPending  TransferStatus = 1
	TransferNotFound TransferStatus = 2
)

func (s TransferStatus) String() string {
	switch s {
	case TransferComplete:
		return "complete"
	case TransferPending:
		return "pending"
	case TransferNotFound:
		return "not found"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

type transferState int

const (
	stateCreated transferState = iota
	stateStarted
	stateDone   // waited; status not yet reported complete
	stateClosed // closed, or complete reported
)

// Transfer moves one region between a buffer and an object, asynchronously:
// Start registers it with the data servers, Wait returns once the bytes are
// stored (write) or in the buffer (read). PDC's region transfer.
type Transfer struct {
	obj    *Object
	access Access
	buf    []byte
	local  region.Box // the part of the buffer, shaped like bufShape
	shape  region.Box // the buffer's shape: local's end in every dim
	remote region.Box // the part of the object

	mu     sync.Mutex
	state  transferState
	err    error
	linear []byte // the elements in remote's row-major order
	packed bool   // linear is a copy (local is not contiguous in buf)
	parts  []part
	// onePart holds parts when there is one, as for every region of an
	// object-static object: one allocation per region fewer.
	onePart [1]part
	// located, if isLocated, are where the pieces of a region-dynamic or
	// region-local transfer are (read) or go (write), as its metadata
	// server answered, for plan.
	located   []piece
	isLocated bool
}

// part is the piece of a transfer held by one data server.
type part struct {
	server int
	slot   int // the data slot box is in (placement.SlotHost)
	box    region.Box
	data   []byte // box's elements in row-major order
	direct bool   // data is a slice of linear
	id     uint64
	done   bool
	// start is the request that started the part, until its answer (the
	// part's id) has been collected; nil for a part started synchronously.
	start *startCall
}

// NewTransfer describes a transfer (PDCregion_transfer_create). local is
// the part of buf that takes part, in a buffer shaped as local's end in
// every dimension (HDF5's memory space: a 1-D local region is size[0]
// elements from element off[0]); remote is the part of the object (the
// file space), which must lie inside its dims. Both hold the same number of
// elements, matched in row-major order.
func (o *Object) NewTransfer(ctx context.Context, buf []byte, access Access, local, remote region.Box) (*Transfer, error) {
	if access != Read && access != Write {
		return nil, fmt.Errorf("object %q: transfer: %v is neither read nor write: %w", o.meta().Name, access, pdc.ErrInvalid)
	}
	if err := remote.Check(); err != nil {
		return nil, fmt.Errorf("object %q: remote region: %w", o.meta().Name, err)
	}
	if err := local.Check(); err != nil {
		return nil, fmt.Errorf("object %q: local region: %w", o.meta().Name, err)
	}
	if err := o.checkRemote(ctx, remote); err != nil {
		return nil, err
	}
	if local.Volume() != remote.Volume() {
		return nil, fmt.Errorf("object %q: local region %v holds %d elements, remote region %v holds %d: %w",
			o.meta().Name, local, local.Volume(), remote, remote.Volume(), pdc.ErrInvalid)
	}
	elem := uint64(o.elem())
	// The three boxes share one allocation: a program describing 64k
	// small regions made six per region.
	n, m := local.Ndim(), remote.Ndim()
	slab := make([]uint64, 4*n+2*m)
	take := func(src []uint64) []uint64 {
		k := len(src)
		dst := slab[:k:k]
		slab = slab[k:]
		copy(dst, src)
		return dst
	}
	shape := region.Box{Off: slab[:n:n], Size: slab[n : 2*n : 2*n]}
	slab = slab[2*n:]
	for i := range local.Size {
		shape.Size[i] = local.End(i)
	}
	if shape.Check() != nil {
		// Only its volume can be wrong: more than 2^64 elements.
		return nil, fmt.Errorf("object %q: local region %v spans a buffer of more than 2^64 elements: %w", o.meta().Name, local, pdc.ErrInvalid)
	}
	need, ok := mulOK(shape.Volume(), elem)
	if !ok || need > uint64(len(buf)) {
		return nil, fmt.Errorf("object %q: local region %v needs a buffer of %d elements of %d bytes, the buffer has %d bytes: %w",
			o.meta().Name, local, shape.Volume(), elem, len(buf), pdc.ErrInvalid)
	}
	lc := region.Box{Off: take(local.Off), Size: take(local.Size)}
	rc := region.Box{Off: take(remote.Off), Size: take(remote.Size)}
	return &Transfer{obj: o, access: access, buf: buf[:need], local: lc, shape: shape, remote: rc}, nil
}

func mulOK(a, b uint64) (uint64, bool) {
	if a != 0 && b > ^uint64(0)/a {
		return 0, false
	}
	return a * b, true
}

func (o *Object) elem() int { return max(o.meta().Props.Type.Size(), 1) }

// checkRemote checks a remote region against the object's dims, looking
// them up again before refusing: another client may have grown it.
func (o *Object) checkRemote(ctx context.Context, remote region.Box) error {
	dims := o.meta().Props.Dims
	if remote.Ndim() != len(dims) {
		return fmt.Errorf("object %q: remote region %v has %d dims, the object %d: %w", o.meta().Name, remote, remote.Ndim(), len(dims), pdc.ErrInvalid)
	}
	if remote.Within(dims) == nil {
		return nil
	}
	info, err := o.Refresh(ctx)
	if err != nil {
		return err
	}
	if err := remote.Within(info.Props.Dims); err != nil {
		return fmt.Errorf("object %q: remote region: %w", o.meta().Name, err)
	}
	return nil
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
	elem := uint64(o.elem())
	if box.Check() == nil && uint64(len(buf)) != box.Volume()*elem {
		return nil, fmt.Errorf("object %q: region %v is %d bytes, the buffer %d: %w", o.meta().Name, box, box.Volume()*elem, len(buf), pdc.ErrInvalid)
	}
	t, err := o.NewTransfer(ctx, buf, a, region.Shape(uint64(len(buf))/elem), box)
	if err != nil {
		return nil, err
	}
	if err := t.Start(ctx); err != nil {
		return nil, err
	}
	return t, nil
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

func (o *Object) transferNow(ctx context.Context, a Access, box region.Box, buf []byte) error {
	t, err := o.startWhole(ctx, a, box, buf)
	if err != nil {
		return err
	}
	return t.Wait(ctx)
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

// Start starts the transfer (PDCregion_transfer_start). With POSIX
// consistency it returns once the transfer is done. Otherwise it queues
// the transfer and returns at once: a goroutine of the client sends it
// (asking its metadata server first where a region-dynamic or
// region-local region goes), together with the other transfers queued
// meanwhile, in Start order. An error on the way, a refusal by a server
// or its loss, is reported by Wait, Status or Close. A buffer must not
// change until the transfer is waited, as in PDC.
func (t *Transfer) Start(ctx context.Context) error {
	return t.obj.c.StartAll(ctx, []*Transfer{t})
}

// Wait returns once the transfer is done (PDCregion_transfer_wait), with
// how it ended: a transfer that failed fails every Wait, the later ones
// at once.
func (t *Transfer) Wait(ctx context.Context) error {
	return t.obj.c.WaitAll(ctx, []*Transfer{t})
}

// Status says where the transfer stands without waiting for it
// (PDCregion_transfer_status). Complete is reported once; after that, and
// for a transfer never started, the status is TransferNotFound.
func (t *Transfer) Status(ctx context.Context) (TransferStatus, error) {
	t.mu.Lock()
	state := t.state
	t.mu.Unlock()
	switch state {
	case stateCreated, stateClosed:
		return TransferNotFound, nil
	case stateDone:
		t.mu.Lock()
		t.state = stateClosed
		t.mu.Unlock()
		return TransferComplete, nil
	}
	if t.obj.c.placing.holds(t) {
		return TransferPending, nil // not sent yet: no need to wait for it
	}
	if err := collectStarts(ctx, []*Transfer{t}); err != nil {
		return 0, err
	}
	byServer := map[int][]int{} // indices of parts not yet done
	for i, p := range t.parts {
		if !p.done {
			byServer[p.server] = append(byServer[p.server], i)
		}
	}
	pending := false
	for server, parts := range byServer {
		ids := make([]uint64, len(parts))
		for i, p := range parts {
			ids[i] = t.parts[p].id
		}
		var res wire.DataResults
		if err := t.obj.c.call(ctx, server, wire.MethodDataStatus, &wire.DataIDs{IDs: ids}, &res); err != nil {
			return 0, fmt.Errorf("object %q region %v: status: %w", t.obj.meta().Name, t.remote, err)
		}
		if len(res.Items) != len(ids) {
			return 0, fmt.Errorf("object %q region %v: status: %s answered %d results for %d transfers: %w",
				t.obj.meta().Name, t.remote, t.obj.c.label(server), len(res.Items), len(ids), pdc.ErrProtocol)
		}
		for i, r := range res.Items {
			switch {
			case r.State == wire.StatePending:
				pending = true
			case r.State == wire.StateComplete && t.access == Write:
				// The server reports a done write once and forgets it:
				// there is nothing left to wait for.
				p := &t.parts[parts[i]]
				p.done = true
				if e := itemErr(t.obj.c, server, r); e != nil {
					t.setErr(fmt.Errorf("object %q region %v: %w", t.obj.meta().Name, p.box, e))
				}
			}
		}
	}
	if pending {
		return TransferPending, nil
	}
	// Done on every server: collect (a read's bytes come with the wait).
	if err := t.Wait(ctx); err != nil {
		return 0, err
	}
	t.mu.Lock()
	t.state = stateClosed
	t.mu.Unlock()
	return TransferComplete, nil
}

// Close releases the transfer, waiting for it first if it was started and
// not yet waited (PDCregion_transfer_close).
//
// If ctx ends before the transfer is done, a transfer still queued (not
// yet sent) is dropped and ends with Close's error; one already on its way
// stays started, so that its buffer is known to be still in use: Close
// returns the error and may be called again.
func (t *Transfer) Close(ctx context.Context) error {
	t.mu.Lock()
	started := t.state == stateStarted
	t.mu.Unlock()
	var err error
	if started {
		err = t.Wait(ctx)
		if err != nil && ctx.Err() != nil && !t.obj.c.unqueue(t, err) {
			return err
		}
	}
	t.mu.Lock()
	t.state = stateClosed
	t.mu.Unlock()
	return err
}

// Closed reports whether Close has released the transfer (its buffer is
// no longer used).
func (t *Transfer) Closed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == stateClosed
}

// Err returns how the transfer ended, once waited.
func (t *Transfer) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// plan splits the transfer into parts per data server and lays out their
// bytes. Region-partitioned objects consult the metadata server.
func (t *Transfer) plan(ctx context.Context) error {
	o := t.obj
	elem := uint64(o.elem())
	// The elements in remote's row-major order: the buffer itself when the
	// local region is contiguous in it.
	t.linear, t.packed = nil, false
	runs := 0
	var first region.Run
	region.Runs(t.shape, t.local, func(r region.Run) bool {
		runs++
		first = r
		return runs < 2
	})
	if runs == 1 {
		t.linear = t.buf[first.Off*elem : (first.Off+first.Len)*elem]
	} else {
		t.linear = make([]byte, t.local.Volume()*elem)
		t.packed = true
		if t.access == Write {
			if err := region.Copy(t.linear, t.local, t.buf, t.shape, t.local, int(elem)); err != nil {
				return err
			}
		}
	}
	var pieces []piece
	var err error
	switch {
	case t.isLocated:
		pieces = t.located
		t.located, t.isLocated = nil, false
	case o.meta().Props.Partition == ObjectStatic:
		// One piece, kept off the heap: a start_all of 64k small
		// regions made one allocation per region for it.
		var one [1]piece
		if one[0], err = o.homePiece(t.remote); err != nil {
			return err
		}
		pieces = one[:]
	default:
		if pieces, err = o.pieces(ctx, t.access, t.remote); err != nil {
			return err
		}
	}
	if t.access == Read && !t.packed {
		covered := uint64(0)
		for _, pc := range pieces {
			covered += pc.box.Volume()
		}
		if covered < t.remote.Volume() {
			clear(t.linear) // parts never written read as zeros
		}
	}
	t.parts = t.parts[:0]
	if t.parts == nil && len(pieces) == 1 {
		t.parts = t.onePart[:0]
	}
	for _, pc := range pieces {
		p := part{server: pc.server, slot: pc.slot, box: pc.box}
		if pc.box.Equal(t.remote) {
			p.data, p.direct = t.linear, true
		} else if r, ok := oneRun(t.remote, pc.box); ok {
			p.data, p.direct = t.linear[r.Off*elem:(r.Off+r.Len)*elem], true
		} else {
			p.data = make([]byte, pc.box.Volume()*elem)
			if t.access == Write {
				if err := region.Copy(p.data, rel(pc.box, t.remote), t.linear, region.Shape(t.remote.Size...), rel(pc.box, t.remote), int(elem)); err != nil {
					return err
				}
			}
		}
		t.parts = append(t.parts, p)
	}
	return nil
}

// rel returns b relative to outer's origin.
func rel(b, outer region.Box) region.Box {
	r := b.Clone()
	for i := range r.Off {
		r.Off[i] -= outer.Off[i]
	}
	return r
}

// oneRun reports whether sub is one contiguous run of outer's row-major
// layout, and which.
func oneRun(outer, sub region.Box) (region.Run, bool) {
	n := 0
	var run region.Run
	region.Runs(region.Shape(outer.Size...), rel(sub, outer), func(r region.Run) bool {
		n++
		run = r
		return n < 2
	})
	return run, n == 1
}

type piece struct {
	server int // rank
	slot   int // data slot, held by server (placement.SlotHost)
	box    region.Box
}

// slotHost returns the rank of the data server that holds data slot slot.
func (c *Client) slotHost(slot int) (int, error) {
	ds := c.dataServers()
	if len(ds) == 0 {
		return 0, fmt.Errorf("the cluster has no data server: %w", pdc.ErrUnavailable)
	}
	if slot < 0 {
		return 0, fmt.Errorf("data slot %d: %w", slot, pdc.ErrProtocol)
	}
	return ds[placement.SlotHost(slot, len(ds))], nil
}

// slotPieces gives pieces located by a metadata server (whose Server is
// a data slot) the ranks of the data servers that hold them.
func (c *Client) slotPieces(ps []wire.RegionPiece) ([]piece, error) {
	out := make([]piece, 0, len(ps))
	for _, p := range ps {
		server, err := c.slotHost(int(p.Server))
		if err != nil {
			return nil, err
		}
		out = append(out, piece{server: server, slot: int(p.Server), box: region.Box{Off: p.Off, Size: p.Size}})
	}
	return out, nil
}

// pieces splits a region of the object among the data servers that hold
// (read) or will hold (write) it, by the object's partition strategy.
func (o *Object) pieces(ctx context.Context, a Access, box region.Box) ([]piece, error) {
	c := o.c
	ds := c.dataServers()
	if len(ds) == 0 {
		return nil, fmt.Errorf("object %q: the cluster has no data server: %w", o.meta().Name, pdc.ErrUnavailable)
	}
	sp := o.meta().spread
	over := int(sp.Over)
	if over == 0 {
		over = len(ds)
	}
	switch o.meta().Props.Partition {
	case ObjectStatic:
		p, err := o.homePiece(box)
		if err != nil {
			return nil, err
		}
		return []piece{p}, nil
	case RegionStatic:
		return staticPieces(box, max(sp.Block, 1), over, ds), nil
	case RegionDynamic, RegionLocal:
		if a == Write {
			var res wire.RegionLocatedAll
			req := wire.RegionBatch{Items: []wire.RegionReq{c.assignItem(o, box)}}
			if err := c.call(ctx, o.meta().Server, wire.MethodRegionPlace, &req, &res); err != nil {
				return nil, fmt.Errorf("object %q region %v: place: %w", o.meta().Name, box, err)
			}
			if len(res.Items) != 1 {
				return nil, fmt.Errorf("object %q: place: %d answers for 1 region: %w", o.meta().Name, len(res.Items), pdc.ErrProtocol)
			}
			ps, err := c.slotPieces(res.Items[0].Pieces)
			if err != nil {
				return nil, fmt.Errorf("object %q region %v: place: %w", o.meta().Name, box, err)
			}
			return ps, nil
		}
		var res wire.RegionPieces
		if err := c.call(ctx, o.meta().Server, wire.MethodRegionQuery, &wire.RegionReq{Obj: o.meta().ID, Off: box.Off, Size: box.Size}, &res); err != nil {
			return nil, fmt.Errorf("object %q region %v: look up: %w", o.meta().Name, box, err)
		}
		out, err := c.slotPieces(res.Items)
		if err != nil {
			return nil, fmt.Errorf("object %q region %v: look up: %w", o.meta().Name, box, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("object %q: unknown partition strategy %d: %w", o.meta().Name, o.meta().Props.Partition, pdc.ErrInvalid)
}

// homePiece is box of an object-static object: all on its home slot.
func (o *Object) homePiece(box region.Box) (piece, error) {
	ds := o.c.dataServers()
	if len(ds) == 0 {
		return piece{}, fmt.Errorf("object %q: the cluster has no data server: %w", o.meta().Name, pdc.ErrUnavailable)
	}
	slot := int(o.meta().spread.Home)
	return piece{server: ds[placement.SlotHost(slot, len(ds))], slot: slot, box: box}, nil
}

// staticPieces cuts box into the blocks of rows of the first dim that
// region static places round-robin over the data slots of the cluster
// the object was created in (placement.StaticPieces).
func staticPieces(box region.Box, block uint64, over int, ds []int) []piece {
	var out []piece
	placement.StaticPieces(box, block, over, func(slot int, b region.Box) {
		out = append(out, piece{server: ds[placement.SlotHost(slot, len(ds))], slot: slot, box: b})
	})
	return out
}

// candidates are the data slots a dynamic or local region may go to:
// those of the data servers of this cluster, each its own (slot i is the
// i-th data server's). Ties go to the first, so each client starts the
// list at a different place.
func (c *Client) candidates(p Partition) []uint64 {
	ds := c.dataServers()
	if p == RegionLocal {
		local := c.localData()
		if len(local) > 0 {
			return []uint64{uint64(slices.Index(ds, local[os.Getpid()%len(local)]))}
		}
		// No data server on this host: the least loaded of all.
	}
	return placement.Candidates(len(ds), os.Getpid())
}

// localData returns the data servers on this client's host.
func (c *Client) localData() []int {
	host := cluster.HostName()
	var out []int
	for _, r := range c.dataServers() {
		s, _, err := c.server(r)
		if err == nil && s.Host == host {
			out = append(out, r)
		}
	}
	return out
}

// StartAll starts transfers together (PDCregion_transfer_start_all): the
// parts of all of them go in one request per data server, writes first.
// Transfers of objects with POSIX consistency are done when it returns.
func (c *Client) StartAll(ctx context.Context, ts []*Transfer) error {
	var listed map[*Transfer]bool
	if len(ts) > 1 {
		listed = make(map[*Transfer]bool, len(ts))
	}
	for _, t := range ts {
		t.mu.Lock()
		state := t.state
		t.mu.Unlock()
		if state == stateStarted || listed[t] {
			return fmt.Errorf("object %q region %v: transfer already started: %w", t.obj.meta().Name, t.remote, pdc.ErrInvalid)
		}
		if listed != nil {
			listed[t] = true
		}
	}
	for _, t := range ts {
		// A transfer started again ends as this run does.
		t.mu.Lock()
		t.err = nil
		t.mu.Unlock()
	}
	if len(ts) == 1 && deferrable(ts[0]) {
		return c.startPlacing(ctx, ts[0])
	}
	if err := c.settle(ctx); err != nil {
		return err
	}
	return c.startNow(ctx, ts)
}

// startNow is StartAll once the transfers queued before are started.
func (c *Client) startNow(ctx context.Context, ts []*Transfer) error {
	if len(ts) > 1 {
		if err := c.placeAll(ctx, ts); err != nil {
			for _, t := range ts {
				if kindOf(t) == placeWrite {
					t.located, t.isLocated = nil, false
				}
			}
			return err
		}
		if err := c.locateAll(ctx, ts); err != nil {
			return err
		}
	}
	for _, t := range ts {
		if err := t.plan(ctx); err != nil {
			return err
		}
	}
	groups := groupParts(ts, false)
	posix := false
	for _, t := range ts {
		posix = posix || t.obj.meta().Props.Consistency == ConsistencyPOSIX
	}
	for server, refs := range groups {
		// Writes first, so that reads of the same call see them.
		slices.SortStableFunc(refs, func(a, b partRef) int {
			return boolInt(a.t.access != Write) - boolInt(b.t.access != Write)
		})
		groups[server] = refs
	}
	servers := make([]int, 0, len(groups))
	for s := range groups {
		servers = append(servers, s)
	}
	startChunk := func(server int, refs []partRef) error {
		if err := c.makeRoom(ctx, server, refs, 0); err != nil {
			return err
		}
		call := func() (wire.DataResults, wire.DataIDs, error) {
			if err := pdc.CtxErr(ctx); err != nil {
				return wire.DataResults{}, wire.DataIDs{}, err // and takes no lane space
			}
			ln, err := c.lane(ctx, server, refs, Write)
			if err != nil {
				return wire.DataResults{}, wire.DataIDs{}, err
			}
			m, payload, use := buildStart(refs, posix, ln)
			if ln != nil {
				ln.unref() // use holds its own
			}
			res, rep, err := c.dataCall(ctx, server, wire.MethodDataStart, &m, payload, posix, readParts(refs))
			use.settled(err)
			return res, rep, err
		}
		res, rep, err := call()
		if errors.Is(err, pdc.ErrStale) {
			// Another client changed the dims: look again, once. The
			// regions now outside them end alone.
			ok, rerr := refreshDims(ctx, refs)
			if rerr != nil {
				return rerr
			}
			if refs = ok; len(refs) == 0 {
				return nil
			}
			res, rep, err = call()
		}
		if err != nil {
			return fmt.Errorf("start %d transfers on %s: %w", len(refs), c.label(server), err)
		}
		ids := rep.IDs
		if posix {
			ids = res.IDs
		}
		if len(ids) != len(refs) {
			return fmt.Errorf("%s answered %d ids for %d transfers: %w", c.label(server), len(ids), len(refs), pdc.ErrProtocol)
		}
		for i, r := range refs {
			r.part().id = ids[i]
			if posix {
				r.part().done = true
				if e := itemErr(c, server, res.Items[i]); e != nil {
					r.t.setErr(e)
				}
			}
		}
		return nil
	}
	start := startChunk
	if !posix {
		start = func(server int, refs []partRef) error { return c.sendStart(ctx, server, refs) }
	}
	err := fanOut(servers, func(server int) error {
		// In order, so that the writes are registered before the reads
		// that must see them.
		all := groups[server]
		for _, ch := range chunk(len(all), chunkBytes, func(i int) int {
			if r := all[i]; r.t.access == Write || posix {
				return len(r.part().data)
			}
			return 0
		}) {
			if err := start(server, all[ch[0]:ch[1]]); err != nil {
				return err
			}
		}
		return nil
	})
	for _, t := range ts {
		t.mu.Lock()
		t.state = stateStarted
		t.mu.Unlock()
		if err != nil {
			// Parts no server took (no id) are over: their wait reports
			// why, rather than "not found".
			for i := range t.parts {
				// start first: a part sent has its id and done written
				// by whoever collects its answer.
				if p := &t.parts[i]; p.start == nil && p.id == 0 && !p.done {
					p.done = true
					t.setErr(fmt.Errorf("object %q region %v: not started: %w", t.obj.meta().Name, p.box, err))
				}
			}
		}
		t.obj.track(t, true)
		if t.access == Write {
			t.obj.wroteTo(t.parts)
		}
	}
	if err != nil {
		return err
	}
	if posix {
		for _, t := range ts {
			if t.obj.meta().Props.Consistency == ConsistencyPOSIX {
				t.finish()
			}
		}
		for _, t := range ts {
			if err := t.Err(); err != nil && t.obj.meta().Props.Consistency == ConsistencyPOSIX {
				return err
			}
		}
	}
	return nil
}

// placeAll has the metadata servers place the region-dynamic and
// region-local writes among ts, in one request per metadata server (and
// per MaxBatch regions), instead of one round trip per region as plan
// would.
func (c *Client) placeAll(ctx context.Context, ts []*Transfer) error {
	groups := map[int][]int{}
	for i, t := range ts {
		if kindOf(t) == placeWrite && !t.isLocated {
			groups[t.obj.meta().Server] = append(groups[t.obj.meta().Server], i)
		}
	}
	return inChunks(groups, func(i int) int { return regionSize(ts[i]) }, func(rank int, idx []int) error {
		writes := make([]*Transfer, len(idx))
		for k, i := range idx {
			writes[k] = ts[i]
		}
		req := c.assignAll(writes)
		var res wire.RegionLocatedAll
		if err := c.call(ctx, rank, wire.MethodRegionPlace, req, &res); err != nil {
			return fmt.Errorf("place %d regions: %w", len(idx), err)
		}
		if len(res.Items) != len(idx) {
			return fmt.Errorf("place: %d answers for %d regions: %w", len(res.Items), len(idx), pdc.ErrProtocol)
		}
		for k, i := range idx {
			ts[i].locate(res.Items[k].Pieces)
		}
		return nil
	})
}

// regionSize is about how many bytes t's region takes in a request.
func regionSize(t *Transfer) int { return 20*len(t.remote.Off) + 32 }

// locateAll looks up where the regions of the region-dynamic and
// region-local reads among ts are, one request per metadata server (and
// MaxBatch regions). A read its server could not locate is left for plan,
// which asks again and fails with the reason.
func (c *Client) locateAll(ctx context.Context, ts []*Transfer) error {
	groups := map[int][]int{}
	for i, t := range ts {
		if kindOf(t) == placeRead && !t.isLocated {
			groups[t.obj.meta().Server] = append(groups[t.obj.meta().Server], i)
		}
	}
	return inChunks(groups, func(i int) int { return regionSize(ts[i]) }, func(rank int, idx []int) error {
		reads := make([]*Transfer, len(idx))
		for k, i := range idx {
			reads[k] = ts[i]
		}
		var res wire.RegionLocatedAll
		if err := c.call(ctx, rank, wire.MethodRegionQueryAll, queryAll(reads), &res); err != nil {
			return fmt.Errorf("look up %d regions: %w", len(idx), err)
		}
		if len(res.Items) != len(reads) {
			return fmt.Errorf("look up: %d answers for %d regions: %w", len(res.Items), len(reads), pdc.ErrProtocol)
		}
		for k, t := range reads {
			if it := &res.Items[k]; it.Code == wire.CodeOK {
				t.locate(it.Pieces)
			}
		}
		return nil
	})
}

// partRef is one part of a transfer.
type partRef struct {
	t *Transfer
	p int
}

func (r partRef) part() *part { return &r.t.parts[r.p] }

// groupParts lists the parts of ts by data server, in order, leaving out
// done parts if told to. Each server's list is made to size: start_all of
// 64k small regions spent more growing them than filling them.
func groupParts(ts []*Transfer, undone bool) map[int][]partRef {
	n := map[int]int{}
	for _, t := range ts {
		for i := range t.parts {
			if !undone || !t.parts[i].done {
				n[t.parts[i].server]++
			}
		}
	}
	groups := make(map[int][]partRef, len(n))
	for server, k := range n {
		groups[server] = make([]partRef, 0, k)
	}
	for _, t := range ts {
		for i := range t.parts {
			if p := &t.parts[i]; !undone || !p.done {
				groups[p.server] = append(groups[p.server], partRef{t, i})
			}
		}
	}
	return groups
}

// buildStart is the DataStart request of refs, and its payload: the
// writes' bytes, in order.
func buildStart(refs []partRef, wait bool, ln *clientLane) (wire.DataStart, [][]byte, *laneUse) {
	m := wire.DataStart{Items: make([]wire.DataItem, len(refs)), Wait: wait}
	payload := make([][]byte, 0, len(refs))
	var use *laneUse
	if ln != nil {
		ln.refs.Add(1) // the use's own
		use = &laneUse{l: ln}
	}
	for i, r := range refs {
		o, p := r.t.obj, r.part()
		m.Items[i] = wire.DataItem{Obj: o.meta().ID, Write: r.t.access == Write, Off: p.box.Off, Size: p.box.Size,
			Dims: o.meta().Props.Dims, DimsVersion: o.meta().DimsVersion, Elem: uint32(o.elem()), Storage: uint32(o.meta().Props.Storage),
			Slot: uint32(p.slot) + 1}
		if r.t.access != Write {
			continue
		}
		if use != nil && len(p.data) >= laneMin {
			if sp, ok := use.alloc(len(p.data)); ok {
				ln.warm.Ensure(ln.mem, sp.End())
				copy(ln.mem[sp.Off:sp.Off+len(p.data)], p.data)
				m.Items[i].Lane = uint64(sp.Off) + 1
				r.t.obj.c.lanes.written.Add(int64(len(p.data)))
				continue
			}
		}
		payload = append(payload, p.data)
	}
	if use != nil && len(use.spans) == 0 {
		use.done()
		use = nil
	}
	if use != nil {
		m.Lane = ln.id
	}
	return m, payload, use
}

// refreshDims looks up the objects of refs again after a data server found
// their dims out of date. It ends the parts whose remote region no longer
// fits, each with its own error, and returns the others, to start again.
func refreshDims(ctx context.Context, refs []partRef) ([]partRef, error) {
	seen := map[*Object]bool{}
	ok := make([]partRef, 0, len(refs))
	for _, r := range refs {
		o := r.t.obj
		if !seen[o] {
			if _, err := o.Refresh(ctx); err != nil {
				return nil, err
			}
			seen[o] = true
		}
		if err := r.t.remote.Within(o.meta().Props.Dims); err != nil {
			r.part().done = true
			r.t.setErr(fmt.Errorf("object %q: remote region: %w", o.meta().Name, err))
			continue
		}
		ok = append(ok, r)
	}
	return ok, nil
}

// Bounds of one data request: messages of a few tens of MiB keep the
// server storing one while the next arrives, and far from the frame limit.
const (
	chunkBytes = 64 << 20
	chunkItems = 8192
	// waitChunkBytes bounds the reads' bytes one wait answers. The waits
	// are sent at once, so smaller answers cost little, and a data server
	// checks an answer's CRCs just before it sends it, so the bytes may
	// still be in the CPU caches when they go. Measured with 1 GiB read
	// in 1 and 16 MiB regions: 8 MiB answers 1.6-2.0 GB/s, 64 MiB
	// 1.65-1.85, 2 MiB (more answers checked at once) 1.5-1.8.
	waitChunkBytes = 8 << 20
)

// chunk splits n items, of size(i) bytes each, into consecutive [start,
// end) ranges of at most chunkItems items and limit bytes (an item
// larger than that goes alone).
func chunk(n, limit int, size func(i int) int) [][2]int {
	var out [][2]int
	start, bytes := 0, 0
	for i := range n {
		sz := size(i)
		if i > start && (i-start == chunkItems || bytes+sz > limit) {
			out = append(out, [2]int{start, i})
			start, bytes = i, 0
		}
		bytes += sz
	}
	if n > start {
		out = append(out, [2]int{start, n})
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readParts lists, per ref, its part if it is a read, nil if a write.
func readParts(refs []partRef) []*part {
	out := make([]*part, len(refs))
	for i, r := range refs {
		if r.t.access == Read {
			out[i] = r.part()
		}
	}
	return out
}

func (t *Transfer) setErr(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

func itemErr(c *Client, server int, r wire.DataResult) error {
	if r.Code == wire.CodeOK {
		return nil
	}
	return &pdc.ServerError{Server: c.label(server), Method: "data_wait", Msg: r.Message, Err: r.Code.Err()}
}

// dataCall makes a data call whose answer, when results is set, is a
// DataResults with one result per item and the bytes of the reads that
// succeeded in its payload, in order; items holds each item's part for a
// read, nil for a write. Without results the answer is DataIDs.
func (c *Client) dataCall(ctx context.Context, server int, m wire.Method, req wire.Message, payload [][]byte, results bool, items []*part) (wire.DataResults, wire.DataIDs, error) {
	d, err := c.dataSend(ctx, server, m, req, payload, results, items)
	if err != nil {
		return wire.DataResults{}, wire.DataIDs{}, err
	}
	return d.recv(ctx)
}

// dataPending is a data call sent whose answer is still to be received.
type dataPending struct {
	c       *Client
	server  int
	results bool
	items   []*part
	p       *rpc.Pending
	lane    *laneUse // where the reads with a lane offset go
}

// dataSend sends a data call (see dataCall); its answer is received by
// recv, which must be called once.
func (c *Client) dataSend(ctx context.Context, server int, m wire.Method, req wire.Message, payload [][]byte, results bool, items []*part) (*dataPending, error) {
	get := c.conn
	if m == wire.MethodDataStart {
		get = c.startConn
	}
	conn, err := get(ctx, server)
	if err != nil {
		return nil, err
	}
	return c.dataSendOn(ctx, conn, server, m, req, payload, results, items, nil)
}

// dataSendOn is dataSend on a given connection to server.
func (c *Client) dataSendOn(ctx context.Context, conn *rpc.Conn, server int, m wire.Method, req wire.Message, payload [][]byte, results bool, items []*part, use *laneUse) (*dataPending, error) {
	// The reads' bytes go straight into their places when all of them
	// came; otherwise they come in one buffer and are copied apart. Not
	// when some reads go through the lane: a server that no longer has
	// it answers those in the payload, and with one of the others failed
	// the sizes could add up all the same, which would scatter bytes into
	// the wrong buffers before the results are read.
	var into [][]byte
	if results && use == nil {
		for _, p := range items {
			if p != nil {
				into = append(into, p.data)
			}
		}
	}
	p, err := conn.Send(ctx, m, req.Marshal(nil), payload, into)
	if err != nil {
		return nil, err
	}
	return &dataPending{c: c, server: server, results: results, items: items, p: p, lane: use}, nil
}

func (d *dataPending) recv(ctx context.Context) (wire.DataResults, wire.DataIDs, error) {
	var res wire.DataResults
	var ids wire.DataIDs
	rep, err := d.p.Wait(ctx)
	defer func() { d.lane.settled(err) }()
	if err != nil {
		return res, ids, err
	}
	if !d.results {
		return res, ids, ids.Unmarshal(rep.Header)
	}
	if err := res.Unmarshal(rep.Header); err != nil {
		return res, ids, err
	}
	if len(res.Items) != len(d.items) {
		return res, ids, fmt.Errorf("%s answered %d results for %d transfers: %w", d.c.label(d.server), len(res.Items), len(d.items), pdc.ErrProtocol)
	}
	pos := uint64(0)
	for i, r := range res.Items {
		if r.InLane {
			// The bytes are in the lane, where this wait said.
			p := d.items[i]
			if p == nil || !d.lane.has(i) {
				return res, ids, fmt.Errorf("%s put a transfer's bytes in the lane where this wait asked for none: %w", d.c.label(d.server), pdc.ErrProtocol)
			}
			if uint64(len(p.data)) != r.Size {
				return res, ids, fmt.Errorf("%s put %d bytes of a %d-byte read in the lane: %w", d.c.label(d.server), r.Size, len(p.data), pdc.ErrProtocol)
			}
			off := int(d.lane.offs[i] - 1)
			copy(p.data, d.lane.l.mem[off:off+len(p.data)])
			d.c.lanes.read.Add(int64(len(p.data)))
			continue
		}
		if r.Size == 0 {
			continue
		}
		p := d.items[i]
		if p == nil || uint64(len(p.data)) != r.Size || !rep.Scattered && pos+r.Size > uint64(len(rep.Payload)) {
			return res, ids, fmt.Errorf("%s: the answer's payload does not match its results: %w", d.c.label(d.server), pdc.ErrProtocol)
		}
		if !rep.Scattered {
			copy(p.data, rep.Payload[pos:pos+r.Size])
		}
		pos += r.Size
	}
	return res, ids, nil
}

// WaitAll waits for transfers together (PDCregion_transfer_wait_all): one
// request per data server. Its error joins those of the transfers that
// failed, whether in this wait or an earlier one.
func (c *Client) WaitAll(ctx context.Context, ts []*Transfer) error {
	if err := c.settle(ctx); err != nil {
		return err
	}
	var waiting []*Transfer
	var ended []error             // of transfers that had ended before, as they did
	var listed map[*Transfer]bool // a transfer listed twice is waited once
	if len(ts) > 1 {
		listed = make(map[*Transfer]bool, len(ts))
	}
	for _, t := range ts {
		t.mu.Lock()
		state, terr := t.state, t.err
		t.mu.Unlock()
		switch state {
		case stateCreated:
			return fmt.Errorf("object %q region %v: transfer not started: %w", t.obj.meta().Name, t.remote, pdc.ErrInvalid)
		case stateDone, stateClosed:
			if terr != nil && (listed == nil || !listed[t]) {
				ended = append(ended, terr)
				if listed != nil {
					listed[t] = true
				}
			}
			continue
		}
		if listed != nil {
			if listed[t] {
				continue
			}
			listed[t] = true
		}
		waiting = append(waiting, t)
	}
	if err := collectStarts(ctx, waiting); err != nil {
		return err
	}
	groups := groupParts(waiting, true)
	servers := make([]int, 0, len(groups))
	for s := range groups {
		servers = append(servers, s)
	}
	sendWait := func(conn *rpc.Conn, server int, refs []partRef, use *laneUse) (*dataPending, error) {
		req := wire.DataIDs{IDs: make([]uint64, len(refs))}
		for i, r := range refs {
			req.IDs[i] = r.part().id
		}
		if use != nil {
			req.Lane, req.LaneOffs = use.l.id, use.offs
		}
		d, err := c.dataSendOn(ctx, conn, server, wire.MethodDataWait, &req, nil, true, readParts(refs), use)
		if err != nil {
			use.settled(err)
		}
		return d, err
	}
	endWait := func(server int, refs []partRef, d *dataPending, err error) error {
		var res wire.DataResults
		if err == nil {
			res, _, err = d.recv(ctx)
		}
		if err != nil {
			err = fmt.Errorf("wait for %d transfers on %s: %w", len(refs), c.label(server), err)
			if !errors.Is(err, pdc.ErrTimeout) && !errors.Is(err, pdc.ErrCanceled) {
				// The server is gone or broke the protocol: these
				// transfers end with the error.
				for _, r := range refs {
					r.part().done = true
					r.t.setErr(err)
				}
			}
			return err
		}
		for i, r := range refs {
			r.part().done = true
			if e := itemErr(c, server, res.Items[i]); e != nil {
				r.t.setErr(fmt.Errorf("object %q region %v: %w", r.t.obj.meta().Name, r.part().box, e))
			}
		}
		return nil
	}
	err := fanOut(servers, func(server int) error {
		// Every chunk's wait is sent at once: the server answers each as
		// soon as its transfers are done, so reading one answer overlaps
		// the server's work on the next.
		all := groups[server]
		chunks := chunk(len(all), waitChunkBytes, func(i int) int {
			if r := all[i]; r.t.access == Read {
				return len(r.part().data)
			}
			return 0
		})
		sent := make([]*dataPending, len(chunks))
		errs := make([]error, len(chunks))
		// All on one connection: its answers are read as they come,
		// whichever the server finishes first; spread over the pool, an
		// answer could wait unread behind another connection's.
		conn, err := c.conn(ctx, server)
		var ln *clientLane
		if err == nil {
			ln, err = c.lane(ctx, server, all, Read)
		}
		if ln != nil {
			defer ln.unref()
		}
		var first error
		ended := 0 // chunks whose answers are in, in order
		end := func() {
			i, ch := ended, chunks[ended]
			ended++
			if sent[i] == nil && errs[i] == nil {
				errs[i] = first // not sent: ends as the first failure did
			}
			if err := endWait(server, all[ch[0]:ch[1]], sent[i], errs[i]); err != nil && first == nil {
				first = err
			}
		}
		for i, ch := range chunks {
			if err != nil {
				errs[i] = err
				break
			}
			refs := all[ch[0]:ch[1]]
			var use *laneUse
			if ln != nil {
				// Through the lane while it has room; when it has none,
				// the oldest answer frees some.
				full := false
				for use, full = waitInLane(ln, refs); full && ended < i; use, full = waitInLane(ln, refs) {
					end()
				}
			}
			if sent[i], errs[i] = sendWait(conn, server, refs, use); errs[i] != nil {
				break
			}
		}
		for ended < len(chunks) {
			end()
		}
		return first
	})
	errs := ended
	if err != nil {
		errs = append(errs, err)
	}
	for _, t := range waiting {
		if !t.allDone() {
			continue
		}
		t.finish()
		if e := t.Err(); e != nil && err == nil {
			errs = append(errs, e)
		}
	}
	return errors.Join(errs...)
}

func (t *Transfer) allDone() bool {
	for _, p := range t.parts {
		if !p.done {
			return false
		}
	}
	return true
}

// finish puts a read's bytes in place and marks the transfer done.
func (t *Transfer) finish() {
	t.mu.Lock()
	if t.state != stateStarted {
		t.mu.Unlock()
		return
	}
	t.state = stateDone
	err := t.err
	t.mu.Unlock()
	if t.access == Read && err == nil {
		elem := t.obj.elem()
		for _, p := range t.parts {
			if !p.direct {
				r := rel(p.box, t.remote)
				_ = region.Copy(t.linear, region.Shape(t.remote.Size...), p.data, r, r, elem)
			}
		}
		if t.packed {
			_ = region.Copy(t.buf, t.shape, t.linear, t.local, t.local, elem)
		}
	}
	for i := range t.parts {
		if !t.parts[i].direct {
			t.parts[i].data = nil
		}
	}
	t.obj.track(t, false)
}

func (o *Object) track(t *Transfer, started bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.pending == nil {
		o.mu.pending = map[*Transfer]struct{}{}
	}
	if started {
		o.mu.pending[t] = struct{}{}
	} else {
		delete(o.mu.pending, t)
	}
}

func (o *Object) wroteTo(parts []part) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.wrote == nil {
		o.mu.wrote = map[int]bool{}
	}
	for _, p := range parts {
		o.mu.wrote[p.server] = true
	}
}

// Flush fsyncs the object's data on the data servers written since the
// last flush (PDCobj_flush_start), after waiting for transfers under way.
func (o *Object) Flush(ctx context.Context) error {
	if err := o.waitPending(ctx); err != nil {
		return err
	}
	o.mu.Lock()
	servers := make([]int, 0, len(o.mu.wrote))
	for s := range o.mu.wrote {
		servers = append(servers, s)
	}
	o.mu.wrote = nil
	o.mu.Unlock()
	return fanOut(servers, func(server int) error {
		if err := o.c.call(ctx, server, wire.MethodDataFlush, &wire.IDArg{ID: o.meta().ID}, nil); err != nil {
			return fmt.Errorf("object %q: flush on %s: %w", o.meta().Name, o.c.label(server), err)
		}
		return nil
	})
}

// waitPending waits for the object's started, unwaited transfers.
func (o *Object) waitPending(ctx context.Context) error {
	o.mu.Lock()
	ts := make([]*Transfer, 0, len(o.mu.pending))
	for t := range o.mu.pending {
		ts = append(ts, t)
	}
	o.mu.Unlock()
	if len(ts) == 0 {
		return nil
	}
	return o.c.WaitAll(ctx, ts)
}
