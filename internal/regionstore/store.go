package regionstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/bits"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// Mode is how an object's data is laid out in its file.
type Mode uint8

const (
	// ByOffset places every element at its canonical row-major offset.
	ByOffset Mode = 1
	// ByRegion appends each written region to a log indexed by box.
	ByRegion Mode = 2
)

func (m Mode) String() string {
	switch m {
	case ByOffset:
		return "offset"
	case ByRegion:
		return "region"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode parses "offset" or "region".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "offset":
		return ByOffset, nil
	case "region":
		return ByRegion, nil
	}
	return 0, fmt.Errorf("unknown storage mode %q (want offset or region): %w", s, pdc.ErrInvalid)
}

// Layout is what the store needs to know of an object.
type Layout struct {
	Dims []uint64 // the object's dims now; the first may grow
	Elem int      // bytes per element
	Mode Mode
	// Version orders dims changes: 0 for the dims an object was created
	// with, one more for each change (the metadata server's count). A
	// call with dims older than the newest applied to the object, that
	// would change its files, is refused with pdc.ErrStale: applying them
	// would cut or relayout the object back, losing what was written
	// under the newer dims.
	Version uint64
}

// Options configure a Store.
type Options struct {
	// Dir holds the object files. Required; created if missing.
	Dir string
	// Sync fsyncs each write before Write returns.
	Sync bool
	// FS holds the files; nil means the operating system's.
	FS vfs.FS
}

// Store keeps objects' data in files under one directory: by offset, one
// %016x.off file per object; by region, a %016x.reg log and its %016x.idx
// index checkpoint. See offset.go and logfile.go for the formats.
//
// Safe for concurrent use: calls on different objects run in parallel,
// reads of one object run in parallel with each other, and a write or a
// change of dims has its object to itself.
type Store struct {
	opts   Options
	fs     *dirFS
	files  *fileCache
	closed atomic.Bool
	// objects counts the objects that have files; written the bytes of
	// regions stored since Open. Kept on the create, write and delete
	// paths so that Stats reads them without walking the objects.
	objects atomic.Int64
	written atomic.Uint64

	mu struct {
		sync.Mutex
		objects map[uint64]*object // guarded by mu
		// onDisk holds the objects that had files when the store opened
		// (listed once, then only shrinking). Files are made only through
		// an object's entry in objects, so an object with neither has no
		// files: deleting it takes no system call. Guarded by mu.
		onDisk map[uint64]struct{}
	}
}

// object is the state of one object's files. Its fields are guarded by mu.
type object struct {
	id     uint64
	mu     sync.RWMutex
	loaded bool // the files were looked for since Open or Delete
	mode   Mode // 0: the object has no files
	off    *offsetFile
	reg    *regionLog
	maps   mapState // the by-offset file's mapping, for views
	// version is the newest Layout.Version applied, kept in the file's
	// dims mark as well (raiseVersion).
	version uint64
	// known is version+1 once the object is loaded, 0 before (or for a
	// version too large to count so): Version reads it without waiting
	// for mu, which a write, a relayout or a verify holds through its
	// I/O. Written with mu held exclusively.
	known atomic.Uint64
	// gone: the object was deleted (Bury); every call on it fails.
	gone bool
	// entrySynced: a flush synced the directory since Open, so the
	// by-offset file's name is durable too, not only its bytes.
	entrySynced bool
}

// Open opens the store in opts.Dir. Objects' files are read when first
// used.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("region store: no directory given: %w", pdc.ErrInvalid)
	}
	fsys := vfs.OrDefault(opts.FS)
	if err := fsys.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("region store: %w", err)
	}
	onDisk, unsynced, err := listObjects(fsys, opts.Dir)
	if err != nil {
		return nil, err
	}
	dfs := newDirFS(fsys)
	s := &Store{opts: opts, fs: dfs, files: newFileCache(dfs, maxOpenFiles)}
	for _, name := range unsynced {
		s.files.inheritUnsynced(filepath.Join(opts.Dir, name))
	}
	s.mu.objects = map[uint64]*object{}
	s.mu.onDisk = onDisk
	s.objects.Store(int64(len(onDisk)))
	return s, nil
}

// Stats is what a store holds, for metrics.
type Stats struct {
	// Objects is the objects that have files.
	Objects int64
	// WrittenBytes is the bytes of regions stored since Open (a region
	// written twice counts twice).
	WrittenBytes uint64
}

// Stats returns the store's counts; it takes no lock.
func (s *Store) Stats() Stats {
	return Stats{Objects: s.objects.Load(), WrittenBytes: s.written.Load()}
}

// listObjects returns the objects that have files in dir, by the names
// path gives them: %016x then an extension; and the names of the files
// whose fsync failed (their markers' names without unsyncedExt).
func listObjects(fsys vfs.FS, dir string) (map[uint64]struct{}, []string, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("region store: list %s: %w", dir, err)
	}
	out := map[uint64]struct{}{}
	var unsynced []string
	for _, name := range names {
		if len(name) > 17 && name[16] == '.' {
			if id, err := strconv.ParseUint(name[:16], 16, 64); err == nil {
				out[id] = struct{}{}
				if base, ok := strings.CutSuffix(name, unsyncedExt); ok {
					unsynced = append(unsynced, base)
				}
			}
		}
	}
	return out, unsynced, nil
}

func (s *Store) path(obj uint64, ext string) string {
	return filepath.Join(s.opts.Dir, fmt.Sprintf("%016x%s", obj, ext))
}

var errClosed = fmt.Errorf("region store: %w", pdc.ErrClosed)

func (s *Store) object(obj uint64) (*object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, errClosed
	}
	o := s.mu.objects[obj]
	if o == nil {
		o = &object{id: obj}
		s.mu.objects[obj] = o
	}
	return o, nil
}

func check(obj uint64, l Layout, box region.Box, n int) error {
	if err := box.Within(l.Dims); err != nil {
		return fmt.Errorf("object %d: %w", obj, err)
	}
	if l.Elem <= 0 {
		return fmt.Errorf("object %d: element size %d: %w", obj, l.Elem, pdc.ErrInvalid)
	}
	if l.Mode != ByOffset && l.Mode != ByRegion {
		return fmt.Errorf("object %d: unknown storage mode %d: %w", obj, uint8(l.Mode), pdc.ErrInvalid)
	}
	if l.Mode == ByOffset {
		if _, err := byteEnd(l.Dims, box, l.Elem); err != nil {
			return fmt.Errorf("object %d: %w", obj, err)
		}
	}
	if hi, lo := bits.Mul64(box.Volume(), uint64(l.Elem)); hi != 0 || uint64(n) != lo {
		return fmt.Errorf("object %d region %v: buffer of %d bytes, want %d elements of %d: %w", obj, box, n, box.Volume(), l.Elem, pdc.ErrInvalid)
	}
	return nil
}

// load finds the object's files once. Requires o.mu held exclusively.
func (s *Store) load(o *object) error {
	if o.loaded {
		return nil
	}
	for _, ext := range []string{".off.tmp", ".reg.tmp", ".idx.tmp"} {
		// Left by a crash before a rename: never the only copy.
		if err := s.fs.Remove(s.path(o.id, ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("region store: object %d: %w", o.id, err)
		}
	}
	offPath, regPath := s.path(o.id, ".off"), s.path(o.id, ".reg")
	_, offErr := s.fs.Stat(offPath)
	_, regErr := s.fs.Stat(regPath)
	for _, err := range []error{offErr, regErr} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("region store: object %d: %w", o.id, err)
		}
	}
	switch {
	case offErr == nil && regErr == nil:
		return fmt.Errorf("region store: object %d has both %s and %s: %w", o.id, offPath, regPath, pdc.ErrCorrupt)
	case offErr == nil:
		err := s.withFile(offPath, func(f vfs.File) (err error) {
			o.off, err = loadOffsetFile(offPath, f)
			return err
		})
		if err != nil {
			return fmt.Errorf("region store: object %d: %w", o.id, err)
		}
		o.mode = ByOffset
	case regErr == nil:
		// A log whose fsync failed is rewritten by its first durable
		// step rather than fsynced here.
		durable := s.opts.Sync && s.files.unsynced(regPath) == nil
		err := s.withFile(regPath, func(f vfs.File) (err error) {
			o.reg, err = loadRegionLog(s.fs, regPath, f, durable)
			return err
		})
		if err != nil {
			return fmt.Errorf("region store: object %d: %w", o.id, err)
		}
		o.mode = ByRegion
	}
	if m := o.mark(); m != nil {
		o.version = max(o.version, m.version)
	}
	o.loaded = true
	o.known.Store(o.version + 1)
	return nil
}

func (s *Store) withFile(path string, fn func(f vfs.File) error) error {
	of, err := s.files.acquire(path)
	if err != nil {
		return err
	}
	defer s.files.release(of)
	return fn(of.f)
}

// conforms checks a call's layout against what the object's files say.
// Requires o.mu held, and the object loaded.
func conforms(o *object, l Layout) error {
	if o.gone {
		return errGone(o.id)
	}
	var elem, ndim int
	switch o.mode {
	case 0:
		return nil
	case ByOffset:
		elem, ndim = o.off.elem, o.off.ndim
	case ByRegion:
		elem, ndim = o.reg.elem, o.reg.ndim
	}
	if l.Mode != o.mode {
		return fmt.Errorf("region store: object %d is stored by %s, not by %s: %w", o.id, o.mode, l.Mode, pdc.ErrInvalid)
	}
	if l.Elem != elem {
		return fmt.Errorf("region store: object %d has %d-byte elements, not %d: %w", o.id, elem, l.Elem, pdc.ErrInvalid)
	}
	if len(l.Dims) != ndim {
		return fmt.Errorf("region store: object %d has %d dims, not %d (dims %v): %w", o.id, ndim, len(l.Dims), l.Dims, pdc.ErrInvalid)
	}
	return nil
}

// needsDims reports whether dims change what the object's files hold.
// Requires o.mu held, and the object loaded.
func needsDims(o *object, dims []uint64) bool {
	switch o.mode {
	case ByOffset:
		return o.off.needsRelayout(dims) || o.off.needsCut(dims)
	case ByRegion:
		return o.reg.outside(dims)
	}
	return false
}

// setDims brings the object's files to dims, and, with need bytes of
// data to come in a by-offset file, to a table that holds them. Requires
// o.mu held exclusively.
func (s *Store) setDims(o *object, dims []uint64, need int64) error {
	switch o.mode {
	case ByOffset:
		path := o.off.path
		if o.off.needsRelayout(dims) {
			n, err := o.off.relayoutNeeds(dims)
			if err != nil {
				return fmt.Errorf("region store: object %d: %w", o.id, err)
			}
			need = max(need, n)
		}
		if o.off.needsRelayout(dims) || need > o.off.blocks*blockSize {
			blocks := o.off.blocks
			if need > blocks*blockSize {
				blocks = tableFor(need)
			}
			o.maps.drop() // the rename replaces the file under the mapping
			if err := s.files.drop(path); err != nil {
				return fmt.Errorf("region store: object %d: %s: %w", o.id, path, err)
			}
			// The relayout reads through its own descriptor: the cached one
			// is dropped because the rename replaces the file under it.
			old, err := s.fs.Open(path)
			if err != nil {
				return fmt.Errorf("region store: object %d: %w", o.id, err)
			}
			n, err := o.off.relayout(s.fs, old, dims, blocks)
			_ = old.Close()
			if n != nil {
				// In place, even if its rename may not be durable: the
				// object is laid out by it from now on. Its name is
				// durable only if the directory's fsync after the
				// rename worked: else a power loss brings the old file
				// back, and a flush or a cut must fsync it again.
				o.off = n
				o.entrySynced = err == nil
			}
			if err != nil {
				return fmt.Errorf("region store: object %d: relayout %s to dims %v: %w", o.id, path, dims, err)
			}
		}
		if o.off.needsCut(dims) {
			o.maps.drop() // a mapping past the new end would fault
			err := s.withFile(path, func(f vfs.File) error {
				if err := o.off.cut(f, dims); err != nil {
					return err
				}
				if s.opts.Sync {
					return f.Sync()
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("region store: object %d: cut %s to dims %v: %w", o.id, path, dims, err)
			}
		}
	case ByRegion:
		err := s.withFile(o.reg.path, func(f vfs.File) error {
			if err := o.reg.setDims(f, dims); err != nil {
				return err
			}
			if s.opts.Sync {
				return f.Sync()
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("region store: object %d: %s: dims %v: %w", o.id, o.reg.path, dims, err)
		}
	}
	return nil
}

// create makes the object's first file. Requires o.mu held exclusively.
func (s *Store) create(o *object, l Layout, need int64) error {
	switch l.Mode {
	case ByOffset:
		path := s.path(o.id, ".off")
		n := newOffsetFile(newVersion, path, l.Elem, l.Dims, tableFor(need))
		n.mark = newMark(markAt, max(o.version, l.Version))
		err := replaceFile(s.fs, path, s.opts.Sync, func(f vfs.File) error {
			_, err := f.WriteAt(n.encodeHeader(), 0)
			return err
		})
		if err != nil {
			return fmt.Errorf("region store: object %d: create %s: %w", o.id, path, err)
		}
		o.off = n
	case ByRegion:
		path := s.path(o.id, ".reg")
		r, err := createRegionLog(s.fs, path, l.Elem, len(l.Dims), max(o.version, l.Version), s.opts.Sync)
		if err != nil {
			return fmt.Errorf("region store: object %d: create %s: %w", o.id, path, err)
		}
		o.reg = r
	}
	o.mode = l.Mode
	o.entrySynced = s.opts.Sync // replaceFile synced the directory
	s.objects.Add(1)
	return nil
}

// Write stores data, box's elements in row-major order, as object obj's
// box. It is in the file (in the kernel) when Write returns, so it
// survives the process being killed; with Options.Sync it is on disk.
// The object's mode and element size are fixed by its first write; dims
// may change between calls, and elements inside both the old and the new
// dims keep their values. data is not retained.
func (s *Store) Write(obj uint64, l Layout, box region.Box, data []byte) error {
	if err := check(obj, l, box, len(data)); err != nil {
		return err
	}
	return s.write(obj, l, box, uint64(len(data)), func(f vfs.File, o *object) error {
		if o.mode == ByOffset {
			return o.off.write(f, l.Dims, box, data)
		}
		return o.reg.write(f, box, data)
	})
}

// WriteFrom stores box's elements in row-major order, as Write does,
// reading them from r as they are stored, a bufferful at a time: a write
// whose bytes arrive from a socket is stored as they arrive, from a buffer
// that stays in the CPU cache, instead of being gathered first. A failed
// read of r fails the write; part of it may be stored then, each block
// with its checksum. It reads exactly box's bytes from r unless r fails
// first or the write fails before reading them all (the caller drains
// what is left).
func (s *Store) WriteFrom(obj uint64, l Layout, box region.Box, r io.Reader, buf []byte) error {
	if err := box.Check(); err != nil {
		return fmt.Errorf("object %d: %w", obj, err)
	}
	hi, n := bits.Mul64(box.Volume(), uint64(l.Elem))
	if hi != 0 || n > math.MaxInt {
		return fmt.Errorf("object %d region %v of %d-byte elements: too large: %w", obj, box, l.Elem, pdc.ErrInvalid)
	}
	if err := check(obj, l, box, int(n)); err != nil {
		return err
	}
	buf = buf[:len(buf)&^int(blockSize-1)]
	if len(buf) == 0 {
		return fmt.Errorf("region store: object %d: a write from a stream needs a buffer of a block at least: %w", obj, pdc.ErrInternal)
	}
	return s.write(obj, l, box, n, func(f vfs.File, o *object) error {
		if o.mode == ByOffset {
			return o.off.writeFrom(f, l.Dims, box, r, buf)
		}
		return o.reg.writeFrom(f, box, int64(n), r, buf)
	})
}

// write does what Write and WriteFrom share around store, which puts the
// bytes in the object's open file; n is the region's bytes.
func (s *Store) write(obj uint64, l Layout, box region.Box, n uint64, store func(vfs.File, *object) error) error {
	o, err := s.object(obj)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s.closed.Load() {
		return errClosed
	}
	if err := s.load(o); err != nil {
		return err
	}
	if err := conforms(o, l); err != nil {
		return err
	}
	var need int64
	if l.Mode == ByOffset {
		if need, err = bytesNeeded(l.Dims, box, l.Elem); err != nil {
			return fmt.Errorf("region store: object %d: %w", obj, err)
		}
	}
	if o.mode == 0 {
		if err := s.create(o, l, need); err != nil {
			return err
		}
	}
	if err := stale(o, l); err != nil {
		return err
	}
	if s.opts.Sync {
		// Every durable step of this write would fsync the file.
		if err := s.rewrite(o); err != nil {
			return err
		}
	}
	if err := s.raiseVersion(o, l.Version); err != nil {
		return err
	}
	if err := s.setDims(o, l.Dims, need); err != nil {
		return err
	}
	path := o.off.pathOr(o.reg)
	if s.opts.Sync && !o.entrySynced && s.fs.pending(path) {
		// A write on disk when acknowledged needs its file's name on
		// disk too: made by a relayout or a create whose directory
		// fsync failed, it is not, and a power loss would take the
		// write with the file (or bring back the file it replaced).
		if err := s.syncName(o); err != nil {
			return fmt.Errorf("region store: write object %d region %v: %w", obj, box, err)
		}
	}
	err = s.withFile(path, func(f vfs.File) error {
		err := store(f, o)
		o.maps.written()
		if err == nil && s.opts.Sync {
			err = f.Sync()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("region store: write object %d region %v: %s: %w", obj, box, path, err)
	}
	s.written.Add(n)
	if o.mode == ByRegion && o.reg.size-o.reg.checkpointed > checkpointEvery {
		if err := s.checkpoint(o, s.opts.Sync); err != nil {
			return err
		}
	}
	return nil
}

func (o *offsetFile) pathOr(r *regionLog) string {
	if o != nil {
		return o.path
	}
	return r.path
}

// Read fills into, box's elements in row-major order, with object obj's
// box: every element from the last completed write covering it, zeros
// where none did. An object never written reads as zeros and gets no
// file. Reading with changed dims applies them first, as a write would.
// into is not retained. A block that fails its checksum is an error
// wrapping pdc.ErrCorrupt.
func (s *Store) Read(obj uint64, l Layout, box region.Box, into []byte) error {
	if err := check(obj, l, box, len(into)); err != nil {
		return err
	}
	o, err := s.object(obj)
	if err != nil {
		return err
	}
	o.mu.RLock()
	if !o.loaded || needsDims(o, l.Dims) {
		// Rare: take the object to load it or apply the new dims, then
		// read holding it.
		o.mu.RUnlock()
		o.mu.Lock()
		defer o.mu.Unlock()
		if err := s.applyDimsLocked(o, l); err != nil {
			return err
		}
	} else {
		defer o.mu.RUnlock()
		if err := conforms(o, l); err != nil {
			return err
		}
	}
	if s.closed.Load() {
		return errClosed
	}
	if o.mode == 0 {
		clear(into)
		return nil
	}
	path := o.off.pathOr(o.reg)
	err = s.withFile(path, func(f vfs.File) error {
		if o.mode == ByOffset {
			return o.off.read(f, l.Dims, box, into)
		}
		return o.reg.read(f, box, into)
	})
	if err != nil {
		return fmt.Errorf("region store: read object %d region %v: %s: %w", obj, box, path, err)
	}
	return nil
}

// checkpoint writes a by-region log's index checkpoint, durably (with
// the log fsynced) when asked. Requires o.mu held exclusively.
func (s *Store) checkpoint(o *object, durable bool) error {
	err := s.withFile(o.reg.path, func(f vfs.File) error { return o.reg.checkpoint(f, durable) })
	if err != nil {
		return fmt.Errorf("region store: object %d: checkpoint %s: %w", o.id, o.reg.idxPath, err)
	}
	return nil
}

// Flush fsyncs object obj's files (and, by region, checkpoints its
// index). An object with no files has nothing to flush.
func (s *Store) Flush(obj uint64) error {
	o, err := s.object(obj)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s.closed.Load() {
		return errClosed
	}
	if o.gone {
		return errGone(obj)
	}
	if err := s.load(o); err != nil {
		return err
	}
	return s.flush(o)
}

// flush requires o.mu held exclusively and the object loaded.
func (s *Store) flush(o *object) error {
	if err := s.rewrite(o); err != nil {
		return err
	}
	switch o.mode {
	case ByOffset:
		err := s.withFile(o.off.path, func(f vfs.File) error {
			if err := o.off.pend.clear(f); err != nil {
				return err
			}
			return f.Sync()
		})
		if err != nil {
			return fmt.Errorf("region store: sync object %d: %s: %w", o.id, o.off.path, err)
		}
	case ByRegion:
		if err := s.checkpoint(o, true); err != nil {
			return err
		}
	default:
		return nil
	}
	// A file created without Options.Sync has a name that a power loss
	// may take with it, bytes and all: flushed, it must stay. A log's
	// durable checkpoint fsyncs the directory only when it has a new
	// index to write, which it has not right after a periodic one.
	if err := s.syncName(o); err != nil {
		return fmt.Errorf("region store: sync object %d: %w", o.id, err)
	}
	return nil
}

// syncName makes the name of o's file durable, if nothing did since it
// was created or renamed (o.entrySynced): a power loss would take the
// file with it, or bring back the one a relayout replaced. A name that a
// failed fsync of the directory may have dropped no later fsync writes
// (dirFS): the file is written anew and renamed into place, as after a
// failed fsync of the file. Requires o.mu held exclusively and the object
// to have files.
func (s *Store) syncName(o *object) error {
	if o.entrySynced {
		return nil
	}
	err := s.fs.syncName(o.off.pathOr(o.reg))
	if errors.Is(err, errNameLost) {
		return s.rewriteFile(o, "after a failed fsync of its directory")
	}
	if err != nil {
		return fmt.Errorf("directory %s: %w", s.opts.Dir, err)
	}
	o.entrySynced = true
	return nil
}

// Delete removes every file of object obj; it is not an error if there
// are none.
func (s *Store) Delete(obj uint64) error { return s.DeleteMany([]uint64{obj}) }

// DeleteMany removes every file of the objects objs, as Delete does each,
// with one fsync of the directory for all of them (with Sync).
func (s *Store) DeleteMany(objs []uint64) error {
	for _, obj := range objs {
		if err := s.delete(obj, false); err != nil {
			return err
		}
	}
	if s.opts.Sync && len(objs) > 0 {
		if err := s.fs.SyncDir(s.opts.Dir); err != nil {
			return fmt.Errorf("region store: delete %d objects: %w", len(objs), err)
		}
	}
	return nil
}

// delete is Delete of one object without the directory's fsync, and Bury
// if bury is set.
func (s *Store) delete(obj uint64, bury bool) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return errClosed
	}
	o := s.mu.objects[obj]
	if o == nil {
		// Untouched since Open: no one can make its entry while s.mu is
		// held, and none is made, so that deleting many objects that
		// were never used here costs no memory, and those that had no
		// files at Open no system call.
		var err error
		if _, ok := s.mu.onDisk[obj]; ok {
			if err = s.removeFiles(obj); err == nil {
				delete(s.mu.onDisk, obj)
				s.objects.Add(-1)
			}
		}
		s.mu.Unlock()
		return err
	}
	// An entry never loaded has the files it had at Open: files are
	// made only by a loaded entry.
	_, listed := s.mu.onDisk[obj]
	s.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	if s.closed.Load() {
		return errClosed
	}
	hadFiles := o.mode != 0 || !o.loaded && listed
	o.gone = o.gone || bury
	o.maps.drop()
	err := s.removeFiles(obj)
	o.loaded, o.mode, o.off, o.reg = true, 0, nil, nil
	o.known.Store(o.version + 1)
	if hadFiles {
		// Counted gone even if a file failed to go: the entry says
		// it has none now, and a write makes it anew (and counts it).
		s.objects.Add(-1)
	}
	return err
}

// removeFiles removes object obj's files. The caller keeps others from
// using them: it holds the object's lock, or s.mu for an object that has
// no entry.
func (s *Store) removeFiles(obj uint64) error {
	var errs []error
	for _, ext := range fileExts {
		p := s.path(obj, ext)
		if err := s.files.drop(p); err != nil {
			errs = append(errs, err)
		}
		// Nothing is left to lose; a new file under the name starts
		// with nothing unsynced.
		s.files.clearUnsynced(p)
		if err := s.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("region store: delete object %d: %w", obj, err)
	}
	return nil
}

// Bytes is the disk space object obj's files take (holes not counted).
func (s *Store) Bytes(obj uint64) (int64, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	var n int64
	for _, ext := range []string{".off", ".reg", ".idx"} {
		st, err := s.fs.Stat(s.path(obj, ext))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("region store: object %d: %w", obj, err)
		}
		n += diskBytes(st)
	}
	return n, nil
}

// Close fsyncs every object's files, checkpoints by-region indexes and
// closes every file. It is idempotent; other calls after it return an
// error wrapping pdc.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed.Swap(true) {
		s.mu.Unlock()
		return nil
	}
	objs := make([]*object, 0, len(s.mu.objects))
	for _, o := range s.mu.objects {
		objs = append(objs, o)
	}
	s.mu.objects = nil
	s.mu.Unlock()
	var errs []error
	for _, o := range objs {
		// Taking the lock waits out a call in progress; calls after it
		// see the store closed.
		o.mu.Lock()
		if o.loaded {
			if err := s.flush(o); err != nil {
				errs = append(errs, err)
			}
		}
		o.maps.drop()
		o.mu.Unlock()
	}
	if err := s.files.closeAll(); err != nil {
		errs = append(errs, fmt.Errorf("region store: close: %w", err))
	}
	return errors.Join(errs...)
}
