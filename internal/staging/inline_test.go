package staging

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// A produce carries a file of up to InlineMax bytes whole in its record,
// empty ones included, and a larger one not.
func TestProduceCarriesSmallFiles(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, "producer", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, InlineMax, InlineMax + 1} {
		data := bytes.Repeat([]byte{byte(n)}, n)
		rel := filepath.Join("f", string(rune('a'+n%26)))
		if err := os.MkdirAll(filepath.Join(root, "f"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), data, 0o600); err != nil {
			t.Fatal(err)
		}
		f, rec, err := OpenProduced(context.Background(), d, rel, filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		want := n <= InlineMax
		if rec.Inline() != want || rec.Format != wire.StageVersion || rec.CRC != crc32.Checksum(data, Table) ||
			(want && !bytes.Equal(rec.Data, data)) || (!want && len(rec.Data) != 0) {
			t.Errorf("%d bytes: record inline %v, format %d, %d bytes carried; want inline %v", n, rec.Inline(), rec.Format, len(rec.Data), want)
		}
	}
}

// PlaceInline installs the bytes a record carries as a current copy, and
// refuses bytes that do not match the record's CRC, leaving nothing.
// Newer tells a copy of a later produce (higher version, produced later)
// from an older one, and from a path produced again after its record was
// removed (versions start again).
func TestPlaceInline(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, "consumer", false)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("a small file")
	rec := &wire.StageRecord{Path: "s", Version: 2, Host: "h", Size: uint64(len(data)), CRC: crc32.Checksum(data, Table),
		Produced: 200, Format: wire.StageFormatInline, Data: data}
	abs := filepath.Join(root, "s")
	bad := *rec
	bad.Data = []byte("a small fill")
	if err := PlaceInline(d, "s", abs, filepath.Join(root, ".s.tmp"), &bad); !errors.Is(err, pdc.ErrChecksum) {
		t.Fatalf("bytes not matching the CRC: %v, want %v", err, pdc.ErrChecksum)
	}
	if left, _ := os.ReadDir(root); len(left) != 0 {
		t.Fatalf("a refused copy left %v", left)
	}
	if err := PlaceInline(d, "s", abs, filepath.Join(root, ".s.tmp"), rec); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(abs); err != nil || !bytes.Equal(got, data) || !d.Current("s", abs, rec) {
		t.Fatalf("placed copy: %q, %v, current %v", got, err, d.Current("s", abs, rec))
	}
	older := *rec
	older.Version, older.Produced = 1, 100
	if held, ok := d.Newer("s", abs, &older); !ok || held.Version != 2 || len(held.Data) != 0 {
		t.Errorf("the copy of version 2 against version 1: newer %v, %+v", ok, held)
	}
	if _, ok := d.Newer("s", abs, rec); ok {
		t.Error("the copy of version 2 is newer than itself")
	}
	again := *rec
	again.Version, again.Produced = 1, 300 // removed and produced again
	if _, ok := d.Newer("s", abs, &again); ok {
		t.Error("the copy of version 2 is newer than a later produce of version 1")
	}
}
