package slots

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
)

// The metadata stores of a cluster (docs/design/0013-data-slots.md, "The
// metadata stores a cluster has"): every start records, in every data dir
// it has, the stores it has (each metadata store meta-<rank> by its
// identity, with the host and data dir it was last seen in), and the next
// full start, which reads the newest record (highest epoch) that any of
// its servers finds, refuses to go on without one of them.
//
// The file, metadata-stores, is framed as the slot table: magic, version
// u32, body length u32, body, CRC-32C u32; little-endian. The body is
// epoch u64, then the stores the cluster has and the stores abandoned,
// each a count u32 and that many entries: rank u32, epoch u64 (the start
// that last saw it, or abandoned it), then id, host, path and data dir id,
// each a length u32 and its bytes.

const (
	storesFile    = "metadata-stores"
	storesMagic   = "pdcmstor"
	storesVersion = 1
)

// StoreEntry is a metadata store of a cluster.
type StoreEntry struct {
	Rank  int    // of its name, meta-<rank>
	ID    string // its identity (STORE-ID)
	Epoch uint64 // of the start that last saw it (abandoned: that abandoned it)
	Host  string // of the server that last saw it
	Path  string // the data dir it was last seen in
	DirID string // that data dir's id
}

// Stores is a cluster's record of its metadata stores.
type Stores struct {
	Epoch uint64 // of the start that wrote it
	// Have are the stores the cluster has: a full start that finds one
	// of them nowhere is refused.
	Have []StoreEntry
	// Abandoned are stores the operator abandoned (--abandon-store): one
	// found again is refused, not taken back beside what was made since.
	Abandoned []StoreEntry
}

// Stores reads the data dir's record of the cluster's metadata stores, as
// stored (nil: it has none).
func (d DataDir) Stores() ([]byte, error) {
	path := filepath.Join(d.path, storesFile)
	b, err := d.readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metadata stores record: %w", err)
	}
	if _, err := DecodeStores(path, b); err != nil {
		return nil, err
	}
	return b, nil
}

// SetStores replaces the data dir's record of the cluster's metadata
// stores with b (EncodeStores), crash-safely.
func (d DataDir) SetStores(b []byte) error {
	if err := atomicfile.WriteFS(d.fs, filepath.Join(d.path, storesFile), b, 0o600); err != nil {
		return fmt.Errorf("metadata stores record: %w", err)
	}
	return nil
}

// EncodeStores encodes a record of metadata stores.
func EncodeStores(s Stores) []byte {
	body := binary.LittleEndian.AppendUint64(nil, s.Epoch)
	for _, list := range [][]StoreEntry{s.Have, s.Abandoned} {
		body = binary.LittleEndian.AppendUint32(body, uint32(len(list)))
		for _, e := range list {
			body = binary.LittleEndian.AppendUint32(body, uint32(e.Rank))
			body = binary.LittleEndian.AppendUint64(body, e.Epoch)
			for _, str := range []string{e.ID, e.Host, e.Path, e.DirID} {
				body = binary.LittleEndian.AppendUint32(body, uint32(len(str)))
				body = append(body, str...)
			}
		}
	}
	return frame(storesMagic, storesVersion, body)
}

// DecodeStores decodes the record of metadata stores b, read from path.
func DecodeStores(path string, b []byte) (Stores, error) {
	var s Stores
	body, err := unframe(path, storesMagic, storesVersion, b)
	if err != nil {
		return s, fmt.Errorf("metadata stores record: %w", err)
	}
	bad := func(what string) (Stores, error) {
		return Stores{}, fmt.Errorf("metadata stores record %s: %s: %w", path, what, pdc.ErrCorrupt)
	}
	if len(body) < 8 {
		return bad("short body")
	}
	s.Epoch = binary.LittleEndian.Uint64(body)
	body = body[8:]
	u32 := func() (uint32, bool) {
		if len(body) < 4 {
			return 0, false
		}
		v := binary.LittleEndian.Uint32(body)
		body = body[4:]
		return v, true
	}
	for _, list := range []*[]StoreEntry{&s.Have, &s.Abandoned} {
		n, ok := u32()
		if !ok || int(n) > len(body)/28 {
			return bad("entry count")
		}
		for range n {
			var e StoreEntry
			r, ok := u32()
			if !ok || r > 1<<30 || len(body) < 8 {
				return bad("entry")
			}
			e.Rank = int(r)
			e.Epoch = binary.LittleEndian.Uint64(body)
			body = body[8:]
			for _, str := range []*string{&e.ID, &e.Host, &e.Path, &e.DirID} {
				l, ok := u32()
				if !ok || int(l) > len(body) {
					return bad("entry string")
				}
				*str = string(body[:l])
				body = body[l:]
			}
			*list = append(*list, e)
		}
	}
	if len(body) != 0 {
		return bad(fmt.Sprintf("%d bytes after the entries", len(body)))
	}
	return s, nil
}

// foundStore is a metadata store a server of a start found.
type foundStore struct {
	rank    int
	id      string
	adopted bool   // renamed once its entries moved at an earlier start
	by      Server // the lowest rank that sees its data dir
}

// StoresPlan is what CheckStores decides.
type StoresPlan struct {
	// Before is the record to write to every data dir of the start
	// before any metadata moves: every store found, those adopted now
	// among them, so that a start killed while their entries move still
	// expects them (or, once renamed, the stores they went to).
	Before Stores
	// After is the record to write once every adopted store's entries
	// have moved (the stores are renamed): the stores the metadata
	// servers open.
	After Stores
	// Abandoned are the stores abandoned by this start.
	Abandoned []StoreEntry
}

// CheckStores checks the metadata stores the servers of a full start
// found against the newest record of the cluster's stores they found
// (Server.Inventory.Stores), and returns the records to write to every
// data dir of this start, and the stores it abandons now. servers are in
// rank order.
//
// Every store the record says the cluster has must be found, under any
// data dir of this start: as meta-<rank>, or renamed after an earlier
// start adopted it (its entries are in the stores that start had). One
// found nowhere is missing, and the start is refused with an error that
// names it (its rank, id, host and data dir) and the ways on, unless
// some server was told to abandon the stores of its rank
// (Inventory.Abandon): then the new record forgets it, and lists it as
// abandoned. A store found that the record lists as abandoned is
// refused too: its entries would come back beside those made since.
// Without a record (a first start, or data dirs of a build from before
// the record), nothing is expected.
//
// The new records have the stores found under their names, with an
// identity: Before those the metadata servers open and those they adopt
// now, After the first only.
func CheckStores(servers []Server) (StoresPlan, error) {
	var next Stores
	var abandoned []StoreEntry
	var prev Stores
	var epoch uint64
	abandon := map[int]bool{}
	var found []foundStore
	seen := map[string]bool{}
	for _, s := range servers {
		for _, r := range s.Inventory.Abandon {
			abandon[int(min(r, 1<<31))] = true
		}
		d := s.Inventory.DirID
		if seen[d] {
			continue
		}
		seen[d] = true
		if b := s.Inventory.Stores; len(b) > 0 {
			rec, err := DecodeStores(filepath.Join(s.Inventory.Path, storesFile), b)
			if err != nil {
				return StoresPlan{}, fmt.Errorf("rank %d: %w", s.Rank, err)
			}
			if rec.Epoch > epoch || prev.Epoch == 0 {
				prev = rec
			}
			epoch = max(epoch, rec.Epoch)
		}
		for _, m := range s.Inventory.MetaStores {
			found = append(found, foundStore{rank: int(min(m.Rank, 1<<31)), id: m.ID, adopted: m.Adopted, by: s})
		}
	}
	next.Epoch = epoch + 1
	byID := map[string]foundStore{}
	for _, f := range found {
		if f.id == "" {
			continue
		}
		if g, ok := byID[f.id]; !ok || g.adopted && !f.adopted {
			byID[f.id] = f
		}
	}
	var missing, back []string
	for _, e := range prev.Have {
		if _, ok := byID[e.ID]; ok {
			continue
		}
		if abandon[e.Rank] {
			e.Epoch = next.Epoch
			abandoned = append(abandoned, e)
			continue
		}
		missing = append(missing, missingStore(e))
	}
	next.Abandoned = append(slices.Clone(prev.Abandoned), abandoned...)
	for _, e := range prev.Abandoned {
		if f, ok := byID[e.ID]; ok && !f.adopted {
			back = append(back, abandonedStore(e, f))
		}
	}
	if len(missing) > 0 {
		return StoresPlan{}, fmt.Errorf("%s; the cluster has it (every start records the metadata stores it has, in each data dir, as %s), and without it every object, container and tag in it would answer \"not found\" "+
			"(a client could create one of them again, and `pdc fsck --remove` would delete their data): the start is refused. "+
			"Start the cluster with a server on the node that holds that data dir, with that --datadir; "+
			"or move the store (the dir meta-<rank> whose STORE-ID is the id above) into the data dir of a server of this cluster that has no store of that name; "+
			"or, to go on without it deliberately, start with --abandon-store RANK (the rank of each store named above; pdc up and pdc server take it), "+
			"after which the cluster forgets the store: its objects are lost to it: %w",
			strings.Join(missing, "; "), storesFile, pdc.ErrInvalid)
	}
	if len(back) > 0 {
		return StoresPlan{}, fmt.Errorf("%s: taken back, its objects, containers and tags would come back beside those made since it was abandoned, a second copy of their names; the start is refused. "+
			"Move it out of the data dir (rename it, e.g. to meta-<rank>.abandoned; it is kept as it is) or remove it, and start again: %w",
			strings.Join(back, "; "), pdc.ErrInvalid)
	}
	opens := map[int]string{} // metadata rank: its data dir
	for _, s := range servers {
		if s.Meta {
			opens[s.Rank] = s.Inventory.DirID
		}
	}
	after := Stores{Epoch: next.Epoch + 1, Abandoned: next.Abandoned}
	for _, f := range found {
		if f.id == "" || f.adopted {
			continue
		}
		e := StoreEntry{Rank: f.rank, ID: f.id, Epoch: next.Epoch, Host: f.by.Host, Path: f.by.Inventory.Path, DirID: f.by.Inventory.DirID}
		next.Have = append(next.Have, e)
		if d, ok := opens[f.rank]; ok && d == e.DirID {
			e.Epoch = after.Epoch
			after.Have = append(after.Have, e)
		}
	}
	for _, l := range [][]StoreEntry{next.Have, after.Have} {
		slices.SortFunc(l, func(x, y StoreEntry) int {
			if x.Rank != y.Rank {
				return x.Rank - y.Rank
			}
			return strings.Compare(x.ID, y.ID)
		})
	}
	return StoresPlan{Before: next, After: after, Abandoned: abandoned}, nil
}

// where names the data dir, and host, of a store entry.
func (e StoreEntry) where() string {
	w := "data dir " + e.Path
	if e.Path == "" {
		w = "data dir id " + e.DirID
	}
	if e.Host != "" {
		w += " on host " + e.Host
	}
	return w
}

// missingStore says which store of the cluster no server finds.
func missingStore(e StoreEntry) string {
	what := fmt.Sprintf("the metadata store meta-%d (id %s), last seen in %s", e.Rank, e.ID, e.where())
	if e.Path != "" {
		what += fmt.Sprintf(" (path %s)", filepath.Join(e.Path, fmt.Sprintf("meta-%d", e.Rank)))
	}
	return what + fmt.Sprintf(" by the start of epoch %d, is found by no server of this start", e.Epoch)
}

// abandonedStore says which abandoned store a server finds again.
func abandonedStore(e StoreEntry, f foundStore) string {
	where := "a data dir"
	if p := f.by.Inventory.Path; p != "" {
		where = fmt.Sprintf("data dir %s (rank %d", p, f.by.Rank)
		if f.by.Host != "" {
			where += ", host " + f.by.Host
		}
		where += fmt.Sprintf("; path %s)", filepath.Join(p, fmt.Sprintf("meta-%d", f.rank)))
	}
	return fmt.Sprintf("the metadata store meta-%d (id %s) in %s was abandoned by the start of epoch %d (--abandon-store %d)",
		f.rank, e.ID, where, e.Epoch, e.Rank)
}
