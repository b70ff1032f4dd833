package regionstore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// A buried object's files go, and every later call on it fails with
// pdc.ErrNotFound instead of bringing a file back; an object the store
// never used is buried without being remembered.
func TestBury(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, false)
			defer s.Close()
			l := Layout{Dims: []uint64{1000}, Elem: 8, Mode: mode}
			box := region.Shape(1000)
			if err := s.Write(6, l, box, make([]byte, 8000)); err != nil {
				t.Fatal(err)
			}
			if err := s.Bury(6); err != nil {
				t.Fatal(err)
			}
			if names := files(t, dir); len(names) != 0 {
				t.Fatalf("bury left %v", names)
			}
			for what, err := range map[string]error{
				"write": s.Write(6, l, box, make([]byte, 8000)),
				"read":  s.Read(6, l, box, make([]byte, 8000)),
				"flush": s.Flush(6),
				"view": func() error {
					_, err := s.View(6, l, box)
					return err
				}(),
				"verify": func() error {
					_, err := s.Verify(6, func(*Corruption) {})
					return err
				}(),
			} {
				if !errors.Is(err, pdc.ErrNotFound) {
					t.Errorf("%s of a buried object: %v, want ErrNotFound", what, err)
				}
			}
			if names := files(t, dir); len(names) != 0 {
				t.Fatalf("calls on a buried object made %v", names)
			}
			if !s.Buried(6) || s.Bury(6) != nil {
				t.Fatal("burying again")
			}
			// Files of an object this store never used, put there after
			// it opened: Bury takes no system call for an object that had
			// no files at Open; Purge (a scrub found them) removes them.
			// Neither remembers the object.
			stray := filepath.Join(dir, "0000000000000007.reg")
			if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := s.Bury(7); err != nil {
				t.Fatal(err)
			}
			if names := files(t, dir); len(names) != 1 || s.Buried(7) {
				t.Fatalf("bury of an object without files at open: files %v, remembered %v", names, s.Buried(7))
			}
			if err := s.Purge(7); err != nil {
				t.Fatal(err)
			}
			if names := files(t, dir); len(names) != 0 || s.Buried(7) {
				t.Fatalf("purge of an unused object: files %v, remembered %v", names, s.Buried(7))
			}
			// Files there at Open go with Bury, and the object is not
			// remembered either.
			if err := os.WriteFile(filepath.Join(dir, "0000000000000008.off"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			s2 := openStore(t, dir, false)
			defer s2.Close()
			if err := s2.Bury(8); err != nil {
				t.Fatal(err)
			}
			if names := files(t, dir); len(names) != 0 || s2.Buried(8) {
				t.Fatalf("bury of an unused object with files at open: files %v, remembered %v", names, s2.Buried(8))
			}
		})
	}
}

// Files lists objects by their files, in id order, and nothing else.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, false)
	defer s.Close()
	for _, name := range []string{"00000000000000ff.off", "0000000000000002.reg", "0000000000000002.idx",
		"0000000000000003.off.tmp", "README", "0123.off", "zzzzzzzzzzzzzzzz.off", "000000000000000A.off", "0000000000000004.offx"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "0000000000000005.off"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := s.Files()
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, of := range got {
		ids = append(ids, of.Obj)
	}
	if !slices.Equal(ids, []uint64{2, 3, 0xff}) || len(got[0].Paths) != 2 {
		t.Fatalf("files: %+v", got)
	}
}
