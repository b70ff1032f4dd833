package staging

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

var fuzzRecord = wire.StageRecord{Path: "run/a.h5", Version: 3, Owner: 2, Host: "n1", Size: 4096, MtimeNS: -5, Ino: 77, CRC: 0xdeadbeef, Produced: 1}

// FuzzDecodeCopy: a local copy's record file of any bytes decodes or is
// refused (ok false), never panics; with its CRC made right (which the
// fuzzer would not find) the same holds; what decodes encodes back to the
// same bytes.
func FuzzDecodeCopy(f *testing.F) {
	good := encodeCopy(&fuzzRecord, 77, 123456789)
	f.Add(good, false)
	f.Add(good[:len(good)-4], true)
	f.Add(encodeCopy(&wire.StageRecord{}, 0, 0), false)
	f.Add([]byte(copyMagic+"\xff\xff\xff\xff"), true)
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, Table))
		}
		rec, ino, mtime, ok := decodeCopy(b)
		if !ok {
			return
		}
		if enc := encodeCopy(&rec, ino, mtime); string(enc) != string(b) {
			// Only a record body that is not canonical, or carries data
			// (which a copy's record leaves out), may differ.
			rec.Data = nil
			if rec2, ino2, mtime2, ok := decodeCopy(enc); !ok || !sameRecord(&rec2, &rec) || ino2 != ino || mtime2 != mtime {
				t.Fatalf("%x decodes to %+v %d %d, which re-encodes to %x", b, rec, ino, mtime, enc)
			}
		}
	})
}

// FuzzParseKey: a DTL key of any bytes is the staged-file key of the record
// it carries or is refused with a clear error, never a panic.
func FuzzParseKey(f *testing.F) {
	f.Add(FetchKey(&fuzzRecord))
	f.Add(FetchKey(&wire.StageRecord{}))
	f.Add([]byte(keyPrefix + "a\x00\x02"))
	f.Add([]byte(keyPrefix + "a\x00\x01\x0a\x05"))
	f.Add([]byte(keyPrefix))
	f.Fuzz(func(t *testing.T, key []byte) {
		rec, err := parseKey(key)
		if err != nil {
			if !errors.Is(err, pdc.ErrInvalid) && !errors.Is(err, pdc.ErrVersion) && !errors.Is(err, pdc.ErrProtocol) {
				t.Fatalf("key %q: error %v", key, err)
			}
			return
		}
		if !IsFetchKey(key) {
			t.Fatalf("parsed %q, which IsFetchKey refuses", key)
		}
		rec2, err := parseKey(FetchKey(rec))
		rec.Data = nil // a key leaves the data out
		if err != nil || !sameRecord(rec2, rec) {
			t.Fatalf("key %q gives %+v, whose key gives %+v, %v", key, rec, rec2, err)
		}
	})
}

func sameRecord(a, b *wire.StageRecord) bool { return string(a.Marshal(nil)) == string(b.Marshal(nil)) }
