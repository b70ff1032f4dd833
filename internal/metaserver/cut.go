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
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// Set dims and the cuts it pushes (docs/design/0006-region-io.md, "Dims
// versions"). A data server learns an object's dims only from the
// transfers it serves, so a shrink that no transfer carried cut nothing
// there, and a regrow after it read the old rows back (set dims 27, write
// every row, set dims 8, then 26: rows 8-25 read their old values). Now a
// set dims that shrinks the first dim or changes another commits, with the
// object's record, a pending cut ('K' id: the version and dims), pushes it
// to every data server (MethodDataCut) before it answers, and drops it
// once all of them applied it. A cut that could not be pushed (a data
// server down, this server killed between the commit and the push) stays
// in the store: a later set dims of the object delivers it first and is
// refused with pdc.ErrUnavailable if it cannot, so that no newer dims
// version can reach a data server before the cut; meanwhile a retrier
// pushes it with a back-off until every data server has applied it, those
// left in the store at start too. A transfer carrying the cut's own
// version (the object's newest) cuts as it always did.

// keyCut is the pending cut of object id: a shrink or relayout some data
// server may not have applied. The value is cutVersion and a
// wire.DimsCut.
func keyCut(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'K'}, id) }

// cutVersion is the format of a pending cut's value.
const cutVersion = 1

const (
	// cutWait bounds a push of a cut to the data servers.
	cutWait = 10 * time.Second
	// cutRetryMin and cutRetryMax bound the back-off between pushes of
	// cuts some data server has not applied.
	cutRetryMin = 500 * time.Millisecond
	cutRetryMax = 15 * time.Second
	// cutPushers bounds the cuts one round of the retrier pushes at once:
	// each may wait up to cutWait for a data server that does not answer,
	// after which the round sends that one no more (stalledRanks).
	cutPushers = 16
)

var errNoPeers = errors.New("no data servers known yet")

// cuts orders the commits that write or drop pending cuts.
type cuts struct {
	// mu is held to read and then write or drop a 'K' key: a push that
	// drops the cut it delivered must not drop a newer one committed
	// meanwhile. setDims holds it through its commit's fsync, so a cut
	// read under it to be pushed is durable, or its sync failed
	// (pushCut settles the store first).
	mu sync.Mutex

	// left are the objects whose pending cut some data server may not
	// have applied, for the retrier: each with the mark it was last
	// recorded under, so that a round forgets only what it delivered.
	leftMu sync.Mutex
	left   map[uint64]uint64
	mark   uint64
	retry  retrier
	// failing is whether the retrier's last round left cuts undelivered
	// (only the retrier reads and writes it).
	failing bool

	// leaseWait is how long a set dims whose cut some data server did
	// not apply waits, from its commit, before it answers:
	// wire.DimsLeaseWait, which tests may shorten.
	leaseWait time.Duration
	// pushWait bounds one push of a cut to the data servers (cutWait,
	// at most dataCallWait); tests may shorten it.
	pushWait time.Duration
}

func (c *cuts) init() {
	c.left = map[uint64]uint64{}
	c.retry = newRetrier(cutRetryMin, cutRetryMax)
	c.leaseWait = wire.DimsLeaseWait
	c.pushWait = min(cutWait, dataCallWait)
}

// awaitLeases returns once every data server's dims lease confirmed
// before a cut committed at committed has ended (wire.DimsLeaseWait
// after it): a data server the cut did not reach acknowledges no write
// at the dims the cut replaced after that. An error means ctx ended
// first.
func (c *cuts) awaitLeases(ctx context.Context, committed time.Time) error {
	wait := time.Until(committed.Add(c.leaseWait))
	if wait <= 0 {
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return pdc.CtxErr(ctx)
	}
}

// markLeft has the retrier push the pending cut of object id, which some
// data server may not have applied. It never waits.
func (c *cuts) markLeft(id uint64) {
	c.leftMu.Lock()
	c.mark++
	c.left[id] = c.mark
	c.leftMu.Unlock()
	c.retry.poke()
}

// forget drops the marks of deleted objects, whose pending cuts their
// delete dropped. It never waits.
func (c *cuts) forget(ids []uint64) {
	c.leftMu.Lock()
	for _, id := range ids {
		delete(c.left, id)
	}
	c.leftMu.Unlock()
}

// PendingCuts is how many objects have a dims cut some data server may
// not have applied.
func (s *Service) PendingCuts() int {
	s.cuts.leftMu.Lock()
	defer s.cuts.leftMu.Unlock()
	return len(s.cuts.left)
}

// hasPeers reports whether the data servers are known (StartTombstones):
// a metadata server serves no set dims before, but one run alone in a
// test has none to push to.
func (s *objects) hasPeers() bool {
	s.tombs.mu.Lock()
	defer s.tombs.mu.Unlock()
	return s.tombs.mu.peers != nil
}

// needsCut reports whether changing an object's dims from old to dims
// may cut or move data stored on the data servers: a shrink of the first
// dim or a change of another.
func needsCut(old, dims []uint64) bool {
	if len(old) != len(dims) || len(dims) == 0 {
		return true
	}
	return dims[0] < old[0] || !slices.Equal(dims[1:], old[1:])
}

func encodeCut(c *wire.DimsCut) []byte { return c.Marshal([]byte{cutVersion}) }

func decodeCut(v []byte) (*wire.DimsCut, error) {
	if len(v) == 0 || v[0] != cutVersion {
		return nil, fmt.Errorf("pending dims cut of format %v: %w", v[:min(len(v), 1)], pdc.ErrCorrupt)
	}
	var c wire.DimsCut
	if err := c.Unmarshal(v[1:]); err != nil {
		return nil, fmt.Errorf("pending dims cut: %w", err)
	}
	return &c, nil
}

// pendingCut returns object id's pending cut, nil if none.
func (s *objects) pendingCut(id uint64) (*wire.DimsCut, error) {
	v, ok, err := s.st.Get(keyCut(id))
	if err != nil || !ok {
		return nil, err
	}
	return decodeCut(v)
}

// deliverCut pushes object id's pending cut, if any, to every data
// server and drops it once all of them applied it. An error names a
// data server that did not. stalled, if not nil, is the retrier round's
// data servers that did not answer (pushCut).
func (s *objects) deliverCut(ctx context.Context, id uint64, stalled *stalledRanks) error {
	// Read under the cut lock, which setDims holds through its commit's
	// fsync: a cut is visible once applied, before that fsync returns,
	// and one pushed then is lost with its set dims by a power loss
	// after the data servers applied it.
	s.cuts.mu.Lock()
	c, err := s.pendingCut(id)
	s.cuts.mu.Unlock()
	if err != nil || c == nil {
		return err
	}
	if err := s.pushCut(ctx, c, stalled); err != nil {
		return err
	}
	s.cuts.mu.Lock()
	defer s.cuts.mu.Unlock()
	now, err := s.pendingCut(id)
	if err != nil || now == nil || now.DimsVersion != c.DimsVersion {
		return err
	}
	b := s.st.NewBatch()
	defer b.Close()
	b.Delete(keyCut(id))
	// A cut dropped and found again after a crash is only pushed again:
	// it needs no sync of its own.
	if err := s.st.Commit(b); err != nil {
		return fmt.Errorf("drop the delivered dims cut of object %d: %w", id, err)
	}
	return nil
}

// pushCut sends c to every data server, at once, and waits for all. A
// cut goes out only once it is durable: one committed by a set dims whose
// fsync failed is applied but may be lost in a crash, and the data
// servers would then have cut rows under dims that hold them again.
//
// stalled, if not nil, collects the data servers that did not answer
// within the bound, and c is not sent to those it holds already: a
// retrier round pushes many cuts, a few at once, and one data server
// that takes connections and answers nothing (stopped) held each of them
// for the bound in turn, and the other data servers' cuts behind them.
// Such a cut stays pending for the next round.
func (s *objects) pushCut(ctx context.Context, c *wire.DimsCut, stalled *stalledRanks) error {
	if err := s.st.Settle(); err != nil {
		return fmt.Errorf("cut object %d to dims %v (version %d): not yet durable, so not pushed: %w", c.Obj, c.Dims, c.DimsVersion, err)
	}
	s.tombs.mu.Lock()
	peers := s.tombs.mu.peers
	s.tombs.mu.Unlock()
	if peers == nil {
		return fmt.Errorf("cut object %d to dims %v: %w: %w", c.Obj, c.Dims, errNoPeers, pdc.ErrUnavailable)
	}
	pctx := ctx
	ctx, cancel := context.WithTimeout(ctx, s.cuts.pushWait)
	defer cancel()
	hdr := c.Marshal(nil)
	ranks := peers.DataRanks()
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for i, rank := range ranks {
		if stalled.has(rank) {
			errs[i] = fmt.Errorf("data server rank %d: cut object %d to dims %v (version %d): not sent, it did not answer an earlier cut of this round: %w",
				rank, c.Obj, c.Dims, c.DimsVersion, pdc.ErrUnavailable)
			continue
		}
		wg.Go(func() {
			if err := peers.CallData(ctx, rank, wire.MethodDataCut, hdr); err != nil {
				errs[i] = fmt.Errorf("data server rank %d: cut object %d to dims %v (version %d): %w", rank, c.Obj, c.Dims, c.DimsVersion, err)
				if ctx.Err() != nil && pctx.Err() == nil {
					stalled.add(rank)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stalledRanks are the data servers that did not answer a push within
// its bound during one retrier round; the nil set holds none. Safe for
// concurrent use.
type stalledRanks struct {
	mu    sync.Mutex
	ranks map[int]bool // guarded by mu
}

func (s *stalledRanks) has(rank int) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ranks[rank]
}

func (s *stalledRanks) add(rank int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ranks == nil {
		s.ranks = map[int]bool{}
	}
	s.ranks[rank] = true
}

// loadCuts lists the objects with a pending cut in the store: left by a
// crash, by data servers that could not be reached, or moved here with
// their objects.
func (s *objects) loadCuts() ([]uint64, error) {
	var ids []uint64
	err := s.scan([]byte{'K'}, func(k, _ []byte) error {
		if len(k) == 9 {
			ids = append(ids, binary.BigEndian.Uint64(k[1:]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load pending dims cuts: %w", err)
	}
	return ids, nil
}

// startCuts starts the retrier of pending cuts (StartTombstones), with
// those of ids, loaded from the store, to push.
func (s *objects) startCuts(ids []uint64) {
	if len(ids) > 0 {
		s.log.Info("pushing dims cuts left in the store to the data servers", "objects", len(ids))
	}
	for _, id := range ids {
		s.cuts.markLeft(id)
	}
	s.tombs.wg.Go(func() { s.cuts.retry.run(s.tombs.ctx, s.cutRound) })
}

// cutRound delivers the cuts marked left (the retrier's round), a few at
// once, and forgets those delivered unless marked again meanwhile. It
// asks to be tried again while some data server has not applied one.
func (s *objects) cutRound(ctx context.Context) (again bool) {
	s.cuts.leftMu.Lock()
	marks := make(map[uint64]uint64, len(s.cuts.left))
	ids := make([]uint64, 0, len(s.cuts.left))
	for id, m := range s.cuts.left {
		marks[id] = m
		ids = append(ids, id)
	}
	s.cuts.leftMu.Unlock()
	if len(ids) == 0 {
		return false
	}
	slices.Sort(ids)
	errs := make([]error, len(ids))
	sem := make(chan struct{}, cutPushers)
	var stalled stalledRanks
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = s.deliverCut(ctx, id, &stalled)
		})
	}
	wg.Wait()
	var last error
	failed := 0
	s.cuts.leftMu.Lock()
	for i, id := range ids {
		if errs[i] != nil {
			failed, last = failed+1, errs[i]
			continue
		}
		if s.cuts.left[id] == marks[id] {
			delete(s.cuts.left, id)
		}
	}
	s.cuts.leftMu.Unlock()
	switch {
	case ctx.Err() != nil:
	case failed > 0 && !s.cuts.failing:
		s.log.Warn("dims cuts not yet applied by every data server; retrying", "objects", failed, "err", last.Error())
	case failed > 0:
		s.log.Debug("dims cuts still to push", "objects", failed, "err", last.Error())
	case s.cuts.failing:
		s.log.Info("dims cuts left undelivered are now applied by every data server", "objects", len(ids))
	}
	s.cuts.failing = failed > 0
	return failed > 0
}

func (s *objects) objSetDims(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var d wire.SetDims
	if err := decode(req, &d); err != nil {
		return nil, err
	}
	// A cut of an earlier shrink that some data server has not applied
	// must reach them all before this version can (cut.go): delivered
	// here first, without holding lifeMu, as it may wait for a data
	// server. A cut committed meanwhile by a concurrent set dims is
	// delivered so too, and the commit tried again (errCutRaced): each
	// round follows a set dims that committed.
	var m *wire.ObjectMeta
	var cut *wire.DimsCut
	var committed time.Time
	for {
		early := s.deliverCut(ctx, d.ID, nil)
		if early != nil {
			s.cuts.markLeft(d.ID)
		}
		var err error
		m, cut, committed, err = s.setDims(ctx, &d, early)
		if errors.Is(err, errCutRaced) {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("set dims of object %d: %w", d.ID, pdc.CtxErr(ctx))
			}
			continue
		}
		if errors.Is(err, pdc.ErrNotFound) {
			// Deleted perhaps by a delete whose sync failed, which a
			// power loss would bring back: "not found" once that is
			// durable. Out of lifeMu: settling may take a commit.
			return nil, s.readDurably(ctx, func() string { return fmt.Sprintf("set dims of object %d", d.ID) }, err, d.ID)
		}
		if err != nil {
			return nil, err
		}
		break
	}
	if cut != nil {
		// Committed: the set dims has succeeded. A data server that did
		// not apply the cut gets it from the retrier, and before the
		// object's next set dims in any case.
		if err := s.deliverCut(ctx, d.ID, nil); err != nil {
			s.log.Warn("dims cut not yet applied by every data server; retrying in the background",
				"object", d.ID, "version", cut.DimsVersion, "err", err.Error())
			s.cuts.markLeft(d.ID)
			// A data server the cut did not reach may still take writes
			// at the dims it replaced while its lease on them holds
			// (dataserver/lease.go): the set dims is answered once
			// none can, so that no write is acknowledged at the older
			// dims after it.
			if err := s.cuts.awaitLeases(ctx, committed); err != nil {
				return nil, fmt.Errorf("set dims of object %d: committed, its cut not applied by every data server, and the wait for their dims leases to end was cut short: %w",
					d.ID, err)
			}
		}
	}
	return rpc.Respond(m), nil
}

// errCutRaced is setDims finding a pending cut committed since the
// delivery before the lock: the caller delivers it and tries again.
var errCutRaced = errors.New("a pending dims cut was committed meanwhile")

// setDims commits d under lifeMu, with a pending cut if the new dims may
// cut stored data, which it returns with when the commit was applied. A pending cut of an earlier change
// still there refuses it: with early, why the delivery before the lock
// failed, or with errCutRaced if that found none to deliver.
func (s *objects) setDims(ctx context.Context, d *wire.SetDims, early error) (*wire.ObjectMeta, *wire.DimsCut, time.Time, error) {
	if err := s.lifeMu.Lock(ctx); err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("set dims of object %d: %w", d.ID, err)
	}
	defer s.lifeMu.Unlock()
	m, ident, err := s.loadObjByID(d.ID)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	what := fmt.Sprintf("set dims of object %q", m.Name)
	if len(d.Dims) != len(m.Props.Dims) {
		return nil, nil, time.Time{}, fmt.Errorf("%s: %d dims given, the object has %d: %w", what, len(d.Dims), len(m.Props.Dims), pdc.ErrInvalid)
	}
	if err := checkDims(what, d.Dims, region.Type(m.Props.Type).Size()); err != nil {
		return nil, nil, time.Time{}, err
	}
	s.cuts.mu.Lock()
	defer s.cuts.mu.Unlock()
	c, err := s.pendingCut(d.ID)
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("%s: %w", what, err)
	}
	if c != nil {
		// Left undelivered by the push just tried (early), refused at
		// once; committed since by a concurrent set dims still pushing
		// it, delivered by the caller out of the locks: a push here
		// would hold every create and delete of this server for as long
		// as a data server that does not answer is waited for (cutWait).
		if early == nil {
			return nil, nil, time.Time{}, errCutRaced
		}
		return nil, nil, time.Time{}, fmt.Errorf("%s: its dims %v (version %d) have not reached every data server, and a newer version must not reach them first: %w: %w",
			what, c.Dims, c.DimsVersion, early, pdc.ErrUnavailable)
	}
	var cut *wire.DimsCut
	if needsCut(m.Props.Dims, d.Dims) && s.hasPeers() {
		cut = &wire.DimsCut{Obj: m.ID, DimsVersion: m.DimsVersion + 1, Dims: d.Dims}
	}
	m.Props.Dims = d.Dims
	m.DimsVersion++
	b := s.st.NewBatch()
	defer b.Close()
	b.Set(keyObj(ident), m.Marshal(nil))
	switch {
	case cut != nil:
		b.Set(keyCut(m.ID), encodeCut(cut))
	}
	// Opens wait for dimsMu at most briefly (they hold it for a look),
	// and no other writer takes it: setDims holds lifeMu.
	if err := s.dimsMu.Lock(ctx); err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("%s: %w", what, err)
	}
	tc := s.touches.begin(m.ID) // a region query checks the dims
	s.dimsCommits.Add(1)
	err = s.st.Commit(b)
	s.dimsCommits.Add(-1)
	s.dimsMu.Unlock()
	s.touches.end(tc)
	if err != nil {
		if cut != nil {
			// Applied perhaps, its sync failed (metastore.ErrUnsynced): the
			// retrier pushes the cut once the store is durable again
			// (pushCut settles it first), and drops the mark if the commit
			// was not applied.
			s.cuts.markLeft(m.ID)
		}
		return nil, nil, time.Time{}, fmt.Errorf("%s: %w", what, err)
	}
	// Read after the commit applied: a question answered before it
	// confirmed the older dims (awaitLeases).
	return m, cut, time.Now(), nil
}
