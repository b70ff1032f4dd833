package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/pdcgo/pdc"
)

// command is one command of the registry, from which help, the top-level
// listing and completion are made (docs/design/0028-command-line.md).
type command struct {
	name    string
	summary string
	// usage is what follows "pdc NAME" in the usage line, e.g.
	// "[flags] OBJECT FILE"; of a command with verbs, "VERB [flags] ...".
	usage string
	// examples are whole command lines, "pdc NAME ...", each optionally
	// followed by "  # what it does".
	examples []string
	// verbs, if any, are dispatched by Run: pdc NAME VERB ...
	verbs []verb
	// defaultVerb, if set, is the verb of pdc NAME given no verb (no
	// arguments, or flags first): a command that grew verbs keeps its
	// old form.
	defaultVerb string
	// long, if any, is a paragraph of help after the summary.
	long   string
	run    func(ctx context.Context, env *env, args []string) error
	hidden bool
	// args says what the positional arguments name, for completion
	// (the last kind repeats).
	args []argKind
}

// verb is one verb of a command such as cont or stage.
type verb struct {
	name     string
	summary  string
	usage    string // what follows "pdc CMD VERB"
	examples []string
	long     string // as command.long
	args     []argKind
}

// env is what every subcommand gets: where to write and how to read the
// process environment (injectable for tests).
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// benchSink, if set, takes benchmarks' figures instead of their
	// printing them (bench all).
	benchSink benchSink
	// flagSink, if set, takes the flag set of a command asked for help
	// instead of its help being printed (completion, tests).
	flagSink func(*flag.FlagSet)
	// fs is the flag set the command made last, whose --timeout an
	// error of its that timed out names (timedOut).
	fs *flag.FlagSet
}

var commands []command

func register(c command) { commands = append(commands, c) }

// errUsage marks an error in the command line itself.
var errUsage = errors.New("usage")

// ExitCode is the process exit status for an error from Run: 2 for usage
// errors, 1 otherwise.
func ExitCode(err error) int {
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// Run runs the pdc command line args (without the program name).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	e := &env{stdout: stdout, stderr: stderr, getenv: os.Getenv}
	if len(args) == 0 {
		usage(stderr)
		return fmt.Errorf("no command given: %w", errUsage)
	}
	start := time.Now()
	err := e.dispatch(ctx, args)
	return e.timedOut(err, time.Since(start))
}

// timedOut adds to an error that is a timeout the command's --timeout,
// if that has passed: "pdc: deadline exceeded" said neither that it was
// the user's --timeout 1ms that ran out nor how to give more time.
func (e *env) timedOut(err error, took time.Duration) error {
	if err == nil || !errors.Is(err, pdc.ErrTimeout) || e.fs == nil {
		return err
	}
	f := e.fs.Lookup("timeout")
	if f == nil {
		return err
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err
	}
	d, ok := g.Get().(time.Duration)
	if _, wait := f.Value.(*waitFlag); !ok || took < d || wait && d == 0 {
		return err
	}
	return fmt.Errorf("%w (--timeout %v passed; a longer --timeout waits longer)", err, d)
}

// flags returns a flag set for a subcommand that reports errors as usage
// errors instead of exiting, and answers -h and --help with the
// command's help (help.go).
func flags(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("pdc "+name, flag.ContinueOnError)
	e.fs = fs
	// A bad flag is the one line of the error parse returns: package
	// flag's own printing of it, and of the usage, said it twice in four
	// lines.
	fs.SetOutput(io.Discard)
	h := &helpFlag{}
	h.show = func() {
		if e.flagSink != nil {
			e.flagSink(fs)
			return
		}
		printHelp(e.stdout, name, synopsis, fs)
	}
	fs.Var(h, "h", "print this help")
	fs.Var(h, "help", "print this help")
	fs.Usage = func() {}
	return fs
}

// parse parses args; -h and --help print the help and are not an error.
func parse(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(flagsFirst(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		name := strings.TrimPrefix(fs.Name(), "pdc ")
		return false, fmt.Errorf("%s: %v (pdc help %s lists its flags): %w", name, err, name, errUsage)
	}
	// A negative duration is no deadline, interval or wait: --timeout
	// -5s timed every call out at once, blaming the servers.
	var neg error
	fs.Visit(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok && neg == nil {
			if d, ok := g.Get().(time.Duration); ok && d < 0 {
				neg = fmt.Errorf("%s: --%s %v: want a duration of 0 or more: %w", strings.TrimPrefix(fs.Name(), "pdc "), f.Name, d, errUsage)
			}
		}
	})
	if neg != nil {
		return false, neg
	}
	if f := fs.Lookup("help"); f != nil {
		if h, ok := f.Value.(*helpFlag); ok && h.asked {
			h.show()
			return true, nil
		}
	}
	return false, nil
}

// noArgs refuses positional arguments to a command that takes none:
// pdc status 1 showed every server, as if the 1 had been read.
func noArgs(fs *flag.FlagSet, what string) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q (it takes none but flags; pdc help %s): %w", what, fs.Arg(0), what, errUsage)
	}
	return nil
}

// flagsFirst moves flags given among or after the positional arguments
// (pdc put OBJ --region 0:8 FILE) in front of them, as package flag wants.
// "--" ends the flags; "-" is a positional argument.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var fl, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		fl = append(fl, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // package flag reports it
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			fl = append(fl, args[i+1])
			i++
		}
	}
	if len(pos) == 0 {
		return fl
	}
	return append(append(fl, "--"), pos...)
}

// Version is the build's version: the module version or VCS revision when
// known, else "dev".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "dev-" + s.Value[:12]
		}
	}
	return "dev"
}

// tmpDirDefault is $PDC_TMPDIR or ./pdc_tmp.
func (e *env) tmpDirDefault() string {
	if d := e.getenv("PDC_TMPDIR"); d != "" {
		return d
	}
	return "pdc_tmp"
}

// dataDirDefault is $PDC_DATA_LOC or ./pdc_data.
func (e *env) dataDirDefault() string {
	if d := e.getenv("PDC_DATA_LOC"); d != "" {
		return d
	}
	return "pdc_data"
}
