package staging

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b[:n]
}

// jerkyReader hands out its bytes in reads of random sizes, as a socket
// does.
type jerkyReader struct {
	b []byte
	r *rand.Rand
}

func (j *jerkyReader) Read(p []byte) (int, error) {
	if len(j.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(j.b), 1+j.r.IntN(300<<10))
	copy(p, j.b[:n])
	j.b = j.b[n:]
	return n, nil
}

func tempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "in"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Whatever the size and however the bytes come (answers, stream chunks of
// their own, one reader to its end, a section), the file holds them in
// order and the CRC-32C is theirs.
func TestIncomingWritesEveryWayInOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	bothWays(t, testIncomingWritesEveryWayInOrder)
}

// bothWays runs f with the pipeline as this machine would use it and
// with it forced on, so that a 2-core CI machine tests both.
func bothWays(t *testing.T, f func(t *testing.T)) {
	t.Run("default", f)
	t.Run("pipelined", func(t *testing.T) {
		pipelined(t)
		f(t)
	})
}

// pipelined makes every large file pipelined until the test ends.
func pipelined(t *testing.T) {
	old := pipeProcs
	pipeProcs = 1
	t.Cleanup(func() { pipeProcs = old })
}

func testIncomingWritesEveryWayInOrder(t *testing.T) {
	for _, size := range []int{0, 1, pipeMin - 1, pipeMin, 1 << 20, 9<<20 + 3} {
		data := randomBytes(uint64(size), size)
		ways := map[string]func(in *Incoming) error{
			"write": func(in *Incoming) error {
				_, err := in.Write(data)
				return err
			},
			"one reader": func(in *Incoming) error {
				n, err := in.ReadFrom(&jerkyReader{b: data, r: rand.New(rand.NewPCG(1, 1))})
				if err == nil && n != int64(size) {
					err = errors.New("short ReadFrom")
				}
				return err
			},
			"chunks": func(in *Incoming) error { // stream mode: a ReadFrom per 1 MiB chunk
				for off := 0; off < size; off += 1 << 20 {
					end := min(off+1<<20, size)
					if _, err := in.ReadFrom(io.LimitReader(&jerkyReader{b: data[off:end], r: rand.New(rand.NewPCG(2, 2))}, int64(end-off))); err != nil {
						return err
					}
				}
				return nil
			},
			"reader then write": func(in *Incoming) error {
				half := size / 2
				if _, err := in.ReadFrom(bytes.NewReader(data[:half])); err != nil {
					return err
				}
				_, err := in.Write(data[half:])
				return err
			},
			"section": func(in *Incoming) error {
				_, err := in.ReceiveSection(bytes.NewReader(append([]byte("xyz"), data...)), 3, int64(size))
				return err
			},
		}
		for name, way := range ways {
			f := tempFile(t)
			var last int64
			in := NewIncoming(f, int64(size), func(done, total int64) {
				if done < last || done > total {
					t.Errorf("size %d, %s: progress %d of %d after %d", size, name, done, total, last)
				}
				last = done
			})
			err := way(in)
			n, crc, ferr := in.Finish()
			if err != nil || ferr != nil {
				t.Fatalf("size %d, %s: %v, finish: %v", size, name, err, ferr)
			}
			if n != int64(size) || crc != crc32.Checksum(data, Table) {
				t.Errorf("size %d, %s: %d bytes, CRC %08x; want %d, %08x", size, name, n, crc, size, crc32.Checksum(data, Table))
			}
			got, err := os.ReadFile(f.Name())
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("size %d, %s: the file differs from what was sent (%d bytes, %v)", size, name, len(got), err)
			}
			if size > 0 && last != int64(size) {
				t.Errorf("size %d, %s: progress ended at %d", size, name, last)
			}
		}
	}
}

// gatedReader gives its bytes out as asked and
// for nothing: it records when the second read is asked for.
type gatedReader struct {
	b     []byte
	reads int
	asked chan struct{} // closed when the second read is asked for
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if len(g.b) == 0 {
		return 0, io.EOF
	}
	g.reads++
	if g.reads == 2 {
		close(g.asked)
	}
	n := copy(p, g.b)
	g.b = g.b[n:]
	return n, nil
}

// The network is read while the previous piece is checksummed and
// written: the writer of the first piece (stalled here in its progress
// call) does not hold up the read of the second. Written one after the
// other, the read would wait for the write, which waits for the read.
func TestIncomingReadsWhileItWrites(t *testing.T) {
	defer goleak.VerifyNone(t)
	pipelined(t)
	size := 8 << 20
	data := randomBytes(3, size)
	src := &gatedReader{b: data, asked: make(chan struct{})}
	f := tempFile(t)
	stalled := false
	in := NewIncoming(f, int64(size), func(done, total int64) {
		if stalled {
			return
		}
		stalled = true
		select {
		case <-src.asked:
		case <-time.After(30 * time.Second):
			t.Errorf("the second piece was not read while the first was being written")
		}
	})
	if _, err := in.ReadFrom(src); err != nil {
		t.Fatal(err)
	}
	n, crc, err := in.Finish()
	if err != nil || n != int64(size) || crc != crc32.Checksum(data, Table) {
		t.Fatalf("%d bytes, CRC %08x, %v", n, crc, err)
	}
}

// A write that fails (here: a file opened read-only) fails the receive:
// ReadFrom stops reading, Finish reports the error and the writer is gone.
func TestIncomingWriteErrorStopsTheReceive(t *testing.T) {
	defer goleak.VerifyNone(t)
	bothWays(t, testIncomingWriteErrorStopsTheReceive)
}

func testIncomingWriteErrorStopsTheReceive(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ro")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := 16 << 20
	src := &jerkyReader{b: randomBytes(4, size), r: rand.New(rand.NewPCG(3, 3))}
	in := NewIncoming(f, int64(size), nil)
	_, rerr := in.ReadFrom(src)
	_, _, ferr := in.Finish()
	if rerr == nil || !errors.Is(ferr, unix.EBADF) {
		t.Fatalf("ReadFrom: %v, Finish: %v; want both to fail with EBADF", rerr, ferr)
	}
	if len(src.b) == 0 {
		t.Errorf("the whole payload was read after the writes had failed")
	}
	if _, _, again := in.Finish(); !errors.Is(again, unix.EBADF) {
		t.Errorf("a second Finish: %v", again)
	}
}

// A file larger than the room left fails the check before any byte moves.
func TestCheckRoom(t *testing.T) {
	f := tempFile(t)
	if err := CheckRoom(f, 1); err != nil {
		t.Fatalf("one byte: %v", err)
	}
	err := CheckRoom(f, 1<<62)
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("4 EiB: %v, want ENOSPC", err)
	}
}

// Files in a dir on tmpfs skip fsync; files on a disk, or on another
// device inside the dir, do not.
func TestInMemory(t *testing.T) {
	check := func(base string, want bool) {
		t.Helper()
		var st unix.Statfs_t
		if err := unix.Statfs(base, &st); err != nil {
			t.Skipf("%s: %v", base, err)
		}
		if (st.Type == unix.TMPFS_MAGIC) != want {
			t.Skipf("%s is not the kind of file system this case needs", base)
		}
		dir, err := os.MkdirTemp(base, "pdc-inmemory-")
		if err != nil {
			t.Skipf("%s: %v", base, err)
		}
		defer os.RemoveAll(dir)
		d, err := OpenDir(dir, "consumer", false)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.InMemory(fi); got != want {
			t.Errorf("a file in %s: InMemory %v, want %v", dir, got, want)
		}
		other, err := os.Stat("/proc/self/stat") // another device
		if err != nil {
			t.Fatal(err)
		}
		if d.InMemory(other) {
			t.Errorf("a file on another device counts as in the dir's memory")
		}
	}
	t.Run("tmpfs", func(t *testing.T) { check("/dev/shm", true) })
	t.Run("disk", func(t *testing.T) { check(os.TempDir(), false) })
}

// Without the pipeline, a file is written a quarter at a time as it
// comes, not once all of it has: by the time the reader is asked for the
// bytes past the first quarter, the file holds that quarter, so that the
// sender goes on filling the socket while it is written.
func TestIncomingWritesAsItComes(t *testing.T) {
	old := pipeProcs
	pipeProcs = 1 << 30 // never pipelined
	t.Cleanup(func() { pipeProcs = old })
	size := 1 << 20
	data := randomBytes(5, size)
	f := tempFile(t)
	src := &watchedReader{b: data, f: f, at: size / 4, held: -1}
	in := NewIncoming(f, int64(size), nil)
	if _, err := in.ReadFrom(src); err != nil {
		t.Fatal(err)
	}
	n, crc, err := in.Finish()
	if err != nil || n != int64(size) || crc != crc32.Checksum(data, Table) {
		t.Fatalf("%d bytes, CRC %08x, %v", n, crc, err)
	}
	if src.held < int64(size/4) {
		t.Fatalf("the file held %d bytes when the reader was asked for byte %d; want the first quarter written by then", src.held, size/4)
	}
}

// watchedReader hands out its bytes 64 KiB at a time and records how
// much f holds when it is first asked for bytes from offset at on.
type watchedReader struct {
	b    []byte
	off  int
	f    *os.File
	at   int
	held int64
}

func (w *watchedReader) Read(p []byte) (int, error) {
	if w.off >= len(w.b) {
		return 0, io.EOF
	}
	if w.off >= w.at && w.held < 0 {
		st, err := w.f.Stat()
		if err != nil {
			return 0, err
		}
		w.held = st.Size()
	}
	n := copy(p[:min(len(p), 64<<10)], w.b[w.off:])
	w.off += n
	return n, nil
}
