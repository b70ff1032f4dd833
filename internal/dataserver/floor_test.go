package dataserver

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/vfs"
	"github.com/pdcgo/pdc/internal/wire"
	"github.com/pdcgo/pdc/region"
)

// A start is answered while another client's write to the same object
// is being stored: looking up the dims version the object's files keep
// (floorVersions) must not wait for the object's lock, which a write, a
// relayout or a scrub of the object holds for as long as its I/O takes.
// Were it to, every later start of the client would wait its turn behind
// that one, on whatever objects.
func TestStartDoesNotWaitForWriteInProgress(t *testing.T) {
	fsys := vfs.NewFaulty(vfs.Default)
	e := newEnvFS(t, Config{}, fsys)
	a, b := e.dial("a"), e.dial("b")
	dims := []uint64{8, 16}
	all := region.Box{Off: []uint64{0, 0}, Size: dims}
	first := pattern(nbytes(dims), 1)
	write(t, a, 1, dims, all, first)

	var mu sync.Mutex
	armed := true
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	fsys.OnOp(func(op vfs.Op, path string) {
		if op != vfs.OpWrite || !strings.HasSuffix(path, "0000000000000001.off") {
			return
		}
		mu.Lock()
		hold := armed
		armed = false
		mu.Unlock()
		if hold {
			close(blocked)
			<-release
		}
	})
	defer fsys.OnOp(nil)

	// a's write holds the object while its bytes are being stored.
	second := pattern(nbytes(dims), 2)
	written := make(chan error, 1)
	go func() {
		_, _, err := startWait(testCtx(t), a, []wire.DataItem{item(1, true, dims, all.Off, all.Size)}, second)
		written <- err
	}()
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the write never reached the file")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ids, err := start(ctx, b, []wire.DataItem{item(1, false, dims, all.Off, all.Size)})
	if err != nil {
		free()
		<-written
		t.Fatalf("a read's start while another client's write of the object is stored: %v", err)
	}
	free()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	res, parts, err := wait(testCtx(t), b, ids...)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	if !bytes.Equal(parts[0], second) && !bytes.Equal(parts[0], first) {
		t.Fatal("the read got neither the first write nor the second")
	}
}
