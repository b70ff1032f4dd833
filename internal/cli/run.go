package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
	hidden  bool
}

// env is what every subcommand gets: where to write and how to read the
// process environment (injectable for tests).
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// benchSink, if set, takes benchmarks' figures instead of their
	// printing them (bench all).
	benchSink benchSink
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
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		usage(stdout)
		return nil
	case "version", "--version":
		fmt.Fprintln(stdout, "pdc", Version())
		return nil
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, e, args[1:])
		}
	}
	usage(stderr)
	return fmt.Errorf("unknown command %q: %w", name, errUsage)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "pdc: Proactive Data Containers and producer/consumer staging, in Go.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: pdc <command> [flags]")
	fmt.Fprintln(w)
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		if !c.hidden {
			fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run `pdc <command> -h` for a command's flags.")
}

// flags returns a flag set for a subcommand that reports errors as usage
// errors instead of exiting.
func flags(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("pdc "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: pdc %s %s\n\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args; -h is not an error.
func parse(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(flagsFirst(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, fmt.Errorf("%s: %v: %w", fs.Name(), err, errUsage)
	}
	return false, nil
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
