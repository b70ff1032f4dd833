package region_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/internal/e2e/clitest"
	"github.com/pdcgo/pdc/region"
)

// Goroutines write and read back column blocks that span both data
// servers (Object.Write and Read: one waited request per server), through
// shared-memory lanes and on the connection, while a data server is
// killed: every write and read that returned nil was right, every failure
// names the killed server within its deadline, and after a restart the
// killed server's half of each block holds the last write acknowledged,
// or in part the one cut short by the kill (record 0012).
func TestDoAllConcurrentAcrossAKill(t *testing.T) {
	for _, mode := range []string{"shm", "stream"} {
		t.Run(mode, func(t *testing.T) {
			tmpdir := e2e.Up(t, 2)
			ctx := e2e.Ctx(t, 2*time.Minute)
			c := e2e.Connect(t, tmpdir, client.WithRegionTransport(mode))
			ct, _, err := c.CreateContainer(ctx, "across", client.Persistent)
			if err != nil {
				t.Fatal(err)
			}
			const g = 4
			dims := []uint64{64, g * 8192}
			o, err := ct.CreateObject(ctx, "cols", client.ObjectProps{Dims: dims, Type: region.Int32, Partition: client.RegionStatic})
			if err != nil {
				t.Fatal(err)
			}
			var victim client.Server
			for _, s := range c.Servers() {
				if s.Rank == 1 {
					victim = s
				}
			}
			var killed sync.WaitGroup
			killed.Add(1)
			var mu sync.Mutex
			failed := 0
			// Per goroutine, the last write acknowledged, and the first
			// that failed: the one under way when the server died may
			// have reached it before the answer was lost.
			lastAcked, firstFailed := make([][]byte, g), make([][]byte, g)
			var wg sync.WaitGroup
			errs := make(chan error, 100)
			for k := range g {
				wg.Go(func() {
					cols := dims[1] / g
					box := clitest.Box([]uint64{0, uint64(k) * cols}, []uint64{dims[0], cols})
					dead := false
					for it := range 60 {
						if it == 20 && k == 0 {
							if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
								errs <- err
							}
							if err := cluster.WaitExit(e2e.Ctx(t, 10*time.Second), victim.PID); err != nil {
								errs <- err
							}
							killed.Done()
						}
						data := clitest.Cells(int(box.Volume()), int32(k*1000000+it*1000))
						wctx := e2e.Ctx(t, 20*time.Second)
						err := o.Write(wctx, box, data)
						if err != nil {
							if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "rank 1") || wctx.Err() != nil {
								errs <- fmt.Errorf("g%d it%d write: %v (deadline passed: %v)", k, it, err, wctx.Err() != nil)
								return
							}
							if !dead {
								mu.Lock()
								firstFailed[k] = data
								mu.Unlock()
							}
							dead = true
							mu.Lock()
							failed++
							mu.Unlock()
							continue
						}
						if dead {
							errs <- fmt.Errorf("g%d it%d: a write succeeded after one failed on the killed server", k, it)
							return
						}
						mu.Lock()
						lastAcked[k] = data
						mu.Unlock()
						got := make([]byte, len(data))
						rctx := e2e.Ctx(t, 20*time.Second)
						err = o.Read(rctx, box, got)
						if err != nil {
							if !errors.Is(err, pdc.ErrUnavailable) || !strings.Contains(err.Error(), "rank 1") || rctx.Err() != nil {
								errs <- fmt.Errorf("g%d it%d read: %v (deadline passed: %v)", k, it, err, rctx.Err() != nil)
								return
							}
							dead = true
							mu.Lock()
							failed++
							mu.Unlock()
							continue
						}
						if !bytes.Equal(got, data) {
							errs <- fmt.Errorf("g%d it%d: read back differs", k, it)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if failed == 0 {
				t.Error("nothing failed on the killed server")
			}
			if t.Failed() {
				return
			}
			e2e.MustRun(t, "up", "--restart-dead", "--tmpdir", tmpdir)
			c2 := e2e.Connect(t, tmpdir)
			o2, err := c2.OpenObject(ctx, "cols")
			if err != nil {
				t.Fatal(err)
			}
			for k := range g {
				cols := dims[1] / g
				// The killed server's half: the rows from 32.
				box := clitest.Box([]uint64{32, uint64(k) * cols}, []uint64{32, cols})
				got := make([]byte, 4*box.Volume())
				if err := o2.Read(ctx, box, got); err != nil {
					t.Fatal(err)
				}
				if lastAcked[k] == nil {
					continue
				}
				// Each element as acknowledged, or as the write cut short
				// left it (record 0012: in part or whole).
				acked := lastAcked[k][len(lastAcked[k])/2:]
				var cut []byte
				if firstFailed[k] != nil {
					cut = firstFailed[k][len(firstFailed[k])/2:]
				}
				for i := 0; i < len(got); i += 4 {
					if !bytes.Equal(got[i:i+4], acked[i:i+4]) && (cut == nil || !bytes.Equal(got[i:i+4], cut[i:i+4])) {
						t.Errorf("g%d: element %d of the killed server's half holds %d, neither the last write acknowledged (%d) nor the one cut short",
							k, i/4, binary.LittleEndian.Uint32(got[i:]), binary.LittleEndian.Uint32(acked[i:]))
						break
					}
				}
			}
		})
	}
}
