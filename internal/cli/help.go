package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// The help of every command and verb is made from the registry (run.go)
// and the command's own flag set: docs/design/0028-command-line.md.

func init() {
	register(command{name: "help", summary: "show a command's usage, verbs, flags and examples", usage: "[COMMAND [VERB]]",
		examples: []string{"pdc help cont", "pdc help stage consume"}, run: runHelp})
	register(command{name: "version", summary: "print pdc's version", usage: "",
		examples: []string{"pdc version"}, run: runVersion})
}

// argKind is what a positional argument names, for completion.
type argKind int

const (
	argNone      argKind = iota
	argContainer         // a container's name
	argObject            // an object's name
	argTag               // a tag of the object or container before it
	argFile              // a local file
	argVerb              // a sub-verb (obj tag put|get|rm|ls)
)

// helpFlag is -h and --help of every flag set: asked is set while
// parsing, and parse shows the help once all flags are read.
type helpFlag struct {
	asked bool
	show  func()
}

func (h *helpFlag) String() string   { return "" }
func (h *helpFlag) IsBoolFlag() bool { return true }
func (h *helpFlag) Set(s string) error {
	h.asked = s != "false"
	return nil
}

func findCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func (c *command) verb(name string) *verb {
	for i := range c.verbs {
		if c.verbs[i].name == name {
			return &c.verbs[i]
		}
	}
	return nil
}

func (c *command) verbNames() string {
	names := make([]string, len(c.verbs))
	for i, v := range c.verbs {
		names[i] = v.name
	}
	return strings.Join(names, ", ")
}

// lookup finds the registry's entry for a flag set's name such as
// "cont create" or "up".
func lookup(name string) (*command, *verb) {
	cmd, vb, _ := strings.Cut(name, " ")
	c := findCommand(cmd)
	if c == nil || vb == "" {
		return c, nil
	}
	return c, c.verb(vb)
}

// usageOf is the usage line of name after "pdc name": the registry's, else
// the synopsis its flag set was made with.
func usageOf(name, synopsis string) string {
	c, v := lookup(name)
	switch {
	case v != nil && v.usage != "":
		return v.usage
	case v == nil && c != nil && c.usage != "" && !strings.Contains(name, " "):
		return c.usage
	}
	return synopsis
}

// dispatch runs the command args[0] with the rest of args; commands with
// verbs are checked and answered here when asked for help.
func (e *env) dispatch(ctx context.Context, args []string) error {
	name := args[0]
	switch name {
	case "-h", "--help", "-help":
		name = "help"
	case "--version":
		name = "version"
	}
	c := findCommand(name)
	if c == nil {
		usage(e.stderr)
		return fmt.Errorf("unknown command %q (pdc help lists them): %w", name, errUsage)
	}
	if len(c.verbs) == 0 {
		return c.run(ctx, e, args[1:])
	}
	args = args[1:]
	if c.defaultVerb != "" && (len(args) == 0 || strings.HasPrefix(args[0], "-") && !isHelpFlag(args[0])) {
		args = append([]string{c.defaultVerb}, args...)
	}
	if len(args) == 0 {
		commandHelp(e.stderr, c)
		return fmt.Errorf("%s: say what to do (%s): %w", c.name, c.verbNames(), errUsage)
	}
	switch args[0] {
	case "-h", "--help", "-help":
		commandHelp(e.stdout, c)
		return nil
	case "help":
		if len(args) == 1 {
			commandHelp(e.stdout, c)
			return nil
		}
		return e.help(ctx, []string{c.name, args[1]})
	}
	if c.verb(args[0]) == nil {
		what := "unknown verb"
		if strings.HasPrefix(args[0], "-") {
			what = "want a verb first, not"
		}
		return fmt.Errorf("%s: %s %q (want %s; pdc help %s): %w", c.name, what, args[0], c.verbNames(), c.name, errUsage)
	}
	return c.run(ctx, e, args)
}

func isHelpFlag(a string) bool { return a == "-h" || a == "--help" || a == "-help" }

// help answers pdc help [CMD [VERB]].
func (e *env) help(ctx context.Context, args []string) error {
	if len(args) == 0 {
		usage(e.stdout)
		return nil
	}
	c := findCommand(args[0])
	if c == nil {
		return fmt.Errorf("help: unknown command %q (pdc help lists them): %w", args[0], errUsage)
	}
	if len(c.verbs) == 0 {
		if len(args) > 1 {
			return fmt.Errorf("help: %s has no verbs: %w", c.name, errUsage)
		}
		return c.run(ctx, e, []string{"--help"})
	}
	if len(args) == 1 {
		commandHelp(e.stdout, c)
		return nil
	}
	if c.verb(args[1]) == nil {
		return fmt.Errorf("help: %s has no verb %q (want %s): %w", c.name, args[1], c.verbNames(), errUsage)
	}
	return c.run(ctx, e, []string{args[1], "--help"})
}

func runHelp(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "help", "[COMMAND [VERB]]")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 2 {
		return fmt.Errorf("help: want a command and at most one verb: %w", errUsage)
	}
	return e.help(ctx, fs.Args())
}

func runVersion(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "version", "")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if err := noArgs(fs, "version"); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "pdc", Version())
	return nil
}

// visible is the registry's commands users see, sorted by name.
func visible() []command {
	var cs []command
	for _, c := range commands {
		if !c.hidden {
			cs = append(cs, c)
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	return cs
}

// usage prints the top-level help: every command, and the verbs of those
// that have them.
func usage(w io.Writer) {
	fmt.Fprintln(w, "pdc: Proactive Data Containers and producer/consumer staging, in Go.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: pdc <command> [verb] [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	cs := visible()
	width := 0
	for _, c := range cs {
		width = max(width, len(c.name))
	}
	for _, c := range cs {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
		if len(c.verbs) > 0 {
			fmt.Fprintf(w, "  %-*s  %s\n", width, "", c.verbNames())
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run `pdc help <command> [verb]` (or pdc <command> [verb] -h) for its usage, flags and examples.")
	fmt.Fprintln(w, "Shell completion: pdc completion bash|zsh|fish.")
}

// commandHelp prints the help of a command with verbs: its verbs and
// examples.
func commandHelp(w io.Writer, c *command) {
	u := c.usage
	if u == "" {
		u = "VERB [flags] [args]"
	}
	fmt.Fprintf(w, "Usage: pdc %s %s\n\n%s\n", c.name, u, capital(c.summary))
	if c.long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.long))
	}
	fmt.Fprintln(w, "\nVerbs:")
	width := 0
	for _, v := range c.verbs {
		width = max(width, len(v.name))
	}
	for _, v := range c.verbs {
		fmt.Fprintf(w, "  %-*s  %s\n", width, v.name, v.summary)
	}
	printExamples(w, c.examples)
	fmt.Fprintf(w, "\nRun `pdc help %s VERB` (or pdc %s VERB -h) for a verb's flags and examples.\n", c.name, c.name)
}

// printHelp prints the help of a command without verbs, or of one verb:
// usage line, summary, examples and flags.
func printHelp(w io.Writer, name, synopsis string, fs *flag.FlagSet) {
	c, v := lookup(name)
	summary, long, examples := "", "", []string(nil)
	switch {
	case v != nil:
		summary, long, examples = v.summary, v.long, v.examples
	case c != nil && !strings.Contains(name, " "):
		summary, long, examples = c.summary, c.long, c.examples
	}
	fmt.Fprintf(w, "Usage: pdc %s %s\n", name, usageOf(name, synopsis))
	if summary != "" {
		fmt.Fprintf(w, "\n%s\n", capital(summary))
	}
	if long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(long))
	}
	printExamples(w, examples)
	fmt.Fprintln(w, "\nFlags:")
	printFlags(w, fs)
}

func printExamples(w io.Writer, examples []string) {
	if len(examples) == 0 {
		return
	}
	fmt.Fprintln(w, "\nExamples:")
	for _, x := range examples {
		fmt.Fprintf(w, "  %s\n", x)
	}
}

// printFlags prints fs's flags but -h and --help, with their defaults.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(*helpFlag); ok {
			return
		}
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		typ, text := flag.UnquoteUsage(f)
		if p, ok := f.Value.(*passFlag); ok {
			typ = p.typ
		}
		line := "  " + dash + f.Name
		if typ != "" {
			line += " " + typ
		}
		if !zeroDefault(f) {
			def := f.DefValue
			if typ == "string" {
				def = fmt.Sprintf("%q", def)
			}
			text += " (default " + def + ")"
		}
		fmt.Fprintf(w, "%s\n        %s\n", line, strings.ReplaceAll(text, "\n", "\n        "))
	})
}

func zeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
