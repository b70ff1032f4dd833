package capi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
)

// busyLib is a Lib with handles standing for an object (1), a container
// (2), a transfer on the object (3), a second object (4) and an object
// iterator (5) listing the first object, on a connection whose timeout is
// short. The handles have no servers behind them: a call that gets as far
// as the servers would fail.
func busyLib(t *testing.T, out *strings.Builder) (*Lib, []*handle) {
	t.Helper()
	l := New(Config{Stderr: out})
	p := &conn{name: "test", timeout: 200 * time.Millisecond}
	hs := []*handle{
		{kind: kindObj, conn: p, objState: objState{objName: "x", metaID: 77}},
		{kind: kindCont, conn: p, cont: &client.Container{}, refs: 1},
		nil, // the transfer, on hs[0]
		{kind: kindObj, conn: p, objState: objState{objName: "y", metaID: 78}},
		{kind: kindIter, conn: p, iter: &iterState{isObj: true, obj: client.ObjectInfo{ID: 77, Name: "x"}}},
	}
	hs[2] = &handle{kind: kindTransfer, conn: p, objState: objState{xferObj: hs[0]}}
	for i, h := range hs {
		if id, err := l.add(h); err != nil || id != uint64(i+1) {
			t.Fatalf("add: %d, %v", id, err)
		}
	}
	return l, hs
}

// hold takes h's lock as a call under way would, until the test ends.
func hold(t *testing.T, h *handle) {
	t.Helper()
	if err := h.lock(context.Background(), func() string { return "test" }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.unlock)
}

// returns runs call and returns its result; it fails the test if call
// still waits after 30 s, 150 times the calls' timeout (200 ms): a call
// that waits for a busy handle past its deadline waits as long as the
// handle stays busy, here for ever.
func returns(t *testing.T, call func() int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc := make(chan int, 1)
	go func() { rc <- call() }()
	select {
	case r := <-rc:
		return r
	case <-ctx.Done():
		t.Fatal("the call still waits for a busy handle, long past its deadline")
		return 0
	}
}

// A call waits for the calls ahead of it on a handle only until its
// deadline, which started before it waited: then it fails, saying so.
func TestCallsGiveUpOnABusyHandleAtTheirDeadline(t *testing.T) {
	var out strings.Builder
	l, hs := busyLib(t, &out)
	hold(t, hs[0])
	hold(t, hs[1])
	hold(t, hs[3])
	for _, c := range []struct {
		call func() int
		want []string
	}{
		{func() int { _, rc := l.ObjGetInfo(1); return rc }, []string{`PDCobj_get_info(1): object 1 ("x") is busy with another call`}},
		{func() int { return l.ObjClose(1) }, []string{`PDCobj_close(1): object 1 ("x") is busy`}},
		{func() int { return l.TransferWait(3) }, []string{`PDCregion_transfer_wait(3): object 1 ("x") is busy`}},
		{func() int { return l.TransferClose(3) }, []string{`PDCregion_transfer_close(3): object 1 ("x") is busy`}},
		{func() int { return l.ContPersist(2) }, []string{`PDCcont_persist(2): container 2 ("") is busy`}},
		// Every object's wait ends at the call's one deadline.
		{func() int { return l.ObjFlushAllStart() }, []string{`PDCobj_flush_all_start(): object 1: object 1 ("x") is busy`,
			`; object 4: object 4 ("y") is busy`}},
	} {
		if rc := returns(t, c.call); rc != Fail {
			t.Fatalf("rc %d, want a failure %q", rc, c.want)
		}
		line := strings.TrimSuffix(out.String(), "\n")
		out.Reset()
		if strings.Contains(line, "\n") {
			t.Errorf("more than one line: %q", line)
		}
		for _, want := range append(c.want, "at this call's deadline (PDC_TIMEOUT 200ms): pdc: deadline exceeded") {
			if !strings.Contains(line, want) {
				t.Errorf("line %q lacks %q", line, want)
			}
		}
	}
	// The closes that gave up left the handles open: the transfer may
	// still be using its buffer, and a later close can finish it.
	if _, err := l.get(1, kindObj); err != nil {
		t.Errorf("after a close that gave up: %v", err)
	}
	if _, err := l.get(3, kindTransfer); err != nil {
		t.Errorf("after a transfer close that gave up: %v", err)
	}
}

// PDCobj_iter_get_info needs no server and no object's lock: an object
// busy with another call does not hold it up.
func TestObjIterInfoDoesNotWaitForBusyObjects(t *testing.T) {
	var out strings.Builder
	l, hs := busyLib(t, &out)
	hold(t, hs[0])
	hold(t, hs[3])
	var info ObjInfo
	if rc := returns(t, func() (rc int) { info, rc = l.ObjIterInfo(5); return rc }); rc != Succeed {
		t.Fatalf("PDCobj_iter_get_info: %s", out.String())
	}
	if info.Name != "x" || info.MetaID != 77 || info.LocalID != 1 {
		t.Errorf("info %+v, want x, meta id 77, local id 1", info)
	}
	if out.Len() > 0 {
		t.Errorf("a call that succeeded printed %q", out.String())
	}
}
