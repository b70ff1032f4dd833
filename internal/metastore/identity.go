package metastore

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/vfs"
)

// IdentityFile is the name, in a store's dir, of the file that holds the
// store's identity.
const IdentityFile = "STORE-ID"

// The identity file is one frame:
//
//	magic [8] | version u32 | body length u32 | body | crc32c u32
//
// all little-endian, the CRC over everything before it; the body is the
// rank u32 and the 16 bytes of the id.
const (
	identityMagic   = "pdcmsid\x00"
	identityVersion = 1
	identityIDBytes = 16
	identityBody    = 4 + identityIDBytes
)

// Identity names one metadata store for as long as it exists, wherever
// its dir is: a store made again under the same name (a rank started on
// a node that does not have its store) has another ID.
type Identity struct {
	// ID is 32 hex digits, random, made with the store.
	ID string
	// Rank is the rank the store was made for.
	Rank int
}

// ReadIdentity reads the identity of the store in dir. A store without
// one (none in dir yet, or one made before stores had identities) is an
// error that matches fs.ErrNotExist; a file that is torn, edited or not
// ours is pdc.ErrCorrupt, and one of another version pdc.ErrVersion.
func ReadIdentity(fsys vfs.FS, dir string) (Identity, error) {
	path := filepath.Join(dir, IdentityFile)
	f, err := vfs.OrDefault(fsys).Open(path)
	if err != nil {
		return Identity{}, fmt.Errorf("metadata store identity: %w", err)
	}
	defer f.Close()
	// Anything longer than a frame is not one: read one byte more than
	// the longest to say so without reading a hostile file whole.
	b, err := io.ReadAll(io.LimitReader(f, 16+identityBody+4+1))
	if err != nil {
		return Identity{}, fmt.Errorf("metadata store identity %s: %w", path, err)
	}
	return decodeIdentity(path, b)
}

// EnsureIdentity returns the identity of the store in dir, first making
// one for rank, crash-safely, if the store has none: made reports that
// it did. Call it once the store is open, so that an identity is never
// recorded for a store that failed to open.
func EnsureIdentity(fsys vfs.FS, dir string, rank int) (id Identity, made bool, err error) {
	fsys = vfs.OrDefault(fsys)
	id, err = ReadIdentity(fsys, dir)
	if !errors.Is(err, fs.ErrNotExist) {
		return id, false, err
	}
	raw := make([]byte, identityIDBytes)
	_, _ = rand.Read(raw)
	id = Identity{ID: hex.EncodeToString(raw), Rank: rank}
	if err := atomicfile.WriteFS(fsys, filepath.Join(dir, IdentityFile), encodeIdentity(rank, raw), 0o600); err != nil {
		return Identity{}, false, fmt.Errorf("metadata store identity: %w", err)
	}
	return id, true, nil
}

// encodeIdentity frames rank and the id's bytes, raw.
func encodeIdentity(rank int, raw []byte) []byte {
	b := make([]byte, 0, 16+identityBody+4)
	b = append(b, identityMagic...)
	b = binary.LittleEndian.AppendUint32(b, identityVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(4+len(raw)))
	b = binary.LittleEndian.AppendUint32(b, uint32(rank))
	b = append(b, raw...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeIdentity decodes the bytes of the identity file at path.
func decodeIdentity(path string, b []byte) (Identity, error) {
	if len(b) < 16+4 || string(b[:8]) != identityMagic {
		return Identity{}, fmt.Errorf("metadata store identity %s: not a metadata store identity (%d bytes; empty, torn or another file): %w", path, len(b), pdc.ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != identityVersion {
		return Identity{}, fmt.Errorf("metadata store identity %s: format version %d, this build reads version %d: %w", path, v, identityVersion, pdc.ErrVersion)
	}
	n := binary.LittleEndian.Uint32(b[12:])
	if n != identityBody || len(b) != 16+identityBody+4 {
		return Identity{}, fmt.Errorf("metadata store identity %s: %d bytes with a body of %d, want %d with %d (torn or edited): %w",
			path, len(b), n, 16+identityBody+4, identityBody, pdc.ErrCorrupt)
	}
	end := 16 + identityBody
	if got, want := crc32.Checksum(b[:end], castagnoli), binary.LittleEndian.Uint32(b[end:]); got != want {
		return Identity{}, fmt.Errorf("metadata store identity %s: crc %08x, stored %08x: %w", path, got, want, pdc.ErrCorrupt)
	}
	rank := binary.LittleEndian.Uint32(b[16:])
	if rank > 1<<30 {
		return Identity{}, fmt.Errorf("metadata store identity %s: rank %d: %w", path, rank, pdc.ErrCorrupt)
	}
	return Identity{ID: hex.EncodeToString(b[20:end]), Rank: int(rank)}, nil
}

// copyIdentity copies the identity of the store in dir, if it has one, to
// the checkpoint in dest: a checkpoint put back in the store's place is
// the same store, and its rank can rejoin the cluster with it.
func copyIdentity(fsys vfs.FS, dir, dest string) error {
	id, err := ReadIdentity(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// The id was decoded from these hex digits: it encodes back.
	raw, _ := hex.DecodeString(id.ID)
	return atomicfile.WriteFS(fsys, filepath.Join(dest, IdentityFile), encodeIdentity(id.Rank, raw), 0o600)
}
