package regionstore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// Decoding a by-offset header never panics, and what decodes encodes back
// to the same bytes.
func FuzzOffsetHeader(f *testing.F) {
	f.Add(newOffsetFile(1, "x", 8, []uint64{1, 3, 4}, minTableBlocks).encodeHeader())
	f.Add(newOffsetFile(2, "x", 8, []uint64{1, 3, 4}, minTableBlocks).encodeHeader())
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := decodeOffsetHeader("x", b)
		if err != nil {
			return
		}
		enc := o.encodeHeader()
		n := 32 + 8*(o.ndim-1) + 4
		if !bytes.Equal(enc[:n], b[:n]) {
			t.Fatalf("header %x re-encodes as %x", b[:n], enc[:n])
		}
	})
}

// Opening a log of any bytes after a valid header never panics, and
// whatever it keeps reads back without error or is corrupt.
func FuzzLogReplay(f *testing.F) {
	sum := sumTable(regVersion)
	rec := encodeRecHeader(sum, kindData, 1, region.Box{Off: []uint64{2, 0}, Size: []uint64{2, 3}}, 6, crcsOf(sum, []byte("abcdef")))
	f.Add(append(rec, "abcdef"...))
	f.Add(encodeRecHeader(sum, kindClip, 2, region.Shape(3, 3), 0, nil))
	f.Fuzz(func(t *testing.T, tail []byte) {
		path := filepath.Join(t.TempDir(), "0000000000000001.reg")
		if err := os.WriteFile(path, append(encodeRegHeader(regVersion, 1, 2), tail...), 0o644); err != nil {
			t.Fatal(err)
		}
		fh, err := vfs.Default.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = fh.Close() }()
		l, err := loadRegionLog(vfs.Default, path, fh, false)
		if err != nil {
			return
		}
		for _, p := range l.pieces {
			if p.live.Volume() > 1<<16 {
				continue
			}
			_ = l.read(fh, p.live, make([]byte, p.live.Volume()))
		}
	})
}
