package slots

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/metastore"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/internal/regionstore"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Files of a data dir:
//
//	datadir-id            the data dir's random id: servers that report
//	                      the same one share the dir
//	data-<slot>/          a slot's region store files, and
//	data-<slot>/SLOT      its marker: the slot and its generation
//	data-<slot>.incoming/ a slot being received (removed at start)
//	data-<slot>.sent/     a slot sent and committed by its new holder
//	                      (removed at start)
//	data-<slot>.aside-<gen>-<epoch>/
//	                      an older or duplicate copy, kept for the operator
//	data-<slot>.cuts      dims cuts owed to a slot out of reach (owed.go)
//	data-slots            rank 0's slot table
//	metadata-stores       the cluster's record of its metadata stores
//	                      (stores.go), written by every start
//
// The marker and the table are framed: magic (8 bytes), version u32, body
// length u32, body, CRC-32C u32 of all before it; little-endian.

const (
	idFile     = "datadir-id"
	markerFile = "SLOT"
	tableFile  = "data-slots"

	markerMagic   = "pdcslot\x00"
	markerVersion = 1
	tableMagic    = "pdcslots"
	// tableVersion 2 adds the data dirs that may keep cuts owed to
	// missing slots. Every missing slot has one (its holder's, named
	// when it goes missing, before any cut is kept), so a table is
	// written as version 1, which builds before it read, only when no
	// slot is missing; those builds refuse a version 2 table by its
	// version.
	tableVersion = 2
)

// SlotDir is the name of slot's dir under a data dir.
func SlotDir(slot int) string { return "data-" + strconv.Itoa(slot) }

// DataDir is a server's data dir, on a file system.
type DataDir struct {
	fs   vfs.FS
	path string
}

// NewDataDir returns the data dir at path on fsys (nil: the operating
// system's).
func NewDataDir(fsys vfs.FS, path string) DataDir {
	return DataDir{fs: vfs.OrDefault(fsys), path: path}
}

// Path returns the data dir's path.
func (d DataDir) Path() string { return d.path }

// Slot returns the path of slot's dir.
func (d DataDir) Slot(slot int) string { return filepath.Join(d.path, SlotDir(slot)) }

// HasSlot reports whether slot's dir exists.
func (d DataDir) HasSlot(slot int) bool { return d.isDir(d.Slot(slot)) }

// MakeSlot makes slot's dir, empty, if it does not exist.
func (d DataDir) MakeSlot(slot int) error {
	if err := d.fs.MkdirAll(d.Slot(slot), 0o700); err != nil {
		return fmt.Errorf("data slot %d: %w", slot, err)
	}
	return d.fs.SyncDir(d.path)
}

func (d DataDir) isDir(path string) bool {
	st, err := d.fs.Stat(path)
	return err == nil && st.IsDir()
}

func frame(magic string, version uint32, body []byte) []byte {
	b := append([]byte(magic), 0, 0, 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[8:], version)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(body)))
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func unframe(path, magic string, version uint32, b []byte) ([]byte, error) {
	body, _, err := unframeUpTo(path, magic, version, version, b)
	return body, err
}

// unframeUpTo is unframe for a format this build reads at versions
// oldest to newest; it returns the version found.
func unframeUpTo(path, magic string, oldest, newest uint32, b []byte) ([]byte, uint32, error) {
	if len(b) < 20 || string(b[:8]) != magic {
		return nil, 0, fmt.Errorf("%s: not a %q file: %w", path, strings.TrimRight(magic, "\x00"), pdc.ErrCorrupt)
	}
	v := binary.LittleEndian.Uint32(b[8:])
	if v < oldest || v > newest {
		if oldest == newest {
			return nil, v, fmt.Errorf("%s: format version %d, this build reads version %d: %w", path, v, newest, pdc.ErrVersion)
		}
		return nil, v, fmt.Errorf("%s: format version %d, this build reads versions %d to %d: %w", path, v, oldest, newest, pdc.ErrVersion)
	}
	n := int(binary.LittleEndian.Uint32(b[12:]))
	if len(b) != 16+n+4 {
		return nil, v, fmt.Errorf("%s: %d bytes, its header says %d: %w", path, len(b), 16+n+4, pdc.ErrCorrupt)
	}
	if got, want := crc32.Checksum(b[:16+n], castagnoli), binary.LittleEndian.Uint32(b[16+n:]); got != want {
		return nil, v, fmt.Errorf("%s: crc %08x, stored %08x: %w", path, got, want, pdc.ErrCorrupt)
	}
	return b[16 : 16+n], v, nil
}

// ID returns the data dir's id, making one if it has none. Servers
// sharing the dir may race to make it: the first link wins, and all read
// it.
func (d DataDir) ID() (string, error) {
	path := filepath.Join(d.path, idFile)
	read := func() (string, error) {
		f, err := d.fs.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 128))
		if err != nil {
			return "", err
		}
		id := strings.TrimSpace(string(b))
		if len(id) != 32 {
			return "", fmt.Errorf("data dir id %s: %q is not 32 hex digits: %w", path, id, pdc.ErrCorrupt)
		}
		return id, nil
	}
	if id, err := read(); !errors.Is(err, fs.ErrNotExist) {
		return id, err
	}
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	tmp := filepath.Join(d.path, "."+idFile+".tmp"+hex.EncodeToString(raw[:4]))
	f, err := d.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("data dir id: %w", err)
	}
	defer d.fs.Remove(tmp)
	_, err = f.Write([]byte(hex.EncodeToString(raw) + "\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// A link fails if another server made the id first.
		if err = d.fs.Link(tmp, path); errors.Is(err, fs.ErrExist) {
			err = nil
		}
	}
	if err == nil {
		err = d.fs.SyncDir(d.path)
	}
	if err != nil {
		return "", fmt.Errorf("data dir id %s: %w", path, err)
	}
	return read()
}

func (d DataDir) readFile(path string) ([]byte, error) {
	f, err := d.fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<26))
}

// Marker returns the slot and generation recorded in slot dir dir (a path
// in d). A dir without a marker (written before slots had one) is
// generation 0 of the slot its name says.
func (d DataDir) Marker(dir string) (slot int, gen uint64, err error) {
	path := filepath.Join(dir, markerFile)
	b, err := d.readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		s, ok := ParseDir(filepath.Base(dir))
		if !ok {
			return 0, 0, fmt.Errorf("%s: not a slot dir: %w", dir, pdc.ErrInvalid)
		}
		return s, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	return decodeMarker(path, b)
}

func decodeMarker(path string, b []byte) (slot int, gen uint64, err error) {
	body, err := unframe(path, markerMagic, markerVersion, b)
	if err != nil {
		return 0, 0, err
	}
	if len(body) != 12 {
		return 0, 0, fmt.Errorf("%s: body of %d bytes, want 12: %w", path, len(body), pdc.ErrCorrupt)
	}
	return int(binary.LittleEndian.Uint32(body)), binary.LittleEndian.Uint64(body[4:]), nil
}

func encodeMarker(slot int, gen uint64) []byte {
	body := binary.LittleEndian.AppendUint32(nil, uint32(slot))
	body = binary.LittleEndian.AppendUint64(body, gen)
	return frame(markerMagic, markerVersion, body)
}

// Gen returns the generation of the data dir's copy of slot, as Scan
// reports it: 0 if its marker cannot be read or is of another slot.
func (d DataDir) Gen(slot int) uint64 {
	s, gen, err := d.Marker(d.Slot(slot))
	if err != nil || s != slot {
		return 0
	}
	return gen
}

// SetMarker records slot and gen in slot dir dir (a path in d),
// crash-safely.
func (d DataDir) SetMarker(dir string, slot int, gen uint64) error {
	return atomicfile.WriteFS(d.fs, filepath.Join(dir, markerFile), encodeMarker(slot, gen), 0o600)
}

// ParseDir returns the slot of a slot dir's name, data-<slot>.
func ParseDir(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "data-")
	if !ok || digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || n >= 1<<20 || strconv.Itoa(n) != digits {
		return 0, false
	}
	return n, true
}

// Table is rank 0's record of every slot's generation: the epoch of the
// last start that held it. A copy of a slot older than its generation is
// out of date.
type Table struct {
	Epoch uint64
	Gens  map[int]uint64
	// Owed are, for each slot missing at the last start, the data dirs
	// that may keep dims cuts owed to it (owed.go), its holder's first,
	// where they are kept while it stays missing: a start that finds the
	// slot again serves it only once it has the cuts of every one.
	Owed map[int][]DirSeen
}

// DirSeen is a data dir as a start saw it.
type DirSeen struct {
	ID   string // its datadir-id
	Host string // of the server that reported it ("" if unknown)
	Path string // as that server named it ("" if unknown)
}

// String names the dir for the operator.
func (d DirSeen) String() string {
	s := "data dir " + d.ID
	if d.Path != "" {
		s = "data dir " + d.Path
	}
	if d.Host != "" {
		s += " on host " + d.Host
	}
	return s
}

// Table reads the data dir's slot table; a dir without one has the empty
// table.
func (d DataDir) Table() (Table, error) {
	path := filepath.Join(d.path, tableFile)
	t := Table{Gens: map[int]uint64{}, Owed: map[int][]DirSeen{}}
	b, err := d.readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return t, fmt.Errorf("slot table: %w", err)
	}
	return decodeTable(path, b)
}

// decodeTable decodes a table file: entries in increasing slot order.
func decodeTable(path string, b []byte) (Table, error) {
	t := Table{Gens: map[int]uint64{}, Owed: map[int][]DirSeen{}}
	body, version, err := unframeUpTo(path, tableMagic, 1, tableVersion, b)
	if err != nil {
		return t, fmt.Errorf("slot table: %w", err)
	}
	bad := func(why string, args ...any) error {
		return fmt.Errorf("slot table %s: %s: %w", path, fmt.Sprintf(why, args...), pdc.ErrCorrupt)
	}
	if len(body) < 12 {
		return t, bad("body of %d bytes", len(body))
	}
	t.Epoch = binary.LittleEndian.Uint64(body)
	n := int(binary.LittleEndian.Uint32(body[8:]))
	if n > (len(body)-12)/12 || version == 1 && len(body) != 12+12*n {
		return t, bad("%d entries in %d bytes", n, len(body))
	}
	last := -1
	for i := range n {
		e := body[12+12*i:]
		slot := int(binary.LittleEndian.Uint32(e))
		if slot <= last {
			return t, bad("entry %d (slot %d) out of order", i, slot)
		}
		last = slot
		t.Gens[slot] = binary.LittleEndian.Uint64(e[4:])
	}
	if version == 1 {
		return t, nil
	}
	r := &reader{b: body[12+12*n:]}
	m := r.u32()
	if r.err == nil && m == 0 {
		// Written as version 1.
		return t, bad("version 2 without owed cuts")
	}
	last = -1
	for i := 0; i < m && r.err == nil; i++ {
		slot, k := r.u32(), r.u32()
		if r.err == nil && (slot <= last || k == 0 || k > len(r.b)) {
			return t, bad("owed entry %d (slot %d, %d dirs) out of order or empty", i, slot, k)
		}
		last = slot
		dirs := make([]DirSeen, 0, min(k, len(r.b)))
		for range k {
			dirs = append(dirs, DirSeen{ID: r.str(), Host: r.str(), Path: r.str()})
		}
		t.Owed[slot] = dirs
	}
	if r.err != nil || len(r.b) != 0 {
		return t, bad("the data dirs of owed cuts do not fit its %d bytes", len(body))
	}
	return t, nil
}

// reader reads the fields of a file's body; the first one that does not
// fit sets err, and every read after it returns zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) u32() int {
	if r.err != nil || len(r.b) < 4 {
		r.err = pdc.ErrCorrupt
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return int(v)
}

func (r *reader) str() string {
	n := r.u32()
	if r.err != nil || n > len(r.b) {
		r.err = pdc.ErrCorrupt
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// SetTable replaces the data dir's slot table, crash-safely.
func (d DataDir) SetTable(t Table) error {
	if err := atomicfile.WriteFS(d.fs, filepath.Join(d.path, tableFile), encodeTable(t), 0o600); err != nil {
		return fmt.Errorf("slot table: %w", err)
	}
	return nil
}

func encodeTable(t Table) []byte {
	body := binary.LittleEndian.AppendUint64(nil, t.Epoch)
	body = binary.LittleEndian.AppendUint32(body, uint32(len(t.Gens)))
	for _, k := range slices.Sorted(maps.Keys(t.Gens)) {
		body = binary.LittleEndian.AppendUint32(body, uint32(k))
		body = binary.LittleEndian.AppendUint64(body, t.Gens[k])
	}
	owed := 0
	for _, dirs := range t.Owed {
		if len(dirs) > 0 {
			owed++
		}
	}
	if owed == 0 {
		return frame(tableMagic, 1, body)
	}
	body = binary.LittleEndian.AppendUint32(body, uint32(owed))
	str := func(s string) {
		body = binary.LittleEndian.AppendUint32(body, uint32(len(s)))
		body = append(body, s...)
	}
	for _, k := range slices.Sorted(maps.Keys(t.Owed)) {
		dirs := t.Owed[k]
		if len(dirs) == 0 {
			continue
		}
		body = binary.LittleEndian.AppendUint32(body, uint32(k))
		body = binary.LittleEndian.AppendUint32(body, uint32(len(dirs)))
		for _, d := range dirs {
			str(d.ID)
			str(d.Host)
			str(d.Path)
		}
	}
	return frame(tableMagic, tableVersion, body)
}

// Scan lists what the data dir holds: its id and absolute path, its
// complete slot dirs with their generations, its metadata stores
// (meta-<rank>), and the highest id sequence number among the object
// files of those slots. It first removes what a start killed midway
// left: partial copies being received (.incoming) and copies already
// committed by their new holder (.sent).
// A slot dir whose marker cannot be read is reported as generation 0 (so
// never preferred to a readable copy), with a warning in warns.
func (d DataDir) Scan() (inv wire.SlotInventory, warns []string, err error) {
	if inv.DirID, err = d.ID(); err != nil {
		return inv, nil, err
	}
	if inv.Path, err = filepath.Abs(d.path); err != nil {
		inv.Path = d.path
	}
	if inv.Stores, err = d.Stores(); err != nil {
		return inv, nil, fmt.Errorf("%w (remove the file to start without it: the start then expects no metadata store, as a first one)", err)
	}
	names, err := d.fs.List(d.path)
	if err != nil {
		return inv, nil, fmt.Errorf("scan data dir: %w", err)
	}
	for _, name := range names {
		path := filepath.Join(d.path, name)
		if base, ok := strings.CutSuffix(name, ".cuts"); ok {
			if slot, ok := ParseDir(base); ok && !d.isDir(path) {
				inv.Owed = append(inv.Owed, d.owedFile(slot))
			}
			continue
		}
		if !d.isDir(path) {
			continue
		}
		if base, ok := strings.CutSuffix(name, ".incoming"); ok {
			if _, ok := ParseDir(base); ok {
				if err := d.fs.RemoveAll(path); err != nil {
					return inv, warns, fmt.Errorf("remove a partial copy: %w", err)
				}
			}
			continue
		}
		if base, ok := strings.CutSuffix(name, ".sent"); ok {
			if _, ok := ParseDir(base); ok {
				if err := d.fs.RemoveAll(path); err != nil {
					return inv, warns, fmt.Errorf("remove a sent copy: %w", err)
				}
			}
			continue
		}
		if r, ok := strings.CutPrefix(name, "meta-"); ok {
			adopted := false
			if i := strings.Index(r, ".adopted-"); i >= 0 {
				// Renamed once adopted (metaserver.Adopt).
				r, adopted = r[:i], true
			}
			if n, err := strconv.Atoi(r); err == nil && n >= 0 && strconv.Itoa(n) == r {
				if !adopted {
					inv.MetaDirs = append(inv.MetaDirs, uint64(n))
				}
				id, err := metastore.ReadIdentity(d.fs, path)
				switch {
				case err == nil:
					inv.MetaStores = append(inv.MetaStores, wire.MetaStoreSeen{Rank: uint64(n), ID: id.ID, Adopted: adopted})
				case !errors.Is(err, fs.ErrNotExist):
					warns = append(warns, fmt.Sprintf("metadata store %s: %v", path, err))
				}
			}
			continue
		}
		slot, ok := ParseDir(name)
		if !ok {
			continue
		}
		s, gen, err := d.Marker(path)
		if err == nil && s != slot {
			err = fmt.Errorf("%s: its marker is of slot %d: %w", path, s, pdc.ErrCorrupt)
		}
		if err != nil {
			warns = append(warns, fmt.Sprintf("slot dir %s taken as generation 0: %v", path, err))
			gen = 0
		}
		inv.Copies = append(inv.Copies, wire.SlotCopy{Slot: uint32(slot), Gen: gen})
		seq, err := d.maxSeq(path)
		if err != nil {
			return inv, warns, err
		}
		inv.MaxSeq = max(inv.MaxSeq, seq)
	}
	return inv, warns, nil
}

// maxSeq returns the highest id sequence number among the object files
// in the slot dir at path (0: none).
func (d DataDir) maxSeq(path string) (uint64, error) {
	names, err := d.fs.List(path)
	if err != nil {
		return 0, fmt.Errorf("scan data slot %s: %w", path, err)
	}
	var top uint64
	for _, name := range names {
		if id, ok := regionstore.ObjectOf(name); ok {
			top = max(top, uint64(placement.SeqOf(id)))
		}
	}
	return top, nil
}

// SetAside renames slot's copy out of the way, keeping it, and returns
// its new path.
func (d DataDir) SetAside(slot int, gen, epoch uint64) (string, error) {
	from := d.Slot(slot)
	to := fmt.Sprintf("%s.aside-%d-%d", from, gen, epoch)
	for i := 1; ; i++ {
		if _, err := d.fs.Stat(to); errors.Is(err, fs.ErrNotExist) {
			break
		}
		to = fmt.Sprintf("%s.aside-%d-%d.%d", from, gen, epoch, i)
	}
	if err := d.fs.Rename(from, to); err != nil {
		return "", fmt.Errorf("set aside data slot %d: %w", slot, err)
	}
	return to, d.fs.SyncDir(d.path)
}
