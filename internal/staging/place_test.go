package staging

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// A hard-linked copy (asked for) of a file produced again unchanged (a
// new version of the same inode) is linked again: rename(2) of one link
// over another of the same inode does nothing and succeeds, which must
// not leave the temporary link behind in the consumer dir.
func TestPlaceLocalLinkAgainLeavesNoTemp(t *testing.T) {
	proot, croot := t.TempDir(), t.TempDir()
	pdir, err := OpenDir(proot, "producer", false)
	if err != nil {
		t.Fatal(err)
	}
	cdir, err := OpenDir(croot, "consumer", false)
	if err != nil {
		t.Fatal(err)
	}
	rec := produced(t, proot, "f", []byte("linked, not copied"))
	for v := uint64(1); v <= 2; v++ {
		rec.Version, rec.Produced = v, int64(v)
		release, tmp, err := cdir.LockCopy(context.Background(), "f")
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(cdir.Real, "f")
		how, err := PlaceLocal(context.Background(), cdir, pdir, "f", dst, tmp, rec, true)
		release()
		if err != nil || how != Linked {
			t.Fatalf("version %d: %q, %v", v, how, err)
		}
		if !cdir.Current("f", dst, rec) {
			t.Fatalf("version %d: the link is not current", v)
		}
		if _, err := os.Lstat(tmp); err == nil {
			t.Fatalf("version %d: the temporary link %s is left in the consumer dir", v, filepath.Base(tmp))
		}
	}
}

// A consumer whose dir is the producer dir (direct use), or which links
// the producer's file, records on the file the version it checked. A
// producer writing the file again just after the check must not leave it
// recorded as the version checked: the record then vouches for bytes
// that are not that version's, and every later consume of it returns at
// once with them.
func TestPlaceLocalDirectRecordsWhatItChecked(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, "producer", false)
	if err != nil {
		t.Fatal(err)
	}
	a, b := bytes.Repeat([]byte{'a'}, 4096), bytes.Repeat([]byte{'b'}, 4096)
	dst := filepath.Join(d.Real, "f")
	bad := 0
	for i := 0; i < 3000 && bad == 0; i++ {
		rec := produced(t, d.Real, "f", a)
		rec.Version, rec.Produced = uint64(i+1), int64(i+1)
		delay := time.Duration(i%40) * time.Microsecond
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(delay)
			f, err := os.OpenFile(dst, os.O_WRONLY, 0)
			if err == nil {
				f.WriteAt(b, 0)
				f.Close()
			}
		}()
		_, err := PlaceLocal(context.Background(), d, d, "f", dst, filepath.Join(d.Real, ".f.tmp"), rec, false)
		<-done
		if err != nil || !d.Current("f", dst, rec) {
			continue
		}
		if got, _ := os.ReadFile(dst); !bytes.Equal(got, a) {
			bad++
			t.Errorf("try %d: the file is recorded as version %d, which was all 'a', but holds %q...", i, rec.Version, got[:8])
		}
	}
}

// A named pipe in the producer dir is not a file to stage: producing it,
// or serving it to a consumer whose key names it, fails at once. An open
// of a FIFO for reading blocks until a writer comes, beyond any context:
// produce (which the interposer runs at a close, so the program hung in
// close) and the owner's server (a worker stuck for ever) waited there.
func TestFIFOIsRefusedNotWaitedFor(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, "producer", false)
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(d.Real, "pipe")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	// Whatever is left waiting on the FIFO is let go at the end.
	t.Cleanup(func() {
		for range 4 {
			if fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				unix.Close(fd)
			}
		}
	})
	files, err := NewFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	rec := &wire.StageRecord{Path: "pipe", Version: 1, Host: "h", Size: 0}
	for _, c := range []struct {
		what string
		run  func(ctx context.Context) error
	}{
		{"produce", func(ctx context.Context) error {
			f, _, err := OpenProduced(ctx, d, "pipe", fifo)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"the owner's resolver", func(ctx context.Context) error {
			src, err := files.Resolve(ctx, FetchKey(rec))
			if err == nil {
				src.Release()
			}
			return err
		}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		done := make(chan error, 1)
		go func() { done <- c.run(ctx) }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s of a FIFO: no error", c.what)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s of a FIFO still waiting 5 s later (its context ended after 1 s)", c.what)
		}
		cancel()
	}
}

// A copy on the owner's node is checked against the record before it is
// installed. A reflink clones the producer's file whole, as it is at the
// clone: bytes appended after the producer's file was checked come along,
// after the produced ones, which the CRC of the record's first Size bytes
// does not see. Such a copy is not the produce and must be refused.
func TestCopyCheckRefusesAFileGrownPastItsRecord(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("produced "), 1000)
	rec := produced(t, dir, "f", data)
	appendTo(t, filepath.Join(dir, "f"), []byte("appended after the produce"))
	f, err := os.Open(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := verifyCRC(context.Background(), f, rec, "the copy"); !errors.Is(err, pdc.ErrChecksum) {
		t.Fatalf("a copy of %d bytes whose first %d are the produce's: %v, want ErrChecksum", len(data)+26, len(data), err)
	}
}

func appendTo(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}
