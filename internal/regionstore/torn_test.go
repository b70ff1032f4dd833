package regionstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/region"
)

const tornEnv = "PDC_REGIONSTORE_TORN_DIR"

// tornLayout is the object TestKillMidOverwrite overwrites: 8 MiB of
// int64, two-dimensional so that boxes with part of the columns write
// strided runs that cut blocks.
func tornLayout(mode Mode) Layout {
	return Layout{Dims: []uint64{512, 2048}, Elem: 8, Mode: mode}
}

// genBytes is box's elements as generation gen writes them: the
// generation above the element's row-major index plus one, never zero.
func genBytes(dims []uint64, box region.Box, gen uint32) []byte {
	buf := make([]byte, 8*box.Volume())
	i := 0
	region.Runs(region.Shape(dims...), box, func(r region.Run) bool {
		for k := range r.Len {
			binary.LittleEndian.PutUint64(buf[8*i:], uint64(gen)<<32|(r.Off+k+1))
			i++
		}
		return true
	})
	return buf
}

// TestTornChild is the child of TestKillMidOverwrite: it overwrites the
// object, each time saying which box it starts and when it is done,
// until it is killed.
func TestTornChild(t *testing.T) {
	dir := os.Getenv(tornEnv)
	if dir == "" {
		t.Skip("run by TestKillMidOverwrite")
	}
	mode, err := ParseMode(os.Getenv(tornEnv + "_MODE"))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := strconv.ParseUint(os.Getenv(tornEnv+"_GEN"), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	l := tornLayout(mode)
	r := rand.New(rand.NewPCG(gen, 1))
	s := openStore(t, dir, false)
	out := bufio.NewWriter(os.Stdout)
	buf := make([]byte, 512<<10)
	for ; ; gen++ {
		box := region.Shape(l.Dims...).Clone()
		switch r.IntN(3) {
		case 0: // whole rows
			box.Off[0] = r.Uint64N(l.Dims[0])
			box.Size[0] = 1 + r.Uint64N(l.Dims[0]-box.Off[0])
		case 1: // part of the columns: strided runs, blocks cut at both ends
			box = randBoxIn(r, l.Dims)
		}
		data := genBytes(l.Dims, box, uint32(gen))
		fmt.Fprintf(out, "start %d %d %d %d %d\n", gen, box.Off[0], box.Off[1], box.Size[0], box.Size[1])
		if err := out.Flush(); err != nil {
			t.Fatal(err)
		}
		if gen%2 == 0 {
			err = s.Write(1, l, box, data)
		} else {
			err = s.WriteFrom(1, l, box, bytes.NewReader(data), buf)
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(out, "done %d\n", gen)
	}
}

// An overwrite killed part way (kill -9 of the process, which the kernel
// obeys between two pages of a pwrite) leaves every block with its old
// bytes or its new ones, each matching its checksum: reopened, the object
// reads back without error, every element as the last write acknowledged
// before the kill left it or as the interrupted write meant it. Before
// the pending slot, such blocks failed their CRC ("stored data is
// corrupt"), taking acknowledged bytes with them.
func TestKillMidOverwrite(t *testing.T) {
	const rounds = 8 // each kills one child mid-write, most often
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			l := tornLayout(mode)
			whole := region.Shape(l.Dims...)
			s := openStore(t, dir, false)
			if err := s.Write(1, l, whole, genBytes(l.Dims, whole, 1)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			acked := make([]uint32, whole.Volume())
			for i := range acked {
				acked[i] = 1
			}
			next := uint64(2)
			r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
			torn := 0
			for round := range rounds {
				inflight, last := tornRound(t, dir, mode, next, time.Duration(1+r.IntN(20))*time.Millisecond, acked)
				next = last + 1
				s := openStore(t, dir, false)
				got := make([]byte, 8*whole.Volume())
				if err := s.Read(1, l, whole, got); err != nil {
					t.Fatalf("round %d: read after kill -9 mid-overwrite: %v", round, err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				coords := make([]uint64, 2)
				oldN, newN := 0, 0
				for i := range acked {
					v := binary.LittleEndian.Uint64(got[8*i:])
					gen := uint32(v >> 32)
					coords[0], coords[1] = uint64(i)/l.Dims[1], uint64(i)%l.Dims[1]
					in := inflight.gen != 0 && inflight.box.Contains(region.Box{Off: coords, Size: []uint64{1, 1}})
					switch {
					case v&0xffffffff != uint64(i+1):
						t.Fatalf("round %d: element %v holds %#x: not its own", round, coords, v)
					case gen == acked[i]:
						if in {
							oldN++
						}
					case in && gen == inflight.gen:
						newN++
						acked[i] = gen // what the next round overwrites
					default:
						t.Fatalf("round %d: element %v holds generation %d, want %d or the interrupted %d", round, coords, gen, acked[i], inflight.gen)
					}
				}
				if oldN > 0 && newN > 0 {
					torn++
				}
			}
			t.Logf("%d of %d rounds killed a write part way (some elements old, some new)", torn, rounds)
		})
	}
}

type inflightWrite struct {
	gen uint32
	box region.Box
}

// tornRound runs a child that overwrites from generation first on and
// kills it after d. It applies the writes the child finished to acked,
// and returns the one it had started and not finished, and the last
// generation it started.
func tornRound(t *testing.T, dir string, mode Mode, first uint64, d time.Duration, acked []uint32) (inflightWrite, uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTornChild$")
	cmd.Env = append(os.Environ(), tornEnv+"="+dir, tornEnv+"_MODE="+mode.String(), tornEnv+"_GEN="+strconv.FormatUint(first, 10))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// Let it get going: its first start line, then the kill's delay.
	firstLine, ok := <-lines
	if !ok {
		_ = cmd.Wait()
		t.Fatalf("child wrote nothing: %s", stderr.String())
	}
	time.Sleep(d) // the fault's timing, not a wait for an event
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var all []string
	all = append(all, firstLine)
	for line := range lines {
		all = append(all, line)
	}
	_ = cmd.Wait()
	l := tornLayout(mode)
	var cur inflightWrite
	last := first
	for _, line := range all {
		f := strings.Fields(line)
		switch {
		case len(f) == 6 && f[0] == "start":
			var v [5]uint64
			for i := range v {
				if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
					t.Fatalf("child said %q", line)
				}
			}
			cur = inflightWrite{gen: uint32(v[0]), box: region.Box{Off: []uint64{v[1], v[2]}, Size: []uint64{v[3], v[4]}}}
			last = v[0]
		case len(f) == 2 && f[0] == "done" && f[1] == strconv.FormatUint(uint64(cur.gen), 10):
			region.Runs(region.Shape(l.Dims...), cur.box, func(r region.Run) bool {
				for k := range r.Len {
					acked[r.Off+k] = cur.gen
				}
				return true
			})
			cur = inflightWrite{}
		default:
			t.Fatalf("child said %q\n%s\n%s", line, strings.Join(all, "\n"), stderr.String())
		}
	}
	return cur, last
}

// A write of thousands of short runs, each in a block of its own and
// some across two, or (with short rows) eight or nine to a block, is cut
// into groups whose blocks fit the pending slot and whose shared blocks
// fit their bound, a block sometimes cut between two groups, and reads
// back, reopened too, in both modes.
func TestStridedOverwriteGroups(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		for _, cols := range []uint64{1000, 60} {
			t.Run(fmt.Sprintf("%s/%dcols", mode, cols), func(t *testing.T) {
				stridedOverwriteGroups(t, mode, cols)
			})
		}
	}
}

func stridedOverwriteGroups(t *testing.T, mode Mode, cols uint64) {
	dir := t.TempDir()
	l := Layout{Dims: []uint64{2048, cols}, Elem: 8, Mode: mode}
	whole := region.Shape(l.Dims...)
	s := openStore(t, dir, false)
	if err := s.Write(1, l, whole, genBytes(l.Dims, whole, 1)); err != nil {
		t.Fatal(err)
	}
	want := genBytes(l.Dims, whole, 1)
	for gen, col := range []uint64{cols/2 + 11, cols / 4, 0, cols - 2} {
		box := region.Box{Off: []uint64{uint64(gen), col}, Size: []uint64{2048 - uint64(gen), 2}}
		data := genBytes(l.Dims, box, uint32(gen+2))
		if err := s.Write(1, l, box, data); err != nil {
			t.Fatal(err)
		}
		if err := region.Copy(want, whole, data, box, box, 8); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 2 {
		got := make([]byte, len(want))
		if err := s.Read(1, l, whole, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: differs at byte %d", round, firstDiff(got, want))
		}
		crash(s)
		s = openStore(t, dir, false)
	}
	_ = s.Close()
}

// Overwrites in place leave their CRCs to the file's table lazily, named
// by the pending slot until it fills: hundreds of them, enough to fill
// it many times over, then a crash without a flush, read back whole.
func TestLazyTablesAfterCrash(t *testing.T) {
	for _, mode := range []Mode{ByOffset, ByRegion} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			l := Layout{Dims: []uint64{300, 700}, Elem: 8, Mode: mode}
			whole := region.Shape(l.Dims...)
			s := openStore(t, dir, false)
			want := genBytes(l.Dims, whole, 1)
			if err := s.Write(1, l, whole, want); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(9, uint64(mode)))
			for gen := uint32(2); gen < 400; gen++ {
				box := randBoxIn(r, l.Dims)
				data := genBytes(l.Dims, box, gen)
				if err := s.Write(1, l, box, data); err != nil {
					t.Fatal(err)
				}
				if err := region.Copy(want, whole, data, box, box, 8); err != nil {
					t.Fatal(err)
				}
				if gen%97 == 0 {
					crash(s)
					s = openStore(t, dir, false)
				}
			}
			crash(s)
			s = openStore(t, dir, false)
			defer func() { _ = s.Close() }()
			got := make([]byte, len(want))
			if err := s.Read(1, l, whole, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("differs at byte %d", firstDiff(got, want))
			}
		})
	}
}
