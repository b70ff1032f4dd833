package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
	"github.com/pdcgo/pdc/internal/dtl"
)

func init() {
	register(command{name: "stage", summary: "move files from producers to consumers (DYAD-style staging), each run in its --namespace", usage: "VERB [flags] PATH...",
		long: `Paths are relative to the producer dir (--producer-dir, $PDC_STAGE_PRODUCER_DIR) and land in the
consumer dir (--consumer-dir, $PDC_STAGE_CONSUMER_DIR). A server serves the files of the producer dir
it was started with: pdc up --stage-producer-dir DIR.`,
		examples: []string{
			"pdc stage produce --producer-dir /scratch/out step1.h5",
			"pdc stage consume --consumer-dir /local/in --timeout inf step1.h5",
			"pdc stage ls --namespace run42",
		},
		verbs: []verb{
			{name: "produce", summary: "publish files of the producer dir for consumers", usage: "[flags] PATH...",
				examples: []string{"pdc stage produce --producer-dir /scratch/out step1.h5 step2.h5"}, args: []argKind{argFile}},
			{name: "consume", summary: "fetch files into the consumer dir, waiting for them to be produced", usage: "[--timeout 30s|inf] [--newer-than V] [flags] PATH...",
				examples: []string{"pdc stage consume --consumer-dir /local/in step1.h5", "pdc stage consume --timeout inf --newer-than 3 step1.h5"}},
			{name: "lookup", summary: "show who serves files: version, size, crc32c, owner, host", usage: "[flags] PATH...",
				examples: []string{"pdc stage lookup step1.h5", "pdc stage lookup --json step1.h5"}},
			{name: "ls", summary: "list the staged files of the namespace", usage: "[flags] [PREFIX]",
				examples: []string{"pdc stage ls", "pdc stage ls --json out/"}},
			{name: "rm", summary: "forget staged files (their records, not the producer's files)", usage: "[flags] PATH... | --prefix PREFIX | --all",
				examples: []string{"pdc stage rm step1.h5", "pdc stage rm --namespace run42 --all"}},
		},
		run: runStage})
}

type stageFlags struct {
	cf                       clientFlags
	producerDir, consumerDir *string
	shared                   *bool
	link                     *bool
	host                     *string
	namespace                *string
}

func addStageFlags(e *env, fs *flag.FlagSet) stageFlags {
	// Not addClientFlags: a consume may wait for its producer without
	// limit, which a plain duration flag cannot say.
	timeout := new(time.Duration)
	*timeout = 30 * time.Second
	fs.Var((*waitFlag)(timeout), "timeout", "deadline for the whole command, a `duration` such as 30s or 2h; 0 or inf: wait without limit (a consume waits for its files forever)")
	return stageFlags{
		cf: clientFlags{
			tmpdir:     fs.String("tmpdir", e.tmpDirDefault(), "the cluster's tmpdir ($PDC_TMPDIR)"),
			secretFile: secretFileFlag(e, fs),
			timeout:    timeout,
		},
		producerDir: fs.String("producer-dir", e.getenv(client.EnvProducerDir), "the producer dir: paths are relative to it ($"+client.EnvProducerDir+")"),
		consumerDir: fs.String("consumer-dir", e.getenv(client.EnvConsumerDir), "the consumer dir: consumed files go there ($"+client.EnvConsumerDir+")"),
		shared:      fs.Bool("shared", envBool(e.getenv(client.EnvShared)), "the producer dirs are on storage every host sees: link or copy instead of fetching ($"+client.EnvShared+")"),
		link:        fs.Bool("link", envBool(e.getenv(client.EnvLink)), "on the owner's node, hard-link the producer's file instead of a reflink or copy: never write to it then ($"+client.EnvLink+")"),
		host:        fs.String("host", "", "this host's name as the servers know it (default $"+cluster.HostEnv+", else the kernel's)"),
		namespace: fs.String("namespace", envNamespace(e), "the staging `namespace` of this run: files produced in one are consumed, listed and removed in it only; "+
			"empty is the default namespace ($"+client.EnvNamespace+", else $DYAD_KVS_NAMESPACE)"),
	}
}

func envBool(s string) bool { return s == "1" || s == "true" || s == "yes" }

// waitFlag is a duration flag in which 0 and "inf" mean no deadline.
type waitFlag time.Duration

func (w *waitFlag) String() string {
	if w == nil || *w == 0 {
		return "inf"
	}
	return time.Duration(*w).String()
}

// Get is the duration, 0 for no limit.
func (w *waitFlag) Get() any { return time.Duration(*w) }

func (w *waitFlag) Set(s string) error {
	if s == "inf" || s == "infinity" || s == "forever" {
		*w = 0
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 30s, or 0 or inf for no limit")
	}
	if d < 0 {
		return fmt.Errorf("a negative duration: want 0 or inf for no limit")
	}
	*w = waitFlag(d)
	return nil
}

// withWait is ctx with the deadline d, or without one if d is 0.
func withWait(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d == 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

func (f stageFlags) connect(ctx context.Context) (*client.Client, context.Context, context.CancelFunc, error) {
	ctx, cancel := withWait(ctx, *f.cf.timeout)
	c, err := client.Connect(ctx, withSecretFile([]client.Option{client.WithTmpDir(*f.cf.tmpdir), client.WithStageDirs(*f.producerDir, *f.consumerDir),
		client.WithSharedStorage(*f.shared), client.WithLinkLocal(*f.link), client.WithHost(*f.host), client.WithNamespace(*f.namespace)}, f.cf.secretFile)...)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return c, ctx, func() { c.CloseContext(ctx); cancel() }, nil
}

func runStage(ctx context.Context, e *env, args []string) error {
	verb, rest, err := sub(args, "stage", "produce, consume, lookup, ls, rm")
	if err != nil {
		return err
	}
	switch verb {
	case "produce":
		return runStageProduce(ctx, e, rest)
	case "consume":
		return runStageConsume(ctx, e, rest)
	case "lookup":
		return runStageLookup(ctx, e, rest)
	case "ls":
		return runStageList(ctx, e, rest)
	case "rm":
		return runStageRemove(ctx, e, rest)
	}
	return fmt.Errorf("stage: unknown verb %q (want produce, consume, lookup, ls or rm): %w", verb, errUsage)
}

func runStageProduce(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "stage produce", "[flags] PATH...")
	sf := addStageFlags(e, fs)
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("stage produce: name the files to produce: %w", errUsage)
	}
	c, ctx, done, err := sf.connect(ctx)
	if err != nil {
		return fmt.Errorf("stage produce: %w", err)
	}
	defer done()
	recs, err := c.Produce(ctx, fs.Args()...)
	for _, r := range recs {
		fmt.Fprintf(e.stdout, "produced %s version %d (%s, crc32c %08x), served by %s on %s\n",
			r.Path, r.Version, humanBytes(uint64(r.Size)), r.CRC, r.Owner.Label(), r.Host)
	}
	return err
}

func runStageConsume(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "stage consume", "[flags] PATH...")
	sf := addStageFlags(e, fs)
	mode := fs.String("mode", "", "DTL mode of fetches: stream, pull, push, shm or auto (default $PDC_DTL, else auto)")
	bar := fs.Bool("progress", false, "draw a progress bar for a single file even when stderr is not a terminal")
	parallel := fs.Int("parallel", 4, "files consumed at once, taken in the order given")
	newer := fs.Uint64("newer-than", 0, "wait for a version newer than this `version` of each file, even if it has been produced (0: any version)")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("stage consume: name the files to consume: %w", errUsage)
	}
	if *parallel < 1 {
		return fmt.Errorf("stage consume: --parallel %d: want at least 1: %w", *parallel, errUsage)
	}
	if *mode != "" {
		// Checked before anything connects, as a flag: it failed each
		// file's consume, exit 1.
		if _, err := dtl.ParseMode(*mode); err != nil {
			return fmt.Errorf("stage consume: --mode: %w: %w", err, errUsage)
		}
	}
	c, ctx, done, err := sf.connect(ctx)
	if err != nil {
		return fmt.Errorf("stage consume: %w", err)
	}
	defer done()
	paths := fs.Args()
	sc := &stageConsumer{e: e, c: c, mode: *mode, bar: *bar, single: len(paths) == 1, newer: *newer, total: len(paths)}
	// One file has its bar; several, a line counting them on a terminal.
	sc.status = newStatus(e.stderr, !sc.single && isTerminal(e.stderr), fmt.Sprintf("consume: 0 of %s", count(len(paths), "file", "files")))
	defer sc.status.stop()
	errs := make([]error, len(paths))
	// The slot is taken here, not in the goroutine, so that files are
	// consumed in the order given: a pipeline's consumer then gets each
	// file as it is produced, not once the last of a random --parallel few.
	sem := make(chan struct{}, *parallel)
	var wg sync.WaitGroup
	for i, p := range paths {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = fmt.Errorf("consume %q: %w", p, ctx.Err())
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = sc.consume(ctx, p)
		})
	}
	wg.Wait()
	if len(paths) == 1 {
		return errs[0]
	}
	if err := errors.Join(errs...); err != nil {
		n := 0
		for _, e := range errs {
			if e != nil {
				n++
			}
		}
		return fmt.Errorf("stage consume: %d of %s failed: %w", n, count(len(paths), "file", "files"), errs[firstErr(errs)])
	}
	return nil
}

// stageConsumer consumes the files of one pdc stage consume, several at
// once.
type stageConsumer struct {
	e      *env
	c      *client.Client
	mode   string     // --mode
	bar    bool       // --progress
	single bool       // one file: a progress bar, and its error is the command's
	newer  uint64     // --newer-than
	total  int        // files to consume
	status *status    // of several files, on a terminal
	mu     sync.Mutex // orders output lines
	ended  int        // files consumed or failed; guarded by mu
	moved  uint64     // bytes of the files consumed; guarded by mu
}

// consume consumes the file p and prints what it got: a line on stdout,
// or, of several files, the error on stderr.
func (sc *stageConsumer) consume(ctx context.Context, p string) error {
	e := sc.e
	opts := []client.ConsumeOption{client.WithWaiting(func(rel string) {
		sc.mu.Lock()
		if sc.newer > 0 {
			sc.status.printf("pdc stage consume: waiting for %q to be produced (a version newer than %d)\n", rel, sc.newer)
		} else {
			sc.status.printf("pdc stage consume: waiting for %q to be produced\n", rel)
		}
		sc.mu.Unlock()
	})}
	if sc.mode != "" {
		opts = append(opts, client.WithTransport(sc.mode))
	}
	if sc.newer > 0 {
		opts = append(opts, client.WithNewerThan(sc.newer))
	}
	var pb *progress
	if sc.single {
		opts = append(opts, client.WithProgress(func(n, total int64) {
			if pb == nil {
				pb = newProgress(e.stderr, sc.bar || isTerminal(e.stderr), "consume "+p, uint64(total))
			}
			pb.add(uint64(n) - pb.done)
		}))
	}
	start := time.Now()
	got, err := sc.c.Consume(ctx, p, opts...)
	if pb != nil {
		pb.finish()
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.ended++
	if err == nil {
		sc.moved += uint64(got.Size)
	}
	sc.status.set("consume: %d of %s, %s", sc.ended, count(sc.total, "file", "files"), humanBytes(sc.moved))
	if err != nil {
		if !sc.single {
			sc.status.printf("pdc: %v\n", err)
		}
		return err
	}
	how := string(got.How)
	switch got.How {
	case client.Fetched:
		how = fmt.Sprintf("fetched %s from %s by %s", humanBytes(uint64(got.Moved)), got.Owner.Label(), got.Mode)
	case client.Inline:
		how = fmt.Sprintf("inline: %s in its record, the owner %s not asked", humanBytes(uint64(got.Moved)), got.Owner.Label())
	}
	sc.status.around(func() {
		fmt.Fprintf(e.stdout, "consumed %s version %d (%s) -> %s: %s in %v\n", got.Path, got.Version,
			humanBytes(uint64(got.Size)), got.Local, how, time.Since(start).Round(time.Microsecond))
	})
	return nil
}

func firstErr(errs []error) int {
	for i, err := range errs {
		if err != nil {
			return i
		}
	}
	return -1
}

func runStageLookup(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "stage lookup", "[flags] PATH...")
	sf := addStageFlags(e, fs)
	asJSON := jsonFlag(fs)
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("stage lookup: name the files to look up: %w", errUsage)
	}
	c, ctx, done, err := sf.connect(ctx)
	if err != nil {
		return fmt.Errorf("stage lookup: %w", err)
	}
	defer done()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "PATH\tVERSION\tSIZE\tCRC32C\tOWNER\tHOST\tPRODUCED")
	}
	var errs []error
	out := newJSONLines(e.stdout)
	for _, p := range fs.Args() {
		r, err := c.Lookup(ctx, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if *asJSON {
			if err := out.put(newStagedJSON(r)); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%08x\t%s\t%s\t%s\n", r.Path, r.Version, r.Size, r.CRC, r.Owner.Label(), r.Host,
			r.Produced.Format(time.RFC3339Nano))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return errors.Join(errs...)
}
