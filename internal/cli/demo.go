package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/region"
)

func init() {
	register(command{name: "demo", summary: "start a local cluster, use it, stop it: the tour", usage: "[flags]",
		examples: []string{"pdc demo", "pdc demo -n 1 --keep"}, run: runDemo})
}

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "demo", "[flags]")
	n := fs.Int("n", 3, "number of servers, 1 to 26 (node-a to node-z)")
	keep := fs.Bool("keep", false, "keep the demo's tmpdir and logs")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if err := noArgs(fs, "demo"); err != nil {
		return err
	}
	// -n -1 panicked making the hosts; -n 5000 started servers until the
	// disk was full.
	if *n < 1 || *n > 26 {
		return fmt.Errorf("demo: -n %d: want 1 to 26 servers, one a node (node-a to node-z): %w", *n, errUsage)
	}
	dir, err := os.MkdirTemp("", "pdc-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	out := e.stdout
	tmpdir, datadir := filepath.Join(dir, "tmp"), filepath.Join(dir, "data")

	fmt.Fprintf(out, "== starting %s (pdc up -n %d --tmpdir %s)\n", count(*n, "server", "servers"), *n, tmpdir)
	t0 := time.Now()
	// The servers stand for nodes of their own (node-a, node-b, ...), each
	// serving a producer dir, so that staging moves files between "nodes".
	hosts := make([]string, *n)
	for i := range hosts {
		hosts[i] = demoHost(i)
	}
	procs, err := up(ctx, e.stderr, upOptions{n: *n, tmpdir: tmpdir, datadir: datadir, roles: "both", secret: true, timeout: 60 * time.Second,
		hosts: hosts, stageDir: filepath.Join(dir, "stage", "{host}")})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			// Leave nothing running, whatever failed above.
			_, _ = down(context.Background(), e.stderr, tmpdir, 30*time.Second)
		}
	}()
	printProcs(out, procs)
	fmt.Fprintf(out, "up in %v\n\n", time.Since(t0).Round(time.Millisecond))

	c, err := client.Connect(ctx, client.WithTmpDir(tmpdir), client.WithName("pdc demo"))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer c.Close()
	if err := demoStatus(ctx, out, c); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := demoMetadata(ctx, out, c); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := demoRegions(ctx, out, c); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if *n >= 2 {
		if err := demoStaging(ctx, out, tmpdir, dir); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	c.Close()
	fmt.Fprintln(out)
	fmt.Fprintln(out, "== stopping (pdc down)")
	k, err := down(ctx, e.stderr, tmpdir, 30*time.Second)
	stopped = err == nil
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(out, "stopped %s; demo done\n", count(k, "server", "servers"))
	if *keep {
		fmt.Fprintf(out, "logs kept in %s\n", filepath.Join(tmpdir, "logs"))
	}
	return nil
}

// demoStatus pings every server (authenticated with the cluster secret)
// and prints the cluster's status.
func demoStatus(ctx context.Context, out io.Writer, c *client.Client) error {
	fmt.Fprintln(out, "== pinging every server (authenticated with the cluster secret)")
	if err := pingAll(ctx, out, c, 5*time.Second); err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "== status")
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	sts, err := c.Status(sctx)
	cancel()
	printStatus(out, sts)
	return err
}

// demoMetadata shows containers, objects and tags.
func demoMetadata(ctx context.Context, out io.Writer, c *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fmt.Fprintln(out)
	fmt.Fprintln(out, "== a container with objects and tags (pdc cont / pdc obj)")
	ct, _, err := c.CreateContainer(ctx, "vpic-run-1", client.Persistent)
	if err != nil {
		return err
	}
	var specs []client.ObjectSpec
	for _, name := range []string{"x", "y", "z", "energy"} {
		specs = append(specs, client.ObjectSpec{Name: name, Props: client.ObjectProps{
			Dims: []uint64{1 << 20}, Type: region.Float, Partition: client.RegionStatic, AppName: "vpic"}})
	}
	objs, err := ct.CreateObjects(ctx, specs)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := o.PutTag(ctx, "timestep", client.Int64(42)); err != nil {
			return err
		}
		if err := o.PutTag(ctx, "units", client.String("m")); err != nil {
			return err
		}
	}
	if err := objs[3].SetDims(ctx, []uint64{2 << 20}); err != nil {
		return err
	}
	list, err := ct.Objects(ctx)
	if err != nil {
		return err
	}
	printObjects(out, list)
	v, err := objs[0].GetTag(ctx, "timestep")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "tag timestep of %q: %s (%s); metadata lives on the server that hash(name) picks, durably\n", objs[0].Name(), v, v.Type)
	for _, o := range objs {
		_ = o.Close(ctx)
	}
	return nil
}

// demoRegions writes a VPIC-style particle set (8 variables) as two
// simulation ranks would, reads it back as BD-CATS does, each rank
// another's particles, and checks every value.
func demoRegions(ctx context.Context, out io.Writer, c *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	const ranks, n = 2, 1 << 20
	fmt.Fprintln(out)
	fmt.Fprintf(out, "== VPIC-IO: %d ranks write %d particles each of 8 variables (x y z px py pz id1 id2), spread over the data servers\n", ranks, n)
	ct, _, err := c.CreateContainer(ctx, "vpic-particles", client.Persistent)
	if err != nil {
		return err
	}
	if err := bench.VPICCreate(ctx, ct, "demo", ranks*n, client.RegionStatic); err != nil {
		return err
	}
	rs := make([]*bench.VPICRank, ranks)
	for r := range rs {
		if rs[r], err = bench.OpenVPICRank(ctx, c, "demo", uint64(r), n); err != nil {
			return err
		}
		rs[r].Fill()
	}
	t0 := time.Now()
	for _, r := range rs {
		if err := r.Write(ctx, c); err != nil {
			return err
		}
	}
	d := time.Since(t0)
	total := float64(ranks) * float64(rs[0].Bytes())
	fmt.Fprintf(out, "wrote %.0f MiB through start_all/wait_all in %v (%.2f GB/s)\n", total/(1<<20), d.Round(time.Millisecond), total/d.Seconds()/1e9)
	fmt.Fprintln(out, "== BD-CATS: each rank reads the other's particles and checks every value")
	t0 = time.Now()
	for r := range rs {
		other, err := bench.OpenVPICRank(ctx, c, "demo", uint64((r+1)%ranks), n)
		if err != nil {
			return err
		}
		if err := other.Read(ctx, c); err != nil {
			return err
		}
		if err := other.Close(ctx); err != nil {
			return err
		}
	}
	d = time.Since(t0)
	fmt.Fprintf(out, "read back and checked %d values in %v (%.2f GB/s)\n", ranks*n*len(bench.VPICVars), d.Round(time.Millisecond), total/d.Seconds()/1e9)
	for _, r := range rs {
		if err := r.Close(ctx); err != nil {
			return err
		}
	}
	return nil
}

func demoHost(i int) string { return fmt.Sprintf("node-%c", 'a'+i%26) }

// demoStaging moves files from a producer on node-a to a consumer on
// node-b that asked for them before they existed, as workflow tasks do.
func demoStaging(ctx context.Context, out io.Writer, tmpdir, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	fmt.Fprintln(out)
	fmt.Fprintln(out, "== staging: a consumer on node-b waits for files a producer on node-a makes (pdc stage)")
	prodDir := filepath.Join(dir, "stage", demoHost(0))
	prod, err := client.Connect(ctx, client.WithTmpDir(tmpdir), client.WithStageDirs(prodDir, ""), client.WithHost(demoHost(0)))
	if err != nil {
		return err
	}
	defer prod.Close()
	cons, err := client.Connect(ctx, client.WithTmpDir(tmpdir), client.WithStageDirs("", filepath.Join(dir, "consumer-b")), client.WithHost(demoHost(1)))
	if err != nil {
		return err
	}
	defer cons.Close()
	files := []demoFile{{"run1/params.txt", 1 << 10}, {"run1/field.dat", 1 << 20}, {"run1/particles.dat", 16 << 20}}
	results := make([]demoGot, len(files))
	waiting := make(chan string, len(files))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, f := range files {
			c, err := cons.Consume(ctx, f.name, client.WithWaiting(func(p string) { waiting <- p }))
			results[i] = demoGot{c, err}
		}
	}()
	// The first consume waits on its metadata server; produce once it does.
	select {
	case p := <-waiting:
		fmt.Fprintf(out, "consumer on node-b: waiting for %s\n", p)
	case <-done:
	}
	if err := demoProduce(ctx, out, prod, prodDir, files); err != nil {
		return err
	}
	<-done
	if err := demoCheckConsumed(out, prodDir, files, results); err != nil {
		return err
	}
	again, err := cons.Consume(ctx, files[2].name)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "consumer on node-b, again: %s (nothing moved: it holds version %d)\n", again.How, again.Version)
	local, err := client.Connect(ctx, client.WithTmpDir(tmpdir), client.WithStageDirs("", filepath.Join(dir, "consumer-a")), client.WithHost(demoHost(0)))
	if err != nil {
		return err
	}
	defer local.Close()
	same, err := local.Consume(ctx, files[2].name)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "consumer on node-a, the owner's node: %s (no transfer)\n", same.How)
	return nil
}

// demoFile is a file the demo's producer makes.
type demoFile struct {
	name string
	size int
}

// demoGot is what a consume of the demo returned.
type demoGot struct {
	c   client.Consumed
	err error
}

// demoProduce writes files into the producer dir and produces them.
func demoProduce(ctx context.Context, out io.Writer, prod *client.Client, prodDir string, files []demoFile) error {
	if err := os.MkdirAll(filepath.Join(prodDir, "run1"), 0o755); err != nil {
		return err
	}
	for i, f := range files {
		data := make([]byte, f.size)
		for j := range data {
			data[j] = byte(i*131 + j*7 + j>>12)
		}
		if err := os.WriteFile(filepath.Join(prodDir, f.name), data, 0o644); err != nil {
			return err
		}
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	recs, err := prod.Produce(ctx, names...)
	if err != nil {
		return err
	}
	for _, r := range recs {
		fmt.Fprintf(out, "producer on node-a: produced %s (%s, version %d, crc32c %08x)\n", r.Path, humanBytes(uint64(r.Size)), r.Version, r.CRC)
	}
	return nil
}

// demoCheckConsumed checks that each consumed copy is what was produced.
func demoCheckConsumed(out io.Writer, prodDir string, files []demoFile, results []demoGot) error {
	for i, r := range results {
		if r.err != nil {
			return r.err
		}
		want, err := os.ReadFile(filepath.Join(prodDir, files[i].name))
		if err != nil {
			return err
		}
		have, err := os.ReadFile(r.c.Local)
		if err != nil {
			return err
		}
		if string(have) != string(want) {
			return fmt.Errorf("staged %s arrived different from what was produced", files[i].name)
		}
		if r.c.How == client.Inline {
			fmt.Fprintf(out, "consumer on node-b: %s %s %s, in its record (the owner on %s not asked), checksum verified\n", r.c.How, r.c.Path, humanBytes(uint64(r.c.Moved)), r.c.Owner.Host)
			continue
		}
		fmt.Fprintf(out, "consumer on node-b: %s %s %s by %s from %s, checksum verified\n", r.c.How, r.c.Path, humanBytes(uint64(r.c.Moved)), r.c.Mode, r.c.Owner.Host)
	}
	return nil
}
