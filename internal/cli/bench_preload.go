package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/bench"
)

// Ways a producer/consumer pair of bench preload stages its file.
const (
	viaStage   = "stage"   // cp, pdc stage produce; pdc stage consume, cat
	viaPreload = "preload" // cp and cat under LD_PRELOAD=libpdc_preload.so
)

func benchPreload(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench preload", "[flags]")
	sizesFlag := fs.String("sizes", "1KiB,1MiB,1GiB", "file sizes, comma-separated")
	rounds := fs.Int("rounds", 5, "pairs per size and way; the ways alternate within a round")
	prefix := fs.String("c-prefix", "", "where make capi installed libpdc (default $PDC_CAPI_PREFIX, else beside this pdc, else build/capi)")
	base := fs.String("dir", defaultStageBenchDir(), "where the producer and consumer dirs go (node-local storage: tmpfs where there is one)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if *rounds < 1 {
		return fmt.Errorf("bench preload: --rounds %d: want at least 1: %w", *rounds, errUsage)
	}
	var sizes []int64
	for _, s := range strings.Split(*sizesFlag, ",") {
		n, err := parseSize(s)
		if err != nil {
			return fmt.Errorf("bench preload: --sizes: %w: %w", err, errUsage)
		}
		sizes = append(sizes, n)
	}
	exe, _ := os.Executable()
	pfx, err := findPreload(*prefix, e.getenv("PDC_CAPI_PREFIX"), exe)
	if err != nil {
		return fmt.Errorf("bench preload: %w", err)
	}
	if err := os.MkdirAll(*base, 0o755); err != nil {
		return fmt.Errorf("bench preload: %w", err)
	}
	dir, err := os.MkdirTemp(*base, "pdc-bench-preload-")
	if err != nil {
		return fmt.Errorf("bench preload: %w", err)
	}
	defer os.RemoveAll(dir)
	load := bench.ReadLoad()
	p, stop, err := startPreloadBench(ctx, pfx, dir)
	if err != nil {
		return fmt.Errorf("bench preload: %w", err)
	}
	defer stop()
	fmt.Fprintf(e.stdout, "bench preload: a producer on node-a writes a file, a consumer on node-b reads it; %s\n", count(*rounds, "round", "rounds"))
	fmt.Fprintf(e.stdout, "  %s: cp, then pdc stage produce; pdc stage consume, then cat\n", viaStage)
	fmt.Fprintf(e.stdout, "  %s: cp and cat under LD_PRELOAD=%s\n", viaPreload, filepath.Join(pfx, "lib", "libpdc_preload.so"))
	fmt.Fprintf(e.stdout, "  wall: from the producer's start to the consumer's end; cpu: user+system time of those processes (not the servers')\n")
	fmt.Fprintf(e.stdout, "  ratios: preload/stage, the median of each round's ratio\n")
	fmt.Fprintf(e.stdout, "%-7s %-28s %-28s %-6s %-10s %-10s %s\n", "size", "stage wall: median [range]", "preload wall", "ratio", "stage cpu", "preload cpu", "ratio")
	for _, size := range sizes {
		wall, cpu, err := p.rounds(ctx, size, *rounds)
		if err != nil {
			return fmt.Errorf("bench preload: %s: %w", sizeLabel(size), err)
		}
		fmt.Fprintf(e.stdout, "%-7s %-28s %-28s %-6.2f %-10s %-10s %.2f\n", sizeLabel(size), spread(wall[viaStage]), spread(wall[viaPreload]), ratio(wall),
			msOf(median(cpu[viaStage])), msOf(median(cpu[viaPreload])), ratio(cpu))
	}
	after := bench.ReadLoad()
	fmt.Fprintf(e.stdout, "load average %.2f before, %.2f after (%s)\n", load.Load1, after.Load1, count(after.Cores, "core", "cores"))
	return nil
}

// spread is a median and range of durations.
func spread(ts []time.Duration) string {
	s := slices.Clone(ts)
	slices.Sort(s)
	return fmt.Sprintf("%s [%s-%s]", msOf(s[len(s)/2]), msOf(s[0]), msOf(s[len(s)-1]))
}

func msOf(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func median(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}

// ratio is the median over rounds of preload's time over stage's in the
// same round: rounds measured under different load compare within
// themselves.
func ratio(times map[string][]time.Duration) float64 {
	var rs []float64
	for i := range times[viaStage] {
		rs = append(rs, times[viaPreload][i].Seconds()/times[viaStage][i].Seconds())
	}
	slices.Sort(rs)
	return rs[len(rs)/2]
}

// findPreload finds the install holding libpdc_preload.so, libpdc.so and
// pdc: prefix (--c-prefix) if set, else envPrefix ($PDC_CAPI_PREFIX) if
// set, else the one exe (this pdc) is in, else build/capi.
func findPreload(prefix, envPrefix, exe string) (string, error) {
	has := func(p string) bool {
		for _, f := range []string{"lib/libpdc_preload.so", "lib/libpdc.so", "bin/pdc"} {
			if fi, err := os.Stat(filepath.Join(p, f)); err != nil || !fi.Mode().IsRegular() {
				return false
			}
		}
		return true
	}
	for _, given := range []struct{ what, dir string }{{"--c-prefix", prefix}, {"$PDC_CAPI_PREFIX", envPrefix}} {
		if given.dir == "" {
			continue
		}
		if !has(given.dir) {
			return "", fmt.Errorf("%s %s: no lib/libpdc_preload.so, lib/libpdc.so and bin/pdc there: install them with `make capi CAPI_PREFIX=%s` in pdc's source tree: %w",
				given.what, given.dir, given.dir, pdc.ErrNotFound)
		}
		return filepath.Abs(given.dir)
	}
	if exe != "" && has(filepath.Dir(filepath.Dir(exe))) {
		return filepath.Dir(filepath.Dir(exe)), nil
	}
	if !has(filepath.Join("build", "capi")) {
		return "", fmt.Errorf("no libpdc_preload.so in build/capi/lib (nor beside %s): build it with `make capi` in pdc's source tree, or give its install with --c-prefix or $PDC_CAPI_PREFIX: %w",
			exe, pdc.ErrNotFound)
	}
	return filepath.Abs(filepath.Join("build", "capi"))
}

// preloadBench stages files between two servers standing for node-a
// (producer) and node-b (consumer), by both ways.
type preloadBench struct {
	pdc, preload   string // the install's pdc and libpdc_preload.so
	dir            string
	tmpdir         string
	prod, cons     string
	n              int // files staged so far: each pair has its own name
	prodEnv, consE []string
}

// startPreloadBench starts the servers; stop stops them.
func startPreloadBench(ctx context.Context, prefix, dir string) (*preloadBench, func(), error) {
	p := &preloadBench{
		pdc:     filepath.Join(prefix, "bin", "pdc"),
		preload: filepath.Join(prefix, "lib", "libpdc_preload.so"),
		dir:     dir,
		tmpdir:  filepath.Join(dir, "tmp"),
		prod:    filepath.Join(dir, "prod-node-a"),
		cons:    filepath.Join(dir, "cons"),
	}
	for _, d := range []string{p.prod, p.cons} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, err
		}
	}
	env := append(os.Environ(), "PDC_TMPDIR="+p.tmpdir, "PDC_DATA_LOC="+filepath.Join(dir, "data"), "PDC_TIMEOUT=10m")
	// The install's pdc starts the servers, as a job script would (and as
	// a test binary, which is not pdc, cannot).
	cmd := exec.CommandContext(ctx, p.pdc, "up", "-n", "2", "--hosts", "node-a,node-b", "--stage-producer-dir", filepath.Join(dir, "prod-{host}"))
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("pdc up: %w: %s", err, strings.TrimSpace(string(out)))
	}
	p.prodEnv = append(slices.Clone(env), "PDC_HOST=node-a", "PDC_STAGE_PRODUCER_DIR="+p.prod)
	p.consE = append(slices.Clone(env), "PDC_HOST=node-b", "PDC_STAGE_CONSUMER_DIR="+p.cons)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = exec.CommandContext(ctx, p.pdc, "down", "--tmpdir", p.tmpdir).Run()
	}
	return p, stop, nil
}

// rounds measures rounds pairs of each way for one size, alternating
// which way goes first, and returns their wall and CPU times by way.
func (p *preloadBench) rounds(ctx context.Context, size int64, rounds int) (wall, cpu map[string][]time.Duration, err error) {
	src := filepath.Join(p.dir, "src.bin")
	if err := writeRandom(src, size); err != nil {
		return nil, nil, err
	}
	defer os.Remove(src)
	wall, cpu = map[string][]time.Duration{}, map[string][]time.Duration{}
	for r := range rounds {
		ways := []string{viaStage, viaPreload}
		if r%2 == 1 {
			ways[0], ways[1] = ways[1], ways[0]
		}
		for _, via := range ways {
			w, c, err := p.pair(ctx, via, src)
			if err != nil {
				return nil, nil, err
			}
			wall[via], cpu[via] = append(wall[via], w), append(cpu[via], c)
		}
	}
	return wall, cpu, nil
}

// pair stages src from node-a to node-b once by way via, as a job script
// would, and returns how long it took from the producer's start to the
// consumer's end, and the CPU time its processes took. The files are
// removed afterwards.
func (p *preloadBench) pair(ctx context.Context, via, src string) (wall, cpu time.Duration, err error) {
	p.n++
	rel := fmt.Sprintf("%s/%d.bin", via, p.n)
	if err := os.MkdirAll(filepath.Join(p.prod, via), 0o755); err != nil {
		return 0, 0, err
	}
	prodPath, consPath := filepath.Join(p.prod, rel), filepath.Join(p.cons, rel)
	defer os.Remove(prodPath)
	defer os.Remove(consPath)
	preload := "LD_PRELOAD=" + p.preload
	steps := [][]string{{"cp", src, prodPath}, {p.pdc, "stage", "produce", rel}, {p.pdc, "stage", "consume", "--timeout", "10m", rel}, {"cat", consPath}}
	envs := [][]string{p.prodEnv, p.prodEnv, p.consE, p.consE}
	if via == viaPreload {
		steps = [][]string{{"cp", src, prodPath}, {"cat", consPath}}
		envs = [][]string{append(slices.Clone(p.prodEnv), preload), append(slices.Clone(p.consE), preload)}
	}
	start := time.Now()
	for i, s := range steps {
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		cmd.Env = envs[i]
		cmd.Stdout = nil // /dev/null
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return 0, 0, fmt.Errorf("%s: %s: %w: %s", via, strings.Join(s, " "), err, strings.TrimSpace(stderr.String()))
		}
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	wall = time.Since(start)
	if st, err := os.Stat(consPath); err != nil {
		return 0, 0, fmt.Errorf("%s: the consumer's copy: %w", via, err)
	} else if fi, err := os.Stat(src); err != nil || st.Size() != fi.Size() {
		return 0, 0, fmt.Errorf("%s: the consumer's copy has %s, want the source's: %w", via, count(st.Size(), "byte", "bytes"), pdc.ErrCorrupt)
	}
	return wall, cpu, nil
}

// sizeLabel is n in the largest binary unit that divides it.
func sizeLabel(n int64) string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}
