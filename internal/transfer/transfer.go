package transfer

import (
	"context"
	"fmt"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

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

// Status is where a transfer stands (pdc_transfer_status_t).
type Status int

// Transfer states.
const (
	Complete Status = 0
	Pending  Status = 1
	NotFound Status = 2
)

func (s Status) String() string {
	switch s {
	case Complete:
		return "complete"
	case Pending:
		return "pending"
	case NotFound:
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
	local  region.Box // the part of the buffer, shaped like shape
	shape  region.Box // the buffer's shape: local's end in every dim
	remote region.Box // the part of the object

	mu     sync.Mutex
	state  transferState
	err    error
	linear []byte // the elements in remote's row-major order
	packed bool   // linear is a copy (local is not contiguous in buf)
	parts  []part
	mark   uint64 // the startable call that saw it last
	// busy says a call is using the parts: a start until it returns, or
	// a wait collecting them (a Flush's among them) until it has
	// finished the transfer. Another wait of the transfer waits for
	// that call to be done (released) rather than ask the servers for
	// ids that call collects, or finish the transfer under it.
	busy     bool
	released chan struct{} // closed when busy ends; made by a call waiting for that
	// onePart holds parts when there is one, as for every region of an
	// object-static object: one allocation per region fewer.
	onePart [1]part
	// located, if isLocated, are where the pieces of a region-dynamic or
	// region-local transfer are (read) or go (write), as its metadata
	// server answered, for plan.
	located   []Piece
	isLocated bool
	// pend links the transfer into its object's pending list; guarded
	// by the object's mu, not the transfer's.
	pend pendLink
	// trace is the id every request of the transfer carries (rpc.TraceOf
	// of New's context, or a new one): its placement, start and wait, on
	// every server, log one id (docs/design/0031).
	trace uint64
}

// pendLink is a transfer's place in its object's pending list.
type pendLink struct {
	prev, next *Transfer
	in         bool
}

// Trace is the trace id of the transfer's requests.
func (t *Transfer) Trace() uint64 { return t.trace }

// traced is ctx carrying the trace id of ts's first transfer, unless it
// carries one already.
func traced(ctx context.Context, ts []*Transfer) context.Context {
	if len(ts) == 0 || rpc.TraceOf(ctx) != 0 {
		return ctx
	}
	return rpc.WithTrace(ctx, ts[0].trace)
}

// part is the piece of a transfer held by one data server.
type part struct {
	server int
	slot   int // the data slot box is in (placement.SlotHost)
	box    region.Box
	data   []byte // box's elements in row-major order
	direct bool   // data is a slice of linear
	id     uint64
	// inst is the instance of the server that gave id (rpc.Conn.Instance):
	// ids are the server process's own, and a server restarted since
	// numbers its transfers afresh, so a wait goes to no other.
	inst string
	done bool
	// start is the request that started the part, until its answer (the
	// part's id) has been collected; nil for a part started synchronously.
	start *startCall
}

// New describes a transfer (PDCregion_transfer_create). local is
// the part of buf that takes part, in a buffer shaped as local's end in
// every dimension (HDF5's memory space: a 1-D local region is size[0]
// elements from element off[0]); remote is the part of the object (the
// file space), which must lie inside its dims. Both hold the same number of
// elements, matched in row-major order.
func New(ctx context.Context, o *Object, buf []byte, access Access, local, remote region.Box) (*Transfer, error) {
	if access != Read && access != Write {
		return nil, fmt.Errorf("object %q: transfer: %v is neither read nor write: %w", o.Meta().Name, access, pdc.ErrInvalid)
	}
	if err := remote.Check(); err != nil {
		return nil, fmt.Errorf("object %q: remote region: %w", o.Meta().Name, err)
	}
	if err := local.Check(); err != nil {
		return nil, fmt.Errorf("object %q: local region: %w", o.Meta().Name, err)
	}
	if err := o.CheckRemote(ctx, remote); err != nil {
		return nil, err
	}
	if local.Volume() != remote.Volume() {
		return nil, fmt.Errorf("object %q: local region %v holds %d elements, remote region %v holds %d: %w",
			o.Meta().Name, local, local.Volume(), remote, remote.Volume(), pdc.ErrInvalid)
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
		return nil, fmt.Errorf("object %q: local region %v spans a buffer of more than 2^64 elements: %w", o.Meta().Name, local, pdc.ErrInvalid)
	}
	need, ok := mulOK(shape.Volume(), elem)
	if !ok || need > uint64(len(buf)) {
		return nil, fmt.Errorf("object %q: local region %v needs a buffer of %d elements of %d bytes, the buffer has %d bytes: %w",
			o.Meta().Name, local, shape.Volume(), elem, len(buf), pdc.ErrInvalid)
	}
	lc := region.Box{Off: take(local.Off), Size: take(local.Size)}
	rc := region.Box{Off: take(remote.Off), Size: take(remote.Size)}
	trace := rpc.TraceOf(ctx)
	if trace == 0 {
		trace = rpc.NewTrace()
	}
	return &Transfer{obj: o, access: access, buf: buf[:need], local: lc, shape: shape, remote: rc, trace: trace}, nil
}

func mulOK(a, b uint64) (uint64, bool) {
	if a != 0 && b > ^uint64(0)/a {
		return 0, false
	}
	return a * b, true
}

// CheckRemote checks a remote region against the object's dims, looking
// them up again before refusing: another client may have grown it.
func (o *Object) CheckRemote(ctx context.Context, remote region.Box) error {
	dims := o.Meta().Dims
	if len(dims) == 0 {
		return fmt.Errorf("object %q has no dims (it was created without dims or a type): it holds tags, not data: %w", o.Meta().Name, pdc.ErrInvalid)
	}
	if remote.Ndim() != len(dims) {
		return fmt.Errorf("object %q: remote region %v has %d dims, the object %d: %w", o.Meta().Name, remote, remote.Ndim(), len(dims), pdc.ErrInvalid)
	}
	if remote.Within(dims) == nil {
		return nil
	}
	info, err := o.refresh(ctx)
	if err != nil {
		return err
	}
	if err := remote.Within(info.Dims); err != nil {
		return fmt.Errorf("object %q: remote region: %w", o.Meta().Name, err)
	}
	return nil
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
	return t.obj.e.StartAll(ctx, []*Transfer{t})
}

// Do starts the transfer and returns once it is done: Start and Wait in
// one request (see Engine.DoAll).
func (t *Transfer) Do(ctx context.Context) error {
	return t.obj.e.DoAll(ctx, []*Transfer{t})
}

// Wait returns once the transfer is done (PDCregion_transfer_wait), with
// how it ended: a transfer that failed fails every Wait, the later ones
// at once.
func (t *Transfer) Wait(ctx context.Context) error {
	return t.obj.e.WaitAll(ctx, []*Transfer{t})
}

// Status says where the transfer stands without waiting for it
// (PDCregion_transfer_status). Complete is reported once; after that, and
// for a transfer never started, the status is NotFound.
func (t *Transfer) Status(ctx context.Context) (Status, error) {
	t.mu.Lock()
	state, busy := t.state, t.busy
	t.mu.Unlock()
	switch state {
	case stateCreated, stateClosed:
		return NotFound, nil
	case stateDone:
		// Pending while the call that finished it holds it: it may
		// still be copying a read's bytes into the buffer (finish).
		return t.report(), nil
	}
	if busy || t.obj.e.placing.holds(t) {
		// Not sent yet, or another call (a wait, a Flush) is collecting
		// it: no need to ask.
		return Pending, nil
	}
	// Held while the servers are asked: a wait meanwhile (a Flush's)
	// would ask them for the ids this forgets.
	if !t.claim() {
		return Pending, nil
	}
	pending, err := t.askStatus(ctx)
	t.release()
	if err != nil {
		return 0, err
	}
	if pending {
		return Pending, nil
	}
	// Done on every server: collect (a read's bytes come with the wait).
	if err := t.Wait(ctx); err != nil {
		return 0, err
	}
	return t.report(), nil
}

// report reports a done transfer complete and marks that reported
// (closed), checked and set at once: one that another call holds (a start
// of it again, a call still copying a read's bytes) is pending, and one
// already reported (by a Status meanwhile) is not found.
func (t *Transfer) report() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.state == stateClosed:
		return NotFound
	case t.state != stateDone || t.busy:
		return Pending
	}
	t.state = stateClosed
	return Complete
}

// claim marks t busy if it is started and no other call holds it.
func (t *Transfer) claim() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != stateStarted || t.busy {
		return false
	}
	t.busy = true
	return true
}

// askStatus asks the servers of t's parts not yet done where they stand
// (Status), and reports whether one is still pending; a done write is
// done for good, the server having forgotten it.
func (t *Transfer) askStatus(ctx context.Context) (bool, error) {
	if err := collectStarts(ctx, []*Transfer{t}); err != nil {
		return false, err
	}
	byServer := map[int][]int{} // indices of parts not yet done
	for i, p := range t.parts {
		if !p.done {
			byServer[p.server] = append(byServer[p.server], i)
		}
	}
	pending := false
	for server, all := range byServer {
		conn, err := t.obj.e.cl.Conn(ctx, server)
		if err != nil {
			return false, fmt.Errorf("object %q region %v: status: %w", t.obj.Meta().Name, t.remote, err)
		}
		// Parts another instance of the server started are not asked
		// about: the one there now gives their ids to its own transfers.
		// The wait that follows ends them (startedElsewhere).
		parts := all[:0]
		ids := make([]uint64, 0, len(all))
		for _, p := range all {
			if t.parts[p].inst == conn.Instance() {
				parts = append(parts, p)
				ids = append(ids, t.parts[p].id)
			}
		}
		if len(ids) == 0 {
			continue
		}
		req := wire.DataIDs{IDs: ids}
		var res wire.DataResults
		rep, err := conn.Call(ctx, wire.MethodDataStatus, req.Marshal(nil), nil, nil)
		if err == nil {
			err = res.Unmarshal(rep.Header)
		}
		if err != nil {
			return false, fmt.Errorf("object %q region %v: status: %w", t.obj.Meta().Name, t.remote, err)
		}
		if len(res.Items) != len(ids) {
			return false, fmt.Errorf("object %q region %v: status: %s answered %d results for %d transfers: %w",
				t.obj.Meta().Name, t.remote, t.obj.e.cl.Label(server), len(res.Items), len(ids), pdc.ErrProtocol)
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
				if ierr := itemErr(t.obj.e, server, r); ierr != nil {
					t.setErr(fmt.Errorf("object %q region %v: %w", t.obj.Meta().Name, p.box, ierr))
				}
			}
		}
	}
	return pending, nil
}

// Close releases the transfer, waiting for it first if it was started and
// not yet waited (PDCregion_transfer_close).
//
// If ctx ends before the transfer is done, a transfer still queued (not
// yet sent) is dropped and ends with Close's error; one the placer is
// sending, one whose start is not yet answered, or one that another call
// (a Flush, a wait of another goroutine) is collecting, stays started, so
// that its buffer is known to be still in use: Close returns the error
// and may be called again.
func (t *Transfer) Close(ctx context.Context) error {
	t.mu.Lock()
	started, busy := t.state == stateStarted, t.busy
	t.mu.Unlock()
	if !started && busy {
		// Done, but the call that finished it (a Flush, a wait of
		// another goroutine) may still be copying a read's bytes into
		// its buffer.
		if err := t.awaitRelease(ctx); err != nil {
			return fmt.Errorf("object %q region %v: %w", t.obj.Meta().Name, t.remote, err)
		}
		t.mu.Lock()
		started = t.state == stateStarted // a start may have held it
		t.mu.Unlock()
	}
	var err error
	if started {
		err = t.Wait(ctx)
		if err != nil && ctx.Err() != nil && !t.obj.e.unqueue(t, err) {
			return err
		}
	}
	t.mu.Lock()
	if started && err != nil && (t.busy || t.startUnanswered()) {
		// Cut short while another call (a Flush, a wait of another
		// goroutine) collects it: that call still reads into its buffer,
		// and finishes it. Or before a start of its parts was answered:
		// whoever collects that answer later writes it into the parts,
		// those of a run started again included. It stays started.
		t.mu.Unlock()
		return err
	}
	t.state = stateClosed
	t.mu.Unlock()
	if started {
		// Not finished if the wait was cut short: nobody waits for it
		// now, a Flush of its object included.
		t.obj.track(t, false)
	}
	return err
}

// startUnanswered reports whether a start of t's parts is still to be
// collected. The caller holds t.mu, and no call holds t busy.
func (t *Transfer) startUnanswered() bool {
	for i := range t.parts {
		if sc := t.parts[i].start; sc != nil {
			select {
			case <-sc.done:
			default:
				return true
			}
		}
	}
	return false
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
