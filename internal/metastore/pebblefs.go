package metastore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc/internal/vfs"
)

// pebbleFS gives pebble the store's vfs.FS, and keeps a full disk from
// killing the server.
//
// Pebble treats a failed write of its MANIFEST, OPTIONS or marker files as
// fatal (it cannot tell whether a version edit landed) and exits the
// process. A failed write of a table (a flush or a compaction) it reports
// and retries at once, in a loop that never pauses. So:
//
//   - a write of one of those critical files that fails is retried here,
//     after a pause that doubles up to a second, until it succeeds: the
//     flush or compaction waits for space instead of ending the process
//     (while pebble opens, for half a minute at most);
//   - a failed write of a table marks the store as failing, which refuses
//     commits (failing); the next table creation waits out the same
//     pause, so the retries do not spin. A table written whole clears the
//     mark.
//
// A commit refused while the mark is set fails with the write's error
// (ENOSPC: pdc.ErrNoSpace to the client) rather than filling memtables
// that cannot be flushed, after which pebble would stall every commit. A
// refused commit first probes whether space came back (a small file
// allocated and removed), so that writes resume once space is freed even
// if pebble has nothing to retry.
type pebbleFS struct {
	fs  vfs.FS
	dir string

	closing     chan struct{}
	closeOnce   sync.Once
	openingDone chan struct{} // closed once pebble.Open has returned

	mu      sync.Mutex
	err     error         // the failing write, nil when none; guarded by mu
	errCh   chan struct{} // closed and replaced when err is set; guarded by mu
	pause   time.Duration // the next pause before a retry; guarded by mu
	retries int           // critical writes waiting for space now; guarded by mu
}

const (
	minPause = 10 * time.Millisecond
	maxPause = time.Second
)

func newPebbleFS(fsys vfs.FS, dir string) *pebbleFS {
	return &pebbleFS{fs: fsys, dir: dir, closing: make(chan struct{}), openingDone: make(chan struct{}), errCh: make(chan struct{})}
}

// opened says pebble.Open has returned: critical writes are retried from
// now on.
func (p *pebbleFS) opened() { close(p.openingDone) }

// close ends the pauses of tables retried. Critical writes still retry
// (pebble cannot take their failure), with pauses of their own.
func (p *pebbleFS) close() { p.closeOnce.Do(func() { close(p.closing) }) }

func (p *pebbleFS) isOpening() bool {
	select {
	case <-p.openingDone:
		return false
	default:
		return true
	}
}

// failing returns the error of the write that failed last if no table has
// been written since; nil otherwise. When one has failed, it first checks
// whether space came back.
func (p *pebbleFS) failing() error {
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err == nil {
		return nil
	}
	if p.probe() {
		p.mu.Lock()
		if p.retries == 0 {
			p.err, p.pause = nil, 0
		}
		err = p.err
		p.mu.Unlock()
	}
	return err
}

// probe reports whether a small file can be allocated in the store's
// directory now.
func (p *pebbleFS) probe() bool { return p.probeErr() == nil }

func (p *pebbleFS) setErr(err error) {
	p.mu.Lock()
	p.setErrLocked(err)
	p.mu.Unlock()
}

func (p *pebbleFS) setErrLocked(err error) {
	p.err = err
	close(p.errCh)
	p.errCh = make(chan struct{})
}

// errNow returns a channel closed when a write fails next, and the
// failing write's error, if any.
func (p *pebbleFS) errNow() (<-chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errCh, p.err
}

// probeErr is probe's error: nil if a small file can be allocated.
func (p *pebbleFS) probeErr() error {
	name := filepath.Join(p.dir, "space.probe")
	f, err := p.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.Fallocate(0, 1<<20)
	if errors.Is(err, errors.ErrUnsupported) {
		_, err = f.WriteAt(zeroBlock[:64<<10], 0)
	}
	f.Close()
	_ = p.fs.Remove(name)
	return err
}

func (p *pebbleFS) clearErr() {
	p.mu.Lock()
	if p.retries == 0 {
		p.err, p.pause = nil, 0
	}
	p.mu.Unlock()
}

// wait pauses before a retry, longer each time, until the pause ends or,
// with stop, the store closes.
func (p *pebbleFS) wait(stop bool) {
	p.mu.Lock()
	p.pause = min(max(2*p.pause, minPause), maxPause)
	d := p.pause
	p.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	var closing <-chan struct{}
	if stop {
		closing = p.closing
	}
	select {
	case <-t.C:
	case <-closing:
	}
}

// critical reports whether pebble takes a failed write of name as fatal.
func (p *pebbleFS) critical(name string) bool {
	base := filepath.Base(name)
	return p.own(name) && !strings.HasSuffix(base, ".sst") && !strings.HasSuffix(base, ".blob")
}

// own reports whether name is the store's directory or in it. Pebble
// writes elsewhere only for a checkpoint, whose failures it returns to
// the caller rather than ending the process: retrying them would hang
// the checkpoint (and refuse every commit) until the disk took them, and
// a failed fsync of one would stop the store's writes until a restart.
// Nor does a failed write there say the store's own disk is full.
func (p *pebbleFS) own(name string) bool {
	rel, err := filepath.Rel(p.dir, name)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// retry runs op, a write of a critical file, until it succeeds. While
// pebble opens (which writes its MANIFEST too, and may end the process on
// a failure) it gives up after openTries, so that a server cannot hang in
// its start on a disk that stays full: the start then fails.
func (p *pebbleFS) retry(name string, op func() error) error {
	err := op()
	if err == nil {
		return nil
	}
	p.mu.Lock()
	p.retries++
	p.setErrLocked(fmt.Errorf("metadata store: pebble cannot write %s: %w", name, err))
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.retries--
		p.mu.Unlock()
	}()
	for try := 1; ; try++ {
		if try > openTries && p.isOpening() {
			return err
		}
		p.wait(false)
		if err = op(); err == nil {
			return nil
		}
	}
}

// openTries bounds the retries of a critical write while pebble opens:
// with the pauses doubling up to a second, about half a minute.
const openTries = 36

// stuck fails every later commit with err and never returns: pebble
// cannot go on past a failed fsync of its MANIFEST, and must not end the
// process over it either.
func (p *pebbleFS) stuck(err error) {
	p.mu.Lock()
	p.retries++ // never given back: failing stays set
	p.setErrLocked(err)
	p.mu.Unlock()
	select {}
}

func (p *pebbleFS) wrap(f vfs.File, name string) *pebbleFile {
	return &pebbleFile{p: p, f: f, name: name, critical: p.critical(name), foreign: !p.own(name)}
}

func (p *pebbleFS) Create(name string, _ pebblevfs.DiskWriteCategory) (pebblevfs.File, error) {
	if !p.critical(name) && p.own(name) {
		p.mu.Lock()
		failed := p.err != nil
		p.mu.Unlock()
		if failed {
			p.wait(true) // a retried flush or compaction does not spin
		}
	}
	var f vfs.File
	create := func() error {
		// A new inode, as pebble asks: a hard link to the old file (a
		// checkpoint's) must keep its contents.
		if err := p.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		var err error
		f, err = p.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		return err
	}
	var err error
	if p.critical(name) {
		err = p.retry(name, create)
	} else if err = create(); err != nil && p.own(name) {
		p.setErr(fmt.Errorf("metadata store: create %s: %w", name, err))
	}
	if err != nil {
		return nil, err
	}
	return p.wrap(f, name), nil
}

func (p *pebbleFS) Link(oldname, newname string) error { return p.fs.Link(oldname, newname) }

func (p *pebbleFS) Open(name string, opts ...pebblevfs.OpenOption) (pebblevfs.File, error) {
	f, err := p.fs.Open(name)
	if err != nil {
		return nil, err
	}
	pf := p.wrap(f, name)
	for _, o := range opts {
		o.Apply(pf)
	}
	return pf, nil
}

func (p *pebbleFS) OpenReadWrite(name string, _ pebblevfs.DiskWriteCategory, opts ...pebblevfs.OpenOption) (pebblevfs.File, error) {
	f, err := p.fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	pf := p.wrap(f, name)
	for _, o := range opts {
		o.Apply(pf)
	}
	return pf, nil
}

func (p *pebbleFS) OpenDir(name string) (pebblevfs.File, error) {
	st, err := p.fs.Stat(name)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: unix.ENOTDIR}
	}
	return &pebbleDir{p: p, name: name}, nil
}

func (p *pebbleFS) Remove(name string) error    { return p.fs.Remove(name) }
func (p *pebbleFS) RemoveAll(name string) error { return p.fs.RemoveAll(name) }

func (p *pebbleFS) Rename(oldname, newname string) error {
	if p.critical(newname) {
		return p.retry(newname, func() error { return p.fs.Rename(oldname, newname) })
	}
	return p.fs.Rename(oldname, newname)
}

func (p *pebbleFS) ReuseForWrite(oldname, newname string, _ pebblevfs.DiskWriteCategory) (pebblevfs.File, error) {
	if err := p.fs.Rename(oldname, newname); err != nil {
		return nil, err
	}
	f, err := p.fs.OpenFile(newname, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return p.wrap(f, newname), nil
}

// MkdirAll makes pebble's directories private to the server's user,
// whatever mode pebble asks for: they hold the cluster's metadata.
func (p *pebbleFS) MkdirAll(dir string, _ os.FileMode) error { return p.fs.MkdirAll(dir, 0o700) }
func (p *pebbleFS) Lock(name string) (io.Closer, error)      { return p.fs.Lock(name) }
func (p *pebbleFS) List(dir string) ([]string, error)        { return p.fs.List(dir) }

func (p *pebbleFS) Stat(name string) (pebblevfs.FileInfo, error) {
	st, err := p.fs.Stat(name)
	if err != nil {
		return nil, err
	}
	return fileInfo{st}, nil
}

func (p *pebbleFS) PathBase(path string) string    { return filepath.Base(path) }
func (p *pebbleFS) PathJoin(elem ...string) string { return filepath.Join(elem...) }
func (p *pebbleFS) PathDir(path string) string     { return filepath.Dir(path) }
func (p *pebbleFS) Unwrap() pebblevfs.FS           { return nil }
func (p *pebbleFS) GetDiskUsage(path string) (pebblevfs.DiskUsage, error) {
	if p.fs == vfs.Default {
		return pebblevfs.Default.GetDiskUsage(path)
	}
	return pebblevfs.DiskUsage{}, pebblevfs.ErrUnsupported
}

type fileInfo struct{ os.FileInfo }

func (fileInfo) DeviceID() pebblevfs.DeviceID { return pebblevfs.DeviceID{} }

// pebbleFile is a file of pebble's on the store's FS.
type pebbleFile struct {
	p        *pebbleFS
	f        vfs.File
	name     string
	critical bool
	foreign  bool // outside the store's directory (a checkpoint's)
	failed   bool // a write of this table failed
}

func (f *pebbleFile) Read(b []byte) (int, error)              { return f.f.Read(b) }
func (f *pebbleFile) ReadAt(b []byte, off int64) (int, error) { return f.f.ReadAt(b, off) }

func (f *pebbleFile) Write(b []byte) (int, error) {
	if !f.critical {
		n, err := f.f.Write(b)
		f.noteErr(err)
		return n, err
	}
	// Write the rest after a short write: the bytes go on in order.
	done := 0
	err := f.p.retry(f.name, func() error {
		n, err := f.f.Write(b[done:])
		done += n
		return err
	})
	return done, err
}

func (f *pebbleFile) WriteAt(b []byte, off int64) (int, error) {
	if !f.critical {
		n, err := f.f.WriteAt(b, off)
		f.noteErr(err)
		return n, err
	}
	done := 0
	err := f.p.retry(f.name, func() error {
		n, err := f.f.WriteAt(b[done:], off+int64(done))
		done += n
		return err
	})
	return done, err
}

func (f *pebbleFile) noteErr(err error) {
	if err != nil && !f.foreign {
		f.failed = true
		f.p.setErr(fmt.Errorf("metadata store: pebble cannot write %s: %w", f.name, err))
	}
}

func (f *pebbleFile) Close() error { return f.f.Close() }

func (f *pebbleFile) Preallocate(off, n int64) error { return nil }

func (f *pebbleFile) Stat() (pebblevfs.FileInfo, error) {
	st, err := f.f.Stat()
	if err != nil {
		return nil, err
	}
	return fileInfo{st}, nil
}

// Sync of a critical file is not retried: after a failed fsync the kernel
// may have dropped the pages it could not write, and a second fsync would
// report success for data that is gone. Nor can its failure go back to
// pebble, which would end the process. So the store stops taking writes
// until the server restarts (reads go on), and the flush or compaction
// that synced waits here for good; the log (wal.go) still holds every
// change it was for, and the next start replays them.
func (f *pebbleFile) Sync() error {
	err := f.f.Sync()
	if !f.critical {
		f.noteErr(err)
		if err == nil && !f.failed && !f.foreign {
			f.p.clearErr() // a table written whole: the disk takes writes again
		}
		return err
	}
	if err != nil && !f.p.isOpening() {
		f.p.stuck(fmt.Errorf("metadata store: fsync %s: %w (writes are refused until the server restarts; reads go on)", f.name, err))
	}
	return err
}

func (f *pebbleFile) SyncData() error { return f.Sync() }

// SyncTo starts the write-back of the first n bytes where the file has a
// descriptor, so that the final fsync has less to do; it promises nothing.
func (f *pebbleFile) SyncTo(n int64) (bool, error) {
	if fd := f.Fd(); fd != pebblevfs.InvalidFd {
		_ = unix.SyncFileRange(int(fd), 0, n, unix.SYNC_FILE_RANGE_WRITE)
	}
	return false, nil
}

func (f *pebbleFile) Prefetch(off, n int64) error { return nil }

func (f *pebbleFile) Fd() uintptr {
	if d, ok := f.f.(interface{ Fd() uintptr }); ok {
		return d.Fd()
	}
	return pebblevfs.InvalidFd
}

// pebbleDir is a directory pebble opened to sync.
type pebbleDir struct {
	p    *pebbleFS
	name string
}

func (d *pebbleDir) Sync() error {
	if !d.p.own(d.name) {
		return d.p.fs.SyncDir(d.name)
	}
	return d.p.retry(d.name, func() error { return d.p.fs.SyncDir(d.name) })
}

func (d *pebbleDir) SyncData() error                   { return d.Sync() }
func (d *pebbleDir) SyncTo(int64) (bool, error)        { return false, nil }
func (d *pebbleDir) Close() error                      { return nil }
func (d *pebbleDir) Read([]byte) (int, error)          { return 0, d.notFile() }
func (d *pebbleDir) ReadAt([]byte, int64) (int, error) { return 0, d.notFile() }
func (d *pebbleDir) Write([]byte) (int, error)         { return 0, d.notFile() }
func (d *pebbleDir) WriteAt([]byte, int64) (int, error) {
	return 0, d.notFile()
}
func (d *pebbleDir) Preallocate(int64, int64) error { return nil }
func (d *pebbleDir) Prefetch(int64, int64) error    { return nil }
func (d *pebbleDir) Fd() uintptr                    { return pebblevfs.InvalidFd }
func (d *pebbleDir) Stat() (pebblevfs.FileInfo, error) {
	st, err := d.p.fs.Stat(d.name)
	if err != nil {
		return nil, err
	}
	return fileInfo{st}, nil
}

func (d *pebbleDir) notFile() error { return &fs.PathError{Op: "read", Path: d.name, Err: unix.EISDIR} }
