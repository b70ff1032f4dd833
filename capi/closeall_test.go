package capi_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pdcgo/pdc/capi"
)

func TestCloseAllServerStopsTheCluster(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a", "PDC_TIMEOUT", "0.5")
	pdc := p.init(t)
	prop := p.PropCreate(0, pdc)
	if prop == 0 || p.PropSetContLifetime(prop, 1) != capi.Succeed || p.ContCreate("gone-with-the-cluster", prop) == 0 {
		t.Fatalf("setup: %q", p.lines())
	}
	if rc := p.CloseAllServer(); rc != capi.Succeed {
		t.Fatalf("PDC_Client_close_all_server: %q", p.lines())
	}
	p.quiet(t)
	if _, err := os.Stat(filepath.Join(tc.tmpdir, "pdc_server_list")); !os.IsNotExist(err) {
		t.Errorf("the server list is still there: %v", err)
	}
	// The servers are gone: a new connection waits for a list and fails.
	q := tc.node("node-b", "PDC_TIMEOUT", "0.2")
	if id := q.Init("after"); id != 0 {
		t.Fatal("PDCinit after close_all_server succeeded")
	}
	q.lines()
	// Handles opened before still close.
	if rc := p.Close(pdc); rc != capi.Succeed {
		t.Errorf("PDCclose after close_all_server: %q", p.lines())
	}
	// Nothing left to stop: it says so.
	if rc := p.CloseAllServer(); rc != capi.Fail {
		t.Error("a second close_all_server succeeded")
	}
	p.wantLine(t, "PDC_Client_close_all_server()", "no server list")
}

// A server already gone is not an error: the call stops the others,
// succeeds, and prints nothing.
func TestCloseAllServerWithADeadServer(t *testing.T) {
	tc := startCluster(t, "node-a", "node-b")
	p := tc.node("node-a", "PDC_TIMEOUT", "10")
	pdc := p.init(t)
	prop := p.PropCreate(0, pdc)
	if prop == 0 || p.PropSetContLifetime(prop, 1) != capi.Succeed {
		t.Fatalf("setup: %q", p.lines())
	}
	for _, name := range []string{"t1", "t2", "t3", "t4"} {
		if p.ContCreate(name, prop) == 0 {
			t.Fatalf("setup: %q", p.lines())
		}
	}
	if err := tc.Stop(1); err != nil {
		t.Fatal(err)
	}
	if rc := p.CloseAllServer(); rc != capi.Succeed {
		t.Fatalf("PDC_Client_close_all_server with rank 1 gone: %q", p.lines())
	}
	p.quiet(t)
	if _, err := os.Stat(filepath.Join(tc.tmpdir, "pdc_server_list")); !os.IsNotExist(err) {
		t.Errorf("the server list is still there: %v", err)
	}
}
