package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/cluster"
)

// Shell completion: the scripts ask `pdc __complete WORDS...` (the words
// after pdc, the last being the one completed) and offer what it prints,
// one candidate a line; when it prints nothing they complete file names.
// All the logic is here, from the registry, so three shells share it.

func init() {
	register(command{name: "completion", summary: "print the shell completion script for bash, zsh or fish", usage: "bash|zsh|fish",
		examples: []string{"source <(pdc completion bash)", "pdc completion zsh > \"${fpath[1]}/_pdc\"", "pdc completion fish > ~/.config/fish/completions/pdc.fish"},
		run:      runCompletion})
	register(command{name: "__complete", summary: "candidates for the word being completed (the completion scripts ask it)", hidden: true, run: runComplete})
}

// completeDeadline bounds the questions to the cluster: a shell waits on
// them.
const completeDeadline = time.Second

// completeMax bounds the names asked of the cluster.
const completeMax = 1000

const bashScript = `# pdc completion for bash: source <(pdc completion bash)
_pdc() {
    local IFS=$'\n' c
    local -a cands
    cands=($(pdc __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
    COMPREPLY=()
    for c in "${cands[@]}"; do
        COMPREPLY+=("$(printf '%q' "$c")")
    done
    if [ ${#COMPREPLY[@]} -eq 0 ]; then
        compopt -o default 2>/dev/null
    fi
}
complete -F _pdc pdc
`

const zshScript = `#compdef pdc
# pdc completion for zsh: pdc completion zsh > "${fpath[1]}/_pdc"
_pdc() {
    local -a cands
    cands=("${(@f)$(pdc __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    if (( ${#cands} )) && [[ -n ${cands[1]} ]]; then
        compadd -- $cands
    else
        _files
    fi
}
if [ "$funcstack[1]" = "_pdc" ]; then
    _pdc "$@"
else
    compdef _pdc pdc
fi
`

const fishScript = `# pdc completion for fish: pdc completion fish > ~/.config/fish/completions/pdc.fish
function __pdc_complete
    set -l args (commandline -opc)
    set -e args[1]
    set -l cands (pdc __complete $args (commandline -ct) 2>/dev/null)
    if test (count $cands) -eq 0
        __fish_complete_path (commandline -ct)
    else
        printf '%s\n' $cands
    end
end
complete -c pdc -f -a '(__pdc_complete)'
`

func runCompletion(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "completion", "bash|zsh|fish")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("completion: name the shell: bash, zsh or fish: %w", errUsage)
	}
	scripts := map[string]string{"bash": bashScript, "zsh": zshScript, "fish": fishScript}
	s, ok := scripts[fs.Arg(0)]
	if !ok {
		return fmt.Errorf("completion: unknown shell %q (bash, zsh or fish): %w", fs.Arg(0), errUsage)
	}
	_, err := io.WriteString(e.stdout, s)
	return err
}

func runComplete(ctx context.Context, e *env, args []string) error {
	for _, c := range complete(ctx, e, args) {
		fmt.Fprintln(e.stdout, c)
	}
	return nil
}

// complete returns the candidates for the last of words, the words after
// pdc, that begin with it.
func complete(ctx context.Context, e *env, words []string) []string {
	if len(words) == 0 {
		words = []string{""}
	}
	cur := words[len(words)-1]
	if len(words) == 1 {
		var names []string
		for _, c := range visible() {
			names = append(names, c.name)
		}
		return withPrefix(names, cur)
	}
	c := findCommand(words[0])
	if c == nil || c.hidden {
		return nil
	}
	rest, kinds, name := words[1:], c.args, c.name
	var lead []string // what run takes before the rest: the verb
	if len(c.verbs) > 0 {
		if len(words) == 2 {
			var names []string
			for _, v := range c.verbs {
				names = append(names, v.name)
			}
			return withPrefix(names, cur)
		}
		v := c.verb(words[1])
		if v == nil {
			return nil
		}
		rest, kinds, name, lead = words[2:], v.args, c.name+" "+v.name, []string{v.name}
	}
	fs := flagSetOf(e, c, lead)
	if fs == nil {
		return nil
	}
	return completeRest(ctx, e, fs, rest, kinds, name)
}

// completeRest completes the last of rest, the words after a command's
// name (and verb) of flag set fs, whose positional arguments are kinds.
func completeRest(ctx context.Context, e *env, fs *flag.FlagSet, rest []string, kinds []argKind, name string) []string {
	cur := rest[len(rest)-1]
	if strings.HasPrefix(cur, "-") {
		var names []string
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name != "h" && f.Name != "help" {
				names = append(names, "--"+f.Name)
			}
		})
		return withPrefix(names, cur)
	}
	// Which positional argument cur is, and the flags given before it.
	var pos []string
	given := map[string]string{}
	for i := 0; i < len(rest)-1; i++ {
		a := rest[i]
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		fname, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(fname)
		if f == nil || hasVal || isBool(f) {
			given[fname] = val
			continue
		}
		if i+1 == len(rest)-1 { // cur is this flag's value
			if fname == "cont" {
				return withPrefix(askCluster(ctx, e, given, containerNames), cur)
			}
			return nil
		}
		given[fname] = rest[i+1]
		i++
	}
	if len(kinds) == 0 {
		return nil
	}
	switch kinds[min(len(pos), len(kinds)-1)] {
	case argVerb:
		return withPrefix([]string{"put", "get", "rm", "ls"}, cur)
	case argContainer:
		return withPrefix(askCluster(ctx, e, given, containerNames), cur)
	case argObject:
		return withPrefix(askCluster(ctx, e, given, objectNames), cur)
	case argTag:
		// cont tag get NAME KEY, obj tag rm NAME KEY: the tags of NAME.
		if len(pos) != 2 || pos[0] == "put" || pos[0] == "ls" {
			return nil
		}
		onCont := strings.HasPrefix(name, "cont ")
		return withPrefix(askCluster(ctx, e, given, func(ctx context.Context, cl *client.Client) []string {
			return tagNames(ctx, cl, onCont, pos[1])
		}), cur)
	}
	return nil
}

// tagNames are the tags of the container (onCont) or object named name.
func tagNames(ctx context.Context, cl *client.Client, onCont bool, name string) []string {
	var t tagger
	if onCont {
		ct, err := cl.OpenContainer(ctx, name)
		if err != nil {
			return nil
		}
		t = ct
	} else {
		o, err := cl.OpenObject(ctx, name)
		if err != nil {
			return nil
		}
		defer o.Close(ctx)
		t = o
	}
	tags, _ := t.Tags(ctx)
	return tags
}

// flagSetOf is the flag set of command c (with lead, its verb, before
// the flags), read without running it.
func flagSetOf(e *env, c *command, lead []string) *flag.FlagSet {
	var got *flag.FlagSet
	sub := &env{stdout: io.Discard, stderr: io.Discard, getenv: e.getenv, flagSink: func(fs *flag.FlagSet) { got = fs }}
	_ = c.run(context.Background(), sub, append(slices.Clone(lead), "--help"))
	return got
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func withPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// askCluster asks the cluster of the command line's --tmpdir (else
// $PDC_TMPDIR) with a short deadline; with none running, it asks nothing.
func askCluster(ctx context.Context, e *env, given map[string]string, ask func(context.Context, *client.Client) []string) []string {
	tmpdir := e.tmpDirDefault()
	if d, ok := given["tmpdir"]; ok && d != "" {
		tmpdir = d
	}
	if _, err := os.Stat(filepath.Join(tmpdir, cluster.ListFile)); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, completeDeadline)
	defer cancel()
	opts := []client.Option{client.WithTmpDir(tmpdir)}
	if s := given["secret-file"]; s != "" {
		opts = append(opts, client.WithSecretFile(s))
	}
	cl, err := client.Connect(ctx, opts...)
	if err != nil {
		return nil
	}
	defer cl.Close()
	return ask(ctx, cl)
}

func containerNames(ctx context.Context, cl *client.Client) []string {
	var names []string
	for ci, err := range cl.AllContainers(ctx) {
		if err != nil || len(names) >= completeMax {
			break
		}
		names = append(names, ci.Name)
	}
	return names
}

// objectNames are the names of the objects of every container, as many
// as completeMax.
func objectNames(ctx context.Context, cl *client.Client) []string {
	seen := map[string]bool{}
	var names []string
	for _, cn := range containerNames(ctx, cl) {
		ct, err := cl.OpenContainer(ctx, cn)
		if err != nil {
			continue
		}
		for o, err := range ct.All(ctx) {
			if err != nil || len(names) >= completeMax {
				break
			}
			if !seen[o.Name] {
				seen[o.Name] = true
				names = append(names, o.Name)
			}
		}
		if len(names) >= completeMax || ctx.Err() != nil {
			break
		}
	}
	slices.Sort(names)
	return names
}
