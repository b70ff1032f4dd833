package staging

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/wire"
)

// How a consume placed a file in the consumer dir without a fetch
// (client.How has the same values).
const (
	Direct    = "direct"    // the consumer dir is the owner's producer dir
	Linked    = "linked"    // hard-linked from the owner's file on this host, when asked
	Reflinked = "reflinked" // a copy-on-write clone of the owner's file on this host
	Copied    = "copied"    // copied from it on this host
)

// PlaceLocal puts the file rel of the producer dir pdir, which this host
// can see, into the consumer dir dir at dst without a transfer: the file
// itself if dst is it; else, if link, a hard link; else a reflink where
// the file system can clone; else a copy on this host; made at tmp and
// renamed. Each is checked against the record first. It returns how
// (Direct, Linked, Reflinked or Copied). It stops when ctx ends: its
// checksums and copy take seconds for a large file.
//
// A hard link is the producer's inode: a consumer that writes to its file
// changes the producer's, and every later consumer fails its checksum. So
// it is made only when asked, by a consumer that promises not to write.
func PlaceLocal(ctx context.Context, dir, pdir Dir, rel, dst, tmp string, rec *wire.StageRecord, link bool) (how string, err error) {
	_, src, err := pdir.Resolve(rel)
	if err != nil {
		return "", err
	}
	sf, err := OpenRead(src)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("version %d was removed from the producer dir %q after it was produced: %w", rec.Version, pdir.Path, pdc.ErrNotFound)
		}
		return "", err
	}
	defer sf.Close()
	st, err := sf.Stat()
	if err != nil {
		return "", err
	}
	if err := Matches(rec, st); err != nil {
		return "", err
	}
	if err := verifyCRC(ctx, sf, rec, "the producer's file"); err != nil {
		return "", err
	}
	if src == dst {
		return Direct, rememberChecked(dir, rel, dst, rec, st)
	}
	if dt, err := os.Lstat(dst); err == nil && link && os.SameFile(dt, st) {
		// Linked already (the file was produced again unchanged): a
		// rename of one link over another of the same inode does nothing,
		// and would leave the temporary link behind.
		return Linked, rememberChecked(dir, rel, dst, rec, st)
	}
	if link && linkTemp(src, tmp) == nil {
		if err := Rename(tmp, dst); err != nil {
			os.Remove(tmp)
			return "", err
		}
		if err := SyncDir(filepath.Dir(dst)); err != nil {
			return "", err
		}
		return Linked, rememberChecked(dir, rel, dst, rec, st)
	}
	if how, err = copyLocal(ctx, sf, tmp, int64(rec.Size)); err != nil {
		os.Remove(tmp)
		return "", err
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = verifyCRC(ctx, f, rec, "the copy")
		f.Close()
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := install(dir, rel, tmp, dst, rec, false, true); err != nil {
		return "", err
	}
	return how, nil
}

// rememberChecked records that dst, the producer's file itself (direct
// use, or a hard link), holds the version rec describes, as it was when
// checked (stat st): the producer may write it again at any time, and a
// record taken from a later stat would vouch for bytes never checked. A
// file changed since fails the consume, as it would have failed the check.
func rememberChecked(dir Dir, rel, dst string, rec *wire.StageRecord, st fs.FileInfo) error {
	if err := dir.rememberAs(rel, dst, rec, st); err != nil {
		return err
	}
	now, err := os.Stat(dst)
	if err != nil {
		return err
	}
	return Matches(rec, now)
}

// copyLocal copies n bytes of src into a new file at path, fsynced: a
// reflink (FICLONE) where the file system shares blocks copy-on-write, so
// that the copy costs no space or time until one side writes, else a copy
// of the bytes, until ctx ends. It returns how (Reflinked or Copied).
func copyLocal(ctx context.Context, src *os.File, path string, n int64) (string, error) {
	f, err := CreateTemp(path, false)
	if err != nil {
		return "", err
	}
	how := Reflinked
	if err = unix.IoctlFileClone(int(f.Fd()), int(src.Fd())); err != nil {
		// EOPNOTSUPP, EXDEV, EINVAL...: no clone here; copy the bytes.
		how = Copied
		if err = reserve(f, n); err == nil {
			_, err = io.Copy(f, io.NewSectionReader(ctxReaderAt{ctx, src}, 0, n))
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return how, err
}

// ctxReaderAt reads r until ctx ends, a buffer's worth at a time.
type ctxReaderAt struct {
	ctx context.Context
	r   io.ReaderAt
}

func (c ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		if c.ctx.Err() != nil {
			return n, pdc.CtxErr(c.ctx)
		}
		k, err := c.r.ReadAt(p[n:min(len(p), n+bufSize)], off+int64(n))
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// roomCheckMin is the size from which a fetch first checks that the file
// fits in the consumer dir: a large file that cannot fit fails before any
// of it moves. A smaller one fails at its first write that finds no room.
const roomCheckMin = 1 << 20

// reserve allocates n bytes for f, so that a full file system fails the
// consume before any byte moves.
func reserve(f *os.File, n int64) error {
	if n == 0 {
		return nil
	}
	err := unix.Fallocate(int(f.Fd()), 0, 0, n)
	if err == unix.EOPNOTSUPP || err == unix.ENOSYS {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reserving %d bytes in %q: %w", n, filepath.Dir(f.Name()), err)
	}
	return nil
}

// verifyCRC checks that f holds exactly the bytes rec describes: its size
// and their CRC. The CRC covers the first rec.Size bytes only, so a file
// grown since must fail on its size: a reflink clones the producer's file
// as it is at the clone, an append made after its check included.
func verifyCRC(ctx context.Context, f *os.File, rec *wire.StageRecord, what string) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if uint64(st.Size()) != rec.Size {
		return fmt.Errorf("%s has %d bytes, but version %d was produced as %d: the file changed after it was produced: %w",
			what, st.Size(), rec.Version, rec.Size, pdc.ErrChecksum)
	}
	crc, err := FileCRC(ctx, f, int64(rec.Size))
	if err != nil {
		return err
	}
	if crc != rec.CRC {
		return fmt.Errorf("%s has CRC-32C %08x, but version %d was produced with %08x: the file changed after it was produced: %w",
			what, crc, rec.Version, rec.CRC, pdc.ErrChecksum)
	}
	return nil
}

// install moves a verified temporary file into place, fsyncs its
// directory if syncDir, and, unless marked (the file carries its record),
// records which version it holds. A record file left from an older copy
// cannot vouch for the new one: it names the old copy's inode.
func install(dir Dir, rel, tmp, dst string, rec *wire.StageRecord, marked, syncDir bool) error {
	if err := Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	if syncDir {
		if err := SyncDir(filepath.Dir(dst)); err != nil {
			return err
		}
	}
	if marked {
		return nil
	}
	return dir.Remember(rel, dst, rec)
}

// Fetching is one file a consumer fetches from its owner.
type Fetching struct {
	Rel, Dst, Tmp string // its path in the consumer dir, absolute, and the temporary file
	Rec           *wire.StageRecord
	Owner         string // the owner's address
	OwnerLabel    string // the owner, as errors name it
	Mode          dtl.Mode
	Progress      func(done, total int64)
}

// Fetch fetches a file from its owner through recv into its temporary
// file, checks its size and CRC against the record, makes it durable
// (unless dir is in memory) and installs it at its place in dir. It
// returns the bytes fetched.
func Fetch(ctx context.Context, recv *dtl.Receiver, dir Dir, fe Fetching) (int64, error) {
	rel, dst, tmp, rec := fe.Rel, fe.Dst, fe.Tmp, fe.Rec
	f, err := CreateTemp(tmp, true)
	if err != nil {
		return 0, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	size := int64(rec.Size)
	if size >= roomCheckMin {
		if err := CheckRoom(f, size); err != nil {
			return 0, fmt.Errorf("the consumer dir %q has no room: %w", dir.Path, err)
		}
	}
	key := FetchKey(rec)
	// The bytes are written as they come, checksummed on the way, large
	// files pipelined across pieces; shm hands over the owner's file, which
	// is copied and checksummed in one part per processor.
	in := NewIncoming(f, size, fe.Progress)
	n, err := recv.Fetch(ctx, fe.Owner, key, dtl.IntoWriter(in), dtl.WithMode(fe.Mode), dtl.WithExpectedSize(size))
	written, crc, werr := in.Finish()
	switch {
	case werr != nil && err != nil:
		// The write's failure (no room, more bytes than the record's)
		// is why the transfer broke, whatever the transport made of it
		// (a push's comes back as the owner's error).
		err = fmt.Errorf("writing %q: %w (the transfer: %w)", tmp, werr, err)
	case werr != nil:
		err = fmt.Errorf("writing %q: %w", tmp, werr)
	}
	if err != nil {
		return 0, fmt.Errorf("fetch from its owner %s: %w", fe.OwnerLabel, err)
	}
	if n != size || written != size || crc != rec.CRC {
		return n, fmt.Errorf("fetched %d bytes with CRC-32C %08x from %s, but version %d was produced as %d bytes with %08x: the file changed at the owner after it was produced: %w",
			n, crc, fe.OwnerLabel, rec.Version, rec.Size, rec.CRC, pdc.ErrChecksum)
	}
	ok = true
	return n, finish(dir, f, rel, tmp, dst, rec)
}

// finish records the version rec describes on f, the complete and checked
// temporary file tmp, makes it durable (unless dir is in memory), closes
// it and installs it at dst. On an error tmp is removed.
func finish(dir Dir, f *os.File, rel, tmp, dst string, rec *wire.StageRecord) error {
	err := func() error {
		st, err := f.Stat()
		if err != nil {
			return err
		}
		marked, err := Mark(f, st, rec)
		if err != nil {
			return err
		}
		// On tmpfs fsync does nothing: skip it, and the directory's.
		durable := !dir.InMemory(st)
		if durable {
			if err := f.Sync(); err != nil {
				return err
			}
		}
		err = f.Close()
		f = nil
		if err != nil {
			return err
		}
		return install(dir, rel, tmp, dst, rec, marked, durable)
	}()
	if err != nil {
		if f != nil {
			f.Close()
		}
		os.Remove(tmp)
	}
	return err
}

// PlaceInline writes the file that rec carries whole (rec.Inline) into its
// temporary file tmp, after checking the bytes against the record's CRC,
// and installs it at dst as Fetch does: the owner is not asked. The file
// is handled by its descriptor alone: a small file's consume is a few
// system calls, and an *os.File would add one.
func PlaceInline(dir Dir, rel, dst, tmp string, rec *wire.StageRecord) error {
	if !rec.Inline() {
		return fmt.Errorf("the record of version %d does not carry the file: %w", rec.Version, pdc.ErrInvalid)
	}
	if crc := crc32.Checksum(rec.Data, Table); crc != rec.CRC {
		return fmt.Errorf("the record of version %d carries %d bytes with CRC-32C %08x, but the file was produced with %08x: %w",
			rec.Version, len(rec.Data), crc, rec.CRC, pdc.ErrChecksum)
	}
	fd, err := createTemp(tmp, false)
	if err != nil {
		return err
	}
	marked, durable, err := writeInline(dir, fd, tmp, rec)
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = newPathError("close", tmp, cerr)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return install(dir, rel, tmp, dst, rec, marked, durable)
}

// writeInline writes rec's bytes to fd, the new file tmp, records their
// version on it and fsyncs it unless dir is in memory. It reports whether
// the record is on the file (marked) and whether the file system keeps
// what is written only once synced (durable).
func writeInline(dir Dir, fd int, tmp string, rec *wire.StageRecord) (marked, durable bool, err error) {
	for b := rec.Data; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, false, fmt.Errorf("writing %q: %w", tmp, err)
		}
		b = b[n:]
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, false, newPathError("stat", tmp, err)
	}
	switch err := unix.Fsetxattr(fd, copyAttr, encodeCopy(rec, 0, st.Mtim.Nano()), 0); err {
	case nil:
		marked = true
	case unix.ENOTSUP, unix.EPERM: // no user attributes here: Remember, once in place
	default:
		return false, false, fmt.Errorf("record the version of %q: %w", tmp, err)
	}
	durable = !(dir.memory && st.Dev == dir.dev)
	if durable {
		if err := unix.Fsync(fd); err != nil {
			return false, false, newPathError("sync", tmp, err)
		}
	}
	return marked, durable, nil
}
