package region_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/internal/placement"
	"github.com/pdcgo/pdc/region"
)

// TestShrinkWhileDataServerDown: a data server is killed (kill -9) before
// a shrink, so the shrink's cut cannot reach it; the regrow that follows
// is refused, naming that server, rather than overtake the cut, and once
// the server is back the regrow delivers the cut first: the rows past the
// shrink read zeros, in every strategy and storage mode. Before the
// metadata server pushed cuts, the regrow was taken and the rows read
// their old values.
func TestShrinkWhileDataServerDown(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "regrowkill", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const victimRank = 1
	whole := region.Shape(27, 64)
	buf := counted(whole)
	// Objects whose metadata the surviving server holds, so that their
	// set dims are answered while the victim is down.
	var names []string
	var objs []*client.Object
	for _, p := range clitest.Partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			for k := 0; ; k++ {
				name := fmt.Sprintf("%s-%d-%d", clitest.PartName(p), st, k)
				o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{27, 64}, Type: region.Uint64, Partition: p, Storage: st})
				if err != nil {
					t.Fatal(err)
				}
				if placement.OwnerOfID(o.ID(), 2) == victimRank {
					continue
				}
				if err := o.Write(ctx, whole, buf); err != nil {
					t.Fatal(err)
				}
				names, objs = append(names, name), append(objs, o)
				break
			}
		}
	}
	var victim client.Server
	for _, s := range c.Servers() {
		if s.Rank == victimRank {
			victim = s
		}
	}
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim.PID); err != nil {
		t.Fatal(err)
	}
	for i, o := range objs {
		if err := o.SetDims(ctx, []uint64{8, 64}); err != nil {
			t.Fatalf("%s: shrink with a data server down: %v", names[i], err)
		}
		err := o.SetDims(ctx, []uint64{26, 64})
		if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("rank %d", victimRank)) {
			t.Errorf("%s: regrow before the shrink reached the killed data server: %v, want ErrUnavailable naming rank %d", names[i], err, victimRank)
		}
	}
	if t.Failed() {
		return
	}
	e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)
	c2 := e2e.Connect(t, tmpdir)
	all := region.Shape(26, 64)
	for _, name := range names {
		o, err := c2.OpenObject(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.SetDims(ctx, []uint64{26, 64}); err != nil {
			t.Fatalf("%s: regrow once the data server is back: %v", name, err)
		}
		got := make([]byte, 8*all.Volume())
		if err := o.Read(ctx, all, got); err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i := range all.Volume() {
			want := uint64(0)
			if i < 8*64 {
				want = i + 1
			}
			if v := binary.LittleEndian.Uint64(got[8*i:]); v != want {
				if bad == 0 {
					t.Errorf("%s: row %d col %d reads %d, want %d", name, i/64, i%64, v, want)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d cells wrong after a shrink to 8 rows with a data server down and a regrow to 26", name, bad, all.Volume())
		}
	}
}

// TestShrinkThenKillThenRegrow: a data server is killed (kill -9) right
// after a shrink answered, and restarted before the regrow: the cut was
// applied and made durable before the shrink answered, so the rows past
// it read zeros, in every strategy and storage mode.
func TestShrinkThenKillThenRegrow(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "regrowkill2", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	whole := region.Shape(27, 64)
	buf := make([]byte, 8*whole.Volume())
	for i := range whole.Volume() {
		binary.LittleEndian.PutUint64(buf[8*i:], i+1)
	}
	var names []string
	for _, p := range clitest.Partitions {
		for _, st := range []client.Storage{client.StorageByOffset, client.StorageByRegion} {
			name := fmt.Sprintf("%s-%d", clitest.PartName(p), st)
			o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: []uint64{27, 64}, Type: region.Uint64, Partition: p, Storage: st})
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Write(ctx, whole, buf); err != nil {
				t.Fatal(err)
			}
			if err := o.SetDims(ctx, []uint64{8, 64}); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
	}
	for _, s := range c.Servers() {
		if s.Rank != 1 {
			continue
		}
		if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), s.PID); err != nil {
			t.Fatal(err)
		}
	}
	e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)
	c2 := e2e.Connect(t, tmpdir)
	all := region.Shape(26, 64)
	for _, name := range names {
		o, err := c2.OpenObject(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.SetDims(ctx, []uint64{26, 64}); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 8*all.Volume())
		if err := o.Read(ctx, all, got); err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i := range all.Volume() {
			want := uint64(0)
			if i < 8*64 {
				want = i + 1
			}
			if v := binary.LittleEndian.Uint64(got[8*i:]); v != want {
				if bad == 0 {
					t.Errorf("%s: row %d col %d reads %d, want %d", name, i/64, i%64, v, want)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d cells wrong after a shrink to 8 rows, a data server killed and a regrow to 26", name, bad, all.Volume())
		}
	}
}
