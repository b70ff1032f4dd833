package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/bench"
	"github.com/pdcgo/pdc/internal/dtl"
)

func init() {
	register(command{name: "bench-stage-producer", summary: "producer process of bench stage", run: runBenchStageProducer, hidden: true})
}

func benchStage(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench stage", "[flags]")
	bo := addBenchOpts(fs, "stage")
	budget := fs.Duration("budget", 300*time.Millisecond, "time spent per size and mode in each round (at least --min-consumes)")
	minOps := fs.Int("min-consumes", 3, "fewest consumes per size and mode in each round")
	sizesFlag := fs.String("sizes", "1KiB,1MiB,64MiB,1GiB", "file sizes, comma-separated")
	modesFlag := fs.String("modes", "stream,pull,push,shm", "transport modes, comma-separated")
	base := fs.String("dir", defaultStageBenchDir(), "where the producer and consumer dirs go (node-local storage: tmpfs where there is one)")
	ext := externalFlags(fs)
	rawEchoFlag := fs.String("raw-echo", "", "with --cluster: host:port of a `pdc bench-echo --listen HOST:0` on the producer's host, for the small files' ceiling")
	prodDirFlag := fs.String("producer-dir", "", "with --cluster: the producer dir its producer's server serves")
	prodHost := fs.String("producer-host", "", "with --cluster: the host name of that server")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if err := ext.check(); err != nil {
		return fmt.Errorf("bench stage: %w", err)
	}
	if ext.cluster != "" && (*rawEchoFlag == "" || *prodDirFlag == "" || *prodHost == "") {
		return fmt.Errorf("bench stage: --cluster needs --raw-echo, --producer-dir and --producer-host: %w", errUsage)
	}
	sizes, modes, err := parseStageMatrix(*sizesFlag, *modesFlag)
	if err != nil {
		return fmt.Errorf("bench stage: %w: %w", err, errUsage)
	}
	run, err := bo.begin(e)
	if err != nil {
		return err
	}
	defer run.close()
	if err := os.MkdirAll(*base, 0o755); err != nil {
		return fmt.Errorf("bench stage: %w", err)
	}
	dir, err := os.MkdirTemp(*base, "pdc-bench-stage-")
	if err != nil {
		return fmt.Errorf("bench stage: %w", err)
	}
	defer os.RemoveAll(dir)
	if ext.cluster != "" {
		return benchStageExternal(ctx, run, ext, *rawEchoFlag, *prodDirFlag, *prodHost, dir, bench.StageConfig{Sizes: sizes, Modes: modes, Budget: *budget, MinOps: *minOps, Want: run.want()})
	}
	cfg := bench.StageConfig{Sizes: sizes, Modes: modes, Budget: *budget, MinOps: *minOps, Want: run.want()}
	if err := benchStageLocal(ctx, e, run, dir, cfg); err != nil {
		return fmt.Errorf("bench stage: %w", err)
	}
	return run.finish()
}

// parseStageMatrix parses the --sizes and --modes flags.
func parseStageMatrix(sizesFlag, modesFlag string) ([]int64, []dtl.Mode, error) {
	var sizes []int64
	for _, s := range strings.Split(sizesFlag, ",") {
		n, err := parseSize(s)
		if err != nil {
			return nil, nil, fmt.Errorf("--sizes: %w", err)
		}
		sizes = append(sizes, n)
	}
	var modes []dtl.Mode
	for _, s := range strings.Split(modesFlag, ",") {
		m, err := dtl.ParseMode(strings.TrimSpace(s))
		if err != nil {
			return nil, nil, fmt.Errorf("--modes: %w", err)
		}
		if m == dtl.ModeAuto {
			return nil, nil, fmt.Errorf("--modes: auto picks one of the others; name them: %w", dtl.ErrBadMode)
		}
		modes = append(modes, m)
	}
	return sizes, modes, nil
}

// benchStageLocal starts two servers in dir standing for two nodes (the
// producer's, node-a, serves its producer dir; the consumer is on
// node-b), a producer, the raw source and echo, and measures the rounds
// of cfg with a consumer on node-b.
func benchStageLocal(ctx context.Context, e *env, run *benchRun, dir string, cfg bench.StageConfig) error {
	tmpdir := filepath.Join(dir, "tmp")
	_, err := up(ctx, e.stderr, upOptions{n: 2, tmpdir: tmpdir, datadir: filepath.Join(dir, "data"), roles: "both", secret: true,
		timeout: 60 * time.Second, hosts: []string{"node-a", "node-b"}, stageDir: filepath.Join(dir, "prod-{host}"), cpuprofile: run.serverProfile()})
	if err != nil {
		return err
	}
	defer down(context.Background(), io.Discard, tmpdir, 30*time.Second)
	run.started(tmpdir)

	producer, err := startProducer(ctx, tmpdir, filepath.Join(dir, "prod-node-a"), "node-a")
	if err != nil {
		return err
	}
	defer producer.stop()
	rawSock := filepath.Join(dir, "raw.sock")
	rawTCP, stopRaw, err := startChild(ctx, "bench-raw-source", "--unix", rawSock)
	if err != nil {
		return err
	}
	defer stopRaw()
	rawEcho, stopEcho, err := startEcho(ctx)
	if err != nil {
		return err
	}
	defer stopEcho()
	c, err := client.Connect(ctx, client.WithTmpDir(tmpdir), client.WithStageDirs("", filepath.Join(dir, "cons")), client.WithHost("node-b"))
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(e.stderr, "bench stage: producer and consumer dirs under %s\n", dir)
	cfg.Consumer, cfg.Produce, cfg.RawTCP, cfg.RawUnix, cfg.RawEcho = c, producer.produceOnce, rawTCP, rawSock, rawEcho
	cfg.FloorDir = filepath.Join(dir, "cons")
	return run.rounds(ctx, func(ctx context.Context, _ int) ([]bench.Result, error) { return bench.Stage(ctx, cfg) })
}

// defaultStageBenchDir is /dev/shm when it is a directory: staging's
// consumer dirs are node-local, and on HPC nodes that is memory or NVMe,
// not a shared disk whose fsyncs the figures would measure instead.
func defaultStageBenchDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// stageProducer is the producer process of bench stage: told a size, it
// writes a file of that size in its producer dir and produces it.
type stageProducer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	mu    sync.Mutex
	made  map[int64]string // size -> path, for produceOnce
}

// benchStageExternal measures a running cluster: its producer is a
// server on another host (prodHost) serving prodDir, and this process's
// host is the consumer's.
func benchStageExternal(ctx context.Context, run *benchRun, ext *external, rawEcho, prodDir, prodHost, dir string, cfg bench.StageConfig) error {
	producer, err := startProducer(ctx, ext.cluster, prodDir, prodHost)
	if err != nil {
		return fmt.Errorf("bench stage: %w", err)
	}
	defer producer.stop()
	c, err := client.Connect(ctx, client.WithTmpDir(ext.cluster), client.WithStageDirs("", filepath.Join(dir, "cons")))
	if err != nil {
		return fmt.Errorf("bench stage: %w", err)
	}
	defer c.Close()
	cfg.Consumer, cfg.Produce, cfg.RawTCP, cfg.RawEcho, cfg.Label = c, producer.produceOnce, ext.raw, rawEcho, ext.label
	cfg.FloorDir = filepath.Join(dir, "cons")
	if err := run.rounds(ctx, func(ctx context.Context, _ int) ([]bench.Result, error) { return bench.Stage(ctx, cfg) }); err != nil {
		return fmt.Errorf("bench stage: %w", err)
	}
	return run.finish()
}

func startProducer(ctx context.Context, tmpdir, prodDir, host string) (*stageProducer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "bench-stage-producer", "--tmpdir", tmpdir, "--producer-dir", prodDir, "--host", host)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &stageProducer{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}, nil
}

func (p *stageProducer) produce(ctx context.Context, size int64) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := fmt.Fprintln(p.stdin, size); err != nil {
		return "", fmt.Errorf("producer process: %w", err)
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("producer process ended: %w", err)
	}
	path, ok := strings.CutPrefix(strings.TrimSpace(line), "ok ")
	if !ok {
		return "", fmt.Errorf("producer process: %s", strings.TrimSpace(line))
	}
	return path, nil
}

// produceOnce produces a file of each size once: the rounds consume the
// same files again (each consume removes its copy), so making a 1 GiB file
// is not part of every round.
func (p *stageProducer) produceOnce(ctx context.Context, size int64) (string, error) {
	p.mu.Lock()
	path, ok := p.made[size]
	p.mu.Unlock()
	if ok {
		return path, nil
	}
	path, err := p.produce(ctx, size)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	if p.made == nil {
		p.made = map[int64]string{}
	}
	p.made[size] = path
	p.mu.Unlock()
	return path, nil
}

func (p *stageProducer) stop() {
	p.stdin.Close()
	_ = p.cmd.Wait()
}

func runBenchStageProducer(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "bench-stage-producer", "[flags]")
	sf := addStageFlags(e, fs)
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	c, ctx, done, err := sf.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		size, err := strconv.ParseInt(strings.TrimSpace(in.Text()), 10, 64)
		if err != nil || size < 0 {
			fmt.Fprintf(e.stdout, "error: bad size %q\n", in.Text())
			continue
		}
		name := fmt.Sprintf("file-%d.bin", size)
		if err := writeRandom(filepath.Join(*sf.producerDir, name), size); err != nil {
			fmt.Fprintf(e.stdout, "error: %v\n", err)
			continue
		}
		if _, err := c.Produce(ctx, name); err != nil {
			fmt.Fprintf(e.stdout, "error: %v\n", err)
			continue
		}
		fmt.Fprintf(e.stdout, "ok %s\n", name)
	}
	return in.Err()
}

// writeRandom writes size pseudo-random bytes to path.
func writeRandom(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(uint64(size), 42))
	buf := make([]byte, 8<<20)
	for done := int64(0); done < size; {
		n := min(int64(len(buf)), size-done)
		for i := int64(0); i+8 <= n; i += 8 {
			v := r.Uint64()
			buf[i], buf[i+1], buf[i+2], buf[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			buf[i+4], buf[i+5], buf[i+6], buf[i+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
		}
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
		done += n
	}
	return f.Close()
}
