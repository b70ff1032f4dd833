package metastore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
)

// A checkpoint ends with a manifest that VerifyCheckpoint checks: any
// file missing, added, cut or changed, a manifest torn or of another
// version, is refused with the error that says which.
func TestVerifyCheckpoint(t *testing.T) {
	fresh := func(t *testing.T) (vfs.FS, string) {
		fsys := vfs.NewMem()
		s := mustOpenFS(t, fsys, DurabilityProcess)
		defer s.close()
		if _, _, err := EnsureIdentity(fsys, faultDir, 1); err != nil {
			t.Fatal(err)
		}
		put(t, s, "k", "v")
		cp, err := s.checkpoint(context.Background(), "/data/checkpoints/meta-1", "saved")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.checkpoint(context.Background(), "/data/checkpoints/meta-1", "saved"); !errors.Is(err, pdc.ErrExists) {
			t.Fatalf("a second checkpoint of one name: %v, want ErrExists", err)
		}
		return fsys, cp
	}
	fsys, cp := fresh(t)
	m, err := VerifyCheckpoint(fsys, cp)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "saved" || m.Rank != 1 || m.Store == "" || len(m.Files) < 3 {
		t.Fatalf("manifest %+v", m)
	}
	largest := m.Files[0]
	for _, f := range m.Files {
		if f.Size > largest.Size {
			largest = f
		}
	}
	rewrite := func(fsys vfs.FS, name string, edit func([]byte) []byte) {
		p := filepath.Join(cp, name)
		b, err := vfs.ReadFile(fsys, p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := fsys.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(edit(bytes.Clone(b))); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, c := range []struct {
		name   string
		damage func(fsys vfs.FS)
		want   error
		says   string
	}{
		{"a byte changed", func(fsys vfs.FS) {
			rewrite(fsys, largest.Name, func(b []byte) []byte { b[len(b)/2] ^= 1; return b })
		}, pdc.ErrCorrupt, largest.Name},
		{"cut short", func(fsys vfs.FS) {
			rewrite(fsys, largest.Name, func(b []byte) []byte { return b[:len(b)-1] })
		}, pdc.ErrCorrupt, largest.Name},
		{"a file missing", func(fsys vfs.FS) { _ = fsys.Remove(filepath.Join(cp, largest.Name)) }, pdc.ErrCorrupt, "is missing"},
		{"a file added", func(fsys vfs.FS) {
			f, _ := fsys.Create(filepath.Join(cp, "000099.sst"))
			f.Close()
		}, pdc.ErrCorrupt, "000099.sst"},
		{"no manifest", func(fsys vfs.FS) { _ = fsys.Remove(filepath.Join(cp, ManifestFile)) }, pdc.ErrNotFound, "cannot be verified"},
		{"manifest torn", func(fsys vfs.FS) {
			rewrite(fsys, ManifestFile, func(b []byte) []byte { return b[:len(b)-5] })
		}, pdc.ErrCorrupt, ManifestFile},
		{"manifest of another version", func(fsys vfs.FS) {
			rewrite(fsys, ManifestFile, func(b []byte) []byte {
				return bytes.Replace(b, []byte("pdc-checkpoint 1\n"), []byte("pdc-checkpoint 2\n"), 1)
			})
		}, pdc.ErrVersion, "version 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys, cp := fresh(t)
			c.damage(fsys)
			_, err := VerifyCheckpoint(fsys, cp)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("VerifyCheckpoint: %v; want %v saying %q", err, c.want, c.says)
			}
			// Nothing is restored from it, and the store stays.
			store := "/data/meta-1"
			if _, err := PrepareRestore(fsys, cp, store); !errors.Is(err, c.want) {
				t.Fatalf("PrepareRestore: %v; want %v", err, c.want)
			}
			if _, err := fsys.Stat(store + RestoreSuffix); err == nil {
				t.Fatal("a refused restore left its copy")
			}
		})
	}
}

// A restore copies the checkpoint beside the store and swaps it in; the
// restored store opens with what the checkpoint held, and the store it
// replaced is kept.
func TestRestoreCheckpoint(t *testing.T) {
	fsys := vfs.NewMem()
	s := mustOpenFS(t, fsys, DurabilityProcess)
	put(t, s, "k", "before")
	cp, err := s.checkpoint(context.Background(), "/data/checkpoints/meta-0", "saved")
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "k", "after")
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := PrepareRestore(fsys, cp, faultDir); err != nil {
		t.Fatal(err)
	}
	if v := getIn(t, fsys, faultDir); v != "after" {
		t.Fatalf("the store before the swap reads %q", v)
	}
	prev, err := SwapRestored(fsys, faultDir)
	if err != nil {
		t.Fatal(err)
	}
	if v := getIn(t, fsys, faultDir); v != "before" {
		t.Fatalf("the restored store reads %q, want the checkpoint's", v)
	}
	if v := getIn(t, fsys, prev); v != "after" {
		t.Fatalf("the store kept as %s reads %q", prev, v)
	}
}

func getIn(t *testing.T, fsys vfs.FS, dir string) string {
	t.Helper()
	s, err := openStoreFS(fsys, dir, DurabilityProcess, 1<<20, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	v, ok, err := s.Get([]byte("k"))
	if err != nil || !ok {
		t.Fatalf("get k: %v %v", ok, err)
	}
	return string(v)
}

func FuzzDecodeManifest(f *testing.F) {
	good := EncodeManifest(Manifest{Name: "saved", Rank: 2, Store: "00112233445566778899aabbccddeeff", Created: "2026-11-29T03:00:00Z",
		Files: []CheckpointFile{{Name: "000004.sst", Size: 1234, CRC32C: 0xdeadbeef}, {Name: "MANIFEST-000001", Size: 99, CRC32C: 1}}})
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte("pdc-checkpoint 2\n{}\ncrc32c 00000000\n"))
	f.Add([]byte("pdc-checkpoint 1\n{\"files\":[{\"name\":\"../x\"}]}\ncrc32c 00000000\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest("m", b)
		if err != nil {
			if !errors.Is(err, pdc.ErrCorrupt) && !errors.Is(err, pdc.ErrVersion) {
				t.Fatalf("error of neither kind: %v", err)
			}
			return
		}
		again, err := DecodeManifest("m", EncodeManifest(m))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", m, again, err)
		}
	})
}
