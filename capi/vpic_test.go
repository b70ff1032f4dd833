package capi_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/e2e"
	"github.com/pdcgo/pdc/region"
)

// vpicCluster is `pdc up -n 2` from a libpdc install, with the C VPIC-IO
// and BD-CATS programs beside it.
type vpicCluster struct {
	prefix, tmpdir string
}

func startVPICCluster(t *testing.T, ctx context.Context) *vpicCluster {
	t.Helper()
	vc := &vpicCluster{prefix: installLibpdc(t, ctx), tmpdir: filepath.Join(t.TempDir(), "tmp")}
	pdcBin := filepath.Join(vc.prefix, "bin", "pdc")
	if out, err := script(ctx, pdcBin, "up", "-n", "2", "--tmpdir", vc.tmpdir, "--datadir", filepath.Join(t.TempDir(), "data")); err != nil {
		t.Fatalf("pdc up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		list, err := cluster.ReadList(vc.tmpdir)
		if err != nil {
			return
		}
		if out, err := script(context.Background(), pdcBin, "down", "--tmpdir", vc.tmpdir, "--timeout", "10s"); err != nil {
			t.Errorf("pdc down: %v\n%s", err, out)
		}
		for _, s := range list.Servers {
			_ = syscall.Kill(s.PID, syscall.SIGKILL)
		}
	})
	return vc
}

// progResult is how one run of a C program ended.
type progResult struct {
	stdout, stderr string
	err            error
}

// run runs bin/prog of the install against the cluster.
func (vc *vpicCluster) run(ctx context.Context, prog string, args ...string) progResult {
	cmd := exec.CommandContext(ctx, filepath.Join(vc.prefix, "bin", prog), args...)
	cmd.Env = append(os.Environ(), "PDC_TMPDIR="+vc.tmpdir, "PDC_TIMEOUT=60")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	return progResult{out.String(), errb.String(), err}
}

// ranks runs prog once per rank, all at once, with -rank R -size len
// after args, and fails the test unless each exits 0 printing its result
// line.
func (vc *vpicCluster) ranks(t *testing.T, ctx context.Context, prog string, size int, n uint64, args ...string) {
	t.Helper()
	res := make([]progResult, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Go(func() {
			res[r] = vc.run(ctx, prog, slices.Concat(args, []string{"-n", fmt.Sprint(n), "-rank", fmt.Sprint(r), "-size", fmt.Sprint(size)})...)
		})
	}
	wg.Wait()
	for r, pr := range res {
		if pr.err != nil {
			t.Fatalf("%s rank %d: %v\nstdout: %s\nstderr: %s", prog, r, pr.err, pr.stdout, pr.stderr)
		}
		kv := resultLine(t, pr.stdout)
		want := map[string]string{"rank": fmt.Sprint(r), "size": fmt.Sprint(size), "n": fmt.Sprint(n), "bytes": fmt.Sprint(n * 32)}
		for k, v := range want {
			if kv[k] != v {
				t.Errorf("%s rank %d printed %s=%q, want %q: %s", prog, r, k, kv[k], v, pr.stdout)
			}
		}
		if s, err := strconv.ParseFloat(kv["seconds"], 64); err != nil || s <= 0 {
			t.Errorf("%s rank %d printed seconds=%q: %s", prog, r, kv["seconds"], pr.stdout)
		}
		if pr.stderr != "" {
			t.Errorf("%s rank %d printed to stderr: %s", prog, r, pr.stderr)
		}
	}
}

// resultLine reads the one line of key=value pairs a program printed.
func resultLine(t *testing.T, out string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	fields := strings.Fields(lines[0])
	if len(lines) != 1 || len(fields) == 0 {
		t.Fatalf("printed %q, want one result line", out)
	}
	kv := map[string]string{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("result line %q: field %q is not key=value", lines[0], f)
		}
		kv[k] = v
	}
	return kv
}

// TestVPICPrograms runs the C VPIC-IO (pdc_vpicio) and BD-CATS
// (pdc_bdcats) that make capi installs, with 2 ranks, against 2 pdc server
// processes, under every partition strategy; checks that Go's VPIC reads
// what C wrote and C what Go wrote (the same objects and values); and
// that BD-CATS fails, saying why, on a run that does not match.
func TestVPICPrograms(t *testing.T) {
	needC(t)
	ctx := testCtx(t)
	vc := startVPICCluster(t, ctx)
	const ranks, n = 2, 3000
	c, err := client.Connect(ctx, client.WithTmpDir(vc.tmpdir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	checkCWritesGoReads(t, ctx, vc, c, ranks, n)
	checkGoWritesCReads(t, ctx, vc, c, ranks, n)

	for _, tc := range []struct {
		name string
		args []string
		want []string // stderr lines, in order
	}{
		{"changed value", []string{"-run", "go", "-n", "3000", "-rank", "1", "-size", "2"}, []string{
			`pdc_bdcats: object "vpic-go-y" particle 4321: got 0xbfc00000 (-1.5), want 0x44872800 (1081.25); 1 of particles 3000..5999 differ`,
			`pdc_bdcats: 1 of the 24000 values read differ from those pdc_vpicio writes`,
		}},
		{"never written", []string{"-run", "half", "-n", "3000", "-rank", "0", "-size", "2"}, []string{
			// x of particle 0 is 0, as a read of what was never written.
			`pdc_bdcats: object "vpic-half-x" particle 1: got 0x00000000 (0), want 0x3e800000 (0.25); 2999 of particles 0..2999 differ`,
			`pdc_bdcats: object "vpic-half-y" particle 0: got 0x00000000 (0), want 0x3f800000 (1); 3000 of particles 0..2999 differ`,
		}},
		{"wrong run", []string{"-run", "nosuch", "-n", "3000", "-rank", "1", "-size", "2"}, []string{
			`libpdc: PDCobj_open("vpic-nosuch-x", pdc 1): open object "vpic-nosuch-x": `,
			`pdc_bdcats: PDCobj_open("vpic-nosuch-x") failed (was run nosuch created, by pdc_vpicio -create?)`,
		}},
		{"wrong n", []string{"-run", "go", "-n", "2000", "-rank", "1", "-size", "2"}, []string{
			`pdc_bdcats: object "vpic-go-x" has 1 dims, the first 6000: want 1 dim of n*size = 4000 particles`,
		}},
		{"wrong partition", []string{"-run", "go", "-n", "3000", "-rank", "1", "-size", "2", "-partition", "object-static"}, []string{
			`pdc_bdcats: object "vpic-go-x" is partitioned region-static, want object-static`,
		}},
		{"rank past size", []string{"-run", "go", "-n", "3000", "-rank", "2", "-size", "2"}, []string{
			`pdc_bdcats: rank 2 is not below size 2`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := vc.run(ctx, "pdc_bdcats", tc.args...)
			if ee, ok := r.err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("pdc_bdcats %s: %v, want exit status 1\nstdout: %s\nstderr: %s", strings.Join(tc.args, " "), r.err, r.stdout, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("printed a result on stdout: %s", r.stdout)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			i := 0
			for _, l := range lines {
				if i < len(tc.want) && strings.HasPrefix(l, tc.want[i]) {
					i++
				}
			}
			if i < len(tc.want) {
				t.Errorf("stderr lacks the line %q (in this order):\n%s", tc.want[i], r.stderr)
			}
		})
	}
}

// checkCWritesGoReads runs C's VPIC-IO and BD-CATS under every partition
// strategy, and Go's BD-CATS checks every value C wrote against its own
// formula.
func checkCWritesGoReads(t *testing.T, ctx context.Context, vc *vpicCluster, c *client.Client, ranks int, n uint64) {
	t.Helper()
	for _, p := range bench.Partitions {
		t.Run(p.String(), func(t *testing.T) {
			run := "c-" + p.String()
			if r := vc.run(ctx, "pdc_vpicio", "-create", "-run", run, "-n", fmt.Sprint(n), "-size", fmt.Sprint(ranks), "-partition", p.String()); r.err != nil {
				t.Fatalf("pdc_vpicio -create: %v\n%s%s", r.err, r.stdout, r.stderr)
			}
			vc.ranks(t, ctx, "pdc_vpicio", ranks, n, "-run", run)
			vc.ranks(t, ctx, "pdc_bdcats", ranks, n, "-run", run, "-partition", p.String())
			// Go's BD-CATS checks every value C wrote against its own formula.
			for r := range uint64(ranks) {
				rd, err := bench.OpenVPICRank(ctx, c, run, r, n)
				if err != nil {
					t.Fatal(err)
				}
				if err := rd.Read(ctx, c); err != nil {
					t.Errorf("Go read of C's rank %d: %v", r, err)
				}
				if err := rd.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// checkGoWritesCReads has Go's VPIC-IO write run "go" for C's BD-CATS to
// read, then changes one value of its y and makes run "half", never
// written, for the failure cases.
func checkGoWritesCReads(t *testing.T, ctx context.Context, vc *vpicCluster, c *client.Client, ranks int, n uint64) {
	t.Helper()
	ct, _, err := c.CreateContainer(ctx, "vpic", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	if err := bench.VPICCreate(ctx, ct, "go", uint64(ranks)*n, client.RegionStatic); err != nil {
		t.Fatal(err)
	}
	for r := range uint64(ranks) {
		w, err := bench.OpenVPICRank(ctx, c, "go", r, n)
		if err != nil {
			t.Fatal(err)
		}
		w.Fill()
		if err := w.Write(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	vc.ranks(t, ctx, "pdc_bdcats", ranks, n, "-run", "go", "-partition", "region-static")

	// One value of "go"'s y changed: particle 4321 (rank 1's) now holds -1.5
	// instead of 4321/4 + 1 = 1081.25.
	y, err := c.OpenObject(ctx, "vpic-go-y")
	if err != nil {
		t.Fatal(err)
	}
	if err := y.Write(ctx, region.Box{Off: []uint64{4321}, Size: []uint64{1}}, binary.LittleEndian.AppendUint32(nil, math.Float32bits(-1.5))); err != nil {
		t.Fatal(err)
	}
	if err := y.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// "half" is made and never written: it reads as zeros.
	if err := bench.VPICCreate(ctx, ct, "half", uint64(ranks)*n, client.RegionStatic); err != nil {
		t.Fatal(err)
	}
}

// pdc bench vpic --c runs the C programs make capi installs, found by
// --c-prefix or $PDC_CAPI_PREFIX, and reports a write and a read row per
// process count.
func TestBenchVPICC(t *testing.T) {
	needC(t)
	ctx := testCtx(t)
	prefix := installLibpdc(t, ctx)
	pdcBin := filepath.Join(prefix, "bin", "pdc")
	out, err := exec.CommandContext(ctx, pdcBin, "bench", "vpic", "--c", "--c-prefix", prefix,
		"--n", "1000", "--steps", "1", "--procs", "1,2", "--json").Output()
	if err != nil {
		t.Fatalf("pdc bench vpic --c --c-prefix: %v", err)
	}
	e2e.CheckVPICRows(t, string(out), "vpic C (2 servers)", []string{"1", "2"},
		"VPIC-IO write (C, pdc_vpicio), ", "BD-CATS read, every value checked (C, pdc_bdcats), ")

	cmd := exec.CommandContext(ctx, pdcBin, "bench", "vpic", "--c", "--n", "1000", "--steps", "1",
		"--procs", "3", "--partition", "object-static", "--json")
	cmd.Env = append(os.Environ(), "PDC_CAPI_PREFIX="+prefix)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("bench vpic --c with $PDC_CAPI_PREFIX: %v\n%s", err, stderr.String())
	}
	e2e.CheckVPICRows(t, string(out), "vpic C (2 servers)", []string{"3"},
		"VPIC-IO write (C, pdc_vpicio), ", "BD-CATS read, every value checked (C, pdc_bdcats), ")
}
