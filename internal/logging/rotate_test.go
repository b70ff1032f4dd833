package logging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A record that triggers a rotation is written even when the rotation
// cannot move the live file aside (a user removed or moved it, as one
// clearing a full disk does), and the records after it are too.
func TestRotationKeepsTheRecordWhenTheFileIsGone(t *testing.T) {
	for _, keep := range []int{2, -1} {
		path := filepath.Join(t.TempDir(), "server.log")
		f, err := OpenFile(path, FileOptions{MaxSize: 64, Keep: keep})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(strings.Repeat("a", 60) + "\n")); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		_, _ = f.Write([]byte("second record\n")) // rotates
		_, _ = f.Write([]byte("third record\n"))
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("keep %d: %v", keep, err)
		}
		if string(b) != "second record\nthird record\n" {
			t.Errorf("keep %d: %s holds %q, want the second and third records", keep, path, b)
		}
	}
}
