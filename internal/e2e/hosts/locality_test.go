package hosts_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/bed"
	"github.com/pdcgo/pdc/internal/e2e"
)

// TestLocalityByHost (issue 26, item 6): what pdc decides by host, it
// decides by the real host a process runs on, with no --host flag or
// $PDC_HOST anywhere. A region-local object written from node-2 has its
// bytes stored by node-2's server; a file produced on node-1 is consumed
// there without a transfer, and from node-3 over the network (a pull,
// never shared memory), as each consume reports.
func TestLocalityByHost(t *testing.T) {
	b := bed.Start(t, 3)
	h := startHostsWith(t, b, 3, func(_ int, n *bed.Node) []string {
		return []string{"--listen", "0.0.0.0:0", "--stage-producer-dir", n.ProducerDir}
	})
	n1, n2, n3 := b.Nodes[0], b.Nodes[1], b.Nodes[2]

	// Region-local: every byte a client on node-2 writes lands in
	// node-2's data dir, and reads back from another node.
	const size = 8 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	lo, hi := filepath.Join(n2.Dir, "lo.bin"), filepath.Join(n2.Dir, "hi.bin")
	if err := os.WriteFile(lo, data[:size/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hi, data[size/2:], 0o600); err != nil {
		t.Fatal(err)
	}
	before := dataBytes(t, b)
	h.pdc(n2, "cont", "create", "loc")
	h.pdc(n2, "obj", "create", "--cont", "loc", "--dims", "8388608", "--type", "uint8", "--partition", "region-local", "local")
	h.pdc(n2, "put", "--region", "0:4194304", "local", lo)
	after := dataBytes(t, b)
	grew := func(i int) int64 { return after[i] - before[i] }
	if grew(1) < size/2 || grew(0) > size/8 || grew(2) > size/8 {
		t.Fatalf("a region-local write of 4 MiB from node-2 grew the data dirs by %d (node-1), %d (node-2), %d (node-3) bytes; want it on node-2",
			grew(0), grew(1), grew(2))
	}
	h.pdc(n2, "put", "--region", "4194304:8388608", "local", hi)
	out := filepath.Join(n3.Dir, "out.bin")
	h.pdc(n3, "get", "local", out)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("node-3 read other bytes than node-2 wrote")
	}

	// Staging: produced on node-1, consumed on node-1 (no transfer) and
	// on node-3 (fetched from node-1's server, over the network).
	if err := os.WriteFile(filepath.Join(n1.ProducerDir, "step-1.h5"), data[:1<<20], 0o600); err != nil {
		t.Fatal(err)
	}
	if l := h.pdc(n1, "stage", "produce", "--producer-dir", n1.ProducerDir, "step-1.h5"); !strings.Contains(l, "on "+n1.Name) {
		t.Errorf("produce on %s: %q, want it served on %s", n1.Name, l, n1.Name)
	}
	local := h.pdc(n1, "stage", "consume", "--producer-dir", n1.ProducerDir, "--consumer-dir", n1.ConsumerDir, "--timeout", "1m", "step-1.h5")
	if strings.Contains(local, "fetched") {
		t.Errorf("a consume on the producer's node moved the file over the network: %q", local)
	}
	remote := h.pdc(n3, "stage", "consume", "--consumer-dir", n3.ConsumerDir, "--timeout", "1m", "step-1.h5")
	if !strings.Contains(remote, "fetched 1.0MiB from rank 0") || !strings.Contains(remote, "by auto (pull)") {
		t.Errorf("a consume on another node: %q, want the file fetched from rank 0 by a pull", remote)
	}
	for _, f := range []string{filepath.Join(n1.ConsumerDir, "step-1.h5"), filepath.Join(n3.ConsumerDir, "step-1.h5")} {
		got, err := os.ReadFile(f)
		if err != nil || !bytes.Equal(got, data[:1<<20]) {
			t.Errorf("%s: %d bytes, %v; want the produced file", f, len(got), err)
		}
	}
	h.alive()
}

// pdc runs a pdc command on node against the cluster and returns what it
// printed; it fails the test if the command fails.
func (h *hosts) pdc(node *bed.Node, args ...string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := node.Command(ctx, e2e.CommandBin(h.t, args...), args...)
	cmd.Env = append(os.Environ(), "PDC_TMPDIR="+h.tmpdir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		h.t.Fatalf("pdc %s on %s: %v\nstdout:\n%s\nstderr:\n%s\nserver logs:\n%s", strings.Join(args, " "), node.Name, err, out.String(), errb.String(), h.logs())
	}
	return strings.TrimSpace(out.String())
}

// dataBytes is the bytes of the files in each node's data slots (its
// data dir's data-* dirs, where region data goes; metadata is beside
// them).
func dataBytes(t *testing.T, b *bed.Bed) []int64 {
	t.Helper()
	out := make([]int64, len(b.Nodes))
	for i, n := range b.Nodes {
		slots, err := filepath.Glob(filepath.Join(n.DataDir, "data-*"))
		if err != nil || len(slots) == 0 {
			t.Fatalf("%s: no data slot dirs in %s (%v)", n.Name, n.DataDir, err)
		}
		for _, slot := range slots {
			if err := filepath.WalkDir(slot, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.Type().IsRegular() {
					info, err := d.Info()
					if err != nil {
						return err
					}
					out[i] += info.Size()
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}
