package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Starts are pipelined: Start sends its request and returns without
// waiting for the data server's answer (the ids of the transfers), so that
// a program starting one region after another keeps the connection busy
// (the server stores one region while the next is on the wire) instead of
// paying a round trip per region, which halved the throughput of 1 MiB
// regions. The answer is collected when it is first needed: by a wait, a
// status or a close of one of its transfers, or by a later start that must
// be registered after it.
//
// These rules keep what a program sees as it was with one round trip per
// start:
//   - a start that reads waits first for the answers to this client's
//     earlier starts on that server that write, so that the reads are
//     registered after the writes they may overlap (the server orders a
//     read after the registered writes it overlaps);
//   - a start refused for out-of-date dims is sent again when its answer
//     is collected, so answers are collected in the order the starts
//     went (collecting one collects the earlier ones on its server
//     first), and a start that writes an object with other dims than an
//     earlier unanswered start that wrote it there, or that does not
//     carry every object that one carries at the same dims (it may be
//     refused for one of those alone), waits for that one's answer
//     first, and a waited start (DoAll, POSIX) that writes an
//     object waits for the answers of every earlier unanswered start
//     that wrote it there: else the earlier, refused, would be sent
//     again after the later was stored, and overwrite it;
//   - at most startWindowBytes of written bytes and startWindowCalls
//     requests per server are unanswered: the server's memory for a
//     client's payloads stays bounded by what it has acknowledged. The
//     window is small on purpose: measured with 1 MiB regions on this
//     2-core machine, 16 requests or 32 MiB wrote at 1.8-2.1 GB/s and 64
//     or 64 MiB at 1.4-1.5 GB/s, since the server's buffers in flight
//     then no longer stay in the CPU caches between their arrival and
//     their store.
const (
	startWindowBytes = 32 << 20
	startWindowCalls = 16
)

// startCall is a DataStart sent whose answer is not yet collected.
type startCall struct {
	e      *Engine
	server int
	refs   []partRef
	bytes  int  // written bytes it carries
	writes bool // it carries writes
	pend   *rpc.Pending
	inst   string   // the instance of the server pend went to
	lane   *laneUse // the lane spans its writes are in, until answered
	// dims holds, for each object it writes, the dims version it was
	// sent with; carried, for each object it reads or writes (mixed: one
	// of them at two versions).
	dims    map[uint64]uint64
	carried map[uint64]uint64
	mixed   bool

	tok  chan struct{} // held by the goroutine collecting it
	done chan struct{} // closed once collected
	err  error         // set before done is closed
}

// startQueue holds each server's unanswered starts, oldest first.
type startQueue struct {
	mu       sync.Mutex
	byServer map[int][]*startCall
}

func (q *startQueue) add(sc *startCall) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.byServer == nil {
		q.byServer = map[int][]*startCall{}
	}
	q.byServer[sc.server] = append(q.byServer[sc.server], sc)
}

func (q *startQueue) remove(sc *startCall) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.byServer[sc.server]
	for i, x := range l {
		if x == sc {
			q.byServer[sc.server] = append(l[:i:i], l[i+1:]...)
			break
		}
	}
}

// collectAll collects every unanswered start. A start that failed has
// ended its transfers; only ctx's end is an error here.
func (q *startQueue) collectAll(ctx context.Context) error {
	q.mu.Lock()
	var all []*startCall
	for _, l := range q.byServer {
		all = append(all, l...)
	}
	q.mu.Unlock()
	for _, sc := range all {
		if err := sc.collect(ctx); err != nil && ctx.Err() != nil {
			return err
		}
	}
	return nil
}

// before lists server's unanswered starts that must be collected before a
// new one of bytes written bytes, reading or not, is sent.
func (q *startQueue) before(server int, bytes int, reads bool) []*startCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.byServer[server]
	var out []*startCall
	if reads {
		for _, sc := range l {
			if sc.writes {
				out = append(out, sc)
			}
		}
	}
	// The oldest go until the new one fits in the window.
	total := bytes
	for _, sc := range l {
		total += sc.bytes
	}
	for i := 0; i < len(l) && (len(l)-i+1 > startWindowCalls || total > startWindowBytes); i++ {
		total -= l[i].bytes
		out = append(out, l[i])
	}
	return out
}

// earlier lists server's unanswered starts sent before sc.
func (q *startQueue) earlier(sc *startCall) []*startCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.byServer[sc.server]
	for i, x := range l {
		if x == sc {
			return append([]*startCall(nil), l[:i]...)
		}
	}
	return nil
}

// writing lists server's unanswered starts that write one of the objects
// of dims (object -> dims version): all of them if any, else those that
// may be refused as stale while a new start writing dims and carrying
// carried (object -> dims version, of all it reads and writes) is not:
// those that write one of the objects at another version, or carry an
// object that the new start does not carry at the same version. Refused
// for an object the new start does not carry, an earlier start was sent
// again after the new one was stored, and its write overwrote the new
// one (TestStaleOtherObjectKeepsWritesInOrder).
func (q *startQueue) writing(server int, dims, carried map[uint64]uint64, any bool) []*startCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*startCall
	for _, sc := range q.byServer[server] {
		for obj, v := range dims {
			if w, ok := sc.dims[obj]; ok && (any || w != v || !carriedIn(sc, carried)) {
				out = append(out, sc)
				break
			}
		}
	}
	return out
}

// carriedIn says whether carried holds every object sc carries at the
// same dims version: then a start of carried is refused as stale whenever
// sc is (a data server never forgets a newer version).
func carriedIn(sc *startCall, carried map[uint64]uint64) bool {
	if sc.mixed || carried == nil {
		return false
	}
	for obj, v := range sc.carried {
		if w, ok := carried[obj]; !ok || w != v {
			return false
		}
	}
	return true
}

// carriedDims is, for each object m reads or writes, the dims version it
// carries; mixed if it carries one at two versions.
func carriedDims(m *wire.DataStart) (out map[uint64]uint64, mixed bool) {
	var last *wire.DataItem
	for i := range m.Items {
		it := &m.Items[i]
		if last != nil && it.Obj == last.Obj && it.DimsVersion == last.DimsVersion {
			continue
		}
		if out == nil {
			out = map[uint64]uint64{}
		}
		if v, ok := out[it.Obj]; ok && v != it.DimsVersion {
			mixed = true
		}
		out[it.Obj] = it.DimsVersion
		last = it
	}
	return out, mixed
}

// writtenDims is, for each object that m writes, the dims version it
// carries.
func writtenDims(m *wire.DataStart) map[uint64]uint64 {
	var out map[uint64]uint64
	var last *wire.DataItem
	for i := range m.Items {
		it := &m.Items[i]
		if !it.Write {
			continue
		}
		// A request's items come in runs of one object (thousands of
		// regions of it): one map store per run, not per region.
		if last != nil && it.Obj == last.Obj && it.DimsVersion == last.DimsVersion {
			continue
		}
		if out == nil {
			out = map[uint64]uint64{}
		}
		out[it.Obj] = it.DimsVersion
		last = it
	}
	return out
}

// sendStart sends refs' DataStart to server without waiting for its
// answer; each part remembers the request that started it.
func (e *Engine) sendStart(ctx context.Context, server int, refs []partRef) error {
	if len(refs) > 0 && rpc.TraceOf(ctx) == 0 {
		ctx = rpc.WithTrace(ctx, refs[0].t.trace)
	}
	bytes, writes := 0, false
	for _, r := range refs {
		if r.t.access == Write {
			bytes += len(r.part().data)
			writes = true
		}
	}
	if err := e.makeRoom(ctx, server, refs, bytes); err != nil {
		return err
	}
	// A request that cannot go out takes no lane space: spans of a request
	// that failed on its way stay taken (the server may have it).
	conn, err := e.cl.StartConn(ctx, server)
	if err == nil {
		err = pdc.CtxErr(ctx)
	}
	if err != nil {
		return fmt.Errorf("start %d transfers on %s: %w", len(refs), e.cl.Label(server), err)
	}
	ln, err := e.lane(ctx, server, laneSized(refs, Write))
	if err != nil {
		return fmt.Errorf("start %d transfers on %s: %w", len(refs), e.cl.Label(server), err)
	}
	m, payload, use := buildStart(refs, false, ln)
	if ln != nil {
		ln.unref() // use holds its own
	}
	// With the dims versions it carries known: an earlier start that
	// wrote the same objects with other dims is answered first, so that,
	// refused as stale, it goes again before this one.
	dims := writtenDims(&m)
	carried, mixed := carriedDims(&m)
	if mixed {
		carried = nil // counts as carrying none: every earlier start that wrote its objects goes first
	}
	for _, sc := range e.starts.writing(server, dims, carried, false) {
		if err := sc.collect(ctx); err != nil && ctx.Err() != nil {
			use.done() // nothing went out: the spans are ours again
			return fmt.Errorf("start %d transfers on %s: %w", len(refs), e.cl.Label(server), pdc.CtxErr(ctx))
		}
	}
	p, err := conn.Send(ctx, wire.MethodDataStart, m.Marshal(nil), payload, nil)
	if err != nil {
		use.settled(err) // it may have gone out in part: the lane is the server's
		return fmt.Errorf("start %d transfers on %s: %w", len(refs), e.cl.Label(server), err)
	}
	sc := &startCall{e: e, server: server, refs: refs, bytes: bytes, writes: writes, pend: p, inst: conn.Instance(), lane: use,
		dims: dims, carried: carried, mixed: mixed, tok: make(chan struct{}, 1), done: make(chan struct{})}
	for _, r := range refs {
		r.part().start = sc
	}
	e.starts.add(sc)
	return nil
}

// makeRoom collects, before refs (carrying bytes written) are started on
// server, the unanswered starts they must come after: this client's
// writes there if refs read, and the oldest until the new request fits in
// the window. Their own failures are their transfers'; only ctx's end
// stops the new start.
func (e *Engine) makeRoom(ctx context.Context, server int, refs []partRef, bytes int) error {
	reads := false
	for _, r := range refs {
		reads = reads || r.t.access == Read
	}
	for _, sc := range e.starts.before(server, bytes, reads) {
		if err := sc.collect(ctx); err != nil && ctx.Err() != nil {
			return fmt.Errorf("start %d transfers on %s: %w", len(refs), e.cl.Label(server), pdc.CtxErr(ctx))
		}
	}
	return nil
}

// collect waits for the start's answer once and gives its transfers their
// ids, or, if it failed, ends them with its error. Every caller gets the
// same result. The starts sent to its server before it are collected
// first: one refused as stale is sent again as it is collected, which
// must not come after a later start to the same place.
func (sc *startCall) collect(ctx context.Context) error {
	select {
	case <-sc.done:
		return sc.err
	default:
	}
	for _, x := range sc.e.starts.earlier(sc) {
		if err := x.collect(ctx); err != nil && ctx.Err() != nil {
			return fmt.Errorf("start on %s: %w", sc.e.cl.Label(sc.server), pdc.CtxErr(ctx))
		}
	}
	select {
	case <-sc.done:
		return sc.err
	case sc.tok <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("start on %s: %w", sc.e.cl.Label(sc.server), pdc.CtxErr(ctx))
	}
	defer func() { <-sc.tok }()
	select {
	case <-sc.done:
		return sc.err
	default:
	}
	err := sc.answer(ctx)
	if err != nil && sc.pend != nil {
		return err // not answered yet; see answer
	}
	sc.lane.settled(err)
	sc.lane = nil
	if err != nil {
		for _, r := range sc.refs {
			r.part().done = true
			r.t.setErr(fmt.Errorf("object %q region %v: %w", r.t.obj.Meta().Name, r.part().box, err))
		}
	}
	sc.err = err
	sc.refs, sc.pend = nil, nil // the transfers no longer need each other
	sc.e.starts.remove(sc)
	close(sc.done)
	return err
}

// answer reads the start's answer into its parts' ids. A server that found
// the dims out of date gets the request again, once, with fresh dims.
func (sc *startCall) answer(ctx context.Context) error {
	e, server, refs := sc.e, sc.server, sc.refs
	rep, err := sc.pend.Poll(ctx)
	var se *pdc.ServerError
	if err != nil && ctx.Err() != nil && !errors.As(err, &se) {
		// Our deadline ended before the answer came: it is kept for a
		// later collect.
		return fmt.Errorf("start %d transfers on %s: %w", len(refs), e.cl.Label(server), err)
	}
	sc.pend = nil // answered: a failure from here on is the start's
	var ids wire.DataIDs
	inst := sc.inst
	if err == nil {
		err = ids.Unmarshal(rep.Header)
	}
	if errors.Is(err, pdc.ErrStale) {
		// Answered: the server is done with the lane's spans.
		sc.lane.settled(err)
		sc.lane = nil
		var ok []partRef
		if ok, err = refreshDims(ctx, refs); err != nil {
			return err
		}
		// The parts outside the new dims have ended alone.
		refs = ok
		ids = wire.DataIDs{}
		if len(refs) > 0 {
			ids, inst, err = e.restart(ctx, server, refs)
		}
	}
	if err != nil {
		return fmt.Errorf("start %d transfers on %s: %w", len(refs), e.cl.Label(server), err)
	}
	if len(ids.IDs) != len(refs) {
		return fmt.Errorf("%s answered %d ids for %d transfers: %w", e.cl.Label(server), len(ids.IDs), len(refs), pdc.ErrProtocol)
	}
	for i, r := range refs {
		r.part().id, r.part().inst = ids.IDs[i], inst
	}
	return nil
}

// restart starts refs on server again, and waits for the answer, after
// the server found their dims out of date. It returns their ids and the
// instance of the server that gave them.
func (e *Engine) restart(ctx context.Context, server int, refs []partRef) (wire.DataIDs, string, error) {
	if err := pdc.CtxErr(ctx); err != nil {
		return wire.DataIDs{}, "", err // and takes no lane space
	}
	conn, err := e.cl.StartConn(ctx, server)
	if err != nil {
		return wire.DataIDs{}, "", err
	}
	ln, err := e.lane(ctx, server, laneSized(refs, Write))
	if err != nil {
		return wire.DataIDs{}, "", err
	}
	m, payload, use := buildStart(refs, false, ln)
	if ln != nil {
		ln.unref() // use holds its own
	}
	var ids wire.DataIDs
	d, err := e.dataSendOn(ctx, conn, server, wire.MethodDataStart, &m, payload, false, nil, nil)
	if err == nil {
		_, ids, err = d.recv(ctx)
	}
	use.settled(err)
	return ids, conn.Instance(), err
}

// collectStarts collects the answers of the starts of ts's parts. A start
// that failed has ended its parts; only ctx's end is an error here.
func collectStarts(ctx context.Context, ts []*Transfer) error {
	for _, t := range ts {
		for i := range t.parts {
			if sc := t.parts[i].start; sc != nil {
				if err := sc.collect(ctx); err != nil && ctx.Err() != nil {
					return fmt.Errorf("object %q region %v: %w", t.obj.Meta().Name, t.remote, pdc.CtxErr(ctx))
				}
			}
		}
	}
	return nil
}
