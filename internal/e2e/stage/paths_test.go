package stage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// Two produces naming the same two files in opposite orders both
// succeed. Each locks its files as it goes and holds them until its
// records are stored; taken in the order named, the first file of each
// was the second of the other, and each waited for the other's until its
// deadline (for ever without one). Here both produces start while a third
// holder has both files locked, and are let go together once both wait.
func TestStageProducesOfOneFileSetInOppositeOrders(t *testing.T) {
	sc := stageUp(t)
	paths := []string{"x.dat", "y.dat"}
	var held []*os.File
	inos := map[uint64]bool{}
	for i, p := range paths {
		writeFile(t, sc.prodA, p, randBytes(uint64(60+i), 100_000))
		f, err := os.Open(filepath.Join(sc.prodA, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
		inos[inodeOf(t, filepath.Join(sc.prodA, p))] = true
	}
	pc := e2e.Connect(t, sc.tmpdir, client.WithHost("node-a"), client.WithStageDirs(sc.prodA, ""))
	ctx := e2e.Ctx(t, 20*time.Second)
	errs := make(chan error, 2)
	for _, order := range [][]string{paths, {paths[1], paths[0]}} {
		go func() {
			_, err := pc.Produce(ctx, order...)
			if err != nil {
				err = fmt.Errorf("produce %s: %w", strings.Join(order, " "), err)
			}
			errs <- err
		}()
	}
	awaitFlockWaiters(t, inos, 2)
	for _, f := range held {
		f.Close()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// awaitFlockWaiters returns once n flock waits on the files whose inodes
// are in inos are blocked: the kernel's list of locks (/proc/locks) is the
// one place a waiting flock shows, so it is read until they do (bounded).
func awaitFlockWaiters(t *testing.T, inos map[uint64]bool, n int) {
	t.Helper()
	bound := time.Now().Add(time.Minute) // only a bound on a hung test
	for {
		b, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Skipf("no /proc/locks to see waiting locks in: %v", err)
		}
		waiting := 0
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			// "N: -> FLOCK ADVISORY WRITE PID MAJ:MIN:INO START END"
			if len(f) < 8 || f[1] != "->" || f[2] != "FLOCK" {
				continue
			}
			dev := strings.Split(f[6], ":")
			if ino, err := strconv.ParseUint(dev[len(dev)-1], 10, 64); err == nil && inos[ino] {
				waiting++
			}
		}
		if waiting >= n {
			return
		}
		if time.Now().After(bound) {
			t.Fatalf("%d flock waits seen on the files, want %d:\n%s", waiting, n, b)
		}
		time.Sleep(time.Millisecond)
	}
}
