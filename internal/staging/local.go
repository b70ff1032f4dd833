package staging

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pdcgo/pdc/internal/atomicfile"
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
// then find the copy current. release drops it.
//
// tmp is the temporary file the holder may write next to rel's copy. Its
// name stays in the lock file while the lock is held, so that the next
// holder removes a temporary file that a consumer killed mid-way left.
func (d Dir) LockCopy(ctx context.Context, rel string) (release func(), tmp string, err error) {
	dir := filepath.Join(d.Real, metaDir, "locks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("consumer dir %s: %w", d.Path, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, name(rel)), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("consumer dir %s: %w", d.Path, err)
	}
	if err := Lock(ctx, f, true); err != nil {
		f.Close()
		return nil, "", fmt.Errorf("%s: another consumer on this host is fetching it: %w", rel, err)
	}
	dst := filepath.Join(d.Real, filepath.FromSlash(rel))
	clearLeftover(f, dst)
	tmp = TempName(dst)
	if _, err := f.WriteAt([]byte(filepath.Base(tmp)), 0); err != nil {
		f.Close()
		return nil, "", fmt.Errorf("consumer dir %s: %w", d.Path, err)
	}
	return func() {
		_ = f.Truncate(0)
		f.Close()
	}, tmp, nil
}

// TempName is a new name for a temporary file next to dst.
func TempName(dst string) string {
	var r [6]byte
	_, _ = rand.Read(r[:])
	return filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".pdc-tmp-"+hex.EncodeToString(r[:]))
}

// clearLeftover removes the temporary file of dst that the lock file f
// names: its last holder died before it could.
func clearLeftover(f *os.File, dst string) {
	b := make([]byte, 512)
	n, _ := f.ReadAt(b, 0)
	if n == 0 {
		return
	}
	left := string(b[:n])
	if strings.HasPrefix(left, "."+filepath.Base(dst)+".pdc-tmp-") && !strings.ContainsRune(left, '/') {
		_ = os.Remove(filepath.Join(filepath.Dir(dst), left))
	}
	_ = f.Truncate(0)
}

// Current reports whether the copy at abs is the version rec describes:
// the consumer dir's record of it says so, and the file is still the one
// that record was written for (inode, size, modification time).
func (d Dir) Current(rel, abs string, rec *wire.StageRecord) bool {
	b, err := os.ReadFile(d.copyRecordPath(rel))
	if err != nil {
		return false
	}
	held, ino, mtime, ok := decodeCopy(b)
	if !ok || held.Path != rec.Path || held.Version != rec.Version || held.CRC != rec.CRC ||
		held.Size != rec.Size || held.Produced != rec.Produced || held.Host != rec.Host {
		return false
	}
	st, err := os.Stat(abs)
	if err != nil || !st.Mode().IsRegular() || uint64(st.Size()) != rec.Size || st.ModTime().UnixNano() != mtime {
		return false
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	return sys != nil && sys.Ino == ino
}

// Remember records that abs holds the version rec describes.
func (d Dir) Remember(rel, abs string, rec *wire.StageRecord) error {
	st, err := os.Stat(abs)
	if err != nil {
		return err
	}
	var ino uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino = sys.Ino
	}
	p := d.copyRecordPath(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(p, encodeCopy(rec, ino, st.ModTime().UnixNano()), 0o644)
}

// Forget drops the record of rel's local copy (before the copy is
// replaced, so that a crash in between leaves no record claiming the new
// file is an old version).
func (d Dir) Forget(rel string) error {
	err := os.Remove(d.copyRecordPath(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func encodeCopy(rec *wire.StageRecord, ino uint64, mtime int64) []byte {
	body := rec.Marshal(nil)
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
