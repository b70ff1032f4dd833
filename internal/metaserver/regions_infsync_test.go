package metaserver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/vfs"
)

// placeOn places a write of [0, 4) of obj on one of cands.
func placeOn(obj func(s *Service) uint64, cands ...uint64) storeChange {
	return func(s *Service) error {
		_, err := readPlace(obj, cands...)(context.Background(), s)
		return err
	}
}

// A placement in its fsync holds back no region query of another object,
// nor a write placed in place on one: the regions' lock, which orders the
// placements' records, is not held through the fsync. What the placement
// made is answered only once it is durable: a query of its object and a
// write placed over its region, probed with a context already done, fail
// at once (they wait for the fsync), and a power-loss image taken then
// lacks the record. Before, the placement held the lock through its fsync,
// and every region query and placement of every object waited for it.
func TestPlacementInItsFsyncHoldsBackNoOtherObject(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem)
	s := openSyncOn(t, fsys)
	a, b := objNamed("a"), objNamed("b")
	setupAll(createObjNamed("a"), createObjNamed("b"), placeOn(b, 0))(t, s)
	ctx := context.Background()
	wantB, err := readRegion(b)(ctx, s)
	if err != nil {
		t.Fatal(err)
	}

	var armed, unblocked sync.Once
	syncing, release := make(chan struct{}), make(chan struct{})
	unblock := func() { unblocked.Do(func() { close(release) }) }
	fsys.OnOp(func(op vfs.Op, path string) {
		if op == vfs.OpSync && strings.Contains(path, walPath) {
			armed.Do(func() {
				close(syncing)
				<-release
			})
		}
	})
	placed, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		placed <- placeOn(a, 1)(s)
	}()
	defer func() {
		unblock()
		<-finished
		fsys.OnOp(nil)
		s.Close()
	}()
	<-syncing

	type answer struct {
		got string
		err error
	}
	// probe reads during the placement's fsync. The timer only ends a
	// probe stuck behind the fsync, which it must not wait for; what
	// passes does not depend on it.
	probe := func(what string, ctx context.Context, rd storeRead) answer {
		t.Helper()
		ch := make(chan answer, 1)
		go func() {
			got, err := rd(ctx, s)
			ch <- answer{got, err}
		}()
		select {
		case ans := <-ch:
			return ans
		case <-time.After(10 * time.Second):
			unblock()
			<-ch
			t.Fatalf("%s waited for the fsync of a placement on another object", what)
			return answer{}
		}
	}
	if got := probe("a region query of b", ctx, readRegion(b)); got.err != nil || got.got != wantB {
		t.Fatalf("a region query of b during the fsync of a placement on a: %q, %v; want %q", got.got, got.err, wantB)
	}
	if got := probe("a write of b placed in place", ctx, readPlace(b, 1)); got.err != nil || !strings.Contains(got.got, "Server:0") {
		t.Fatalf("a write of b placed in place during the fsync of a placement on a: %q, %v; want it on server 0", got.got, got.err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for what, rd := range map[string]storeRead{
		"a region query of a":               readRegion(a),
		"a region query of many, a's among": readRegions(a),
		"a write of a placed in place":      readPlace(a, 0),
	} {
		if got := probe(what, done, rd); !errors.Is(got.err, context.Canceled) {
			t.Errorf("%s during the fsync of its placement: %q, %v; want it to wait for the fsync (context canceled)", what, got.got, got.err)
		}
	}

	lost := mem.CrashClone() // power loss during the placement's fsync
	unblock()
	if err := <-placed; err != nil {
		t.Fatalf("the placement on a: %v", err)
	}
	after, err := readRegion(a)(ctx, s)
	if err != nil || !strings.Contains(after, "Server:1") {
		t.Fatalf("a region query of a once its placement is durable: %q, %v; want it on server 1", after, err)
	}
	s2 := openSyncOn(t, lost)
	defer s2.Close()
	if got, err := readRegion(a)(ctx, s2); err != nil || got == after {
		t.Fatalf("after a power loss during the placement's fsync, a region query of a: %q, %v; want no piece on server 1", got, err)
	}
}
