package slots

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/wire"
)

// Dims cuts owed to a data slot out of reach (docs/design/0013-data-slots.md,
// "Cuts owed to a missing slot"). A shrink or relayout's cut is pushed to
// every data server (docs/design/0006-region-io.md, "Dims versions"); the
// holder of a slot that is missing cannot apply it there, and the slot
// comes back at a later start with its files as they were. Rather than
// refuse the cut (which kept it pending on the metadata server and refused
// the object's every later set dims until the slot was back, for good if
// it never was), the holder records it in its data dir, durably, and
// acknowledges it; the start that finds the slot again applies every cut
// recorded for it, in version order, before the slot serves.
//
// The file, data-<slot>.cuts, is framed as the slot table: magic, version
// u32, body length u32, body, CRC-32C u32; little-endian. The body is the
// slot u32, a count u32, and that many cuts: epoch u64, object u64, dims
// version u64, a count u32 of dims and the dims, u64 each. It is replaced
// whole (temp, fsync, rename, fsync dir) for each cut recorded.

const (
	owedMagic   = "pdccuts\x00"
	owedVersion = 1

	// MaxOwed bounds the cuts kept for one slot: a start may have to move
	// them between data dirs in one message. A cut beyond it fails, as
	// every cut did before cuts were kept, and stays pending on its
	// metadata server.
	MaxOwed = 4096
)

// OwedName is the name of the file, under a data dir, of the cuts owed to
// slot.
func OwedName(slot int) string { return SlotDir(slot) + ".cuts" }

// OwedCut is a dims cut owed to a data slot: pushed while the slot was out
// of reach of the server that holds it.
type OwedCut struct {
	// Epoch is that of the start the cluster ran under when the cut was
	// owed. The slot was missing at that start, so no copy of it is of
	// that generation: a copy older has not had the cut, and one newer was
	// held by a later start, which applied it.
	Epoch   uint64
	Obj     uint64
	Version uint64 // the dims version
	Dims    []uint64
}

// Owed returns the path of the file of the cuts owed to slot.
func (d DataDir) Owed(slot int) string { return filepath.Join(d.path, OwedName(slot)) }

// OwedCuts reads the cuts owed to slot kept in the data dir, in the order
// they were recorded; none: nil.
func (d DataDir) OwedCuts(slot int) ([]OwedCut, error) {
	path := d.Owed(slot)
	b, err := d.readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dims cuts owed to data slot %d: %w", slot, err)
	}
	return decodeOwed(path, slot, b)
}

// SetOwedCuts replaces the cuts owed to slot kept in the data dir with
// cuts, crash-safely; none removes the file.
func (d DataDir) SetOwedCuts(slot int, cuts []OwedCut) error {
	if len(cuts) == 0 {
		return d.DropOwedCuts(slot)
	}
	if err := atomicfile.WriteFS(d.fs, d.Owed(slot), encodeOwed(slot, cuts), 0o600); err != nil {
		return fmt.Errorf("dims cuts owed to data slot %d: %w", slot, err)
	}
	return nil
}

// DropOwedCuts removes the file of the cuts owed to slot, durably, if
// there is one.
func (d DataDir) DropOwedCuts(slot int) error {
	err := d.fs.Remove(d.Owed(slot))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = d.fs.SyncDir(d.path)
	}
	if err != nil {
		return fmt.Errorf("drop the dims cuts owed to data slot %d: %w", slot, err)
	}
	return nil
}

func encodeOwed(slot int, cuts []OwedCut) []byte {
	body := binary.LittleEndian.AppendUint32(nil, uint32(slot))
	body = binary.LittleEndian.AppendUint32(body, uint32(len(cuts)))
	for _, c := range cuts {
		body = binary.LittleEndian.AppendUint64(body, c.Epoch)
		body = binary.LittleEndian.AppendUint64(body, c.Obj)
		body = binary.LittleEndian.AppendUint64(body, c.Version)
		body = binary.LittleEndian.AppendUint32(body, uint32(len(c.Dims)))
		for _, x := range c.Dims {
			body = binary.LittleEndian.AppendUint64(body, x)
		}
	}
	return frame(owedMagic, owedVersion, body)
}

// maxDims bounds the dims of a cut read back: an object has a few.
const maxDims = 64

func decodeOwed(path string, slot int, b []byte) ([]OwedCut, error) {
	body, err := unframe(path, owedMagic, owedVersion, b)
	if err != nil {
		return nil, fmt.Errorf("dims cuts owed to data slot %d: %w", slot, err)
	}
	bad := func(why string, args ...any) error {
		return fmt.Errorf("dims cuts owed to data slot %d: %s: %s: %w", slot, path, fmt.Sprintf(why, args...), pdc.ErrCorrupt)
	}
	if len(body) < 8 {
		return nil, bad("body of %d bytes", len(body))
	}
	if s := int(binary.LittleEndian.Uint32(body)); s != slot {
		return nil, bad("the cuts of slot %d", s)
	}
	n := int(binary.LittleEndian.Uint32(body[4:]))
	body = body[8:]
	if n > len(body)/28 {
		return nil, bad("%d cuts in %d bytes", n, len(body))
	}
	cuts := make([]OwedCut, 0, n)
	for i := range n {
		if len(body) < 28 {
			return nil, bad("cut %d cut short", i)
		}
		c := OwedCut{
			Epoch:   binary.LittleEndian.Uint64(body),
			Obj:     binary.LittleEndian.Uint64(body[8:]),
			Version: binary.LittleEndian.Uint64(body[16:]),
		}
		k := int(binary.LittleEndian.Uint32(body[24:]))
		body = body[28:]
		if k == 0 || k > maxDims || len(body) < 8*k {
			return nil, bad("cut %d has %d dims in %d bytes", i, k, len(body))
		}
		c.Dims = make([]uint64, k)
		for j := range k {
			c.Dims[j] = binary.LittleEndian.Uint64(body[8*j:])
		}
		body = body[8*k:]
		cuts = append(cuts, c)
	}
	if len(body) != 0 {
		return nil, bad("%d bytes after the last cut", len(body))
	}
	return cuts, nil
}

// Due returns the cuts of owed that a copy of generation gen has not had
// (those owed at a later epoch), in the order to apply them: by object,
// then dims version, each version once. Applying an object's cuts in
// version order drops what each of them dropped, which the newest alone
// would not (set dims 8, then 26, then 20: rows 8-19 must read as never
// written).
func Due(owed []OwedCut, gen uint64) []OwedCut {
	out := make([]OwedCut, 0, len(owed))
	for _, c := range owed {
		if c.Epoch > gen {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b OwedCut) int {
		return cmp.Or(cmp.Compare(a.Obj, b.Obj), cmp.Compare(a.Version, b.Version))
	})
	return slices.CompactFunc(out, func(a, b OwedCut) bool { return a.Obj == b.Obj && a.Version == b.Version })
}

// Ledger keeps, in a data server's data dir, the dims cuts owed to the
// slots it should hold and cannot reach (those the start's plan names
// missing and keeps cuts for here). Safe for concurrent use.
type Ledger struct {
	dir   DataDir
	epoch uint64
	owes  map[int]bool

	mu     sync.Mutex  // serializes the rewrites of each slot's file
	counts map[int]int // guarded by mu: cuts kept per slot
}

// NewLedger returns the ledger of the cuts owed to owes, slots this
// server should hold and cannot reach, in data dir d, for a cluster
// started at epoch. A slot whose file of owed cuts cannot be read keeps
// none (a cut then fails while it is missing); the error names each.
func NewLedger(d DataDir, epoch uint64, owes []int) (*Ledger, error) {
	l := &Ledger{dir: d, epoch: epoch, owes: map[int]bool{}, counts: map[int]int{}}
	var errs []error
	for _, s := range owes {
		cuts, err := d.OwedCuts(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l.owes[s], l.counts[s] = true, len(cuts)
	}
	return l, errors.Join(errs...)
}

// Owes reports whether cuts owed to slot are kept here.
func (l *Ledger) Owes(slot int) bool { return l != nil && l.owes[slot] }

// Count returns how many cuts owed to slot are kept here.
func (l *Ledger) Count(slot int) int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[slot]
}

// Owe records c as owed to each of slots (which must be kept here, Owes),
// durably, before it returns. A cut already recorded (pushed again, its
// acknowledgment lost) is not recorded twice. An error means it may not
// be recorded for every slot: the caller must not acknowledge it.
func (l *Ledger) Owe(slots []int, c wire.DimsCut) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range slots {
		if !l.owes[s] {
			return fmt.Errorf("dims cuts owed to data slot %d are not kept here: %w", s, pdc.ErrInternal)
		}
		cuts, err := l.dir.OwedCuts(s)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(cuts, func(o OwedCut) bool { return o.Obj == c.Obj && o.Version == c.DimsVersion }) {
			continue
		}
		if len(cuts) >= MaxOwed {
			return fmt.Errorf("data slot %d, out of reach, is owed %d dims cuts already, as many as are kept for it: "+
				"bring it back (start the cluster with a server that sees its dir, or restore it), or, if its data is gone for good, "+
				"abandon it (start the cluster with --abandon-slot %d): %w", s, len(cuts), s, pdc.ErrUnavailable)
		}
		cuts = append(cuts, OwedCut{Epoch: l.epoch, Obj: c.Obj, Version: c.DimsVersion, Dims: slices.Clone(c.Dims)})
		if err := l.dir.SetOwedCuts(s, cuts); err != nil {
			return err
		}
		l.counts[s] = len(cuts)
	}
	return nil
}

// owedFile describes the file of the cuts owed to slot, for Scan.
func (d DataDir) owedFile(slot int) wire.OwedFile {
	f := wire.OwedFile{Slot: uint32(slot)}
	cuts, err := d.OwedCuts(slot)
	if err != nil {
		f.Bad = err.Error()
		return f
	}
	f.Cuts = uint64(len(cuts))
	for _, c := range cuts {
		f.Newest = max(f.Newest, c.Epoch)
	}
	return f
}

// WireCuts returns the cuts owed to slot as a start's rounds carry them.
func WireCuts(slot int, cuts []OwedCut) wire.OwedCuts {
	m := wire.OwedCuts{Slot: uint32(slot), Cuts: make([]wire.OwedCut, len(cuts))}
	for i, c := range cuts {
		m.Cuts[i] = wire.OwedCut{Epoch: c.Epoch, Obj: c.Obj, DimsVersion: c.Version, Dims: c.Dims}
	}
	return m
}

// FromWire returns the cuts m carries. A cut without dims, or with more
// than an object has, is refused.
func FromWire(m wire.OwedCuts) ([]OwedCut, error) {
	out := make([]OwedCut, len(m.Cuts))
	for i, c := range m.Cuts {
		if len(c.Dims) == 0 || len(c.Dims) > maxDims {
			return nil, fmt.Errorf("dims cut %d owed to data slot %d has %d dims: %w", i, m.Slot, len(c.Dims), pdc.ErrProtocol)
		}
		out[i] = OwedCut{Epoch: c.Epoch, Obj: c.Obj, Version: c.DimsVersion, Dims: c.Dims}
	}
	return out, nil
}
