package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pdcgo/pdc/internal/logging"
	"github.com/pdcgo/pdc/internal/rpc"
)

// logOptions are a server's log flags, which pdc up passes on.
type logOptions struct {
	levelText string
	level     slog.Level // levelText, once checked
	format    string
	slow      time.Duration
	file      string
	maxSize   string
	keep      int
}

// logFlags defines the log flags of pdc server and pdc up on fs.
func logFlags(fs *flag.FlagSet) *logOptions {
	o := &logOptions{}
	fs.StringVar(&o.levelText, "log-level", "info", "debug, info, warn or error; debug logs every request with its trace id")
	fs.StringVar(&o.format, "log-format", logging.Text, "log records as text or json")
	fs.DurationVar(&o.slow, "slow", 0, "log every request that takes at least this long (e.g. 100ms) as a warning naming its method, trace id, object and region (not a consumer's stage_wait, which waits by design); 0: off")
	fs.StringVar(&o.maxSize, "log-max-size", "64MiB", "with a log file: rotate it past this size")
	fs.IntVar(&o.keep, "log-keep", 3, "with a log file: rotated files kept (FILE.1 the newest)")
	return o
}

// open makes the server's logger: to --log-file, rotated, with
// the process's standard error pointed at the current file (so that a
// crash's trace lands next to the last records), or to standard error.
func (o *logOptions) open(e *env) (*slog.Logger, func(), error) {
	if err := o.check(); err != nil {
		return nil, nil, err
	}
	var w io.Writer = e.stderr
	closeLog := func() {}
	if o.file != "" {
		max, _ := parseSize(o.maxSize)
		keep := o.keep
		if keep == 0 {
			keep = -1 // none kept: FileOptions' 0 is its default
		}
		f, err := logging.OpenFile(o.file, logging.FileOptions{MaxSize: max, Keep: keep, OnOpen: redirectStderr})
		if err != nil {
			return nil, nil, err
		}
		w, closeLog = f, func() { f.Close() }
	}
	log, err := logging.New(w, o.format, o.level)
	if err != nil {
		closeLog()
		return nil, nil, fmt.Errorf("--log-format: %w: %w", err, errUsage)
	}
	return log, closeLog, nil
}

// redirectStderr points descriptor 2 at f.
func redirectStderr(f *os.File) error {
	return unix.Dup3(int(f.Fd()), 2, 0)
}

// check checks the options' values, as open would, without opening
// anything: pdc up checks them before it starts servers with them.
func (o *logOptions) check() error {
	if err := o.level.UnmarshalText([]byte(o.levelText)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error: %w", o.levelText, errUsage)
	}
	if o.format != logging.Text && o.format != logging.JSON {
		return fmt.Errorf("--log-format %q: want text or json: %w", o.format, errUsage)
	}
	if n, err := parseSize(o.maxSize); err != nil || n < 1 {
		return fmt.Errorf("--log-max-size %q: want a size such as 64MiB: %w", o.maxSize, errUsage)
	}
	if o.keep < 0 {
		return fmt.Errorf("--log-keep %d: want 0 or more: %w", o.keep, errUsage)
	}
	return nil
}

// args are the log flags set on fs, as given, for pdc up to pass on to
// its servers.
func (o *logOptions) args(fs *flag.FlagSet) []string {
	var args []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "log-level", "log-format", "slow", "log-max-size", "log-keep":
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	return args
}

// verboseUsage is the usage of client commands' --verbose.
const verboseUsage = "log the command's trace id, which the servers' logs name its requests by, and how long it took, to standard error ($" + envLog + "=text or json does too)"

// envLog turns on the verbose log of client commands: text or json.
const envLog = "PDC_LOG"

// trace gives a client command one trace id, which every request it makes
// carries, and, with --verbose or $PDC_LOG, logs it to standard error
// with the time the command took (end).
func (f clientFlags) trace(ctx context.Context) (context.Context, func(), error) {
	id := rpc.NewTrace()
	ctx = rpc.WithTrace(ctx, id)
	format := f.e.getenv(envLog)
	if (f.verbose == nil || !*f.verbose) && format == "" {
		return ctx, func() {}, nil
	}
	log, err := logging.New(f.e.stderr, format, slog.LevelDebug)
	if err != nil {
		return nil, nil, fmt.Errorf("$%s: %w", envLog, err)
	}
	start := time.Now()
	log.InfoContext(ctx, "client operation", "command", f.name)
	return ctx, func() {
		log.InfoContext(ctx, "client operation done", "command", f.name, "duration", time.Since(start))
	}, nil
}
