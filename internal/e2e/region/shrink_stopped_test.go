package region_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

// TestShrinkWhileDataServerStopped: a data server that takes connections
// and answers nothing (SIGSTOP, as a hung node or a firewall): a shrink
// answers once its push gives up on it (cutWait), the regrow after it is
// refused with ErrUnavailable naming that server, and once the server
// runs again the regrow delivers the cut first: the rows past the shrink
// read zeros.
func TestShrinkWhileDataServerStopped(t *testing.T) {
	tmpdir := e2e.Up(t, 2)
	ctx := e2e.Ctx(t, 3*time.Minute)
	c := e2e.Connect(t, tmpdir)
	ct, _, err := c.CreateContainer(ctx, "shrinkstopped", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	const victimRank = 1
	o := objectAwayFrom(ctx, t, ct, "o", client.ObjectProps{Dims: []uint64{27, 64}, Type: region.Uint64,
		Partition: client.RegionStatic, Storage: client.StorageByOffset}, victimRank)
	whole := region.Shape(27, 64)
	buf := counted(whole)
	if err := o.Write(ctx, whole, buf); err != nil {
		t.Fatal(err)
	}
	var victim client.Server
	for _, s := range c.Servers() {
		if s.Rank == victimRank {
			victim = s
		}
	}
	// Stop waits until every thread of it has stopped: kill(2) returns
	// before, and once in CI the shrink answered in 2 ms and the regrow
	// went through, the cut applied by a server still running.
	e2e.Stop(t, victim.PID)
	start := time.Now()
	if err := o.SetDims(ctx, []uint64{8, 64}); err != nil {
		t.Fatalf("shrink with a data server stopped: %v", err)
	}
	t.Logf("shrink answered in %v", time.Since(start).Round(time.Millisecond))
	err = o.SetDims(ctx, []uint64{26, 64})
	if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "rank 1") {
		logServers(t, tmpdir)
		t.Fatalf("regrow with the cut not applied by a stopped data server: %v, want ErrUnavailable naming rank 1", err)
	}
	t.Logf("regrow refused: %v", err)
	e2e.Continue(victim.PID)
	if err := o.SetDims(ctx, []uint64{26, 64}); err != nil {
		t.Fatalf("regrow once the data server runs again: %v", err)
	}
	all := region.Shape(26, 64)
	got := make([]byte, 8*all.Volume())
	if err := o.Read(ctx, all, got); err != nil {
		t.Fatal(err)
	}
	for i := range all.Volume() {
		want := uint64(0)
		if i < 8*64 {
			want = i + 1
		}
		if v := binary.LittleEndian.Uint64(got[8*i:]); v != want {
			t.Fatalf("row %d col %d reads %d, want %d", i/64, i%64, v, want)
		}
	}
}

// logServers logs the servers' logs of the cluster of tmpdir.
func logServers(t *testing.T, tmpdir string) {
	paths, _ := filepath.Glob(filepath.Join(tmpdir, "logs", "*.log"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Logf("%s: %v", p, err)
			continue
		}
		t.Logf("%s:\n%s", filepath.Base(p), b)
	}
}
