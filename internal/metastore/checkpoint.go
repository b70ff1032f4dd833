package metastore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/vfs"
)

// ManifestFile is the file in a checkpoint that lists its files with
// their sizes and CRCs. It is written last: a checkpoint without one was
// cut short, or made by a build from before manifests, and is not
// restored.
const ManifestFile = "CHECKPOINT"

// manifestMagic and manifestVersion begin a manifest: "pdc-checkpoint 1\n",
// then its JSON, then "crc32c XXXXXXXX\n" over everything before it.
const (
	manifestMagic   = "pdc-checkpoint"
	manifestVersion = 1
)

// Manifest describes one checkpoint of one metadata store.
type Manifest struct {
	// Name is the checkpoint's name: its directory's, shared by the
	// checkpoints of every metadata server that one pdc checkpoint made.
	Name string `json:"name"`
	// Rank is the rank whose store it copies; Store that store's id
	// (empty for a store from before ids).
	Rank  int    `json:"rank"`
	Store string `json:"store,omitempty"`
	// Created is when it was written, RFC 3339.
	Created string           `json:"created"`
	Files   []CheckpointFile `json:"files"`
}

// CheckpointFile is one file of a checkpoint.
type CheckpointFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

// EncodeManifest returns m in the manifest format.
func EncodeManifest(m Manifest) []byte {
	body, _ := json.Marshal(m) // plain fields: never fails
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %d\n", manifestMagic, manifestVersion)
	b.Write(body)
	b.WriteByte('\n')
	fmt.Fprintf(&b, "crc32c %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

// DecodeManifest decodes the manifest at path from b. A version this
// build does not read is pdc.ErrVersion; anything else wrong (a torn or
// edited file) is pdc.ErrCorrupt. Both errors name path.
func DecodeManifest(path string, b []byte) (Manifest, error) {
	head, rest, ok := bytes.Cut(b, []byte{'\n'})
	magic, ver, ok2 := strings.Cut(string(head), " ")
	if !ok || !ok2 || magic != manifestMagic {
		return Manifest{}, fmt.Errorf("checkpoint manifest %s: not a checkpoint manifest (it begins %q): %w", path, clip(head), pdc.ErrCorrupt)
	}
	v, err := strconv.Atoi(ver)
	if err != nil {
		return Manifest{}, fmt.Errorf("checkpoint manifest %s: version %q: %w", path, clip([]byte(ver)), pdc.ErrCorrupt)
	}
	if v != manifestVersion {
		return Manifest{}, fmt.Errorf("checkpoint manifest %s: format version %d, this build reads version %d: %w", path, v, manifestVersion, pdc.ErrVersion)
	}
	const tail = len("crc32c 01234567\n")
	if len(rest) < tail || !bytes.HasPrefix(rest[len(rest)-tail:], []byte("crc32c ")) || rest[len(rest)-1] != '\n' {
		return Manifest{}, fmt.Errorf("checkpoint manifest %s: no checksum at its end (torn): %w", path, pdc.ErrCorrupt)
	}
	end := len(b) - tail
	want, err := strconv.ParseUint(string(b[end+len("crc32c "):len(b)-1]), 16, 32)
	if err != nil {
		return Manifest{}, fmt.Errorf("checkpoint manifest %s: checksum %q: %w", path, b[end:len(b)-1], pdc.ErrCorrupt)
	}
	if got := crc32.Checksum(b[:end], castagnoli); got != uint32(want) {
		return Manifest{}, fmt.Errorf("checkpoint manifest %s: crc %08x, stored %08x (torn or edited): %w", path, got, want, pdc.ErrCorrupt)
	}
	var m Manifest
	if err := json.Unmarshal(b[len(head)+1:end], &m); err != nil {
		return Manifest{}, fmt.Errorf("checkpoint manifest %s: %v: %w", path, err, pdc.ErrCorrupt)
	}
	if m.Rank < 0 || m.Rank > 1<<30 {
		return Manifest{}, fmt.Errorf("checkpoint manifest %s: rank %d: %w", path, m.Rank, pdc.ErrCorrupt)
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if !plainName(f.Name) || f.Name == ManifestFile || seen[f.Name] || f.Size < 0 {
			return Manifest{}, fmt.Errorf("checkpoint manifest %s: file entry %q (size %d): %w", path, f.Name, f.Size, pdc.ErrCorrupt)
		}
		seen[f.Name] = true
	}
	return m, nil
}

// plainName says whether name names a file in a directory, nothing
// above or below it.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

func clip(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

// ValidCheckpointName checks a checkpoint name given by a user: it
// becomes a directory name under every metadata server's checkpoint dir.
func ValidCheckpointName(name string) error {
	if name == "" || len(name) > 64 || name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("checkpoint name %q: want 1 to 64 letters, digits, '.', '_' or '-', not beginning with '.' or '-': %w", name, pdc.ErrInvalid)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("checkpoint name %q: %q is not a letter, digit, '.', '_' or '-': %w", name, r, pdc.ErrInvalid)
		}
	}
	return nil
}

// writeManifest lists the files of the checkpoint in dest, with their
// sizes and CRCs, in its manifest, and makes it durable.
func writeManifest(fsys vfs.FS, dest string, rank int, store string) error {
	names, err := fsys.List(dest)
	if err != nil {
		return err
	}
	m := Manifest{Name: filepath.Base(dest), Rank: rank, Store: store, Created: time.Now().UTC().Format(time.RFC3339Nano)}
	for _, n := range names {
		p := filepath.Join(dest, n)
		st, err := fsys.Stat(p)
		if err != nil {
			return err
		}
		if st.IsDir() {
			return fmt.Errorf("checkpoint %s: holds a directory, %s, which a checkpoint of this build cannot list: %w", dest, n, pdc.ErrInvalid)
		}
		size, crc, err := fileCRC(fsys, p, nil)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, CheckpointFile{Name: n, Size: size, CRC32C: crc})
	}
	// Pebble synced the files it linked or copied; the identity was
	// written atomically. The manifest, last, says the checkpoint is
	// whole.
	return atomicfile.WriteFS(fsys, filepath.Join(dest, ManifestFile), EncodeManifest(m), 0o600)
}

// fileCRC returns the size and CRC32C of the file at path, copying it to
// w as it reads, if w is not nil.
func fileCRC(fsys vfs.FS, path string, w io.Writer) (int64, uint32, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	dst := io.Writer(h)
	if w != nil {
		dst = io.MultiWriter(h, w)
	}
	n, err := io.Copy(dst, f)
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", path, err)
	}
	return n, h.Sum32(), nil
}

// VerifyCheckpoint checks the checkpoint in dir against its manifest:
// every file it lists is there with its size and CRC, no other file is,
// and the store identity it holds is the one the manifest names. It
// reads every byte and changes nothing. Errors name the checkpoint and
// what is wrong: pdc.ErrCorrupt, pdc.ErrVersion, or (no manifest)
// pdc.ErrNotFound.
func VerifyCheckpoint(fsys vfs.FS, dir string) (Manifest, error) {
	fsys = vfs.OrDefault(fsys)
	mpath := filepath.Join(dir, ManifestFile)
	b, err := vfs.ReadFile(fsys, mpath)
	if errors.Is(err, fs.ErrNotExist) {
		if _, derr := fsys.Stat(dir); derr != nil {
			return Manifest{}, fmt.Errorf("checkpoint %s: %w", dir, derr)
		}
		return Manifest{}, fmt.Errorf("checkpoint %s has no %s: it was cut short, or made by a build from before checkpoint manifests, and cannot be verified: %w",
			dir, ManifestFile, pdc.ErrNotFound)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	m, err := DecodeManifest(mpath, b)
	if err != nil {
		return Manifest{}, err
	}
	names, err := fsys.List(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	listed := map[string]bool{ManifestFile: true}
	for _, f := range m.Files {
		listed[f.Name] = true
	}
	for _, n := range names {
		if !listed[n] {
			return Manifest{}, fmt.Errorf("checkpoint %s holds %s, which its manifest does not list: %w", dir, n, pdc.ErrCorrupt)
		}
	}
	for _, f := range m.Files {
		p := filepath.Join(dir, f.Name)
		size, crc, err := fileCRC(fsys, p, nil)
		if errors.Is(err, fs.ErrNotExist) {
			return Manifest{}, fmt.Errorf("checkpoint %s: %s, which its manifest lists, is missing: %w", dir, f.Name, pdc.ErrCorrupt)
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("checkpoint %s: %w", dir, err)
		}
		if size != f.Size || crc != f.CRC32C {
			return Manifest{}, fmt.Errorf("checkpoint %s: %s has %d bytes with crc %08x, its manifest says %d with %08x: %w",
				dir, f.Name, size, crc, f.Size, f.CRC32C, pdc.ErrCorrupt)
		}
	}
	if m.Store != "" {
		id, err := ReadIdentity(fsys, dir)
		if err != nil {
			return Manifest{}, fmt.Errorf("checkpoint %s: %w", dir, err)
		}
		if id.ID != m.Store || id.Rank != m.Rank {
			return Manifest{}, fmt.Errorf("checkpoint %s: holds store %s of rank %d, its manifest says %s of rank %d: %w",
				dir, id.ID, id.Rank, m.Store, m.Rank, pdc.ErrCorrupt)
		}
	}
	return m, nil
}

// RestoreSuffix and PreviousSuffix name the directories a restore uses
// beside a store's: the copy being made, and the store it replaced.
const (
	RestoreSuffix  = ".restoring"
	PreviousSuffix = ".before-restore-"
)

// A restore of a store from a checkpoint takes three steps, so that the
// stores of several ranks are replaced together or not at all:
// PrepareRestore verifies the checkpoint (VerifyCheckpoint) and copies it
// beside the store (storeDir+RestoreSuffix), checking every byte against
// the manifest again and syncing the copy; only then does SwapRestored
// move the store aside (storeDir+PreviousSuffix+time) and the copy into
// its place, and sync their parent dir. Until the swap, storeDir is
// untouched, and AbortRestore removes the copy. A swap cut short between
// its two renames leaves no storeDir but both the copy and the previous
// store; a restore run again completes it. No server may have the store
// open meanwhile.

// PrepareRestore verifies the checkpoint in cp and copies it next to
// storeDir for SwapRestored. It changes nothing else.
func PrepareRestore(fsys vfs.FS, cp, storeDir string) (Manifest, error) {
	fsys = vfs.OrDefault(fsys)
	m, err := VerifyCheckpoint(fsys, cp)
	if err != nil {
		return Manifest{}, err
	}
	tmp := storeDir + RestoreSuffix
	if err := fsys.RemoveAll(tmp); err != nil {
		return Manifest{}, fmt.Errorf("restore %s: remove the copy of an earlier restore: %w", storeDir, err)
	}
	if err := copyCheckpoint(fsys, cp, tmp, m); err != nil {
		_ = fsys.RemoveAll(tmp)
		return Manifest{}, fmt.Errorf("restore %s from %s: %w", storeDir, cp, err)
	}
	return m, nil
}

// AbortRestore removes the copy PrepareRestore made for storeDir.
func AbortRestore(fsys vfs.FS, storeDir string) error {
	return vfs.OrDefault(fsys).RemoveAll(storeDir + RestoreSuffix)
}

// SwapRestored puts the copy PrepareRestore made in storeDir's place and
// returns where the store it replaced now is ("" if there was none).
func SwapRestored(fsys vfs.FS, storeDir string) (prev string, err error) {
	fsys = vfs.OrDefault(fsys)
	tmp := storeDir + RestoreSuffix
	if _, err := fsys.Stat(storeDir); err == nil {
		prev = storeDir + PreviousSuffix + time.Now().UTC().Format(CheckpointTimeLayout)
		if err := fsys.Rename(storeDir, prev); err != nil {
			return "", fmt.Errorf("restore %s: move the store aside: %w", storeDir, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("restore %s: %w", storeDir, err)
	}
	if err := fsys.Rename(tmp, storeDir); err != nil {
		return prev, fmt.Errorf("restore %s: put the restored copy %s in its place (the store it replaces is %s; run the restore again): %w", storeDir, tmp, prev, err)
	}
	parent := filepath.Dir(storeDir)
	if err := fsys.SyncDir(parent); err != nil {
		return prev, fmt.Errorf("restore %s: sync %s: %w", storeDir, parent, err)
	}
	return prev, nil
}

// copyCheckpoint copies the files m lists from cp into a new dir dst,
// each synced and checked against m as it is copied, then syncs dst.
func copyCheckpoint(fsys vfs.FS, cp, dst string, m Manifest) error {
	if err := fsys.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	for _, f := range m.Files {
		out, err := fsys.OpenFile(filepath.Join(dst, f.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		size, crc, err := fileCRC(fsys, filepath.Join(cp, f.Name), out)
		if err == nil {
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if size != f.Size || crc != f.CRC32C {
			return fmt.Errorf("%s changed while it was copied: %d bytes with crc %08x, its manifest says %d with %08x: %w",
				filepath.Join(cp, f.Name), size, crc, f.Size, f.CRC32C, pdc.ErrCorrupt)
		}
	}
	return fsys.SyncDir(dst)
}
