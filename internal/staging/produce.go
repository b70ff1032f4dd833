package staging

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/wire"
)

// OpenProduced opens the file rel of the producer dir dir (abs is its
// path, from Resolve), takes its exclusive lock, so that no consume
// copies it while it is described, and returns the file with the record
// of what it holds: path, size, modification time, inode and CRC-32C,
// and a file of at most InlineMax bytes whole, so that its consumers need
// not ask the owner for it.
// The lock lasts until the caller closes the file, once the produce is
// recorded; the caller sets the record's owner. On an error the file is
// closed.
func OpenProduced(ctx context.Context, dir Dir, rel, abs string) (*os.File, wire.StageRecord, error) {
	f, _, err := OpenUnlocked(dir, abs)
	if err != nil {
		return nil, wire.StageRecord{}, err
	}
	rec, err := Describe(ctx, f, rel)
	if err != nil {
		f.Close()
		return nil, wire.StageRecord{}, err
	}
	return f, rec, nil
}

// FileID names a file by its device and inode: two paths with one ID
// (hard links, or a symlink and its target) are one file.
type FileID struct{ Dev, Ino uint64 }

// OpenUnlocked opens the produced file at abs, as OpenProduced does, but
// does not lock it yet: it returns the file's ID, so that a produce
// naming one file under two paths locks it once. A flock belongs to an
// open file, so a second open of a file this produce has locked would
// wait for that lock, its own, until its deadline. Describe locks it.
func OpenUnlocked(dir Dir, abs string) (*os.File, FileID, error) {
	f, err := OpenRead(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, FileID{}, fmt.Errorf("no such file in the producer dir %q: %w", dir.Path, pdc.ErrNotFound)
		}
		return nil, FileID{}, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, FileID{}, err
	}
	id := FileID{Ino: inode(st)}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		id.Dev = sys.Dev
	}
	return f, id, nil
}

// InlineMax is the largest file whose bytes travel in its record (at most
// wire.StageInlineMax). Below it a consume is one round trip, the lookup,
// instead of two; above, a fetch from the owner costs about as much as
// the bytes themselves, while the record would grow the metadata store
// and every lookup of it (docs/design/0008-staging.md, "Small files").
const InlineMax = 16 << 10

// Describe locks f, a file OpenUnlocked opened, and reads what its
// record says. The lock lasts until the caller closes f.
func Describe(ctx context.Context, f *os.File, rel string) (wire.StageRecord, error) {
	if err := Lock(ctx, f, true); err != nil {
		return wire.StageRecord{}, err
	}
	st, err := f.Stat()
	if err != nil {
		return wire.StageRecord{}, err
	}
	if !st.Mode().IsRegular() {
		return wire.StageRecord{}, fmt.Errorf("%s, not a regular file: %w", atomicfile.Kind(st.Mode()), pdc.ErrInvalid)
	}
	rec := wire.StageRecord{Path: rel, Size: uint64(st.Size()), MtimeNS: st.ModTime().UnixNano(), Ino: Inode(st), Format: wire.StageVersion}
	if st.Size() <= InlineMax {
		// Read once: the bytes travel in the record, checksummed as read.
		rec.Data = make([]byte, st.Size())
		if _, err := f.ReadAt(rec.Data, 0); err != nil && !(err == io.EOF && st.Size() == 0) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return wire.StageRecord{}, fmt.Errorf("read %q: %w", f.Name(), err)
		}
		rec.CRC = crc32.Checksum(rec.Data, Table)
		return rec, nil
	}
	crc, err := FileCRC(ctx, f, st.Size())
	if err != nil {
		return wire.StageRecord{}, err
	}
	rec.CRC = crc
	return rec, nil
}
