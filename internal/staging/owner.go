package staging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/dtl"
	"github.com/pdcgo/pdc/internal/wire"
)

// keyPrefix opens every staging fetch key, followed by the path (which
// makes the key readable in messages), a NUL, the key format's version and
// the record.
const (
	keyPrefix  = "stage:"
	keyVersion = 1
)

// FetchKey is the DTL key under which the owner serves the file a record
// describes. It carries the whole record, so that the owner serves the
// bytes only while the file is still the one that was produced.
func FetchKey(rec *wire.StageRecord) []byte {
	b := append([]byte(keyPrefix), rec.Path...)
	b = append(b, 0, keyVersion)
	short := *rec
	short.Data = nil // the owner serves the bytes from the file
	return short.Marshal(b)
}

// IsFetchKey reports whether key is a staging key.
func IsFetchKey(key []byte) bool { return bytes.HasPrefix(key, []byte(keyPrefix)) }

func parseKey(key []byte) (*wire.StageRecord, error) {
	rest, ok := bytes.CutPrefix(key, []byte(keyPrefix))
	i := bytes.IndexByte(rest, 0)
	if !ok || i < 0 || i+1 >= len(rest) {
		return nil, fmt.Errorf("not a staged-file key: %w", pdc.ErrInvalid)
	}
	if v := rest[i+1]; v != keyVersion {
		return nil, fmt.Errorf("staged-file key of format %d; this server reads format %d: %w", v, keyVersion, pdc.ErrVersion)
	}
	var rec wire.StageRecord
	if err := rec.Unmarshal(rest[i+2:]); err != nil {
		return nil, err
	}
	if rec.Path != string(rest[:i]) {
		return nil, fmt.Errorf("staged-file key names %q but carries the record of %q: %w", rest[:i], rec.Path, pdc.ErrInvalid)
	}
	return &rec, nil
}

// Files serves produced files from a server's producer dir.
type Files struct {
	dir Dir
}

// NewFiles serves files from dir, creating it if needed.
func NewFiles(dir string) (*Files, error) {
	d, err := OpenDir(dir, "producer", true)
	if err != nil {
		return nil, err
	}
	return &Files{dir: d}, nil
}

// Dir is the producer dir, absolute.
func (f *Files) Dir() string { return f.dir.Path }

// Resolve is the DTL resolver: it opens the file of the record in key and
// hands it over under a shared lock, which a concurrent produce (holding
// it exclusively while it checksums) waits for. A file removed, replaced
// or changed since its produce is refused: the consumer would get bytes
// that do not match the record.
func (f *Files) Resolve(ctx context.Context, key []byte) (dtl.Source, error) {
	recp, err := parseKey(key)
	if err != nil {
		return dtl.Source{}, err
	}
	rec := *recp
	if err := CheckRel(rec.Path); err != nil {
		return dtl.Source{}, err
	}
	// Only the path below the dir is walked (the dir was resolved once):
	// a symlink met there must stay inside it. Then one open, without
	// os.Open's attempt to register a regular file with the poller, and
	// a look at where it went: the path may have changed since its walk.
	abs := filepath.Join(f.dir.Real, filepath.FromSlash(rec.Path))
	if err := f.dir.checkLinks(rec.Path, abs); err != nil {
		return dtl.Source{}, fmt.Errorf("staged file %q (version %d): %w", rec.Path, rec.Version, err)
	}
	file, err := OpenRead(abs)
	if err != nil {
		return dtl.Source{}, f.gone(&rec, err)
	}
	if err := f.dir.openedInside(file, rec.Path); err != nil {
		file.Close()
		return dtl.Source{}, fmt.Errorf("staged file %q (version %d): %w", rec.Path, rec.Version, err)
	}
	if err := Lock(ctx, file, false); err != nil {
		file.Close()
		return dtl.Source{}, fmt.Errorf("staged file %q (version %d): %w", rec.Path, rec.Version, err)
	}
	// The lock goes with the file: closing it lets produce in again.
	release := func() { file.Close() }
	st, err := file.Stat()
	if err != nil {
		release()
		return dtl.Source{}, fmt.Errorf("staged file %q: %w", rec.Path, err)
	}
	if err := Matches(&rec, st); err != nil {
		release()
		return dtl.Source{}, fmt.Errorf("at the owner: %w", err)
	}
	return dtl.Source{File: file, Off: 0, Len: int64(rec.Size), Release: release}, nil
}

func (f *Files) gone(rec *wire.StageRecord, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("staged file %q (version %d) was removed from the producer dir %q after it was produced: %w",
			rec.Path, rec.Version, f.dir.Path, pdc.ErrNotFound)
	}
	return fmt.Errorf("staged file %q (version %d): %w", rec.Path, rec.Version, err)
}

// Matches checks that st, a stat of the produced file, still describes the
// file the record was made from: same inode, size and modification time.
func Matches(rec *wire.StageRecord, st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("staged file %q (version %d) is no longer a regular file: %w", rec.Path, rec.Version, pdc.ErrChecksum)
	}
	if inode(st) != rec.Ino || uint64(st.Size()) != rec.Size || st.ModTime().UnixNano() != rec.MtimeNS {
		return fmt.Errorf("staged file %q changed after version %d was produced (now %d bytes, modified %s; produced as %d bytes, modified %s): produce it again: %w",
			rec.Path, rec.Version, st.Size(), st.ModTime().Format("15:04:05.000000000"), rec.Size,
			timeOf(rec.MtimeNS).Format("15:04:05.000000000"), pdc.ErrChecksum)
	}
	return nil
}
