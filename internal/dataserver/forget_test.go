package dataserver

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/rpc"
	"github.com/pdcgo/pdc/internal/wire"
)

// transfersLeft waits a little for the service's registered transfers to
// drop to want, and returns how many there are.
func transfersLeft(s *Service, want int) int {
	deadline := time.Now().Add(2 * time.Second)
	for {
		n := s.Stats().Transfers
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFailedEnqueueForgetsFollowers: a start whose merged writes cannot
// be queued before the client's deadline fails, and leaves none of its
// transfers registered: the client never learns their ids, so nothing
// would ever collect them while its session lasts.
func TestFailedEnqueueForgetsFollowers(t *testing.T) {
	const max = 1 << 20
	cfg := Config{MaxBytes: max, Workers: 1, QueueDepth: 1}
	g := newGate(&cfg, 1)
	defer g.release()
	e := newEnv(t, cfg)
	ctx := testCtx(t)
	c := e.dial("c")
	dims := []uint64{1024}
	row := []uint64{256}
	// One write held by the worker, another filling the queue.
	held, err := start(ctx, c, []wire.DataItem{item(1, true, dims, []uint64{0}, row)}, pattern(nbytes(row), 1))
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered
	queued, err := start(ctx, c, []wire.DataItem{item(2, true, dims, []uint64{0}, row)}, pattern(nbytes(row), 2))
	if err != nil {
		t.Fatal(err)
	}
	// Three writes that continue each other: one leader and two
	// followers, which find no room in the queue before the deadline.
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = start(sctx, c, []wire.DataItem{
		item(3, true, dims, []uint64{0}, row),
		item(3, true, dims, []uint64{256}, row),
		item(3, true, dims, []uint64{512}, row),
	}, pattern(3*nbytes(row), 3))
	if err == nil {
		t.Fatal("a start that found no room in the queue before its deadline succeeded")
	}
	if err := <-e.started; err != nil {
		t.Fatalf("first start: %v", err)
	}
	<-e.started
	if err := <-e.started; err == nil {
		t.Fatal("the server's side of the start that timed out succeeded")
	}
	g.release()
	for _, ids := range [][]uint64{held, queued} {
		res, _, err := wait(ctx, c, ids...)
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, res)
	}
	if n := transfersLeft(e.svc, 0); n != 0 {
		t.Fatalf("%d transfers still registered after every start answered was waited and the failed one was forgotten", n)
	}
}

// TestCanceledWaitedStartLeavesNothing: a waited start of writes and
// reads (merged into leaders and followers) whose client gives up while
// the I/O is held, and one whose client's connections all close, leave
// no transfer registered once the I/O is done.
func TestCanceledWaitedStartLeavesNothing(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			const max = 1 << 20
			cfg := Config{MaxBytes: max, Workers: 1}
			g := newGate(&cfg, 1)
			defer g.release()
			e := newEnv(t, cfg)
			dims := []uint64{4096}
			row := []uint64{256}
			c, err := rpc.Dial(testCtx(t), e.addr, rpc.DialOptions{ClientName: "c"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, _, err := startWait(ctx, c, []wire.DataItem{
					item(1, true, dims, []uint64{0}, row),
					item(1, true, dims, []uint64{256}, row),
					item(1, false, dims, []uint64{512}, row),
					item(1, false, dims, []uint64{768}, row),
				}, pattern(2*nbytes(row), 1))
				done <- err
			}()
			<-g.entered
			if how == "cancel" {
				cancel()
			} else {
				_ = c.Close()
				<-e.ended
			}
			if err := <-done; err == nil {
				t.Fatal("a waited start given up succeeded")
			}
			g.release()
			if n := transfersLeft(e.svc, 0); n != 0 {
				t.Fatalf("%d transfers still registered", n)
			}
		})
	}
}

// TestSessionsEndWhileOthersStart: clients start, wait for some and
// leave the rest as their connections close, concurrently, over many
// pages of ids: every wait answered is right, and once every session
// has ended nothing is registered.
func TestSessionsEndWhileOthersStart(t *testing.T) {
	e := newEnv(t, Config{MaxBytes: 8 << 20})
	ctx := testCtx(t)
	dims := []uint64{1 << 16}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for k := range 6 {
		wg.Go(func() {
			for round := range 15 {
				c, err := rpc.Dial(ctx, e.addr, rpc.DialOptions{ClientName: fmt.Sprintf("c%d", k)})
				if err != nil {
					errs <- err
					return
				}
				var items []wire.DataItem
				n := 1 + (round*37+k*11)%300 // across page boundaries
				row := uint64(8)
				for i := range n {
					off := uint64(k*4096) + uint64(i)*row%4096
					items = append(items, item(uint64(10+k), i%3 != 2, dims, []uint64{off}, []uint64{row}))
				}
				var payload []byte
				for _, it := range items {
					if it.Write {
						payload = append(payload, pattern(nbytes(it.Size), byte(round))...)
					}
				}
				ids, err := start(ctx, c, items, payload)
				if err != nil {
					errs <- fmt.Errorf("c%d round %d start: %w", k, round, err)
					_ = c.Close()
					return
				}
				if round%2 == 0 {
					res, _, err := wait(ctx, c, ids...)
					if err != nil {
						errs <- fmt.Errorf("c%d round %d wait: %w", k, round, err)
					} else {
						for i, r := range res.Items {
							if r.Code != wire.CodeOK {
								errs <- fmt.Errorf("c%d round %d item %d: %v %s", k, round, i, r.Code, r.Message)
								break
							}
						}
					}
				} else if round%3 == 0 && len(ids) > 1 {
					// Half of them waited, the rest left to the session's end.
					if _, _, err := wait(ctx, c, ids[:len(ids)/2]...); err != nil {
						errs <- fmt.Errorf("c%d round %d half wait: %w", k, round, err)
					}
				}
				_ = c.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := transfersLeft(e.svc, 0); n != 0 {
		t.Fatalf("%d transfers registered after every session ended", n)
	}
}
