package staging

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
)

func timeOf(ns int64) time.Time { return time.Unix(0, ns) }

// copyMagic opens a local copy's record: the format and its version.
const copyMagic = "PSC1"

// name is the file name under metaDir/copies and metaDir/locks for rel.
func name(rel string) string {
	h := sha256.Sum256([]byte(rel))
	return hex.EncodeToString(h[:16])
}

func (d Dir) copyRecordPath(rel string) string {
	return filepath.Join(d.Real, metaDir, "copies", name(rel))
}

// LockCopy takes the consumer dir's exclusive lock for rel, so that the
// consumers of one file on one host fetch it once: the others wait here,
// then find the copy current. It also makes a consume's check of the copy
// and its rename one step among consumers on this host, so that one that
// looked up an older version never puts it over a newer copy (Newer).
// release drops it.
//
// tmp is the temporary file the holder may write next to rel's copy: one
// name per path, written only under this lock, so that a file found there
// is what a holder killed mid-way left; CreateTemp replaces it. The lock
// file holds nothing: taking and dropping the lock is open, flock, close.
func (d Dir) LockCopy(ctx context.Context, rel string) (release func(), tmp string, err error) {
	dir := filepath.Join(d.Real, metaDir, "locks")
	path := filepath.Join(dir, name(rel))
	fd, err := openRaw(path, unix.O_RDWR|unix.O_CREAT, 0o600)
	if err == unix.ENOENT {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", fmt.Errorf("consumer dir %q: %w", d.Path, err)
		}
		fd, err = openRaw(path, unix.O_RDWR|unix.O_CREAT, 0o600)
	}
	if err != nil {
		return nil, "", fmt.Errorf("consumer dir %q: %w", d.Path, newPathError("open", path, err))
	}
	// Free at once, as it mostly is: no *os.File, whose making costs a
	// system call of its own.
	switch err := flock(fd, unix.LOCK_EX|unix.LOCK_NB); err {
	case nil:
		release = func() { unix.Close(fd) }
	case unix.EWOULDBLOCK:
		f := os.NewFile(uintptr(fd), path)
		if err := Lock(ctx, f, true); err != nil {
			f.Close()
			return nil, "", fmt.Errorf("%q: another consumer on this host is fetching it: %w", rel, err)
		}
		release = func() { f.Close() }
	default:
		unix.Close(fd)
		return nil, "", fmt.Errorf("consumer dir %q: lock %q: %w", d.Path, path, err)
	}
	return release, tempName(filepath.Join(d.Real, filepath.FromSlash(rel)), rel), nil
}

// nameMax is the longest file name (a path element) Linux file systems
// take.
const nameMax = 255

// tempName is the temporary file of rel's copy dst: ".<name>.pdc-tmp-"
// and a hash of rel, next to it. A name too long to carry all that is cut
// short (the hash keeps it rel's), so that a file whose name is as long as
// the file system allows still has a temporary file.
func tempName(dst, rel string) string {
	base, suffix := filepath.Base(dst), ".pdc-tmp-"+name(rel)[:12]
	if keep := nameMax - 1 - len(suffix); len(base) > keep {
		base = base[:keep]
	}
	return filepath.Join(filepath.Dir(dst), "."+base+suffix)
}

// CreateTemp creates the temporary file tmp that LockCopy named, for
// writing (and reading if rw), replacing what a holder killed mid-way left
// there. It does not follow a symlink at tmp.
func CreateTemp(tmp string, rw bool) (*os.File, error) {
	fd, err := createTemp(tmp, rw)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), tmp), nil
}

func createTemp(tmp string, rw bool) (int, error) {
	flag := unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW
	if rw {
		flag = unix.O_RDWR | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW
	}
	fd, err := openRaw(tmp, flag, 0o600)
	if err == unix.EEXIST {
		// Left by a holder of the lock that died; the lock is ours.
		if err := unix.Unlink(tmp); err != nil && err != unix.ENOENT {
			return -1, newPathError("remove", tmp, err)
		}
		fd, err = openRaw(tmp, flag, 0o600)
	}
	if err != nil {
		return -1, newPathError("create", tmp, err)
	}
	return fd, nil
}

// linkTemp hard-links src at tmp, replacing a leftover there.
func linkTemp(src, tmp string) error {
	err := unix.Link(src, tmp)
	if err == unix.EEXIST {
		if err := unix.Unlink(tmp); err != nil && err != unix.ENOENT {
			return newPathError("remove", tmp, err)
		}
		err = unix.Link(src, tmp)
	}
	if err != nil {
		return newLinkError("link", src, tmp, err)
	}
	return nil
}

// openRaw opens path, retrying on EINTR, and returns the descriptor.
func openRaw(path string, flag int, perm uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flag|unix.O_CLOEXEC, perm)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// copyAttr is the extended attribute in which a local copy carries the
// record of the version it holds (and its own size and modification time,
// so that a copy edited in place is not taken for current). It travels
// with the file: set on the temporary file before the rename, it can never
// describe another file. Where the file system has no user attributes, a
// record file under metaDir stands in for it.
const copyAttr = "user.pdc.stage"

// Current reports whether the copy at abs is the version rec describes:
// its record says so, and the file is still the one that record was
// written for (size, modification time, and inode for a record file).
func (d Dir) Current(rel, abs string, rec *wire.StageRecord) bool {
	held, ok := d.Held(rel, abs)
	return ok && SameProduce(&held, rec)
}

// SameProduce reports whether a copy's record, held, is of the produce rec
// describes.
func SameProduce(held, rec *wire.StageRecord) bool {
	return held.Path == rec.Path && held.Version == rec.Version && held.CRC == rec.CRC &&
		held.Size == rec.Size && held.Produced == rec.Produced && held.Host == rec.Host && held.Namespace == rec.Namespace
}

// Newer reports whether the copy at abs holds a later produce of rel (in
// rec's namespace) than rec describes, and returns its record: a consume
// that looked rec up before a re-produce must not put its older version
// over the newer one another consumer installed meanwhile. Later is a
// higher version produced later: versions start again at 1 for a path
// produced again after its record was removed.
func (d Dir) Newer(rel, abs string, rec *wire.StageRecord) (wire.StageRecord, bool) {
	held, ok := d.Held(rel, abs)
	if !ok || !LaterProduce(&held, rec) {
		return wire.StageRecord{}, false
	}
	return held, true
}

// Serves reports whether the copy at abs, which another consumer on this
// host may have installed since rec was looked up, can stand for rec: it
// holds the same produce, or a later one (see Newer), whose record it
// returns to report instead.
func (d Dir) Serves(rel, abs string, rec *wire.StageRecord) (wire.StageRecord, bool) {
	held, ok := d.Held(rel, abs)
	if !ok || (!SameProduce(&held, rec) && !LaterProduce(&held, rec)) {
		return wire.StageRecord{}, false
	}
	return held, true
}

// LaterProduce reports whether a copy's record, held, is of a later
// produce of the same path than rec (see Newer).
func LaterProduce(held, rec *wire.StageRecord) bool {
	return held.Path == rec.Path && held.Namespace == rec.Namespace && held.Version > rec.Version && held.Produced > rec.Produced
}

// Held returns the record of the version the copy at abs holds, if its
// record is intact and the file is still the one it was written for
// (size, modification time, and inode for a record file).
func (d Dir) Held(rel, abs string) (wire.StageRecord, bool) {
	var st unix.Stat_t
	if err := unix.Stat(abs, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return wire.StageRecord{}, false
	}
	var buf [512]byte
	var b []byte
	n, err := unix.Getxattr(abs, copyAttr, buf[:])
	switch {
	case err == nil:
		b = buf[:n]
	case err == unix.ERANGE: // a record with a long path
		big := make([]byte, 64<<10)
		if n, err = unix.Getxattr(abs, copyAttr, big); err != nil {
			return wire.StageRecord{}, false
		}
		b = big[:n]
	default:
		if b, err = vfs.ReadFile(vfs.OrDefault(d.FS), d.copyRecordPath(rel)); err != nil {
			return wire.StageRecord{}, false
		}
	}
	held, ino, mtime, ok := decodeCopy(b)
	if !ok || uint64(st.Size) != held.Size || st.Mtim.Nano() != mtime || (ino != 0 && ino != st.Ino) {
		return wire.StageRecord{}, false
	}
	return held, true
}

// Mark records, on f itself, that it holds the version rec describes; st
// is f's stat, taken after its last write. It reports false where the
// file system keeps no user attributes: then call Remember once the file
// is in place.
func Mark(f *os.File, st fs.FileInfo, rec *wire.StageRecord) (bool, error) {
	err := unix.Fsetxattr(int(f.Fd()), copyAttr, encodeCopy(rec, 0, st.ModTime().UnixNano()), 0)
	if err == unix.ENOTSUP || err == unix.EOPNOTSUPP || err == unix.EPERM {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record the version of %q: %w", f.Name(), err)
	}
	return true, nil
}

// Remember records that abs, in place, holds the version rec describes:
// on the file where the file system allows (a link shares the owner's
// inode, whose attributes say which version it is), else in a record file.
func (d Dir) Remember(rel, abs string, rec *wire.StageRecord) error {
	st, err := os.Stat(abs)
	if err != nil {
		return err
	}
	return d.rememberAs(rel, abs, rec, st)
}

// rememberAs is Remember for the file abs as it was when stat st was
// taken: a file changed since does not match the record.
func (d Dir) rememberAs(rel, abs string, rec *wire.StageRecord, st fs.FileInfo) error {
	err := unix.Setxattr(abs, copyAttr, encodeCopy(rec, 0, st.ModTime().UnixNano()), 0)
	if err == nil {
		return nil
	}
	if err != unix.ENOTSUP && err != unix.EOPNOTSUPP && err != unix.EPERM {
		return fmt.Errorf("record the version of %q: %w", abs, err)
	}
	ino := inode(st)
	p := d.copyRecordPath(rel)
	fsys := vfs.OrDefault(d.FS)
	if err := fsys.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFS(fsys, p, encodeCopy(rec, ino, st.ModTime().UnixNano()), 0o600)
}

// Forget drops the record file of rel's local copy.
func (d Dir) Forget(rel string) error {
	err := vfs.OrDefault(d.FS).Remove(d.copyRecordPath(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func encodeCopy(rec *wire.StageRecord, ino uint64, mtime int64) []byte {
	short := *rec
	short.Data = nil // the copy is the data
	body := short.Marshal(nil)
	b := append([]byte(copyMagic), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b[4:], uint32(len(body)))
	b = append(b, body...)
	b = binary.BigEndian.AppendUint64(b, ino)
	b = binary.BigEndian.AppendUint64(b, uint64(mtime))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, Table))
}

func decodeCopy(b []byte) (rec wire.StageRecord, ino uint64, mtime int64, ok bool) {
	if len(b) < 8+20 || string(b[:4]) != copyMagic {
		return rec, 0, 0, false
	}
	if crc32.Checksum(b[:len(b)-4], Table) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return rec, 0, 0, false
	}
	n := int(binary.BigEndian.Uint32(b[4:]))
	if 8+n+20 != len(b) {
		return rec, 0, 0, false
	}
	if rec.Unmarshal(b[8:8+n]) != nil {
		return rec, 0, 0, false
	}
	rest := b[8+n:]
	return rec, binary.BigEndian.Uint64(rest), int64(binary.BigEndian.Uint64(rest[8:])), true
}

// Inode is the inode number of a stat.
func Inode(st fs.FileInfo) uint64 { return inode(st) }

func inode(st fs.FileInfo) uint64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Ino
	}
	return 0
}

// OpenFile opens path like os.OpenFile, without os's attempt to register a
// regular file with the network poller (four failing system calls per
// open, a measurable part of staging a small file).
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := unix.Open(path, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, newPathError("open", path, err)
		}
		return os.NewFile(uintptr(fd), path), nil
	}
}

// OpenRead opens a file that should be a staged (regular) file for
// reading, as OpenFile does, without waiting: an open of a FIFO for
// reading blocks until a writer comes, beyond any context, so it is
// opened non-blocking, then made blocking again for its reads. The
// callers refuse what is not a regular file.
func OpenRead(path string) (*os.File, error) {
	fd, err := openRaw(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, newPathError("open", path, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
		unix.Close(fd)
		return nil, newPathError("fcntl", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// SyncDir fsyncs a directory, making a rename in it durable.
func SyncDir(dir string) error {
	f, err := OpenFile(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Rename moves oldpath to newpath (replacing it) with one system call.
func Rename(oldpath, newpath string) error {
	if err := unix.Rename(oldpath, newpath); err != nil {
		return newLinkError("rename", oldpath, newpath, err)
	}
	return nil
}
