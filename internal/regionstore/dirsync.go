package regionstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/pdcgo/pdc/internal/vfs"
)

// errNameLost says that a file's name was made (renamed into place)
// before a failed fsync of its directory: no fsync can make it durable
// now, only a new name (dirFS).
var errNameLost = errors.New("a failed fsync of its directory may have dropped its name, which a later fsync would not write")

// dirFS is the store's file system, with a memory of what the fsyncs of
// its directory made durable. Linux may drop a directory's dirty state
// when its writeback fails, as it does a file's pages: a later fsync of
// the directory then succeeds without writing the names changed before
// the failure, and a power loss takes them (the file is gone, or the one
// a rename replaced is back). So a name made before a failed fsync, and
// not yet durable then, is lost to every later one: syncName says so
// (errNameLost), and the store makes the name anew, the file written
// again and renamed into place (Store.syncName), which a later fsync
// does write. Only the names of files renamed into place are tracked:
// the store makes its files so (replaceFile). A removal lost brings back
// the files of a deleted object, an orphan that its data server refuses
// and a scrub reports (record 0016). Fsyncs of a directory run one at a
// time, so that each failure is ordered against the names it may have
// dropped. Safe for concurrent use.
type dirFS struct {
	vfs.FS
	syncMu sync.Mutex // held through each SyncDir
	mu     struct {
		sync.Mutex
		gen   uint64            // names made so far
		dirty map[string]uint64 // names made since the last good fsync, with their gen
		lost  map[string]error  // names a failed fsync may have dropped, with its error
	}
}

func newDirFS(fsys vfs.FS) *dirFS {
	d := &dirFS{FS: fsys}
	d.mu.dirty = map[string]uint64{}
	d.mu.lost = map[string]error{}
	return d
}

// made notes that path's name was made now; gone that it was removed.
func (d *dirFS) made(path string) {
	d.mu.Lock()
	d.mu.gen++
	d.mu.dirty[path] = d.mu.gen
	delete(d.mu.lost, path)
	d.mu.Unlock()
}

func (d *dirFS) gone(path string) {
	d.mu.Lock()
	delete(d.mu.dirty, path)
	delete(d.mu.lost, path)
	d.mu.Unlock()
}

func (d *dirFS) Rename(oldname, newname string) error {
	if err := d.FS.Rename(oldname, newname); err != nil {
		return err
	}
	d.gone(oldname)
	d.made(newname)
	return nil
}

func (d *dirFS) Remove(name string) error {
	err := d.FS.Remove(name)
	if err == nil {
		d.gone(name)
	}
	return err
}

func (d *dirFS) RemoveAll(name string) error {
	err := d.FS.RemoveAll(name)
	if err == nil {
		d.gone(name)
	}
	return err
}

// SyncDir fsyncs dir. Names of dir made before it began are durable if it
// succeeds, and lost (to every later fsync) if it fails; so are those
// made while it ran, if it fails.
func (d *dirFS) SyncDir(dir string) error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	d.mu.Lock()
	gen := d.mu.gen
	d.mu.Unlock()
	err := d.FS.SyncDir(dir)
	dir = filepath.Clean(dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	for p, g := range d.mu.dirty {
		switch {
		case filepath.Dir(p) != dir:
		case err != nil:
			d.mu.lost[p] = err
			delete(d.mu.dirty, p)
		case g <= gen:
			delete(d.mu.dirty, p)
		}
	}
	return err
}

// syncName makes path's name durable: it fsyncs its directory (at least
// once: a name made before the store opened is not tracked), and fails,
// wrapping errNameLost, if a failed fsync may have dropped the name.
func (d *dirFS) syncName(path string) error {
	for {
		if err := d.lostErr(path); err != nil {
			return err
		}
		if err := d.SyncDir(filepath.Dir(path)); err != nil {
			return err
		}
		d.mu.Lock()
		_, dirty := d.mu.dirty[path]
		d.mu.Unlock()
		if !dirty {
			return d.lostErr(path)
		}
		// Made again while the fsync ran: the next one covers it.
	}
}

func (d *dirFS) lostErr(path string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.mu.lost[path]; err != nil {
		return fmt.Errorf("%s: %w (%w)", path, errNameLost, err)
	}
	return nil
}

// pending reports whether path's name was made since the last fsync of
// its directory that made it durable, or was lost.
func (d *dirFS) pending(path string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, dirty := d.mu.dirty[path]
	return dirty || d.mu.lost[path] != nil
}

// syncName makes path's name durable on fsys: through dirFS.syncName when
// fsys is the store's, else by an fsync of its directory.
func syncName(fsys vfs.FS, path string) error {
	if d, ok := fsys.(*dirFS); ok {
		return d.syncName(path)
	}
	return fsys.SyncDir(filepath.Dir(path))
}
