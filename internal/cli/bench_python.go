package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/region"
)

// bench python: the same regions written and read, and the same tags put,
// through the Python package (python3 -m pdc bench, over libpdc) and
// through the Go client, in the same rounds; Python's figure is reported
// against Go's as its ceiling. Each pass, Python's and Go's alike, is a
// process of its own (pdc bench-python-go for Go), started and connected
// before its clock starts: what a program of either kind does. A Go pass
// in this long-lived process would run on connections, socket buffers and
// a heap that earlier rounds had warmed, which no new Python process has,
// and measured 20-40% faster than a new Go process on the same regions.

func benchPython(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench python", "[flags]")
	bo := addBenchOpts(fs, "python")
	sizeFlag := fs.String("size", "1GiB", "object size")
	regionFlag := fs.String("region", "1MiB", "region size (a multiple of 8 bytes dividing --size): the object is written and read one region at a time")
	tags := fs.Int("tags", 10000, "tags put one at a time")
	servers := fs.Int("servers", 2, "server processes")
	python := pythonFlag(e, fs)
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	size, err := parseSize(*sizeFlag)
	if err != nil {
		return fmt.Errorf("bench python: --size: %w: %w", err, errUsage)
	}
	reg, err := parseSize(*regionFlag)
	if err != nil || reg < 8 || reg%8 != 0 || size < reg || size%reg != 0 {
		return fmt.Errorf("bench python: --region %s: want a multiple of 8 bytes that divides --size %s: %w", *regionFlag, *sizeFlag, errUsage)
	}
	if *tags < 1 || *servers < 1 {
		return fmt.Errorf("bench python: --tags and --servers: want at least 1: %w", errUsage)
	}
	run, err := bo.begin(e)
	if err != nil {
		return err
	}
	defer run.close()
	dir, err := os.MkdirTemp("", "pdc-bench-python-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	o := upOptions{n: *servers, tmpdir: filepath.Join(dir, "tmp"), datadir: filepath.Join(dir, "data"), roles: "both", secret: true,
		timeout: time.Minute, cpuprofile: run.serverProfile()}
	if _, err := up(ctx, e.stderr, o); err != nil {
		return fmt.Errorf("bench python: %w", err)
	}
	defer down(context.Background(), io.Discard, o.tmpdir, time.Minute)
	run.started(o.tmpdir)
	pb := &pythonBench{e: e, python: *python, tmpdir: o.tmpdir, rows: uint64(size / reg), cols: uint64(reg / 8), tags: *tags, label: sizeLabel(reg)}
	if err := pb.goSetup(ctx); err != nil {
		return fmt.Errorf("bench python: %w", err)
	}
	err = run.rounds(ctx, func(ctx context.Context, i int) ([]bench.Result, error) { return pb.round(ctx, i) })
	if err != nil {
		return fmt.Errorf("bench python: %w", err)
	}
	return run.finish()
}

// tagObject is the object both passes put their tags on.
const tagObject = "bench-tags"

type pythonBench struct {
	e          *env
	python     string
	tmpdir     string
	rows, cols uint64
	tags       int
	label      string
}

// passTimes are one pass's seconds.
type passTimes struct {
	Write float64 `json:"write_s"`
	Read  float64 `json:"read_s"`
	Tags  float64 `json:"tags_s"`
}

// goSetup creates the container and the Go passes' objects, as libpdc
// creates the Python side's.
func (p *pythonBench) goSetup(ctx context.Context) error {
	c, err := client.Connect(ctx, client.WithTmpDir(p.tmpdir))
	if err != nil {
		return err
	}
	defer c.Close()
	ct, _, err := c.CreateContainer(ctx, "bench-python", client.Persistent)
	if err == nil {
		// PDC's default partition, as libpdc's.
		_, err = ct.CreateObject(ctx, "go-data", client.ObjectProps{Dims: []uint64{p.rows, p.cols}, Type: region.Double, Partition: client.RegionStatic})
	}
	if err == nil {
		// One object for both passes' tags: the same metadata server
		// answers both, as it would not for two objects of different
		// names (each name has its own owner), and each pass overwrites
		// the same tags.
		_, err = ct.CreateObject(ctx, tagObject, client.ObjectProps{Dims: []uint64{1}, Type: region.Int64, Partition: client.RegionStatic})
	}
	return err
}

// round runs the Go pass and the Python pass, in turns first.
func (p *pythonBench) round(ctx context.Context, i int) ([]bench.Result, error) {
	var g, py passTimes
	var err error
	if i%2 == 0 {
		if g, err = p.goPass(ctx); err == nil {
			py, err = p.pyPass(ctx)
		}
	} else {
		if py, err = p.pyPass(ctx); err == nil {
			g, err = p.goPass(ctx)
		}
	}
	if err != nil {
		return nil, err
	}
	mb := float64(p.rows*p.cols*8) / 1e6
	// Issue 30's targets: 0.9 of Go's rate for regions, 0.8 for tags.
	rate := func(name string, v, cv float64, unit, target string) bench.Result {
		return bench.Result{Bench: "python", Case: name, Value: v, Unit: unit, Ceiling: "go client", CeilingValue: cv, Ratio: v / cv, Target: target}
	}
	return []bench.Result{
		rate(fmt.Sprintf("write %s regions", p.label), mb/py.Write, mb/g.Write, "MB/s", "ratio >= 0.9"),
		rate(fmt.Sprintf("read %s regions", p.label), mb/py.Read, mb/g.Read, "MB/s", "ratio >= 0.9"),
		rate("tag puts one at a time", float64(p.tags)/py.Tags, float64(p.tags)/g.Tags, "puts/s", "ratio >= 0.8"),
	}, nil
}

// goPass runs one `pdc bench-python-go` process for the round's Go pass.
func (p *pythonBench) goPass(ctx context.Context) (passTimes, error) {
	self, err := os.Executable()
	if err != nil {
		return passTimes{}, err
	}
	cmd := exec.CommandContext(ctx, self, "bench-python-go", "--tmpdir", p.tmpdir,
		"--rows", strconv.FormatUint(p.rows, 10), "--cols", strconv.FormatUint(p.cols, 10), "--tags", strconv.Itoa(p.tags))
	return passOutput(cmd, "go")
}

// runBenchPythonGo is the Go pass of bench python, in a process of its
// own: connect, then the timed work, then one JSON line of times.
func runBenchPythonGo(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench-python-go", "[flags]")
	tmpdir := fs.String("tmpdir", "", "the cluster's tmpdir")
	rows := fs.Uint64("rows", 0, "regions (rows of the object go-data)")
	cols := fs.Uint64("cols", 0, "doubles per region")
	tags := fs.Int("tags", 0, "tags put one at a time on "+tagObject)
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	c, err := client.Connect(ctx, client.WithTmpDir(*tmpdir))
	if err != nil {
		return err
	}
	defer c.Close()
	data, err := c.OpenObject(ctx, "go-data")
	if err != nil {
		return err
	}
	tobj, err := c.OpenObject(ctx, tagObject)
	if err != nil {
		return err
	}
	t, err := goPassIn(ctx, data, tobj, *rows, *cols, *tags)
	if err != nil {
		return err
	}
	return json.NewEncoder(e.stdout).Encode(t)
}

func goPassIn(ctx context.Context, data, tobj *client.Object, rows, cols uint64, tags int) (passTimes, error) {
	var t passTimes
	buf := make([]byte, cols*8)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	box := func(r uint64) region.Box { return region.Box{Off: []uint64{r, 0}, Size: []uint64{1, cols}} }
	t0 := time.Now()
	for r := range rows {
		if err := data.Write(ctx, box(r), buf); err != nil {
			return t, fmt.Errorf("go: write region %d: %w", r, err)
		}
	}
	t1 := time.Now()
	out := make([]byte, len(buf))
	for r := range rows {
		if err := data.Read(ctx, box(r), out); err != nil {
			return t, fmt.Errorf("go: read region %d: %w", r, err)
		}
	}
	t2 := time.Now()
	for i := range tags {
		if err := tobj.PutTag(ctx, "t"+strconv.Itoa(i), client.Int64(int64(i))); err != nil {
			return t, fmt.Errorf("go: tag %d: %w", i, err)
		}
	}
	t3 := time.Now()
	if !bytes.Equal(out, buf) {
		return t, fmt.Errorf("go: the last region read back differs from what was written: %w", pdc.ErrCorrupt)
	}
	return passTimes{Write: t1.Sub(t0).Seconds(), Read: t2.Sub(t1).Seconds(), Tags: t3.Sub(t2).Seconds()}, nil
}

// pyPass runs one Python process for the round's Python pass (its start
// and connect are not timed).
func (p *pythonBench) pyPass(ctx context.Context) (passTimes, error) {
	args := []string{"bench", "--tmpdir", p.tmpdir, "--container", "bench-python", "--object", "py-data", "--tag-object", tagObject,
		"--rows", strconv.FormatUint(p.rows, 10), "--cols", strconv.FormatUint(p.cols, 10), "--tags", strconv.Itoa(p.tags)}
	return passOutput(pythonCmd(ctx, p.e, p.python, args, "PDC_TMPDIR="+p.tmpdir), "python")
}

// passOutput runs one pass's process and reads its times.
func passOutput(cmd *exec.Cmd, side string) (passTimes, error) {
	var t passTimes
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return t, fmt.Errorf("%s: %s: %w: %s", side, cmd.Path, err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout.String())), &t); err != nil || t.Write <= 0 || t.Read <= 0 || t.Tags <= 0 {
		return t, fmt.Errorf("%s: want one line of times, got %q (%v): %w", side, stdout.String(), err, pdc.ErrInternal)
	}
	return t, nil
}
