package regionstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// fileVersion reads the format version in a store file's header.
func fileVersion(t *testing.T, path string) uint32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint32(b[8:])
}

// Files of version 1 (CRC-32C) keep working under a build that makes
// version 2 (CRC-32): they read, take writes in their own checksum, grow,
// and still detect corruption, while new objects get version 2.
func TestVersion1FilesKeepWorking(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			ext := map[Mode]string{ByOffset: ".off", ByRegion: ".reg"}[mode]
			path := func(obj int) string { return filepath.Join(dir, "000000000000000"+string(rune('0'+obj))+ext) }
			l := Layout{Dims: []uint64{64, 1024}, Elem: 4, Mode: mode}
			r := rand.New(rand.NewPCG(1, uint64(mode)))
			want := randData(r, 64*1024*4)

			writeVersion1File(t, dir, l, want[:32*1024*4], path(5))

			// Reopened by this build: old bytes read, a new write lands in
			// the old file, and the object grows.
			s := openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			grown := Layout{Dims: []uint64{128, 1024}, Elem: 4, Mode: mode, Version: 2}
			s = checkVersion1Grows(t, s, dir, l, grown, want, path(5), path(6))

			// Its checksums still catch a flipped byte.
			s = checkVersion1DetectsCorruption(t, s, dir, grown, path(5))
		})
	}
}

// writeVersion1File makes object 5 as a version 1 file holding first, the
// first half of its rows, and checks the file says version 1.
func writeVersion1File(t *testing.T, dir string, l Layout, first []byte, path string) {
	t.Helper()
	newVersion, newRegVersion = 1, 1
	s := openStore(t, dir, false)
	err := s.Write(5, l, region.Shape(32, 1024), first)
	newVersion, newRegVersion = sumVersion, regVersion
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v := fileVersion(t, path); v != 1 {
		t.Fatalf("file made as version 1 says %d", v)
	}
}

// checkVersion1Grows writes the rest of version 1 object 5 and a row past
// its end, writes object 6 new, and checks both read back before and after
// a reopen, object 5 staying version 1 and object 6 getting this build's
// version. It returns the reopened store.
func checkVersion1Grows(t *testing.T, s *Store, dir string, l, grown Layout, want []byte, path5, path6 string) *Store {
	t.Helper()
	rest := region.Box{Off: []uint64{32, 0}, Size: []uint64{32, 1024}}
	if err := s.Write(5, l, rest, want[32*1024*4:]); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(5, grown, region.Box{Off: []uint64{127, 0}, Size: []uint64{1, 1024}}, want[:1024*4]); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(6, l, region.Shape(64, 1024), want); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		got := make([]byte, len(want))
		if err := s.Read(5, grown, region.Shape(64, 1024), got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("version 1 object reads back wrong (err %v)", err)
		}
		last := make([]byte, 1024*4)
		if err := s.Read(5, grown, region.Box{Off: []uint64{127, 0}, Size: []uint64{1, 1024}}, last); err != nil || !bytes.Equal(last, want[:1024*4]) {
			t.Fatalf("grown version 1 object reads back wrong (err %v)", err)
		}
		if err := s.Read(6, l, region.Shape(64, 1024), got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("version 2 object reads back wrong (err %v)", err)
		}
	}
	check()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, false)
	check()
	if v := fileVersion(t, path5); v != 1 {
		t.Fatalf("version 1 file says %d after writes and growth", v)
	}
	if v, want := fileVersion(t, path6), map[Mode]uint32{ByOffset: sumVersion, ByRegion: regVersion}[l.Mode]; v != want {
		t.Fatalf("new file says version %d, want %d", v, want)
	}
	return s
}

// checkVersion1DetectsCorruption closes s, flips a data byte of the grown
// version 1 file and checks a read over it fails with ErrCorrupt. It
// returns the reopened store.
func checkVersion1DetectsCorruption(t *testing.T, s *Store, dir string, grown Layout, path string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var dataAt int64
	if grown.Mode == ByOffset {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		dataAt = st.Size() - 1000 // in the grown row
	} else {
		dataAt = regHeaderSize + recFixed + 32 + 4*32 + 5000 // first record's payload
	}
	flipByte(t, path, dataAt)
	s = openStore(t, dir, false)
	err := s.Read(5, grown, region.Shape(128, 1024), make([]byte, 128*1024*4))
	if !errors.Is(err, pdc.ErrCorrupt) {
		t.Fatalf("read over a flipped byte in a version 1 file: %v, want ErrCorrupt", err)
	}
	return s
}

// copyDir copies the files of src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// Files written by the build before version 2 (testdata/v1: object 5 by
// offset, 6 by region, 16x256 int32 each, byte i = i*7+1, written in two
// halves) read back under this build, and take more writes.
func TestFilesOfTheLastBuildRead(t *testing.T) {
	want := make([]byte, 16*256*4)
	for i := range want {
		want[i] = byte(i*7 + 1)
	}
	dir := copyDir(t, "testdata/v1")
	for round := range 2 {
		s := openStore(t, dir, false)
		for obj, mode := range map[uint64]Mode{5: ByOffset, 6: ByRegion} {
			l := Layout{Dims: []uint64{16, 256}, Elem: 4, Mode: mode}
			got := make([]byte, len(want))
			if err := s.Read(obj, l, region.Shape(16, 256), got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("round %d: object %d (%s) of the last build reads back wrong (err %v)", round, obj, mode, err)
			}
			if o, err := s.object(obj); err != nil || mode == ByRegion && round == 0 && (o.reg == nil || o.reg.checkpointed == 0) {
				t.Fatalf("object %d: the last build's index checkpoint was not used (err %v)", obj, err)
			}
			if round == 0 {
				// Rewrite a row with its own bytes: the file's checksums
				// must still match them on the next round.
				row := region.Box{Off: []uint64{3, 0}, Size: []uint64{1, 256}}
				if err := s.Write(obj, l, row, want[3*256*4:4*256*4]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A version newer than this build's is refused by name.
func TestNewerVersionRefused(t *testing.T) {
	b := newOffsetFile(sumVersion+1, "x", 1, []uint64{8}, minTableBlocks).encodeHeader()
	if _, err := decodeOffsetHeader("x", b); !errors.Is(err, pdc.ErrVersion) {
		t.Fatalf("by-offset header of version %d: %v, want ErrVersion", sumVersion+1, err)
	}
	if _, _, _, err := decodeRegHeader("x", encodeRegHeader(regVersion+1, 1, 1)); !errors.Is(err, pdc.ErrVersion) {
		t.Fatalf("by-region header of version %d: %v, want ErrVersion", regVersion+1, err)
	}
}

// Logs of version 3 take an overwrite inside a stored piece in place;
// logs of earlier versions, whose blocks straddle pages and which have no
// pending slot, take it as a new record, which a crash cannot tear.
func TestOverwriteInPlaceOnlyFromVersion3(t *testing.T) {
	for _, v := range []uint32{2, regVersion} {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) {
			dir := t.TempDir()
			newRegVersion = v
			defer func() { newRegVersion = regVersion }()
			l := Layout{Dims: []uint64{64, 1024}, Elem: 4, Mode: ByRegion}
			r := rand.New(rand.NewPCG(5, uint64(v)))
			s := openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			if err := s.Write(1, l, region.Shape(64, 1024), randData(r, 64*1024*4)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "0000000000000001.reg")
			before := fileSize(t, path)
			part := region.Box{Off: []uint64{10, 100}, Size: []uint64{20, 300}}
			data := randData(r, 20*300*4)
			if err := s.Write(1, l, part, data); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(data))
			if err := s.Read(1, l, part, got); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("overwrite reads back wrong (err %v)", err)
			}
			grew := fileSize(t, path) > before
			if grew != (v < 3) {
				t.Fatalf("log of version %d grew %v on an overwrite inside its piece", v, grew)
			}
		})
	}
}
