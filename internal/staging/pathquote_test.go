package staging

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
)

// Staging's errors quote the paths they name: a path with a newline in
// it, printed bare, made one error two lines, the second of which read
// as a message of its own. What the errors are (errors.Is, errors.As)
// does not change.
func TestErrorsQuotePaths(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pro\nducer")
	if err := os.MkdirAll(filepath.Join(dir, "sub\ndir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "elsewhere\nfile"), filepath.Join(dir, "dangl\ning")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "fi\nle")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir, "producer", false)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "no\nsuch")
	for _, c := range []struct {
		name  string
		err   error
		paths []string // quoted in the message
		is    error
	}{
		{"outside the dir", third(d.Resolve(filepath.Join(root, "out\nside"))), []string{filepath.Join(root, "out\nside"), dir}, pdc.ErrPermission},
		{"dangling symlink", third(d.Resolve("dangl\ning")), []string{"dangl\ning", dir}, pdc.ErrPermission},
		{"missing dir", second(OpenDir(filepath.Join(root, "no\ndir"), "consumer", false)), []string{filepath.Join(root, "no\ndir")}, pdc.ErrNotFound},
		{"a dir through a dangling symlink", second(OpenDir(filepath.Join(dir, "dangl\ning"), "consumer", false)), []string{filepath.Join(dir, "dangl\ning")}, pdc.ErrNotFound},
		{"a file for a dir", second(OpenDir(file, "consumer", false)), []string{file}, pdc.ErrInvalid},
		{"missing file to produce", third(OpenUnlocked(d, missing)), []string{dir}, pdc.ErrNotFound},
		{"absolute path without dirs", second(RecordPath("/a\nb", "", "")), []string{"/a\nb"}, pdc.ErrInvalid},
		{"absolute prefix outside", second(RecordPrefix("/a\nb/", "/c", "/d")), []string{"/a\nb/"}, pdc.ErrInvalid},
		{"open", second(OpenRead(missing)), []string{missing}, fs.ErrNotExist},
		{"rename", Rename(missing, filepath.Join(dir, "new\nname")), []string{missing, filepath.Join(dir, "new\nname")}, fs.ErrNotExist},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		msg := c.err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: the error is more than one line:\n%s", c.name, msg)
		}
		for _, p := range c.paths {
			if !strings.Contains(msg, strconv.Quote(p)) {
				t.Errorf("%s: %q does not quote %q", c.name, msg, p)
			}
		}
		if !errors.Is(c.err, c.is) {
			t.Errorf("%s: %v is not %v", c.name, c.err, c.is)
		}
	}
	// The os package's error types are still found under the quoting.
	var pe *fs.PathError
	if _, err := OpenRead(missing); !errors.As(err, &pe) || pe.Path != missing {
		t.Errorf("OpenRead of a missing file: %v, want an *fs.PathError naming it", err)
	}
	var le *os.LinkError
	if err := Rename(missing, dir+"x"); !errors.As(err, &le) || le.Old != missing {
		t.Errorf("Rename of a missing file: %v, want an *os.LinkError naming it", err)
	}
}

func second[A any](_ A, err error) error        { return err }
func third[A, B any](_ A, _ B, err error) error { return err }
