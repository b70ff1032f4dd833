package netio_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/netio"
)

// mappingsOf lists the lines of /proc/self/maps naming path.
func mappingsOf(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), path) {
			out = append(out, sc.Text())
		}
	}
	return out
}

func sendAll(t *testing.T, f *os.File, off, n int64) {
	t.Helper()
	a, b := tcpPair(t)
	ch := readAll(b)
	if k, err := netio.SendFile(context.Background(), a, f, off, n); err != nil || k != n {
		t.Fatalf("SendFile: %d, %v", k, err)
	}
	a.Close()
	if got := recv(t, ch); int64(len(got)) != n {
		t.Fatalf("received %d bytes, want %d", len(got), n)
	}
}

// Regression (second review): a cached mapping kept a deleted file's
// storage allocated. Deleted files are not cached, and a sweep drops the
// mapping of one deleted after it was sent.
func TestMapCacheLetsDeletedFilesGo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "staged")
	if err := os.WriteFile(path, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, f, 0, 4<<20)
	f.Close()
	if len(mappingsOf(t, path)) == 0 {
		t.Fatal("a whole-file send was not cached (the test checks nothing)")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	netio.SweepMappings(time.Hour) // not idle: dropped because deleted
	if m := mappingsOf(t, path); len(m) > 0 {
		t.Fatalf("deleted file still mapped after a sweep: %q", m)
	}

	// Deleted before the send: never cached.
	path2 := filepath.Join(t.TempDir(), "gone")
	if err := os.WriteFile(path2, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	f2, err := os.Open(path2)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	os.Remove(path2)
	sendAll(t, f2, 0, 1<<20)
	if m := mappingsOf(t, path2); len(m) > 0 {
		t.Fatalf("a deleted file was cached: %q", m)
	}
}

// Regression (second review): a small section of a large file mapped and
// populated the whole file. Only sends of most of a file cache it.
func TestMapCacheSectionsNotCached(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(256 << 20); err != nil {
		t.Fatal(err)
	}
	sendAll(t, f, 1<<20, 64<<10)
	if m := mappingsOf(t, path); len(m) > 0 {
		t.Fatalf("a 64 KiB send left the file mapped: %q", m)
	}
}
