package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dataserver"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/slots"
	"github.com/pdcgo/pdc/internal/wire"
)

// The data slots at start (package slots, docs/design/0013-data-slots.md):
// rank 0 gathers every server's inventory (RoundInventory), plans who holds
// which slot (RoundPlan), waits for every server to have sent what it must
// (RoundMoved) and to hold its slots (RoundOpened), then records the slot
// table. A server serves data only after that.

// dataDir is the server's data dir.
func (s *Server) dataDir() slots.DataDir { return slots.NewDataDir(s.cfg.FS, s.cfg.DataDir) }

// slotState is rank 0's record of the start's rounds.
type slotState struct {
	servers []slots.Server
	plans   map[int]*wire.SlotPlan
	next    slots.Table
	// stores is the record of the cluster's metadata stores to write
	// once the metadata has moved (slots.StoresPlan.After).
	stores []byte
	// stamped: every holder has stamped its slots with the plan's epoch
	// (the slot table is written), so a rank that restarts holds them at
	// that generation (rejoinRound).
	stamped atomic.Bool
}

// finishRound computes rank 0's answers to a round every server reported.
// It runs under the rounds' lock.
func (s *Server) finishRound(round uint32, reports map[int]*wire.StartRound) (map[int]*wire.StartRound, error) {
	out := map[int]*wire.StartRound{}
	switch round {
	case wire.RoundInventory:
		s.mu.Lock()
		list := s.mu.list
		s.mu.Unlock()
		servers := make([]slots.Server, len(list.Servers))
		for i, m := range list.Servers {
			r, _ := cluster.ParseRoles(m.Roles)
			servers[i] = slots.Server{Rank: m.Rank, Data: r&wire.RoleData != 0, Meta: r&wire.RoleMetadata != 0, Host: m.Host}
			if rep := reports[m.Rank]; rep != nil && rep.Inventory != nil {
				servers[i].Inventory = *rep.Inventory
			}
		}
		s.slots.servers = servers
		adopt, err := slots.Adopt(servers)
		if err != nil {
			return nil, err
		}
		// Ids of objects whose data files a data dir holds are not handed
		// out again, even by a store put back from a checkpoint.
		var floor uint64
		for _, sv := range servers {
			floor = max(floor, sv.Inventory.MaxSeq)
		}
		// The metadata stores the cluster has must all be here; the record
		// of them goes to every data dir before any metadata moves.
		stores, err := slots.CheckStores(servers)
		if err != nil {
			return nil, err
		}
		s.slots.stores = slots.EncodeStores(stores.After)
		for _, e := range stores.Abandoned {
			s.log.Warn("abandoned a metadata store of the cluster, as told (--abandon-store): its objects, containers and tags are lost to the cluster",
				"store", fmt.Sprintf("meta-%d", e.Rank), "id", e.ID, "host", e.Host, "datadir", e.Path)
		}
		record := slots.EncodeStores(stores.Before)
		dirs := map[string]bool{}
		for _, sv := range servers {
			p := &wire.StartRound{Round: round, Plan: &wire.SlotPlan{}}
			if d := sv.Inventory.DirID; !dirs[d] {
				dirs[d] = true
				p.Plan.Stores = record
			}
			if adopted := adopt[sv.Rank]; sv.Meta && (len(adopted) > 0 || floor > 0) {
				p.Plan.Adopt, p.Plan.SeqFloor = adopted, floor
			}
			out[sv.Rank] = p
		}
	case wire.RoundPlan:
		table, err := s.dataDir().Table()
		if err != nil {
			return nil, fmt.Errorf("rank 0: %w", err)
		}
		plans, next := slots.Plan(s.slots.servers, table)
		s.slots.plans, s.slots.next = plans, next
		s.logAbandonedSlots(table, plans)
		// Every server has moved its metadata (the barrier): the stores
		// adopted are renamed, and expected no more.
		dirs := map[string]bool{}
		for _, sv := range s.slots.servers {
			if d := sv.Inventory.DirID; !dirs[d] && plans[sv.Rank] != nil {
				dirs[d] = true
				plans[sv.Rank].Stores = s.slots.stores
			}
		}
		var moves, missing int
		for rank, p := range plans {
			out[rank] = &wire.StartRound{Round: round, Plan: p}
			moves += len(p.Send)
			missing += len(p.Missing)
		}
		if moves > 0 || missing > 0 {
			s.log.Info("data slots planned", "epoch", next.Epoch, "moves", moves, "missing", missing)
		}
	case wire.RoundMoved:
		// The dims cuts owed to slots held now, from the data dirs that
		// keep them, to their holders.
		holder := map[uint32]int{}
		for rank, p := range s.slots.plans {
			for _, c := range append(slices.Clone(p.Hold), p.Receive...) {
				holder[c.Slot] = rank
			}
		}
		owed := map[int][]wire.OwedCuts{}
		for rank, rep := range reports {
			for _, m := range rep.Owed {
				h, ok := holder[m.Slot]
				if !ok {
					return nil, fmt.Errorf("rank %d sent the dims cuts owed to data slot %d, which no server holds: %w", rank, m.Slot, pdc.ErrInternal)
				}
				owed[h] = append(owed[h], m)
			}
		}
		for rank, m := range owed {
			out[rank] = &wire.StartRound{Round: round, Plan: &wire.SlotPlan{Owed: m}}
		}
	case wire.RoundOpened:
		if err := s.dataDir().SetTable(s.slots.next); err != nil {
			return nil, fmt.Errorf("rank 0: %w", err)
		}
		s.slots.stamped.Store(true)
	}
	return out, nil
}

// logAbandonedSlots warns of each slot the cluster knew that plans start
// empty as told (--abandon-slot).
func (s *Server) logAbandonedSlots(table slots.Table, plans map[int]*wire.SlotPlan) {
	told := map[uint64]bool{}
	for _, sv := range s.slots.servers {
		for _, a := range sv.Inventory.AbandonSlots {
			told[a] = true
		}
	}
	if len(told) == 0 {
		return
	}
	for rank, p := range plans {
		for _, f := range p.Fresh {
			if _, known := table.Gens[int(f)]; known && told[f] {
				s.log.Warn("abandoned a data slot of the cluster, as told (--abandon-slot): it starts empty, and what it held reads as never written; copies of it found are set aside",
					"slot", f, "holder", rank)
			}
		}
	}
}

// rejoinRound answers a server that restarted while the cluster serves:
// it holds what its plan gave it, in place, and moves nothing. Each slot
// is held at the generation its copy has now: the plan's epoch once every
// holder stamped it, and before that (a restart during the start) the
// generation planned or that epoch. A copy older than that under the
// restarted server's data dir (it restarted on another node, which has an
// out-of-date copy left behind) is not the one the cluster wrote to, and
// is refused (openSlots).
//
// The dims cuts owed to a slot coming back at this start go with it as
// they went with the server it replaces (a restart during the start; after
// it they are applied, and older than the copy): the data dir that keeps
// them reports them at RoundMoved (ShipOwed) and drops its file once the
// start is done (DropOwed), and the holder is answered them again at
// RoundMoved. Without them, the holder would open the slot without the
// cuts kept under another data dir, stamp it with the epoch (after which
// they count as applied) and serve the rows they dropped.
func (s *Server) rejoinRound(round uint32, rank int) *wire.StartRound {
	if round == wire.RoundMoved {
		if a := s.rounds.reply(round, rank); a != nil {
			return a
		}
	}
	if round != wire.RoundPlan {
		return &wire.StartRound{Round: round}
	}
	p := s.slots.plans[rank]
	if p == nil {
		return &wire.StartRound{Round: round, Plan: &wire.SlotPlan{}}
	}
	stamped := s.slots.stamped.Load()
	gen := func(planned uint64) uint64 {
		if stamped {
			return p.Epoch
		}
		return planned
	}
	q := &wire.SlotPlan{Epoch: p.Epoch, Own: p.Own, Missing: p.Missing, ShipOwed: p.ShipOwed, DropOwed: p.DropOwed}
	for _, c := range p.Hold {
		q.Hold = append(q.Hold, wire.SlotCopy{Slot: c.Slot, Gen: gen(c.Gen)})
	}
	for _, c := range p.Receive {
		q.Hold = append(q.Hold, wire.SlotCopy{Slot: c.Slot, Gen: gen(c.Gen)})
	}
	for _, f := range p.Fresh {
		q.Hold = append(q.Hold, wire.SlotCopy{Slot: uint32(f), Gen: gen(0)})
	}
	return &wire.StartRound{Round: round, Plan: q}
}

// takeRound reports this server's step of a round to rank 0 and returns
// the answer.
func (s *Server) takeRound(ctx context.Context, m *wire.StartRound, secret []byte) (*wire.StartRound, error) {
	m.Rank, m.Instance = uint32(s.cfg.Rank), s.self.Instance
	if s.cfg.Rank == 0 {
		return s.rounds.report(ctx, m, true)
	}
	s.mu.Lock()
	rank0 := s.mu.list.Servers[0]
	s.mu.Unlock()
	conn, err := rpc.Dial(ctx, rank0.Addr, rpc.DialOptions{Secret: secret, Label: rank0.Label()})
	if err != nil {
		return nil, fmt.Errorf("start round %d: %w", m.Round, err)
	}
	defer conn.Close()
	rep, err := conn.Call(ctx, wire.MethodStartRound, m.Marshal(nil), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("start round %d: %w", m.Round, err)
	}
	var a wire.StartRound
	if err := a.Unmarshal(rep.Header); err != nil {
		return nil, fmt.Errorf("start round %d: %w", m.Round, err)
	}
	return &a, nil
}

// moveData takes this server's part in moving the data slots (the rounds
// after the metadata moved), and returns the slots it holds, opened. With
// a data service, it hands them over.
func (s *Server) moveData(ctx context.Context, list *cluster.List, secret []byte, recv *slots.Receiver, data *dataserver.Service) ([]*regionstore.Store, error) {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.StartupTimeout)
	a, err := s.takeRound(pctx, &wire.StartRound{Round: wire.RoundPlan}, secret)
	cancel()
	if err != nil {
		return nil, err
	}
	plan := a.Plan
	if plan == nil {
		plan = &wire.SlotPlan{}
	}
	if len(plan.Stores) > 0 {
		if err := s.dataDir().SetStores(plan.Stores); err != nil {
			return nil, err
		}
	}
	if recv != nil {
		recv.Expect(plan)
	}
	for _, c := range plan.Aside {
		path, err := s.dataDir().SetAside(int(c.Slot), c.Gen, plan.Epoch)
		if err != nil {
			return nil, err
		}
		s.log.Warn("set aside an out-of-date or duplicate copy of a data slot; remove it once the data is checked", "slot", c.Slot, "generation", c.Gen, "path", path)
	}
	if err := s.sendSlots(ctx, list, secret, plan.Send); err != nil {
		return nil, err
	}
	// The dims cuts owed to slots held now under another data dir go to
	// their holders with this round.
	moved := &wire.StartRound{Round: wire.RoundMoved}
	for _, slot := range plan.ShipOwed {
		cuts, err := s.dataDir().OwedCuts(int(slot))
		if err != nil {
			return nil, err
		}
		moved.Owed = append(moved.Owed, slots.WireCuts(int(slot), cuts))
	}
	// Every server has sent what it had to: the slots this one receives
	// are here, and the cuts owed to them that other data dirs keep.
	a, err = s.takeRound(ctx, moved, secret)
	if err != nil {
		return nil, err
	}
	shipped := map[int][]slots.OwedCut{}
	if a.Plan != nil {
		for _, m := range a.Plan.Owed {
			cuts, err := slots.FromWire(m)
			if err != nil {
				return nil, err
			}
			shipped[int(m.Slot)] = append(shipped[int(m.Slot)], cuts...)
		}
	}
	if recv != nil {
		recv.Close()
	}
	stores, sl, err := s.openSlots(plan, recv, shipped)
	if err != nil {
		for _, st := range stores {
			_ = st.Close()
		}
		return nil, err
	}
	if _, err := s.takeRound(ctx, &wire.StartRound{Round: wire.RoundOpened}, secret); err != nil {
		for _, st := range stores {
			_ = st.Close()
		}
		return nil, err
	}
	// Every holder has applied the cuts owed to its slots, and the table
	// is written: the files of those kept here go, and those older than
	// every copy the cluster may hold.
	for _, slot := range plan.DropOwed {
		if err := s.dataDir().DropOwedCuts(int(slot)); err != nil {
			s.log.Warn("could not remove the dims cuts owed to a data slot, applied by its holder", "slot", slot, "err", err)
		}
	}
	if data != nil {
		data.SetSlots(sl)
	}
	return stores, nil
}

// sendSlots sends this server's copies of slots to their new holders.
func (s *Server) sendSlots(ctx context.Context, list *cluster.List, secret []byte, sends []wire.SlotSend) error {
	pools := map[int]*rpc.Pool{}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, m := range sends {
		to := int(m.To)
		if to < 0 || to >= len(list.Servers) {
			return fmt.Errorf("send data slot %d to rank %d: no such rank: %w", m.Slot, to, pdc.ErrInternal)
		}
		p := pools[to]
		if p == nil {
			srv := list.Servers[to]
			p = rpc.NewPool(srv.Addr, 1, rpc.DialOptions{Secret: secret, Label: srv.Label()})
			pools[to] = p
		}
		call := func(ctx context.Context, meth wire.Method, hdr []byte, payload [][]byte) error {
			_, err := p.Call(ctx, meth, hdr, payload, nil)
			return err
		}
		sent, err := s.sendSlot(ctx, m, call, list.Servers[to])
		if err != nil {
			return fmt.Errorf("to %s: %w", list.Servers[to].Label(), err)
		}
		s.log.Info("sent a data slot to its new holder", "slot", m.Slot, "to", to, "files", sent.Files, "bytes", sent.Bytes)
	}
	return nil
}

// sendSlot sends one slot, and again from its first file while its
// holder cannot be reached (a partition) but is not gone, for up to the
// startup timeout: sending is idempotent, and the copy here stays whole
// until the holder has committed it. Rank 0 waits as long for a server
// it cannot reach (rounds.patience). A holder that is gone (its host
// refuses, or another instance answers) fails the send at once, and the
// start with it.
func (s *Server) sendSlot(ctx context.Context, m wire.SlotSend, call slots.Call, holder cluster.Server) (slots.Sent, error) {
	var pause time.Duration
	var since time.Time // of the first failure
	for {
		sent, err := s.dataDir().Send(ctx, int(m.Slot), m.Gen, call)
		if since.IsZero() {
			since = time.Now()
		}
		if err == nil || !errors.Is(err, pdc.ErrUnavailable) || ctx.Err() != nil || time.Since(since) >= s.cfg.StartupTimeout {
			return sent, err
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		h, perr := rpc.Probe(pctx, holder.Addr)
		cancel()
		if perr == nil && h.Instance != holder.Instance || perr != nil && answered(perr) {
			return sent, err
		}
		s.log.Warn("could not send a data slot to its new holder; retrying", "slot", m.Slot, "to", holder.Label(), "err", err)
		pause = min(max(2*pause, 100*time.Millisecond), 2*time.Second)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return sent, fmt.Errorf("send data slot %d: %w", m.Slot, pdc.CtxErr(ctx))
		}
	}
}

// openSlots opens the stores of the slots plan gives this server, each
// with the dims cuts owed to it applied (those its data dir keeps, and
// shipped, those other data dirs keep) and marked with the plan's epoch,
// and says which it should hold and cannot.
func (s *Server) openSlots(plan *wire.SlotPlan, recv *slots.Receiver, shipped map[int][]slots.OwedCut) ([]*regionstore.Store, dataserver.Slots, error) {
	sl := dataserver.Slots{Own: int(plan.Own) - 1, Stores: map[int]*regionstore.Store{}, Missing: map[int]error{}}
	var stores []*regionstore.Store
	// gen is the generation the plan holds the slot at: a copy older than
	// that is out of date.
	open := func(slot int, gen uint64, fresh bool) error {
		dir := s.dataDir().Slot(slot)
		if fresh {
			if err := s.dataDir().MakeSlot(slot); err != nil {
				return err
			}
		} else if !s.dataDir().HasSlot(slot) {
			sl.Missing[slot] = fmt.Errorf("its dir %s is not under this server's data dir (did the server restart on another node?): %w", dir, pdc.ErrUnavailable)
			s.log.Error("a data slot this server holds is not in its data dir", "slot", slot, "dir", dir)
			return nil
		} else if have := s.dataDir().Gen(slot); have < gen {
			sl.Missing[slot] = fmt.Errorf("its copy %s under this server's data dir is of generation %d, and the cluster holds it at generation %d: "+
				"an out-of-date copy (did the server restart on another node?); restart the server where its data dir has the current copy: %w",
				dir, have, gen, pdc.ErrUnavailable)
			s.log.Error("a data slot this server holds is out of date in its data dir: requests in it fail", "slot", slot, "dir", dir,
				"generation", have, "want", gen)
			return nil
		}
		st, err := regionstore.Open(regionstore.Options{Dir: dir, Sync: s.cfg.Durability == metastore.DurabilitySync, FS: s.cfg.FS})
		if err != nil {
			return fmt.Errorf("data slot %d: %w", slot, err)
		}
		stores = append(stores, st)
		// The cuts owed to the slot while it was out of reach go into its
		// files before its marker says it is held at this epoch (after
		// that they count as applied) and before it serves.
		if !fresh {
			if err := s.applyOwed(st, slot, s.dataDir().Gen(slot), shipped[slot]); err != nil {
				return err
			}
		}
		if err := s.dataDir().SetMarker(dir, slot, plan.Epoch); err != nil {
			return fmt.Errorf("data slot %d: %w", slot, err)
		}
		if err := s.dataDir().DropOwedCuts(slot); err != nil {
			// Applied, and older than the copy now: the next start
			// finds them so and leaves them be.
			s.log.Warn("could not remove the dims cuts applied to a data slot", "slot", slot, "err", err)
		}
		sl.Stores[slot] = st
		return nil
	}
	for _, c := range plan.Hold {
		if err := open(int(c.Slot), c.Gen, false); err != nil {
			return stores, sl, err
		}
	}
	for _, c := range plan.Receive {
		if recv == nil || !recv.Committed(int(c.Slot)) {
			return stores, sl, fmt.Errorf("data slot %d was to be sent here and did not arrive: %w", c.Slot, pdc.ErrInternal)
		}
		if err := open(int(c.Slot), c.Gen, false); err != nil {
			return stores, sl, err
		}
	}
	for _, f := range plan.Fresh {
		if err := open(int(f), 0, true); err != nil {
			return stores, sl, err
		}
	}
	var owes []int
	for _, m := range plan.Missing {
		sl.Missing[int(m.Slot)] = fmt.Errorf("%s: %w", m.Why, pdc.ErrUnavailable)
		s.log.Error("a data slot this server should hold is out of reach: requests in it fail until a start finds it", "slot", m.Slot, "why", m.Why)
		if m.Owe != "" {
			owes = append(owes, int(m.Slot))
		}
	}
	if len(owes) > 0 {
		// The dims cuts pushed while such a slot is out of reach are kept
		// for it in the data dir the plan names, so that they are
		// acknowledged; this server keeps them only if that is its own
		// (not if it restarted on another node).
		id, err := s.dataDir().ID()
		if err != nil {
			return stores, sl, err
		}
		for _, m := range plan.Missing {
			if m.Owe != "" && m.Owe != id {
				owes = slices.DeleteFunc(owes, func(k int) bool { return k == int(m.Slot) })
				s.log.Warn("the dims cuts owed to a data slot out of reach are kept in another data dir than this server's: a shrink fails while it is out of reach",
					"slot", m.Slot, "datadir", s.cfg.DataDir)
			}
		}
		l, err := slots.NewLedger(s.dataDir(), plan.Epoch, owes)
		if err != nil {
			s.log.Error("dims cuts owed to a data slot out of reach cannot be read: a shrink fails while it is out of reach", "err", err)
		}
		sl.Owed = l
	}
	if len(plan.Hold)+len(plan.Receive)+len(plan.Fresh) > 1 {
		held := make([]int, 0, len(sl.Stores))
		for k := range sl.Stores {
			held = append(held, k)
		}
		slices.Sort(held)
		s.log.Info("holding data slots", "slots", fmt.Sprint(held), "epoch", plan.Epoch)
	}
	return stores, sl, nil
}

// applyOwed applies to st, the store of slot, whose copy is of generation
// gen, the dims cuts owed to the slot while it was out of reach that the
// copy has not had, in version order (slots.Due): those the data dir
// keeps, and shipped, from other data dirs.
func (s *Server) applyOwed(st *regionstore.Store, slot int, gen uint64, shipped []slots.OwedCut) error {
	owed, err := s.dataDir().OwedCuts(slot)
	if err != nil {
		return err
	}
	due := slots.Due(append(owed, shipped...), gen)
	for _, c := range due {
		err := st.Cut(c.Obj, c.Dims, c.Version)
		switch {
		case err == nil || errors.Is(err, pdc.ErrNotFound):
		case errors.Is(err, pdc.ErrInvalid):
			// Files of another shape than the cut's: not the object it
			// was for (an orphan left by a delete), which a start must
			// not fail for, every time.
			s.log.Warn("a dims cut owed to a data slot does not fit the files of its object there; left alone", "slot", slot, "err", err)
		default:
			return fmt.Errorf("data slot %d: apply the cut of object %d to dims %v (version %d), owed to it while it was out of reach: %w",
				slot, c.Obj, c.Dims, c.Version, err)
		}
	}
	if len(due) > 0 {
		s.log.Info("applied the dims cuts owed to a data slot while it was out of reach", "slot", slot, "cuts", len(due))
	}
	return nil
}
