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

// frameWAL lays records out as the log does (wal.append), in a file
// written with sync durability. If acked, each record's mark says all
// before it was durable; else none is, as after a crash before any
// fsync of the file.
func frameWAL(acked bool, recs ...[]byte) []byte {
	b := walHeader(true)
	for _, r := range recs {
		mark := uint64(walHeaderLen)
		if acked {
			mark = uint64(len(b))
		}
		h := make([]byte, walRecHeaderLen)
		frame(h, r, mark)
		b = append(append(b, h...), r...)
	}
	return b
}

// frameWALv1 lays records out as version 1 of the log did.
func frameWALv1(recs ...[]byte) []byte {
	b := []byte(walMagicV1)
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
// fails only as a log of another format (pdc.ErrVersion) or a damaged one
// (pdc.ErrCorrupt). A log of framed records gives back exactly its
// non-empty records up to the first empty one, unless the records' marks
// say that one was acknowledged and a non-empty one follows it: then it
// fails with pdc.ErrCorrupt. Replaying any record into pebble fails with
// an error or applies it, never panics.
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
		f.Add(frameWAL(false, set, mixed), fix)
		f.Add(frameWALv1(set, mixed), fix)
		for _, acked := range []byte{0, 1} {
			f.Add(append([]byte{acked}, joinRecords(set, mixed)...), fix)
			f.Add(append([]byte{acked}, joinRecords(mixed[:len(mixed)-1])...), fix)
			f.Add(append([]byte{acked}, joinRecords(set[:12])...), fix)
			f.Add(append([]byte{acked}, joinRecords(set, nil, mixed)...), fix)
		}
	}
	// An acknowledged record damaged in the middle of the log.
	damaged := frameWAL(true, set, mixed, set)
	damaged[walHeaderLen+walRecHeaderLen+3] ^= 1
	f.Add(damaged, false)
	f.Add([]byte(walMagic[:3]), false)
	f.Add(append(frameWAL(false, set), 0, 0, 0, 0, 0, 0, 0, 0), false)
	f.Add(append(frameWALv1(set), 0, 0, 0, 0, 0, 0, 0, 0), false)
	f.Fuzz(func(t *testing.T, in []byte, fix bool) {
		data, want, wantCorrupt := in, [][]byte(nil), false
		if fix && len(in) > 0 {
			// The first byte says whether the marks acknowledge every
			// record before theirs; the rest are the records.
			acked := in[0]&1 == 1
			want = splitRecords(in[1:])
			data = frameWAL(acked, want...)
			for i, r := range want {
				if len(r) == 0 {
					for _, later := range want[i:] {
						wantCorrupt = wantCorrupt || acked && len(later) > 0
					}
					want = want[:i] // a zero length ends the log
					break
				}
			}
		}
		recs, err := parseWAL("pdc.wal", data)
		if fix && wantCorrupt != errors.Is(err, pdc.ErrCorrupt) {
			t.Fatalf("an acknowledged empty record before a non-empty one: %v; want corrupt %v", err, wantCorrupt)
		}
		if err != nil {
			if fix && !wantCorrupt || !errors.Is(err, pdc.ErrVersion) && !errors.Is(err, pdc.ErrCorrupt) {
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
