package regionstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

const crashEnv = "PDC_REGIONSTORE_CRASH_DIR"

// crashBig is the workload's large object: its writes (150 of up to 512
// KiB) make a log of about 38 MiB, over two checkpoints' worth at
// smallCheckpoints' 16 MiB.
const crashBig = 32 << 20

// smallCheckpoints makes the store checkpoint its log every 16 MiB until
// the test ends, so that the crash tests reach a checkpoint with a
// quarter of the writes the default 64 MiB would take.
func smallCheckpoints(t *testing.T) {
	old := checkpointEvery
	checkpointEvery = 16 << 20
	t.Cleanup(func() { checkpointEvery = old })
}

// crashWorkload is what the child writes and the parent checks: a 1-D
// object of crashBig bytes written in overlapping chunks of up to 512 KiB
// (enough to pass a checkpoint of the log) and a 2-D object in small
// boxes.
func crashWorkload(mode Mode, fn func(obj uint64, l Layout, box region.Box, data []byte) error) error {
	r := rand.New(rand.NewPCG(7, uint64(mode)))
	big := Layout{Dims: []uint64{crashBig}, Elem: 1, Mode: mode}
	small := Layout{Dims: []uint64{50, 40}, Elem: 8, Mode: mode}
	for i := range 300 {
		if i%2 == 0 {
			off := r.Uint64N(big.Dims[0] - 1)
			n := 1 + r.Uint64N(min(512<<10, big.Dims[0]-off))
			box := region.Box{Off: []uint64{off}, Size: []uint64{n}}
			if err := fn(1, big, box, randData(r, int(n))); err != nil {
				return err
			}
			continue
		}
		box := randBox(r, 2, 40)
		if err := fn(2, small, box, randData(r, int(box.Volume())*small.Elem)); err != nil {
			return err
		}
	}
	return nil
}

// TestCrashChild is the child of TestKill: it writes the workload,
// says so, and waits to be killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("run by TestKill")
	}
	mode, err := ParseMode(os.Getenv(crashEnv + "_MODE"))
	if err != nil {
		t.Fatal(err)
	}
	smallCheckpoints(t)
	s := openStore(t, dir, false)
	if err := crashWorkload(mode, s.Write); err != nil {
		t.Fatal(err)
	}
	fmt.Println("done")
	// Wait for the kill; stdin is never closed by the parent before it.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	t.Fatal("not killed")
}

// TestKill writes in a child process, kills it with SIGKILL, and reads
// every acknowledged write back.
func TestKill(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 70 MiB")
	}
	smallCheckpoints(t)
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
			cmd.Env = append(os.Environ(), crashEnv+"="+dir, crashEnv+"_MODE="+mode.String())
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = stdin.Close() }()
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			var lines []string
			for sc.Scan() && sc.Text() != "done" {
				lines = append(lines, sc.Text())
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if sc.Text() != "done" {
				t.Fatalf("child did not finish: %s\n%s", strings.Join(lines, "\n"), stderr.String())
			}

			m := map[uint64][]byte{1: make([]byte, crashBig), 2: make([]byte, 50*40*8)}
			layouts := map[uint64]Layout{}
			_ = crashWorkload(mode, func(obj uint64, l Layout, box region.Box, data []byte) error {
				layouts[obj] = l
				return region.Copy(m[obj], region.Shape(l.Dims...), data, box, box, l.Elem)
			})
			s := openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			for obj, want := range m {
				l := layouts[obj]
				got := make([]byte, len(want))
				if err := s.Read(obj, l, region.Shape(l.Dims...), got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("object %d differs after kill -9 at byte %d", obj, firstDiff(got, want))
				}
			}
			if mode == ByRegion {
				if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%016x.idx", 1))); err != nil {
					t.Fatalf("no checkpoint after %d MiB of log: %v", checkpointEvery>>20, err)
				}
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A log cut inside its last record, or followed by garbage, opens with
// every earlier record intact, and takes new writes after it.
func TestTornTail(t *testing.T) {
	for _, cutAt := range []string{"header", "payload", "garbage"} {
		t.Run(cutAt, func(t *testing.T) {
			dir := t.TempDir()
			l := Layout{Dims: []uint64{10, 100}, Elem: 4, Mode: ByRegion}
			s := openStore(t, dir, false)
			want := make([]byte, 10*100*4)
			r := rand.New(rand.NewPCG(1, 2))
			var before int64
			var last []byte
			var lastBox region.Box
			for i := range 5 {
				if i == 3 {
					if err := s.Flush(9); err != nil { // a checkpoint in the middle
						t.Fatal(err)
					}
				}
				box := region.Box{Off: []uint64{uint64(i * 2), 0}, Size: []uint64{2, 100}}
				data := randData(r, 2*100*4)
				if err := s.Write(9, l, box, data); err != nil {
					t.Fatal(err)
				}
				if i < 4 {
					_ = region.Copy(want, region.Shape(l.Dims...), data, box, box, 4)
				} else {
					last, lastBox = data, box
					before = fileSize(t, filepath.Join(dir, "0000000000000009.reg")) - int64(len(data)) - int64(recFixed+16*2+4)
				}
			}
			crash(s)
			path := filepath.Join(dir, "0000000000000009.reg")
			switch cutAt {
			case "header":
				truncate(t, path, before+10)
			case "payload":
				truncate(t, path, fileSize(t, path)-100)
			case "garbage":
				// The last record survives; garbage after it goes.
				appendFile(t, path, bytes.Repeat([]byte{0xA5}, 1000))
				_ = region.Copy(want, region.Shape(l.Dims...), last, lastBox, lastBox, 4)
			}
			s = openStore(t, dir, false)
			got := make([]byte, len(want))
			if err := s.Read(9, l, region.Shape(l.Dims...), got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("after a torn tail (%s) the object differs at byte %d", cutAt, firstDiff(got, want))
			}
			if cutAt == "garbage" && fileSize(t, path) != before+int64(recFixed+16*2+4)+2*100*4 {
				t.Fatalf("garbage not cut: log is %d bytes", fileSize(t, path))
			}
			// New writes land after the cut and survive.
			box := region.Box{Off: []uint64{9, 0}, Size: []uint64{1, 100}}
			data := randData(r, 100*4)
			if err := s.Write(9, l, box, data); err != nil {
				t.Fatal(err)
			}
			_ = region.Copy(want, region.Shape(l.Dims...), data, box, box, 4)
			crash(s)
			s = openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			if err := s.Read(9, l, region.Shape(l.Dims...), got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("a write after the cut differs at byte %d", firstDiff(got, want))
			}
		})
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func truncate(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A flipped byte in stored data reads as ErrCorrupt, in both modes, and
// only for the block it is in.
func TestCorruption(t *testing.T) {
	l := Layout{Dims: []uint64{4 << 20}, Elem: 1}
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			l.Mode = mode
			s := openStore(t, dir, false)
			data := randData(rand.New(rand.NewPCG(3, 4)), 1<<20)
			box := region.Box{Off: []uint64{0}, Size: []uint64{1 << 20}}
			if err := s.Write(5, l, box, data); err != nil {
				t.Fatal(err)
			}
			// A second record, so that the first is not the log's tail.
			if err := s.Write(5, l, region.Box{Off: []uint64{2 << 20}, Size: []uint64{1}}, []byte{1}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var path string
			var dataAt int64
			if mode == ByOffset {
				path = filepath.Join(dir, "0000000000000005.off")
				dataAt = offHeaderSize + tableBytes(tableFor(1<<20))
			} else {
				path = filepath.Join(dir, "0000000000000005.reg")
				// The payload: after the header's page, the record's header,
				// and zeros up to the next page.
				dataAt = (regPageHeader + recFixed + 16 + 4*(1<<20/blockSize+1) + blockSize - 1) / blockSize * blockSize
			}
			flipByte(t, path, dataAt+300_000) // in block 4
			s = openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			got := make([]byte, 1<<20)
			err := s.Read(5, l, box, got)
			if !errors.Is(err, pdc.ErrCorrupt) || !strings.Contains(err.Error(), "object 5") {
				t.Fatalf("read of a flipped byte: %v, want ErrCorrupt naming object 5", err)
			}
			// Other blocks still read.
			part := region.Box{Off: []uint64{0}, Size: []uint64{4 * blockSizeU()}}
			if err := s.Read(5, l, part, got[:part.Size[0]]); err != nil || !bytes.Equal(got[:part.Size[0]], data[:part.Size[0]]) {
				t.Fatalf("read of good blocks: %v", err)
			}
			// A partial read of the bad block fails too.
			one := region.Box{Off: []uint64{300_001}, Size: []uint64{1}}
			if err := s.Read(5, l, one, got[:1]); !errors.Is(err, pdc.ErrCorrupt) {
				t.Fatalf("partial read of a flipped block: %v, want ErrCorrupt", err)
			}
		})
	}
}

func blockSizeU() uint64 { return uint64(blockSize) }

// A corrupt or unknown header is refused with a clear error.
func TestBadHeader(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			l := Layout{Dims: []uint64{10}, Elem: 1, Mode: mode}
			s := openStore(t, dir, false)
			if err := s.Write(1, l, region.Shape(10), make([]byte, 10)); err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			ext := map[Mode]string{ByOffset: ".off", ByRegion: ".reg"}[mode]
			path := filepath.Join(dir, "0000000000000001"+ext)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			var v [4]byte
			binary.LittleEndian.PutUint32(v[:], 99)
			if _, err := f.WriteAt(v[:], 8); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
			s = openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			err = s.Read(1, l, region.Shape(10), make([]byte, 10))
			if !errors.Is(err, pdc.ErrVersion) || !strings.Contains(err.Error(), path) {
				t.Fatalf("read with version 99: %v, want ErrVersion naming %s", err, path)
			}
			flipByte(t, path, 0)
			s2 := openStore(t, dir, false)
			defer func() { _ = s2.Close() }()
			if err := s2.Read(1, l, region.Shape(10), make([]byte, 10)); !errors.Is(err, pdc.ErrCorrupt) {
				t.Fatalf("read with a bad magic: %v, want ErrCorrupt", err)
			}
		})
	}
}
