package metastore

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/atomicfile"
	"github.com/pdcgo/pdc/internal/vfs"
)

func TestIdentityMadeOnceAndKept(t *testing.T) {
	fsys := vfs.NewMem()
	if _, err := ReadIdentity(fsys, faultDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a store with no identity: %v, want fs.ErrNotExist", err)
	}
	s := mustOpenFS(t, fsys, DurabilityProcess)
	defer s.close()
	id, made, err := EnsureIdentity(fsys, faultDir, 3)
	if err != nil || !made || len(id.ID) != 32 || id.Rank != 3 {
		t.Fatalf("first EnsureIdentity: %+v, made %v, %v", id, made, err)
	}
	// A power loss now keeps it: it was written temp, fsync, rename,
	// fsync dir.
	again, made, err := EnsureIdentity(fsys.CrashClone(), faultDir, 5)
	if err != nil || made || again != id {
		t.Fatalf("after a power loss: %+v, made %v, %v; want %+v kept", again, made, err, id)
	}
	elsewhere := vfs.NewMem()
	if err := elsewhere.MkdirAll(faultDir, 0o700); err != nil {
		t.Fatal(err)
	}
	other, _, err := EnsureIdentity(elsewhere, faultDir, 3)
	if err != nil || other.ID == id.ID {
		t.Fatalf("another store made under the same name: %+v, %v; want another id than %s", other, err, id.ID)
	}
}

// A write of the identity that fails midway (the disk full, the process
// killed before the rename) leaves no identity: never a torn one that the
// next start would take as corrupt.
func TestIdentityFailedWriteLeavesNone(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll(faultDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpRename} {
		f := vfs.NewFaulty(mem)
		f.Inject(vfs.Rule{Ops: op, Path: IdentityFile, Short: true})
		if _, _, err := EnsureIdentity(f, faultDir, 0); err == nil {
			t.Fatalf("%v failing: EnsureIdentity succeeded", op)
		}
		for _, clone := range []*vfs.MemFS{mem.Clone(), mem.CrashClone()} {
			if _, err := ReadIdentity(clone, faultDir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%v failing: the identity reads back as %v, want none", op, err)
			}
		}
	}
	id, made, err := EnsureIdentity(mem, faultDir, 0)
	if err != nil || !made {
		t.Fatalf("after the failures: %+v, made %v, %v", id, made, err)
	}
}

// A checkpoint is the same store: put back in its place, its rank can
// rejoin the cluster with it.
func TestCheckpointKeepsIdentity(t *testing.T) {
	fsys := vfs.NewMem()
	s := mustOpenFS(t, fsys, DurabilityProcess)
	defer s.close()
	id, _, err := EnsureIdentity(fsys, faultDir, 2)
	if err != nil {
		t.Fatal(err)
	}
	dest, err := s.checkpoint(context.Background(), "/data/checkpoints/meta-2", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReadIdentity(fsys, dest); err != nil || got != id {
		t.Fatalf("checkpoint's identity: %+v, %v; want %+v", got, err, id)
	}
}

var goodID = []byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}

func identityFrame(version, n uint32, body []byte) []byte {
	b := []byte(identityMagic)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint32(b, n)
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// Hostile, torn and foreign bytes are refused with the error that says
// which, and EnsureIdentity never replaces them with a new identity: that
// would make the store another one.
func TestIdentityRefusesBadFiles(t *testing.T) {
	good := encodeIdentity(7, goodID)
	body := good[16 : 16+identityBody]
	flipped := append([]byte(nil), good...)
	flipped[20] ^= 1
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, pdc.ErrCorrupt},
		{"torn in the header", good[:10], pdc.ErrCorrupt},
		{"torn in the body", good[:30], pdc.ErrCorrupt},
		{"torn in the crc", good[:len(good)-1], pdc.ErrCorrupt},
		{"bytes after it", append(append([]byte(nil), good...), 0), pdc.ErrCorrupt},
		{"another magic", append([]byte("pdcslot\x00"), good[8:]...), pdc.ErrCorrupt},
		{"text", []byte("0123456789abcdef0123456789abcdef\n"), pdc.ErrCorrupt},
		{"a bit flipped", flipped, pdc.ErrCorrupt},
		{"version 2", identityFrame(2, identityBody, body), pdc.ErrVersion},
		{"version 0", identityFrame(0, identityBody, body), pdc.ErrVersion},
		{"a length that lies", identityFrame(identityVersion, 1<<31, body), pdc.ErrCorrupt},
		{"a short body", identityFrame(identityVersion, 4, body[:4]), pdc.ErrCorrupt},
		{"a huge rank", identityFrame(identityVersion, identityBody, append([]byte{0xff, 0xff, 0xff, 0xff}, body[4:]...)), pdc.ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			if err := fsys.MkdirAll(faultDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := atomicfile.WriteFS(fsys, filepath.Join(faultDir, IdentityFile), c.b, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadIdentity(fsys, faultDir); !errors.Is(err, c.want) {
				t.Fatalf("ReadIdentity: %v, want %v", err, c.want)
			}
			if id, made, err := EnsureIdentity(fsys, faultDir, 7); !errors.Is(err, c.want) || made {
				t.Fatalf("EnsureIdentity: %+v, made %v, %v; want %v and nothing made", id, made, err, c.want)
			}
		})
	}
	if id, err := decodeIdentity("x", good); err != nil || id.ID != "00112233445566778899aabbccddeeff" || id.Rank != 7 {
		t.Fatalf("the good frame: %+v, %v", id, err)
	}
}

func FuzzDecodeIdentity(f *testing.F) {
	good := encodeIdentity(7, goodID)
	f.Add(good)
	f.Add(good[:30])
	f.Add([]byte{})
	f.Add(identityFrame(2, identityBody, good[16:16+identityBody]))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := decodeIdentity("fuzz", b)
		if err != nil {
			return
		}
		raw, _ := hex.DecodeString(id.ID)
		if again := encodeIdentity(id.Rank, raw); string(again) != string(b) {
			t.Fatalf("decode then encode: %x, want %x", again, b)
		}
	})
}
