package overwrite_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

var partitions = []client.Partition{client.ObjectStatic, client.RegionStatic, client.RegionDynamic, client.RegionLocal}

var storages = []client.Storage{client.StorageByOffset, client.StorageByRegion}

// rounds is how many faults a test injects: PDC_OW_ROUNDS, or def (a
// third under the race detector, which makes every process several times
// slower). The same with -short: the loop is what finds the window, and
// def is sized for CI.
func rounds(t *testing.T, def int) int {
	if s := os.Getenv("PDC_OW_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("PDC_OW_ROUNDS=%q: want a positive count", s)
		}
		return n
	}
	if e2e.Race {
		return max(1, def/3)
	}
	return def
}

// seeded is a source seeded by PDC_OW_SEED, or from the clock (logged,
// so that a failure can be replayed).
func seeded(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PDC_OW_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("PDC_OW_SEED=%q: %v", s, err)
		}
	}
	t.Logf("PDC_OW_SEED=%d", seed)
	return rand.New(rand.NewPCG(seed, seed>>32|1))
}

// object is one object under test and what may be read from it: each
// element holds the generation of the last acknowledged write covering
// it, or of any write not acknowledged (its client died, or its server)
// that covered it: such a write may take effect at any time after it
// started, wholly, in part or not at all.
type object struct {
	name    string
	dims    []uint64
	acked   []uint32              // per element, row-major
	unacked map[uint32]region.Box // by generation
	o       *client.Object
}

func (m *object) ack(box region.Box, gen uint32) {
	region.Runs(region.Shape(m.dims...), box, func(r region.Run) bool {
		for k := range r.Len {
			m.acked[r.Off+k] = gen
		}
		return true
	})
}

// check compares a whole read with what may be there. It returns how
// many elements hold something they may not (zeros among them), and the
// first such, described; and how many hold each generation.
func (m *object) check(got []byte) (bad, zeros int, first string, held map[uint32]int) {
	coords := make([]uint64, len(m.dims))
	held = map[uint32]int{}
	for i := range m.acked {
		v := binary.LittleEndian.Uint64(got[8*i:])
		gen := uint32(v >> 32)
		held[gen]++
		ok := v&0xffffffff == uint64(i+1)&0xffffffff
		if ok && gen != m.acked[i] {
			b, pending := m.unacked[gen]
			ok = pending && contains(b, unravel(m.dims, uint64(i), coords))
		}
		if ok {
			continue
		}
		bad++
		if v == 0 {
			zeros++
		}
		if first == "" {
			first = fmt.Sprintf("element %v holds %#x (generation %d), acknowledged generation %d", unravel(m.dims, uint64(i), coords), v, gen, m.acked[i])
		}
	}
	return bad, zeros, first, held
}

func unravel(dims []uint64, i uint64, into []uint64) []uint64 {
	for d := len(dims) - 1; d >= 0; d-- {
		into[d] = i % dims[d]
		i /= dims[d]
	}
	return into
}

func contains(b region.Box, c []uint64) bool {
	for d := range c {
		if c[d] < b.Off[d] || c[d] >= b.Off[d]+b.Size[d] {
			return false
		}
	}
	return true
}

// randBox is a sub-box of dims of at least minRows rows, all columns or
// a part of them.
func randBox(r *rand.Rand, dims []uint64, minRows uint64) region.Box {
	rows := minRows + r.Uint64N(dims[0]-minRows+1)
	b := region.Box{Off: []uint64{r.Uint64N(dims[0] - rows + 1), 0}, Size: []uint64{rows, dims[1]}}
	if r.IntN(2) == 0 {
		b.Size[1] = 1 + r.Uint64N(dims[1])
		b.Off[1] = r.Uint64N(dims[1] - b.Size[1] + 1)
	}
	return b
}

// setup creates an object per partition strategy and storage mode, and
// writes each whole (generation 1), waited.
func setup(t *testing.T, ctx context.Context, c *client.Client, dims []uint64) []*object {
	t.Helper()
	ct, _, err := c.CreateContainer(ctx, "overwrite", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*object
	for _, p := range partitions {
		for _, st := range storages {
			m := &object{name: fmt.Sprintf("%s-%s", p, st), dims: dims, unacked: map[uint32]region.Box{}}
			m.acked = make([]uint32, region.Shape(dims...).Volume())
			if m.o, err = ct.CreateObject(ctx, m.name, client.ObjectProps{Dims: dims, Type: region.Int64, Partition: p, Storage: st}); err != nil {
				t.Fatal(err)
			}
			whole := region.Shape(dims...)
			if err := m.o.Write(ctx, whole, genData(dims, whole, 1)); err != nil {
				t.Fatalf("%s: %v", m.name, err)
			}
			m.ack(whole, 1)
			objs = append(objs, m)
		}
	}
	return objs
}

// tally counts what a test checked, for the table, and how the
// interrupted writes ended: whole, in part, or not at all.
type tally struct {
	faults, acked, elems, bad, zeros, failed int
	whole, part, none                        int
}

func (n *tally) String() string {
	return fmt.Sprintf("%d faults, %d acknowledged object reads checked (%d elements), %d lost or zeroed (%d zeros), %d failed reads; the interrupted writes landed whole %d times, in part %d, not at all %d",
		n.faults, n.acked, n.elems, n.bad, n.zeros, n.failed, n.whole, n.part, n.none)
}

// checkAll reads every object whole through c and checks it. interrupted
// are the generations of the writes the fault cut, one per object (0:
// none), whose outcome it counts.
func checkAll(t *testing.T, ctx context.Context, c *client.Client, objs []*object, interrupted []uint32, when string, n *tally) {
	t.Helper()
	for k, m := range objs {
		o, err := c.OpenObject(ctx, m.name)
		if err != nil {
			t.Fatalf("%s: open %s: %v", when, m.name, err)
		}
		got, err := o.GetData(ctx)
		if err != nil {
			n.failed++
			t.Errorf("%s: read %s: %v", when, m.name, err)
			continue
		}
		bad, zeros, first, held := m.check(got)
		if g := interrupted[k]; g != 0 {
			switch landed := uint64(held[g]); {
			case landed == 0:
				n.none++
			case landed == m.unacked[g].Volume():
				n.whole++
			default:
				n.part++
			}
		}
		n.elems += len(m.acked)
		n.acked++
		n.bad += bad
		n.zeros += zeros
		if bad > 0 {
			t.Errorf("%s: %s: %d elements hold what no acknowledged or later write put there (%d zeros); first: %s", when, m.name, bad, zeros, first)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// A client process starts overwrites of every object, of every partition
// strategy and storage mode, and ends 0.1-2 ms later: it exits, or is
// killed with SIGKILL. Every element reads back as its acknowledged value
// or as one of the interrupted writes', never zeros, never an error; and
// a waited overwrite after that reads back as itself.
func TestOverwriteClientExits(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	r := seeded(t)
	dims := []uint64{128, 1024} // 1 MiB of int64 per object
	objs := setup(t, ctx, c, dims)
	gen := uint32(1)
	var n tally
	for round := range rounds(t, 16) {
		var specs []writeSpec
		for _, m := range objs {
			gen++
			s := writeSpec{Name: m.name, Gen: gen, Box: randBox(r, dims, 8), Dims: dims}
			m.unacked[gen] = s.Box
			specs = append(specs, s)
		}
		spec, err := json.Marshal(specs)
		if err != nil {
			t.Fatal(err)
		}
		// 0.1 to 2 ms, as a walltime kill or a Ctrl-C lands, in most
		// rounds; up to 30 ms in the others, to land in the bytes' way.
		delay := 100 + r.IntN(1900)
		if round%4 >= 2 {
			delay = 2000 + r.IntN(28000)
		}
		kill := round%2 == 1
		env := []string{specEnv + "=" + string(spec), delayEnv + "=" + strconv.Itoa(delay)}
		if kill {
			env[1] = delayEnv + "=-1"
		}
		cmd, lines, _ := e2e.ClientProc(t, tmpdir, "overwrite", env...)
		if kill {
			if !lines.Scan() || lines.Text() != "started" {
				t.Fatalf("round %d: client process said %q (%v), want started", round, lines.Text(), lines.Err())
			}
			time.Sleep(time.Duration(delay) * time.Microsecond) // the fault's timing, not a wait for an event
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		err = cmd.Wait()
		if kill && err == nil || !kill && err != nil {
			t.Fatalf("round %d: client process ended with %v", round, err)
		}
		n.faults++
		gens := make([]uint32, len(specs))
		for i, sp := range specs {
			gens[i] = sp.Gen
		}
		checkAll(t, ctx, c, objs, gens, fmt.Sprintf("round %d, client %s after %d us", round, map[bool]string{false: "exited", true: "killed"}[kill], delay), &n)

		// A waited overwrite after the interrupted ones wins over them.
		if round%4 == 3 {
			for _, m := range objs {
				gen++
				b := randBox(r, dims, 1)
				if err := m.o.Write(ctx, b, genData(dims, b, gen)); err != nil {
					t.Fatalf("%s: waited overwrite: %v", m.name, err)
				}
				m.ack(b, gen)
			}
			checkAll(t, ctx, c, objs, make([]uint32, len(objs)), fmt.Sprintf("round %d, after waited overwrites", round), &n)
		}
	}
	deaths := 0
	for _, s := range c.Servers() {
		if !e2e.Alive(s.PID) {
			deaths++
		}
	}
	t.Logf("fault table: client exit/SIGKILL mid-overwrite: %v; %d server deaths", &n, deaths)
	if deaths > 0 {
		t.Fatalf("%d servers died", deaths)
	}
}

// A data server is killed with kill -9 while overwrites of every object
// are stored, and the cluster restarted: every element reads back as its
// acknowledged value or as one of the interrupted writes', never zeros,
// never an error (a block failing its checksum).
func TestOverwriteServerKilled(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	datadir := e2e.ServerDataDir(t, tmpdir)
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	r := seeded(t)
	dims := []uint64{256, 2048} // 4 MiB of int64 per object
	killWithin := 3000          // us after the starts
	if e2e.Race {
		// Every process is several times slower: smaller objects, and
		// the kill spread over the slower stores.
		dims, killWithin = []uint64{128, 1024}, 20000
	}
	objs := setup(t, ctx, c, dims)
	gen := uint32(1)
	var n tally
	deaths := 0
	for round := range rounds(t, 6) {
		var ts []*client.Transfer
		var boxes []region.Box
		var gens, cut []uint32
		for _, m := range objs {
			gen++
			b := randBox(r, dims, dims[0]/2)
			m.unacked[gen] = b
			tr, err := m.o.StartWrite(ctx, b, genData(dims, b, gen))
			if err != nil {
				t.Fatalf("%s: start: %v", m.name, err)
			}
			ts = append(ts, tr)
			boxes = append(boxes, b)
			gens = append(gens, gen)
		}
		servers := c.Servers()
		victim := servers[round%len(servers)]
		time.Sleep(time.Duration(r.IntN(killWithin)) * time.Microsecond) // the fault's timing, not a wait for an event
		if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		n.faults++
		// What the surviving server acknowledges is acknowledged.
		for i, tr := range ts {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := tr.Wait(wctx)
			cancel()
			if err == nil {
				objs[i].ack(boxes[i], gens[i])
				delete(objs[i].unacked, gens[i])
				cut = append(cut, 0)
			} else {
				cut = append(cut, gens[i])
			}
		}
		for _, s := range servers {
			if s.PID != victim.PID && !e2e.Alive(s.PID) {
				deaths++
				t.Errorf("round %d: %s died on its own", round, s.Label())
			}
		}
		if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim.PID); err != nil {
			t.Fatal(err)
		}
		e2e.KillAll(t, tmpdir)
		e2e.MustRun(t, "up", "-n", "2", "--tmpdir", tmpdir, "--datadir", datadir)
		c.Close()
		c = e2e.Connect(t, tmpdir)
		checkAll(t, ctx, c, objs, cut, fmt.Sprintf("round %d, %s killed", round, victim.Label()), &n)
		for _, m := range objs {
			if m.o, _ = c.OpenObject(ctx, m.name); m.o == nil {
				t.Fatalf("reopen %s", m.name)
			}
		}
	}
	t.Logf("fault table: kill -9 of a data server mid-overwrite: %v; %d server deaths", &n, deaths)
}
