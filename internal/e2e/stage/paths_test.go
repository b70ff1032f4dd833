package stage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
)

// One produce naming one file under two paths (a hard link, or a
// symlink inside the producer dir) records both: it must not wait on its
// own exclusive lock on the file (flock locks per open file, and each
// path is opened on its own) until its deadline, or for ever without one.
func TestStageProduceOneFileUnderTwoPaths(t *testing.T) {
	sc := stageUp(t)
	writeFile(t, sc.prodA, "orig.dat", randBytes(9, 5000))
	if err := os.Link(filepath.Join(sc.prodA, "orig.dat"), filepath.Join(sc.prodA, "hard.dat")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("orig.dat", filepath.Join(sc.prodA, "soft.dat")); err != nil {
		t.Fatal(err)
	}
	pc := e2e.Connect(t, sc.tmpdir, client.WithHost("node-a"), client.WithStageDirs(sc.prodA, ""))
	for _, other := range []string{"hard.dat", "soft.dat"} {
		ctx := e2e.Ctx(t, 10*time.Second)
		start := time.Now()
		recs, err := pc.Produce(ctx, "orig.dat", other)
		if err != nil {
			t.Fatalf("produce of orig.dat and %s, the same file, after %v: %v", other, time.Since(start).Round(time.Millisecond), err)
		}
		if len(recs) != 2 || recs[0].Path != "orig.dat" || recs[1].Path != other || recs[1].Size != 5000 || recs[1].CRC != recs[0].CRC {
			t.Fatalf("produce of orig.dat and %s: %+v", other, recs)
		}
	}
}

// A file whose name is as long as the file system allows (255 bytes) can
// be produced, so it must be consumable: the consumer's temporary file
// next to it must not need a longer name.
func TestStageConsumeLongestName(t *testing.T) {
	sc := stageUp(t)
	long := strings.Repeat("n", 255)
	for i, size := range []int{100, 1 << 20} { // inline, and fetched
		rel := fmt.Sprintf("d%d/%s", i, long)
		want := randBytes(uint64(10+i), size)
		writeFile(t, sc.prodA, rel, want)
		sc.produce(t, rel)
		consB := realDir(t, filepath.Join(sc.base, "cons-b"))
		r := sc.consume(t, "node-b", consB, rel)
		if r.Err != nil {
			t.Fatalf("consume of a %d-byte file with a 255-byte name: %v\nstdout:\n%s\nstderr:\n%s", size, r.Err, r.Stdout, r.Stderr)
		}
		sameFile(t, consB, rel, want)
	}
}
