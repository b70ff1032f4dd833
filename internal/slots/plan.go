package slots

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pdcgo/pdc"

	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/wire"
)

// Server is one server of a starting cluster, as the plan sees it.
type Server struct {
	Rank      int
	Data      bool // has the data role
	Meta      bool // has the metadata role
	Host      string
	Inventory wire.SlotInventory
}

// Plan decides, from what every server of a starting cluster found in its
// data dir and the slot table of the last start, which server holds each
// data slot and how it gets there. servers are in rank order, one per
// rank. It returns each rank's part, and the table to record once every
// server holds its slots. It is a pure function of its inputs.
//
// For each slot (known to the table, found in a data dir, or the own slot
// of a server now): the copies at the newest generation found are the
// candidates, if that generation is not older than the table's. One under
// the holder's data dir is held in place; else the copy whose data dir
// the lowest rank sees is sent by that rank. Other copies are set aside
// by the lowest rank that sees them. A slot with no candidate is missing
// at its holder, unless it is the own slot of a server now and the table
// has never known it: then it starts empty.
//
// Dims cuts owed to a slot while it was missing (owed.go) are kept in the
// data dir of its holder then. A slot found again is held only if every
// data dir that may keep cuts owed to it is here (the table names those
// of earlier starts); those not yet applied to the copy found that are
// under another data dir than the holder's are sent to it at RoundMoved
// (ShipOwed), and it applies them all before it serves; else it stays
// missing, saying which data dir it waits for. A missing slot's holder
// keeps the cuts owed to it from now on in its own data dir
// (SlotMissing.Owe). Files of cuts applied, or older than every copy the
// cluster may hold, are removed once the start is done (DropOwed).
//
// A slot that would be missing and that a server was told to abandon
// (Inventory.AbandonSlots, --abandon-slot) starts empty instead: its
// copies found are set aside and the cuts owed to it go. One that is held
// is not touched.
func Plan(servers []Server, table Table) (map[int]*wire.SlotPlan, Table) {
	p := survey(servers, table)
	if len(p.ds) == 0 {
		// No server holds data: nothing moves, and the table stays,
		// with the data dirs that may keep cuts owed to missing slots.
		maps.Copy(p.next.Gens, table.Gens)
		maps.Copy(p.next.Owed, table.Owed)
		return p.plans, p.next
	}
	p.dirOf = map[int]string{}
	p.seen = map[string]DirSeen{}
	p.owed = map[int]map[string]wire.OwedFile{}
	p.shipped = map[int]uint64{}
	p.abandon = map[int]bool{}
	for _, s := range servers {
		for _, a := range s.Inventory.AbandonSlots {
			p.abandon[int(a)] = true
		}
		d := s.Inventory.DirID
		p.dirOf[s.Rank] = d
		if _, ok := p.seen[d]; ok {
			continue
		}
		p.seen[d] = DirSeen{ID: d, Host: s.Host, Path: s.Inventory.Path}
		for _, f := range s.Inventory.Owed {
			if p.owed[int(f.Slot)] == nil {
				p.owed[int(f.Slot)] = map[string]wire.OwedFile{}
			}
			p.owed[int(f.Slot)][d] = f
		}
	}
	known := map[int]bool{}
	for s := range table.Gens {
		known[s] = true
	}
	for s := range p.found {
		known[s] = true
	}
	for i := range p.ds {
		known[i] = true
	}
	for _, slot := range slices.Sorted(maps.Keys(known)) {
		p.place(slot)
	}
	return p.plans, p.next
}

// planner is a Plan being made.
type planner struct {
	table Table
	plans map[int]*wire.SlotPlan           // by rank
	ds    []int                            // data servers, in rank order: slot i is ds[i]'s own
	owner map[string]int                   // data dir: the lowest rank that sees it
	dirOf map[int]string                   // rank: its data dir
	found map[int][]copyAt                 // slot: its copies
	seen  map[string]DirSeen               // data dir: as the lowest rank that sees it reported it
	owed  map[int]map[string]wire.OwedFile // slot, data dir: its file of cuts owed to the slot
	// shipped counts the owed cuts this start moves from and to each
	// rank (MaxShipped).
	shipped map[int]uint64
	abandon map[int]bool // slots to start empty rather than missing (--abandon-slot)
	epoch   uint64       // of this start
	next    Table
}

// survey gathers what the servers found: the data servers, who sees
// which data dir, the copies of each slot, and this start's epoch, newer
// than every generation seen.
func survey(servers []Server, table Table) *planner {
	p := &planner{table: table, plans: map[int]*wire.SlotPlan{}, owner: map[string]int{}, found: map[int][]copyAt{}}
	epoch := table.Epoch
	for _, g := range table.Gens {
		epoch = max(epoch, g)
	}
	for _, s := range servers {
		p.plans[s.Rank] = &wire.SlotPlan{}
		if s.Data {
			p.ds = append(p.ds, s.Rank)
			p.plans[s.Rank].Own = uint32(len(p.ds))
		}
		d := s.Inventory.DirID
		if _, ok := p.owner[d]; ok {
			continue // the same dir, reported again by another rank
		}
		p.owner[d] = s.Rank
		for _, c := range s.Inventory.Copies {
			p.found[int(c.Slot)] = append(p.found[int(c.Slot)], copyAt{d, c.Gen})
			epoch = max(epoch, c.Gen)
		}
	}
	epoch++
	p.epoch = epoch
	p.next = Table{Epoch: epoch, Gens: map[int]uint64{}, Owed: map[int][]DirSeen{}}
	for _, sp := range p.plans {
		sp.Epoch = epoch
	}
	return p
}

// place decides where slot goes: held in place, sent by the lowest rank
// that sees the chosen copy, started fresh or missing; the other copies
// are set aside.
func (p *planner) place(slot int) {
	host := p.ds[placement.SlotHost(slot, len(p.ds))]
	hp := p.plans[host]
	need := p.table.Gens[slot]
	copies := p.found[slot]
	var best uint64
	for _, c := range copies {
		best = max(best, c.gen)
	}
	hostDir := p.dirOf[host]
	missing := func(why string) {
		if p.abandon[slot] {
			p.abandonSlot(slot, host, copies)
			return
		}
		hp.Missing = append(hp.Missing, wire.SlotMissing{Slot: uint32(slot), Why: why, Owe: hostDir})
		p.next.Gens[slot] = need
		p.next.Owed[slot] = p.owedAfter(slot, hostDir, need)
		// Cuts no copy can be owed any more (a copy was held since) go;
		// the holder's own file takes new ones meanwhile.
		for _, d := range slices.Sorted(maps.Keys(p.owed[slot])) {
			if f := p.owed[slot][d]; d != hostDir && f.Bad == "" && f.Newest <= need {
				p.dropOwed(slot, d)
			}
		}
	}
	if len(copies) == 0 || best < need {
		if len(copies) == 0 && need == 0 && slot < len(p.ds) {
			hp.Fresh = append(hp.Fresh, uint64(slot))
			p.next.Gens[slot] = p.epoch
			// Nothing left to cut; the holder drops its own file.
			for d := range p.owed[slot] {
				if d != hostDir {
					p.dropOwed(slot, d)
				}
			}
			return
		}
		missing(missingWhy(slot, need, copies, p.owner))
		return
	}
	ship, why := p.owedFor(slot, best, hostDir)
	if why != "" {
		missing(why)
		return
	}
	for _, d := range ship {
		f := p.owed[slot][d]
		sp := p.plans[p.owner[d]]
		sp.ShipOwed = append(sp.ShipOwed, uint64(slot))
		p.shipped[p.owner[d]] += f.Cuts
		p.shipped[host] += f.Cuts
	}
	for d := range p.owed[slot] {
		if d != hostDir {
			p.dropOwed(slot, d)
		}
	}
	chosen := p.choose(copies, best, hostDir)
	if chosen == hostDir {
		hp.Hold = append(hp.Hold, wire.SlotCopy{Slot: uint32(slot), Gen: best})
	} else {
		sp := p.plans[p.owner[chosen]]
		sp.Send = append(sp.Send, wire.SlotSend{Slot: uint32(slot), Gen: best, To: uint32(host)})
		hp.Receive = append(hp.Receive, wire.SlotCopy{Slot: uint32(slot), Gen: best})
	}
	p.next.Gens[slot] = p.epoch
	for _, c := range copies {
		if c.dir == chosen || c.dir == hostDir {
			// The holder sets its own aside when the chosen copy
			// arrives.
			continue
		}
		ap := p.plans[p.owner[c.dir]]
		ap.Aside = append(ap.Aside, wire.SlotCopy{Slot: uint32(slot), Gen: c.gen})
	}
}

// abandonSlot starts slot, which would be missing and the operator
// abandons (--abandon-slot), empty at host: every copy found is set
// aside, kept for the operator, and the cuts owed to it go.
func (p *planner) abandonSlot(slot, host int, copies []copyAt) {
	for _, c := range copies {
		ap := p.plans[p.owner[c.dir]]
		ap.Aside = append(ap.Aside, wire.SlotCopy{Slot: uint32(slot), Gen: c.gen})
	}
	p.plans[host].Fresh = append(p.plans[host].Fresh, uint64(slot))
	p.next.Gens[slot] = p.epoch
	for d := range p.owed[slot] {
		if d != p.dirOf[host] {
			p.dropOwed(slot, d)
		}
	}
}

// dropOwed has the lowest rank that sees data dir d remove its file of
// the cuts owed to slot once the start is done.
func (p *planner) dropOwed(slot int, d string) {
	dp := p.plans[p.owner[d]]
	dp.DropOwed = append(dp.DropOwed, uint64(slot))
}

// MaxShipped bounds the owed cuts a start moves from or to one server, in
// the messages of its rounds: a slot whose cuts would go over it stays
// missing at this start, and the next moves them.
const MaxShipped = 2 * MaxOwed

// owedFor returns the data dirs whose cuts owed to slot, whose newest copy
// found is of generation best, its holder (whose data dir is hostDir)
// must be sent at this start: those under another data dir that this copy
// has not had. why says why it cannot be held now: cuts owed to it may be
// kept under a data dir no server of this cluster sees, or cannot be
// read, or are more than this start can move. "": it can.
func (p *planner) owedFor(slot int, best uint64, hostDir string) (ship []string, why string) {
	var whys []string
	for _, d := range p.table.Owed[slot] {
		if _, ok := p.owner[d.ID]; !ok {
			whys = append(whys, fmt.Sprintf("dims cuts owed to it may be kept under %s, which no server of this cluster sees", d))
		}
	}
	host := p.ds[placement.SlotHost(slot, len(p.ds))]
	into := p.shipped[host]
	for _, d := range slices.Sorted(maps.Keys(p.owed[slot])) {
		f := p.owed[slot][d]
		switch {
		case f.Bad != "":
			whys = append(whys, fmt.Sprintf("the dims cuts owed to it under %s cannot be read (%s): restore that file, or remove it to serve the slot without them (rows those shrinks dropped may then read back)",
				p.seen[d], f.Bad))
		case f.Newest > best && d != hostDir:
			from := p.shipped[p.owner[d]]
			into += f.Cuts
			if from+f.Cuts > MaxShipped || into > MaxShipped {
				whys = append(whys, fmt.Sprintf("its %d dims cuts owed under %s are more than this start moves between two servers with the others: the next start moves them", f.Cuts, p.seen[d]))
				continue
			}
			ship = append(ship, d)
		}
	}
	if len(whys) == 0 {
		return ship, ""
	}
	return nil, fmt.Sprintf("its data (dir %s, generation %d) is found, but it must not serve before the dims cuts made while it was out of reach are applied to it, "+
		"and %s: start the cluster with a server that sees each of those data dirs%s",
		SlotDir(slot), best, strings.Join(whys, "; "), abandonHint(slot))
}

// owedAfter returns the data dirs that keep, or may keep, cuts owed to
// slot once this start leaves it missing at the server whose data dir is
// hostDir: that one first, where they are kept from now on, then those
// that keep some its copy of generation need has not had (or an
// unreadable file of them), and those the table names that this start
// does not see.
func (p *planner) owedAfter(slot int, hostDir string, need uint64) []DirSeen {
	out := []DirSeen{p.seen[hostDir]}
	have := map[string]bool{hostDir: true}
	for _, d := range slices.Sorted(maps.Keys(p.owed[slot])) {
		if f := p.owed[slot][d]; !have[d] && (f.Bad != "" || f.Newest > need) {
			have[d] = true
			out = append(out, p.seen[d])
		}
	}
	for _, d := range p.table.Owed[slot] {
		if _, ok := p.owner[d.ID]; !ok && !have[d.ID] {
			have[d.ID] = true
			out = append(out, d)
		}
	}
	return out
}

// choose picks, among the copies at generation best, the one under the
// holder's data dir (hostDir), else the one whose dir the lowest rank
// sees.
func (p *planner) choose(copies []copyAt, best uint64, hostDir string) string {
	chosen := ""
	for _, c := range copies {
		if c.gen != best {
			continue
		}
		if c.dir == hostDir {
			return c.dir
		}
		if chosen == "" || p.owner[c.dir] < p.owner[chosen] {
			chosen = c.dir
		}
	}
	return chosen
}

// copyAt is a copy of a slot under a data dir.
type copyAt struct {
	dir string
	gen uint64
}

// missingWhy says why a slot's data is out of reach.
func missingWhy(slot int, need uint64, copies []copyAt, owner map[string]int) string {
	what := fmt.Sprintf("its data (dir %s, written to data server %d of an earlier cluster) was last held at generation %d", SlotDir(slot), slot, need)
	if len(copies) == 0 {
		return what + ", and no server of this cluster finds it under its data dir: start the cluster with a server that sees that dir (on the node that holds it), or restore it" + abandonHint(slot)
	}
	newest := copies[0]
	for _, c := range copies {
		if c.gen > newest.gen {
			newest = c
		}
	}
	return fmt.Sprintf("%s; the newest copy found, under the data dir of rank %d, is of generation %d and out of date: start the cluster with a server that sees the newest copy, or restore it%s",
		what, owner[newest.dir], newest.gen, abandonHint(slot))
}

// abandonHint says how to give up a missing slot's data for good.
func abandonHint(slot int) string {
	return fmt.Sprintf("; or, if its data is gone for good, abandon it: start with --abandon-slot %d (pdc up or pdc server), "+
		"and it starts empty (what it held reads as never written)", slot)
}

// Adopt decides which metadata server adopts each metadata store
// (meta-<rank> under a data dir) that no server opens: that of a rank that
// no longer holds metadata, or one under another data dir than its rank's
// now (the rank runs on another node, with a node-local data dir). The
// adopter sends its entries to their owners. It is one that sees the
// store: among those sharing its data dir, the one at the store's rank mod
// their number (with one shared data dir, as pdc up makes, the metadata
// server of index rank mod count). servers are in rank order. It returns
// the ranks of the stores each metadata server adopts.
//
// A store that no metadata server sees (the servers sharing its data dir
// hold no metadata: the roles changed, or no metadata server runs on the
// node of that node-local data dir) cannot be adopted: the cluster would
// answer "not found" for everything in it, a client could create an
// object of the same name again, and a scrub would count its objects'
// data as orphans. Adopt then returns an error naming every such store,
// the data dir and rank that reported it, and what the operator can do;
// the start must not go on. (A data slot out of reach is different: its
// objects are known, and reads of them fail naming the slot; see Plan.)
func Adopt(servers []Server) (map[int][]uint64, error) {
	isMeta := map[int]bool{}
	dirOf := map[int]string{}
	byDir := map[string][]int{} // metadata servers by data dir, in rank order
	for _, s := range servers {
		dirOf[s.Rank] = s.Inventory.DirID
		if s.Meta {
			isMeta[s.Rank] = true
			byDir[s.Inventory.DirID] = append(byDir[s.Inventory.DirID], s.Rank)
		}
	}
	out := map[int][]uint64{}
	var orphans []string
	seen := map[string]bool{}
	for _, s := range servers {
		d := s.Inventory.DirID
		if seen[d] {
			continue
		}
		seen[d] = true
		for _, r := range s.Inventory.MetaDirs {
			if isMeta[int(r)] && dirOf[int(r)] == d {
				continue // its rank opens it
			}
			cands := byDir[d]
			if len(cands) == 0 {
				orphans = append(orphans, orphan(s, r))
				continue
			}
			a := cands[int(r%uint64(len(cands)))]
			out[a] = append(out[a], r)
		}
	}
	if len(orphans) > 0 {
		return nil, fmt.Errorf("%s: no metadata server of this cluster has the data dir it is in, so every object, container and tag in it would answer \"not found\" "+
			"(a client could create one of them again, and `pdc fsck --remove` would delete their data); the start is refused. "+
			"Start the cluster with a metadata server on the node that holds that data dir (a server with the metadata role and that --datadir; with pdc up, --roles both), "+
			"or move the store into the data dir of a metadata server of this cluster that has no store of that name, "+
			"or, to abandon its metadata deliberately, remove it (the path above): %w",
			strings.Join(orphans, "; "), pdc.ErrInvalid)
	}
	return out, nil
}

// orphan names store r, under the data dir s reported, that no metadata
// server adopts.
func orphan(s Server, r uint64) string {
	where := fmt.Sprintf("the data dir of rank %d", s.Rank)
	if s.Inventory.Path != "" {
		where = fmt.Sprintf("data dir %s (rank %d", s.Inventory.Path, s.Rank)
		if s.Host != "" {
			where += ", host " + s.Host
		}
		where += ")"
	}
	what := fmt.Sprintf("the metadata store meta-%d in %s would be adopted by no metadata server", r, where)
	if s.Inventory.Path != "" {
		what += fmt.Sprintf(" (path %s)", filepath.Join(s.Inventory.Path, fmt.Sprintf("meta-%d", r)))
	}
	return what
}

// Held is what each server of a running cluster holds, as the last start
// recorded it in table: every slot at the table's epoch is held in place by
// its host; one at an older generation was missing then and still is. A
// rank 0 that restarts into a running cluster answers with it what Plan
// answered at the start (the plans died with the old rank 0): the servers
// of ranks that restart later hold what they held, and move nothing.
func Held(servers []Server, table Table) map[int]*wire.SlotPlan {
	plans := map[int]*wire.SlotPlan{}
	var ds []int
	for _, s := range servers {
		plans[s.Rank] = &wire.SlotPlan{Epoch: table.Epoch}
		if s.Data {
			ds = append(ds, s.Rank)
			plans[s.Rank].Own = uint32(len(ds))
		}
	}
	if len(ds) == 0 {
		return plans
	}
	for _, slot := range slices.Sorted(maps.Keys(table.Gens)) {
		hp := plans[ds[placement.SlotHost(slot, len(ds))]]
		if gen := table.Gens[slot]; gen == table.Epoch {
			hp.Hold = append(hp.Hold, wire.SlotCopy{Slot: uint32(slot), Gen: gen})
		} else {
			m := wire.SlotMissing{Slot: uint32(slot),
				Why: fmt.Sprintf("data slot %d: the last start (epoch %d) found no copy at generation %d", slot, table.Epoch, gen)}
			if dirs := table.Owed[slot]; len(dirs) > 0 {
				m.Owe = dirs[0].ID
			}
			hp.Missing = append(hp.Missing, m)
		}
	}
	return plans
}
