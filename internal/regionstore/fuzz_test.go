package regionstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/region"
)

// Decoding a by-offset header never panics, and what decodes encodes back
// to the same bytes. Each input is tried as it is and with its CRC made
// right, which the fuzzer would not find on its own.
func FuzzOffsetHeader(f *testing.F) {
	f.Add(newOffsetFile(1, "x", 8, []uint64{1, 3, 4}, minTableBlocks).encodeHeader())
	f.Add(newOffsetFile(2, "x", 8, []uint64{1, 3, 4}, minTableBlocks).encodeHeader())
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, b := range [][]byte{in, withOffsetHeaderCRC(in)} {
			o, err := decodeOffsetHeader("x", b)
			if err != nil {
				if !errors.Is(err, pdc.ErrCorrupt) && !errors.Is(err, pdc.ErrVersion) {
					t.Fatalf("header %x: error %v wraps neither ErrCorrupt nor ErrVersion", b, err)
				}
				continue
			}
			// Bytes 20-23 are padding, which the decoder does not read
			// and the encoder writes as zeros; the CRC covers them.
			enc := o.encodeHeader()
			n := 32 + 8*(o.ndim-1) + 4
			want := bytes.Clone(b[:n])
			if !allZero(want[20:24]) {
				clear(want[20:24])
				binary.LittleEndian.PutUint32(want[n-4:], crc32.Checksum(want[:n-4], sumTable(o.version)))
			}
			if !bytes.Equal(enc[:n], want) {
				t.Fatalf("header %x re-encodes as %x", b[:n], enc[:n])
			}
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

// withOffsetHeaderCRC returns b with the CRC of its by-offset header
// recomputed, so that the fuzzer reaches what lies behind the check.
func withOffsetHeaderCRC(b []byte) []byte {
	if len(b) < 32 {
		return b
	}
	ndim := binary.LittleEndian.Uint32(b[16:])
	if ndim == 0 || ndim > region.MaxDims {
		return b
	}
	end := 32 + 8*int(ndim-1)
	if len(b) < end+4 {
		return b
	}
	b = bytes.Clone(b)
	version := binary.LittleEndian.Uint32(b[8:])
	if version < 1 || version > offVersion {
		return b
	}
	binary.LittleEndian.PutUint32(b[end:], crc32.Checksum(b[:end], sumTable(version)))
	return b
}

// A by-offset file of any bytes, with its header's CRC made right, opens
// or fails with an error; what opens reads back as data or as an error
// wrapping pdc.ErrCorrupt, never a panic.
func FuzzOffsetFile(f *testing.F) {
	o := newOffsetFile(offVersion, "x", 2, []uint64{3, 4}, 16)
	hdr := o.encodeHeader()
	table := make([]byte, tableBytes(16))
	data := []byte("0123456789abcdefghijklmnopqrstuv")
	binary.LittleEndian.PutUint32(table, crc32.Checksum(append(bytes.Clone(data), make([]byte, blockSize-int64(len(data)))...), sumTable(offVersion)))
	f.Add(cat(hdr, table, data), uint8(3))
	f.Add(cat(hdr, table[:8]), uint8(1))
	f.Add(cat(newOffsetFile(1, "x", 1, []uint64{1}, 1).encodeHeader(), make([]byte, 4096), []byte{7}), uint8(9))
	f.Add(hdr[:40], uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, first uint8) {
		path := filepath.Join(t.TempDir(), "0000000000000001.off")
		if err := os.WriteFile(path, withOffsetHeaderCRC(b), 0o644); err != nil {
			t.Fatal(err)
		}
		fh, err := vfs.Default.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = fh.Close() }()
		o, err := loadOffsetFile(path, fh)
		if err != nil {
			if !errors.Is(err, pdc.ErrCorrupt) && !errors.Is(err, pdc.ErrVersion) {
				t.Fatalf("open: error %v wraps neither ErrCorrupt nor ErrVersion", err)
			}
			return
		}
		dims := o.dims(uint64(first) + 1)
		box := region.Shape(dims...)
		n, err := bytesNeeded(dims, box, o.elem)
		if err != nil || n > 1<<16 {
			return
		}
		if err := o.read(fh, dims, box, make([]byte, n)); err != nil && !errors.Is(err, pdc.ErrCorrupt) {
			t.Fatalf("read %v: %v", box, err)
		}
	})
}

// An index checkpoint of any body, with its CRC made right, next to an
// intact log, opens; the pieces it keeps read back as data or as
// pdc.ErrCorrupt, never a panic.
func FuzzIndexCheckpoint(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "0000000000000001.reg")
	l, err := createRegionLog(vfs.Default, path, 1, 2, 0, false)
	if err != nil {
		f.Fatal(err)
	}
	fh, err := vfs.Default.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		f.Fatal(err)
	}
	for i, box := range []region.Box{
		{Off: []uint64{0, 0}, Size: []uint64{2, 3}},
		{Off: []uint64{1, 1}, Size: []uint64{3, 2}},
		{Off: []uint64{0, 2}, Size: []uint64{4, 1}},
	} {
		if err := l.write(fh, box, bytes.Repeat([]byte{byte('a' + i)}, int(box.Volume()))); err != nil {
			f.Fatal(err)
		}
	}
	if err := l.checkpoint(fh, false); err != nil {
		f.Fatal(err)
	}
	_ = fh.Close()
	log, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	idx, err := os.ReadFile(idxPathOf(path))
	if err != nil {
		f.Fatal(err)
	}
	body := idx[:len(idx)-4]
	f.Add(body)
	f.Add(body[:48])
	f.Add(body[:len(body)-8])
	f.Fuzz(func(t *testing.T, body []byte) {
		path := filepath.Join(t.TempDir(), "0000000000000001.reg")
		if err := os.WriteFile(path, log, 0o644); err != nil {
			t.Fatal(err)
		}
		idx := binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
		if err := os.WriteFile(idxPathOf(path), idx, 0o644); err != nil {
			t.Fatal(err)
		}
		fh, err := vfs.Default.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = fh.Close() }()
		l, err := loadRegionLog(vfs.Default, path, fh, false)
		if err != nil {
			t.Fatalf("open an intact log: %v", err)
		}
		for _, p := range l.pieces {
			if p.live.Volume() > 1<<16 {
				continue
			}
			if err := l.read(fh, p.live, make([]byte, p.live.Volume())); err != nil && !errors.Is(err, pdc.ErrCorrupt) {
				t.Fatalf("read %v: %v", p.live, err)
			}
		}
	})
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
