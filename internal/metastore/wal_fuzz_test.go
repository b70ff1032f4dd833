package metastore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/pdcgo/pdc"
)

// frameWAL lays records out as the log does (wal.append).
func frameWAL(recs ...[]byte) []byte {
	b := []byte(walMagic)
	for _, r := range recs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(r)))
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(r, castagnoli))
		b = append(b, r...)
	}
	return b
}

// splitRecords cuts fuzz input into records: each a u16 length and that
// many bytes (fewer at the end). Framing them with a right CRC lets the
// fuzzer reach the batch decoding behind the checksum.
func splitRecords(in []byte) [][]byte {
	var recs [][]byte
	for len(in) >= 2 {
		n := min(int(binary.LittleEndian.Uint16(in)), len(in)-2)
		recs = append(recs, in[2:2+n])
		in = in[2+n:]
	}
	return recs
}

func joinRecords(recs ...[]byte) []byte {
	var b []byte
	for _, r := range recs {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(r)))
		b = append(b, r...)
	}
	return b
}

// FuzzWALReplay: a metadata log of any bytes parses without panicking and
// fails only as a log of another format (pdc.ErrVersion); a log of framed
// records gives back exactly its non-empty records up to the first empty
// one; replaying any record into pebble fails with an error or applies
// it, never panics.
func FuzzWALReplay(f *testing.F) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), DisableWAL: true, Logger: newStoreLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = db.Close() })
	batch := func(fn func(b *pebble.Batch)) []byte {
		b := db.NewBatch()
		fn(b)
		return bytes.Clone(b.Repr())
	}
	set := batch(func(b *pebble.Batch) { _ = b.Set([]byte("O\x00\x01"), []byte("meta"), nil) })
	mixed := batch(func(b *pebble.Batch) {
		_ = b.Set([]byte("k1"), []byte("v1"), nil)
		_ = b.Delete([]byte("k0"), nil)
		_ = b.DeleteRange([]byte("a"), []byte("b"), nil)
		_ = b.SingleDelete([]byte("k2"), nil)
	})
	for _, fix := range []bool{false, true} {
		f.Add(frameWAL(set, mixed), fix)
		f.Add(joinRecords(set, mixed), fix)
		f.Add(joinRecords(mixed[:len(mixed)-1]), fix)
		f.Add(joinRecords(set[:12]), fix)
	}
	f.Add([]byte(walMagic[:3]), false)
	f.Add(append(frameWAL(set), 0, 0, 0, 0, 0, 0, 0, 0), false)
	f.Fuzz(func(t *testing.T, in []byte, fix bool) {
		data, want := in, [][]byte(nil)
		if fix {
			want = splitRecords(in)
			data = frameWAL(want...)
			for i, r := range want {
				if len(r) == 0 {
					want = want[:i] // a zero length ends the log
					break
				}
			}
		}
		recs, err := parseWAL("pdc.wal", data)
		if err != nil {
			if !errors.Is(err, pdc.ErrVersion) || fix {
				t.Fatalf("parse: %v", err)
			}
			return
		}
		if fix {
			if len(recs) != len(want) {
				t.Fatalf("%d records framed, %d parsed", len(want), len(recs))
			}
			for i := range recs {
				if !bytes.Equal(recs[i], want[i]) {
					t.Fatalf("record %d: got %x, want %x", i, recs[i], want[i])
				}
			}
		}
		for _, r := range recs {
			_ = replayRecord(db, r)
		}
	})
}
