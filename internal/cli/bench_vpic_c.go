package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
)

// The C VPIC-IO and BD-CATS that make capi installs (capi/bench), which
// bench vpic --c runs as its client processes.
const (
	vpicCWriter = "pdc_vpicio"
	vpicCReader = "pdc_bdcats"
)

// vpicC runs the C programs against one cluster.
type vpicC struct {
	bin string   // the install's bin folder, holding both programs
	env []string // theirs: ours, with the cluster's tmpdir
}

// findVPICC finds the programs' bin folder: in prefix (--c-prefix) if
// set, else in envPrefix ($PDC_CAPI_PREFIX) if set, else beside exe (this
// pdc, when it is the one make capi installed), else in build/capi under
// the current directory. Not there is an error saying how to build them.
func findVPICC(prefix, envPrefix, exe string) (string, error) {
	has := func(bin string) bool {
		for _, p := range []string{vpicCWriter, vpicCReader} {
			if fi, err := os.Stat(filepath.Join(bin, p)); err != nil || !fi.Mode().IsRegular() {
				return false
			}
		}
		return true
	}
	for _, given := range []struct{ what, dir string }{{"--c-prefix", prefix}, {"$PDC_CAPI_PREFIX", envPrefix}} {
		if given.dir == "" {
			continue
		}
		bin := filepath.Join(given.dir, "bin")
		if !has(bin) {
			return "", fmt.Errorf("%s %s: no %s and %s in %s: install them there with `make capi CAPI_PREFIX=%s` (or capi/install.sh %s) in pdc's source tree: %w",
				given.what, given.dir, vpicCWriter, vpicCReader, bin, given.dir, given.dir, pdc.ErrNotFound)
		}
		return bin, nil
	}
	if exe != "" && has(filepath.Dir(exe)) {
		return filepath.Dir(exe), nil
	}
	bin := filepath.Join("build", "capi", "bin")
	if !has(bin) {
		return "", fmt.Errorf("no %s and %s in %s (nor beside %s): build them with `make capi` in pdc's source tree, or give the folder make capi installed into with --c-prefix or $PDC_CAPI_PREFIX: %w",
			vpicCWriter, vpicCReader, bin, exe, pdc.ErrNotFound)
	}
	return filepath.Abs(bin)
}

func newVPICC(e *env, prefix, tmpdir string) (*vpicC, error) {
	exe, _ := os.Executable()
	bin, err := findVPICC(prefix, e.getenv("PDC_CAPI_PREFIX"), exe)
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "PDC_TMPDIR="+tmpdir)
	if e.getenv("PDC_TIMEOUT") == "" {
		// Each libpdc call's bound; the Go processes have none.
		env = append(env, "PDC_TIMEOUT=10m")
	}
	return &vpicC{bin: bin, env: env}, nil
}

func (v *vpicC) command(ctx context.Context, prog string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(v.bin, prog), args...)
	cmd.Env = v.env
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// create makes the run's container and objects for total particles, by
// pdc_vpicio -create.
func (v *vpicC) create(ctx context.Context, run string, n uint64, size int, p client.Partition) error {
	cmd := v.command(ctx, vpicCWriter, "-create", "-run", run, "-n", strconv.FormatUint(n, 10), "-size", strconv.Itoa(size), "-partition", p.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s -create: %w: %s", vpicCWriter, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// phase runs prog (pdc_vpicio or pdc_bdcats) once per element of ranks,
// as that rank of len(ranks), each set up before all are released
// together (-sync). It returns the span from the earliest start to the
// latest end the programs report (each times its transfers, and
// pdc_bdcats its check of every value, not its set-up or close).
func (v *vpicC) phase(ctx context.Context, prog, run string, n uint64, ranks []int) (time.Duration, error) {
	cmds := make([]*exec.Cmd, len(ranks))
	for i, r := range ranks {
		cmds[i] = v.command(ctx, prog, "-sync", "-run", run, "-n", strconv.FormatUint(n, 10),
			"-rank", strconv.Itoa(r), "-size", strconv.Itoa(len(ranks)))
	}
	g, err := startProcs(cmds)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", prog, err)
	}
	defer g.stop()
	g.release()
	first, last := math.Inf(1), math.Inf(-1)
	var errs []error
	for i, p := range g.ps {
		out, rerr := io.ReadAll(p.out)
		if err := p.wait(); err != nil || rerr != nil {
			errs = append(errs, p.failure(fmt.Sprintf("%s rank %d", prog, ranks[i]), "a result line", string(out), rerr))
			continue
		}
		start, end, err := parseVPICCLine(string(out), n)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s rank %d: %w", prog, ranks[i], err))
			continue
		}
		first, last = min(first, start), max(last, end)
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return time.Duration((last - first) * float64(time.Second)), nil
}

// parseVPICCLine reads the result line of pdc_vpicio or pdc_bdcats (what
// it printed after "ready"): the start and end of its timed span, in
// seconds since 1970, having checked that it moved n particles of 8
// 4-byte variables.
func parseVPICCLine(out string, n uint64) (start, end float64, err error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	fields := strings.Fields(lines[0])
	if len(lines) != 1 || len(fields) == 0 {
		return 0, 0, fmt.Errorf("printed %q: want one result line", out)
	}
	kv := map[string]string{}
	for _, f := range fields[1:] {
		if k, val, ok := strings.Cut(f, "="); ok {
			kv[k] = val
		}
	}
	if want := strconv.FormatUint(n*32, 10); kv["bytes"] != want {
		return 0, 0, fmt.Errorf("result line %q: bytes=%s, want %s", lines[0], kv["bytes"], want)
	}
	start, err1 := strconv.ParseFloat(kv["start"], 64)
	end, err2 := strconv.ParseFloat(kv["end"], 64)
	if err1 != nil || err2 != nil || end < start {
		return 0, 0, fmt.Errorf("result line %q: want start=SECONDS end=SECONDS, end not before start", lines[0])
	}
	return start, end, nil
}
