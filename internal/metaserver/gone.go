package metaserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Deleted objects' data (docs/design/0016-deleted-objects.md). A delete
// commits, with the object's records, a tombstone ('G' id): the object's
// data must go from every data server. The service pushes it to each
// (MethodDataGone), which removes the object's files and refuses the
// object from then on, and drops the tombstone once every data server has
// confirmed. A data server that cannot be reached gets it later: the
// tombstone survives restarts and moves with the object's records when
// the metadata server count changes. Data servers ask about objects they
// see for the first time (MethodObjGone), so one that was down at the
// delete refuses the object before its tombstone arrives.

// DataPeers reaches the cluster's data servers, to push tombstones.
type DataPeers interface {
	// DataRanks lists the ranks of the data servers.
	DataRanks() []int
	// CallData sends a request to the data server of rank and waits for
	// its answer.
	CallData(ctx context.Context, rank int, m wire.Method, hdr []byte) error
}

// keyGone is the tombstone of deleted object id: its data is still to be
// removed from some data server. The value is the format version.
func keyGone(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'G'}, id) }

// goneVersion is the format of a tombstone's value.
const goneVersion = 1

const (
	// goneWait bounds how long a delete waits for the data servers to
	// confirm its tombstones before it answers; the rest are retried.
	goneWait = 10 * time.Second
	// goneBatch bounds the ids of one push.
	goneBatch = 1 << 14
	// goneRetryMin and goneRetryMax bound the back-off between pushes to
	// data servers that failed.
	goneRetryMin = 500 * time.Millisecond
	goneRetryMax = 15 * time.Second
)

// tombs pushes tombstones to the data servers until each has confirmed.
type tombs struct {
	s *core

	mu struct {
		sync.Mutex
		peers   DataPeers               // nil until started
		pending map[uint64]map[int]bool // id -> data ranks that confirmed
		// held are the ids of deletes applied but not known durable (their
		// sync failed): pushed once a later commit is durable.
		held   map[uint64]struct{}
		closed bool
	}
	retry retrier

	// pushMu makes one push at a time per rank go out, so that a slow
	// rank is not sent the same tombstones twice at once. It is a
	// channel, taken under the pusher's context: a push to a rank that
	// does not answer (stopped, firewalled) holds it until the call
	// fails (dataCallWait), and a delete waiting behind it must still
	// answer within its own bound (goneWait).
	pushMu sync.Map // rank -> chan struct{}, capacity 1

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the retrier
}

func (t *tombs) init(s *core) {
	t.s = s
	t.mu.pending = map[uint64]map[int]bool{}
	t.mu.held = map[uint64]struct{}{}
	t.retry = newRetrier(goneRetryMin, goneRetryMax)
	t.ctx, t.cancel = context.WithCancel(context.Background())
}

// StartTombstones starts pushing the tombstones of deleted objects to the
// data servers: those left in the store (by a crash, by data servers that
// could not be reached, moved here with their objects) and those of later
// deletes. Call it once every server has moved its metadata.
func (s *Service) StartTombstones(peers DataPeers) error {
	var ids []uint64
	err := s.scan([]byte{'G'}, func(k, _ []byte) error {
		if len(k) == 9 {
			ids = append(ids, binary.BigEndian.Uint64(k[1:]))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load tombstones: %w", err)
	}
	cutIDs, err := s.objects.loadCuts()
	if err != nil {
		return err
	}
	t := &s.tombs
	t.mu.Lock()
	if t.mu.closed || t.mu.peers != nil {
		t.mu.Unlock()
		return nil
	}
	t.mu.peers = peers
	for _, id := range ids {
		if _, held := t.mu.held[id]; held {
			continue
		}
		if t.mu.pending[id] == nil {
			t.mu.pending[id] = map[int]bool{}
		}
	}
	t.mu.Unlock()
	if len(ids) > 0 {
		s.log.Info("pushing tombstones of deleted objects left in the store to the data servers", "objects", len(ids))
	}
	t.wg.Go(func() { t.retry.run(t.ctx, t.round) })
	t.poke()
	s.objects.startCuts(cutIDs)
	return nil
}

func (t *tombs) poke() { t.retry.poke() }

// close stops the retrier; tombstones not yet confirmed stay in the store.
func (t *tombs) close() {
	t.mu.Lock()
	t.mu.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
}

// added records that the tombstones of ids were committed and has the
// retrier push them. Deletes call it holding lifeMu, so it does not
// wait: the handler waits with await once it has let go.
func (t *tombs) added(ids []uint64) {
	t.mu.Lock()
	for _, id := range ids {
		if t.mu.pending[id] == nil {
			t.mu.pending[id] = map[int]bool{}
		}
	}
	t.mu.Unlock()
	t.poke()
}

// hold records that the deletes of ids were applied but their sync
// failed: the objects are gone here, and a crash may still bring them
// back with their records. Pushed now, the tombstones would have the data
// servers drop data that such an object would then name; never pushed
// until a restart, they would leave a deleted object's data on the data
// servers for as long as this server runs. The retrier makes them durable
// with a commit of their own and then pushes them.
func (t *tombs) hold(ids []uint64) {
	t.mu.Lock()
	for _, id := range ids {
		t.mu.held[id] = struct{}{}
	}
	t.mu.Unlock()
	t.poke()
}

// settle commits the held tombstones again and, once that commit is
// durable (which makes every commit before it durable too, the deletes
// among them), moves them to the pending ones to push. It reports whether
// some are left held.
func (t *tombs) settle() (left bool, err error) {
	t.mu.Lock()
	ids := make([]uint64, 0, len(t.mu.held))
	for id := range t.mu.held {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	if len(ids) == 0 {
		return false, nil
	}
	slices.Sort(ids)
	b := t.s.st.NewBatch()
	defer b.Close()
	for _, id := range ids {
		b.Set(keyGone(id), []byte{goneVersion})
	}
	if err := t.s.st.Commit(b); err != nil {
		return true, fmt.Errorf("make the tombstones of %d deletes durable: %w", len(ids), err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		delete(t.mu.held, id)
		if t.mu.pending[id] == nil {
			t.mu.pending[id] = map[int]bool{}
		}
	}
	return len(t.mu.held) > 0, nil
}

// await pushes the tombstones of ids and waits up to goneWait (or ctx)
// for every data server to confirm them, so that when a delete answers,
// the data servers refuse the object. The delete has succeeded whatever
// happens here: a data server that does not confirm gets them from the
// retrier.
func (t *tombs) await(ctx context.Context, ids []uint64) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, goneWait)
	defer cancel()
	if err := t.push(ctx, ids); err != nil {
		t.s.log.Warn("deleted objects' data not yet removed from every data server; retrying in the background",
			"objects", len(ids), "err", err.Error())
		t.poke()
	}
}

// push sends the tombstones of ids to every data server that has not
// confirmed them, and forgets those every data server has confirmed.
func (t *tombs) push(ctx context.Context, ids []uint64) error {
	t.mu.Lock()
	peers := t.mu.peers
	t.mu.Unlock()
	if peers == nil {
		return nil
	}
	ranks := peers.DataRanks()
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for i, rank := range ranks {
		wg.Go(func() { errs[i] = t.pushTo(ctx, peers, rank, ids) })
	}
	wg.Wait()
	// Forget what every data server has confirmed.
	var done []uint64
	t.mu.Lock()
	for _, id := range ids {
		told := t.mu.pending[id]
		if told == nil {
			continue
		}
		all := true
		for _, r := range ranks {
			if !told[r] {
				all = false
				break
			}
		}
		if all {
			delete(t.mu.pending, id)
			done = append(done, id)
		}
	}
	t.mu.Unlock()
	if len(done) > 0 {
		b := t.s.st.NewBatch()
		for _, id := range done {
			b.Delete(keyGone(id))
		}
		// A tombstone dropped and then found again after a crash is only
		// pushed again: it needs no sync of its own.
		if err := t.s.st.Commit(b); err != nil {
			t.s.log.Warn("drop confirmed tombstones: "+err.Error(), "objects", len(done))
		}
		b.Close()
	}
	return errors.Join(errs...)
}

// pushTo sends rank the tombstones of ids it has not confirmed.
func (t *tombs) pushTo(ctx context.Context, peers DataPeers, rank int, ids []uint64) error {
	v, _ := t.pushMu.LoadOrStore(rank, make(chan struct{}, 1))
	mu := v.(chan struct{})
	select {
	case mu <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("data server rank %d: remove the data of deleted objects: waiting for the push under way to it: %w", rank, pdc.CtxErr(ctx))
	}
	defer func() { <-mu }()
	var todo []uint64
	t.mu.Lock()
	for _, id := range ids {
		if told := t.mu.pending[id]; told != nil && !told[rank] {
			todo = append(todo, id)
		}
	}
	t.mu.Unlock()
	for len(todo) > 0 {
		n := min(len(todo), goneBatch)
		part := todo[:n]
		todo = todo[n:]
		cctx, cancel := context.WithTimeout(ctx, dataCallWait)
		err := peers.CallData(cctx, rank, wire.MethodDataGone, (&wire.IDList{IDs: part}).Marshal(nil))
		cancel()
		if err != nil {
			return fmt.Errorf("data server rank %d: remove the data of %d deleted objects: %w", rank, len(part), err)
		}
		t.mu.Lock()
		for _, id := range part {
			if told := t.mu.pending[id]; told != nil {
				told[rank] = true
			}
		}
		t.mu.Unlock()
	}
	return nil
}

// round settles the held tombstones and pushes the pending ones (the
// retrier's round); it asks to be tried again while some data server does
// not confirm or some deletes are not yet durable.
func (t *tombs) round(ctx context.Context) (again bool) {
	held, serr := t.settle()
	if serr != nil {
		t.s.log.Warn("deleted objects' data stays on the data servers until their deletes are durable; retrying", "err", serr.Error())
	}
	t.mu.Lock()
	ids := make([]uint64, 0, len(t.mu.pending))
	for id := range t.mu.pending {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	if len(ids) == 0 {
		return held
	}
	slices.Sort(ids)
	err := t.push(ctx, ids)
	if err != nil {
		t.s.log.Debug("tombstones still to push", "objects", len(ids), "err", err.Error())
	}
	return err != nil || held
}

// PendingTombstones is how many deleted objects' data some data server
// has not yet confirmed removed.
func (s *Service) PendingTombstones() int { return s.tombs.pending() }

func (t *tombs) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.pending)
}

// isHeld reports whether id's delete was applied but is not yet known
// durable (hold).
func (t *tombs) isHeld(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, held := t.mu.held[id]
	return held
}

// maxGoneQuery bounds the ids of one MethodObjGone request.
const maxGoneQuery = 1 << 16

// objGone is MethodObjGone: a data server asks which of the objects it
// holds data of (or is asked to store) do not exist, and which of those
// were never created (wire.GoneIDs).
func (s *objects) objGone(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var m wire.IDList
	if err := decode(req, &m); err != nil {
		return nil, err
	}
	if len(m.IDs) > maxGoneQuery {
		return nil, fmt.Errorf("asked about %d objects at once, over the limit of %d: %w", len(m.IDs), maxGoneQuery, pdc.ErrTooLarge)
	}
	var out wire.GoneIDs
	for _, id := range m.IDs {
		// Asked before the look: see inFlight.unborn.
		unborn := s.creates.unborn(s.st, placement.SeqOf(id))
		err := s.objExists(id)
		switch {
		case err == nil:
		case errors.Is(err, pdc.ErrNotFound) && s.tombs.isHeld(id):
			// Deleted here, but a crash could still bring it back: a data
			// server told it is gone would refuse it for as long as it
			// runs, and a scrub asked to remove orphans would drop its
			// data. Its tombstone comes once the delete is durable.
		case errors.Is(err, pdc.ErrNotFound) && unborn:
			// Not created yet (a guessed id, or a create not yet
			// committed): told "gone" alone, a data server would refuse
			// the object for as long as it runs once it is created.
			// Named in IDs too, for data servers that do not read Never.
			out.IDs = append(out.IDs, id)
			out.Never = append(out.Never, id)
		case errors.Is(err, pdc.ErrNotFound):
			out.IDs = append(out.IDs, id)
		default:
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	// An object not found may be one whose delete is still in its fsync,
	// or whose sync failed and is not held yet: told "gone", a data
	// server would drop data that a power loss gives back to the object.
	// Answered once those deletes are durable.
	if len(out.IDs) > 0 {
		if err := s.readDurably(ctx, func() string { return fmt.Sprintf("tell whether %d objects are gone", len(m.IDs)) }, nil, out.IDs...); err != nil {
			return nil, err
		}
	}
	return rpc.Respond(&out), nil
}
