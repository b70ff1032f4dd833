package atomicfile

import (
	"strings"
	"testing"
)

// Creating over what is not a regular file names what it is: it said
// "not a regular file (d---------)".
func TestCreateOverADirectoryNamesIt(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(dir, 0o600)
	if err == nil {
		f.Abort()
		t.Fatal("Create over a directory succeeded")
	}
	if !strings.Contains(err.Error(), "a directory, not a regular file") || strings.Contains(err.Error(), "d---") {
		t.Errorf("Create over a directory: %v; want it named a directory", err)
	}
}
