package metastore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
)

// recordOffsets returns the offset of each whole record of the log at
// path, and the offset its records end at.
func recordOffsets(t *testing.T, path string) (offs []int, end int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), walMagic) {
		t.Fatalf("%s: header %q, want version 2", path, data[:8])
	}
	off := walHeaderLen
	for {
		rec, _, ok := walRecordAt(data, off)
		if !ok {
			return offs, off
		}
		offs = append(offs, off)
		off += walRecHeaderLen + len(rec)
	}
}

// patchFile writes b at off in the file at path.
func patchFile(t *testing.T, path string, off int, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, int64(off)); err != nil {
		t.Fatal(err)
	}
}

func readByte(t *testing.T, path string, off int) byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data[off]
}

// withBoot makes the log see the machine as restarted (a boot id of its
// own) for the rest of the test.
func withBoot(t *testing.T, id byte) {
	old := bootID
	bootID = func() ([16]byte, bool) { return [16]byte{id}, true }
	t.Cleanup(func() { bootID = old })
}

// logCommits opens a store in dir, commits n keys (across rotations of
// the log: smallLog), and leaves it as a killed process would.
func logCommits(t *testing.T, dir string, d Durability, n int) {
	t.Helper()
	s := openTest(t, dir, d)
	for i := range n {
		put(t, s, fmt.Sprint("k", i), strings.Repeat(fmt.Sprint("v", i), 40))
	}
	crash(s)
}

// An acknowledged record damaged in the middle of the log (a flipped bit,
// a bad sector) stops the open with an error naming the log and the
// record's offset: replaying up to it would drop every acknowledged change
// after it without a word. With process durability the same holds while
// the machine has not restarted (the records were in its page cache).
func TestDamagedAckedRecordIsRefused(t *testing.T) {
	smallLog(t)
	damage := map[string]func(t *testing.T, path string, off int){
		"payload bit": func(t *testing.T, path string, off int) {
			patchFile(t, path, off+walRecHeaderLen+5, []byte{readByte(t, path, off+walRecHeaderLen+5) ^ 0x10})
		},
		"length bit": func(t *testing.T, path string, off int) {
			patchFile(t, path, off, []byte{readByte(t, path, off) ^ 0x01})
		},
		"mark bit": func(t *testing.T, path string, off int) {
			patchFile(t, path, off+9, []byte{readByte(t, path, off+9) ^ 0x40})
		},
		"zeroed sector": func(t *testing.T, path string, off int) {
			patchFile(t, path, off, make([]byte, 64))
		},
	}
	for _, d := range []Durability{DurabilitySync, DurabilityProcess} {
		for name, fn := range damage {
			t.Run(d.String()+"/"+name, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, walFile)
				withBoot(t, 7) // the machine runs on for process durability
				logCommits(t, dir, d, 200)
				offs, _ := recordOffsets(t, path)
				if len(offs) < 5 || len(offs) >= 200 {
					t.Fatalf("%d records in the log, want a few after a rotation", len(offs))
				}
				bad := offs[1]
				fn(t, path, bad)
				_, err := openStore(dir, d, 1<<20, slog.New(slog.DiscardHandler))
				if !errors.Is(err, pdc.ErrCorrupt) {
					t.Fatalf("open with record at %d damaged: %v, want ErrCorrupt", bad, err)
				}
				for _, want := range []string{path, fmt.Sprintf("byte %d ", bad), "truncate -s"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				// Refused again, and the log left as it was.
				if _, err2 := openStore(dir, d, 1<<20, slog.New(slog.DiscardHandler)); !errors.Is(err2, pdc.ErrCorrupt) {
					t.Fatalf("second open: %v", err2)
				}
				// The way out the error names: cut the log at the record.
				if err := os.Truncate(path, int64(bad)); err != nil {
					t.Fatal(err)
				}
				s := openTest(t, dir, d)
				defer s.close()
				mustGet(t, s, "k0", strings.Repeat("v0", 40))
			})
		}
	}
}

// After a power loss, what was not fsynced may be on the disk in part and
// in any order: a record cut short, garbage, or a whole record written
// after a torn one. None of it was acknowledged, and the log opens with
// every fsynced record. The same holds for a log of process durability
// after the machine restarted, whatever it lost.
func TestTornTailsOpen(t *testing.T) {
	smallLog(t)
	const n = 200
	tails := map[string]func(t *testing.T, path string, end int){
		"cut record": func(t *testing.T, path string, end int) {
			rec := make([]byte, walRecHeaderLen+40)
			frame(rec, make([]byte, 40), uint64(end))
			if err := os.Truncate(path, int64(end+30)); err != nil {
				t.Fatal(err)
			}
			patchFile(t, path, end, rec[:30])
		},
		"garbage": func(t *testing.T, path string, end int) {
			patchFile(t, path, end, []byte(strings.Repeat("\x30\x00\x00\x00garbage!", 20)))
		},
		// The writer's next two records, the first torn: the second's
		// mark is the log's fsynced end, which the torn one starts at.
		"whole record after a torn one": func(t *testing.T, path string, end int) {
			payload := []byte(strings.Repeat("x", 40))
			torn := make([]byte, walRecHeaderLen+len(payload))
			frame(torn, payload, uint64(end))
			torn[walRecHeaderLen+3] ^= 1
			next := make([]byte, walRecHeaderLen)
			frame(next, payload, uint64(end))
			patchFile(t, path, end, append(append(torn, next...), payload...))
		},
	}
	for name, tail := range tails {
		for _, d := range []Durability{DurabilitySync, DurabilityProcess} {
			t.Run(d.String()+"/"+name, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, walFile)
				logCommits(t, dir, d, n)
				_, end := recordOffsets(t, path)
				tail(t, path, end)
				if d == DurabilityProcess {
					withBoot(t, 0xb0) // the machine restarted: any gap may be a power loss
				}
				s := openTest(t, dir, d)
				defer s.close()
				for i := range n {
					mustGet(t, s, fmt.Sprint("k", i), strings.Repeat(fmt.Sprint("v", i), 40))
				}
			})
		}
	}
}

// With process durability a power loss may leave any part of what was not
// written back: a damaged record in the middle, after a restart of the
// machine, is a loss the durability does not promise to survive, and the
// log opens with the records before it.
func TestProcessLogAfterRebootOpens(t *testing.T) {
	withBoot(t, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, walFile)
	logCommits(t, dir, DurabilityProcess, 10)
	offs, _ := recordOffsets(t, path)
	patchFile(t, path, offs[4]+walRecHeaderLen+2, []byte{0xff, 0xff})
	withBoot(t, 2)
	s := openTest(t, dir, DurabilityProcess)
	defer s.close()
	mustGet(t, s, "k0", strings.Repeat("v0", 40))
}

// A log of version 1, left by an older pdc, replays (up to a torn tail,
// as that version did), and the log goes on in version 2.
func TestLogVersion1Replays(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, walFile)
	s := openTest(t, dir, DurabilitySync)
	var recs [][]byte
	for i := range 5 {
		b := s.db.NewBatch()
		_ = b.Set([]byte(fmt.Sprint("old", i)), []byte(fmt.Sprint("v", i)), nil)
		recs = append(recs, append([]byte(nil), b.Repr()...))
		b.Close()
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	data := frameWALv1(recs...)
	data = binary.LittleEndian.AppendUint32(data, 100) // torn tail
	data = append(data, 1, 2, 3, 4, 5)
	if err := os.WriteFile(path, append(data, make([]byte, 1024)...), 0o600); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, DurabilitySync)
	for i := range 5 {
		mustGet(t, s, fmt.Sprint("old", i), fmt.Sprint("v", i))
	}
	put(t, s, "new", "1")
	crash(s)
	if offs, _ := recordOffsets(t, path); len(offs) != 1 {
		t.Fatalf("%d records in the log after one commit, want 1", len(offs))
	}
	s = openTest(t, dir, DurabilitySync)
	defer s.close()
	mustGet(t, s, "new", "1")
	mustGet(t, s, "old4", "v4")
}

// A header that fails its checksum is damage, not a torn file: the header
// is fsynced before the file is linked.
func TestDamagedLogHeaderIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, walFile)
	logCommits(t, dir, DurabilitySync, 3)
	patchFile(t, path, 9, []byte{0x80})
	_, err := openStore(dir, DurabilitySync, 1<<20, slog.New(slog.DiscardHandler))
	if !errors.Is(err, pdc.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("open with a damaged header: %v, want ErrCorrupt naming %s", err, path)
	}
}

// A record larger than the log's rotation size gets a file of its own
// with room for it and its header, and survives a crash.
func TestRecordLargerThanTheLog(t *testing.T) {
	smallLog(t)
	for _, d := range []Durability{DurabilityProcess, DurabilitySync} {
		t.Run(d.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, d)
			big := strings.Repeat("b", int(walRotateBytes)*3)
			put(t, s, "small", "1")
			put(t, s, "big", big)
			crash(s)
			s = openTest(t, dir, d)
			defer s.close()
			if v, ok, err := s.get([]byte("big")); err != nil || string(v) != big {
				t.Fatalf("get big: %d bytes, %v, %v; want %d bytes", len(v), ok, err, len(big))
			}
			mustGet(t, s, "small", "1")
		})
	}
}

// Bytes after a bad record made to look like records at every offset
// (payloads hold clients' values) prove nothing and cost about one pass:
// a header every 16 bytes claiming the rest of the file, with a fitting
// mark and a wrong CRC, would make a search without the cap checksum
// terabytes here.
func TestLaterAckedSearchIsLinear(t *testing.T) {
	data := make([]byte, 4<<20)
	copy(data, walHeader(true))
	const bad = walHeaderLen
	for o := bad + walRecHeaderLen; o+walRecHeaderLen <= len(data); o += walRecHeaderLen {
		binary.LittleEndian.PutUint32(data[o:], uint32(len(data)-o-walRecHeaderLen))
		binary.LittleEndian.PutUint32(data[o+4:], 1)
		binary.LittleEndian.PutUint64(data[o+8:], uint64(o))
	}
	start := time.Now()
	if o, ok := laterAcked(data, bad); ok {
		t.Fatalf("imitated records prove a record at %d acknowledged", o)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the search took %v", d)
	}
}

// skipZeros stops where a word-at-a-time scan stops, wherever the first
// nonzero byte lies relative to its blocks, and at the end of the data.
func TestSkipZerosStopsWhereAWordScanStops(t *testing.T) {
	byWord := func(data []byte, q int) int {
		for q+8 <= len(data) && binary.LittleEndian.Uint64(data[q:]) == 0 {
			q += 8
		}
		return q
	}
	for _, size := range []int{0, 7, 8, 4095, 4096, 4100, 3*zeroRun + 13} {
		for _, start := range []int{0, 1, 4, 9} {
			if start > size {
				continue
			}
			data := make([]byte, size)
			if got, want := skipZeros(data, start), byWord(data, start); got != want {
				t.Fatalf("%d zero bytes from %d: skipZeros at %d, a word scan at %d", size, start, got, want)
			}
			for nz := start; nz < size; nz += max(1, size/37) {
				for _, at := range []int{nz, min(size-1, nz+zeroRun-1), min(size-1, nz+zeroRun)} {
					clear(data)
					data[at] = 0x5a
					if got, want := skipZeros(data, start), byWord(data, start); got != want {
						t.Fatalf("%d bytes, nonzero at %d, from %d: skipZeros at %d, a word scan at %d", size, at, start, got, want)
					}
				}
			}
		}
	}
}
