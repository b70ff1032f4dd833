package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every command and every verb answers -h, --help and pdc help with its
// usage line, at least one example and (but a command with verbs) its
// flags, exit 0, without a cluster: the tmpdir is empty and stays so
// (issue 32, item 1). A command that connected first would fail here.
func TestHelpEverywhere(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PDC_TMPDIR", dir)
	t.Setenv("PDC_DATA_LOC", filepath.Join(dir, "data"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := 0
	for _, c := range visible() {
		paths := [][]string{{c.name}}
		for _, v := range c.verbs {
			paths = append(paths, []string{c.name, v.name})
		}
		for _, p := range paths {
			forms := [][]string{append(append([]string{}, p...), "-h"), append(append([]string{}, p...), "--help"), append([]string{"help"}, p...)}
			for _, args := range forms {
				n++
				var out, errb bytes.Buffer
				if err := Run(ctx, args, &out, &errb); err != nil || errb.Len() > 0 {
					t.Errorf("pdc %s: err %v, stderr %q; want help and exit 0", strings.Join(args, " "), err, errb.String())
					continue
				}
				s := out.String()
				if want := "Usage: pdc " + strings.Join(p, " ") + " "; !strings.HasPrefix(s, want) {
					t.Errorf("pdc %s: help does not begin with %q:\n%s", strings.Join(args, " "), want, s)
				}
				_, ex, ok := strings.Cut(s, "\nExamples:\n")
				if !ok || !strings.Contains(strings.Split(ex, "\n\n")[0], "pdc "+c.name) {
					t.Errorf("pdc %s: help has no example of pdc %s:\n%s", strings.Join(args, " "), c.name, s)
				}
				if verbs := len(p) == 1 && len(c.verbs) > 0; verbs != strings.Contains(s, "\nVerbs:\n") || !verbs && !strings.Contains(s, "\nFlags:\n") {
					t.Errorf("pdc %s: want verbs listed for a command with verbs, else flags:\n%s", strings.Join(args, " "), s)
				}
			}
		}
	}
	if n < 100 {
		t.Errorf("walked %d help forms; the registry lost its commands or verbs", n)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		t.Errorf("asking for help touched the tmpdir: %v %v", ents, err)
	}
}

// The top-level help lists every command and every verb, the summaries in
// one column; unknown commands and verbs are usage errors that name what
// is known.
func TestTopLevelHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if err := Run(context.Background(), []string{"--help"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	_, list, _ := strings.Cut(s, "Commands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	col := -1
	for _, line := range strings.Split(list, "\n") {
		i := 2
		for i < len(line) && line[i] != ' ' { // the command's name; none on a line of verbs
			i++
		}
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if col == -1 {
			col = i
		}
		if i != col {
			t.Errorf("misaligned line (text at column %d, not %d): %q", i, col, line)
		}
	}
	for _, c := range visible() {
		if !strings.Contains(list, "  "+c.name+" ") {
			t.Errorf("top-level help does not list %s", c.name)
		}
		for _, v := range c.verbs {
			if !strings.Contains(list, v.name) {
				t.Errorf("top-level help does not list %s %s", c.name, v.name)
			}
		}
	}
	for _, args := range [][]string{{"nosuch"}, {"cont", "nosuch"}, {"cont"}, {"help", "cont", "nosuch"}} {
		err := Run(context.Background(), args, &out, &errb)
		if ExitCode(err) != 2 {
			t.Errorf("pdc %s: %v, exit %d; want a usage error", strings.Join(args, " "), err, ExitCode(err))
		}
		if args[0] == "cont" && !strings.Contains(err.Error(), "create, ls, info, rm") {
			t.Errorf("pdc %s: %v; want the verbs named", strings.Join(args, " "), err)
		}
	}
	if err := Run(context.Background(), []string{"cont", "create", "--nosuch"}, &out, &errb); !errors.Is(err, errUsage) {
		t.Errorf("an unknown flag: %v; want a usage error", err)
	}
}

// Every flag of pdc server is a flag of pdc up, but the few up sets per
// rank itself (upServerOnly), each of which is a server flag (issue 32,
// item 5).
func TestUpTakesEveryServerFlag(t *testing.T) {
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	var up *flag.FlagSet
	sub := *e
	sub.flagSink = func(fs *flag.FlagSet) { up = fs }
	if err := runUp(context.Background(), &sub, []string{"--help"}); err != nil || up == nil {
		t.Fatalf("up --help: %v", err)
	}
	srv := serverFlagSet(e)
	n := 0
	srv.VisitAll(func(f *flag.Flag) {
		n++
		if up.Lookup(f.Name) == nil && upServerOnly[f.Name] == "" {
			t.Errorf("pdc server --%s cannot be set through pdc up", f.Name)
		}
	})
	if n < 20 {
		t.Fatalf("pdc server has %d flags: its flag set was not read", n)
	}
	for name := range upServerOnly {
		if srv.Lookup(name) == nil {
			t.Errorf("upServerOnly names --%s, which pdc server does not have", name)
		}
	}
	// Given to up, they reach every server; not given, up passes nothing.
	_ = up.Parse([]string{"--max-conns", "100", "--stall-timeout=5s", "--debug-addr", "127.0.0.1:7000"})
	o := upOptions{n: 2, debugAddr: "127.0.0.1:7000"}
	o.pass = passedArgs(up)
	args := strings.Join(append(serverArgs(o), rankArgs(o, 1)...), " ")
	for _, want := range []string{"--max-conns=100", "--stall-timeout=5s", "--debug-addr 127.0.0.1:7001"} {
		if !strings.Contains(args, want) {
			t.Errorf("server args %q lack %q", args, want)
		}
	}
}

// Completion of commands, verbs, flags and tag verbs comes from the
// registry and the flag sets; names asked of a cluster are nothing when
// none runs (issue 32, item 2). internal/e2e/commands completes names
// from a running cluster.
func TestComplete(t *testing.T) {
	t.Setenv("PDC_TMPDIR", t.TempDir())
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: os.Getenv}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"c"}, "checkpoint completion cont"},
		{[]string{"cont", ""}, "create ls info rm tag add remove"},
		{[]string{"bench", "pr"}, "preload"},
		{[]string{"cont", "rm", "--r"}, "--recursive"},
		{[]string{"obj", "tag", ""}, "put get rm ls"},
		{[]string{"obj", "tag", "--time-step", "3", "g"}, "get"},
		{[]string{"stage", "consume", "--ne"}, "--newer-than"},
		{[]string{"up", "--max-conns"}, "--max-conns --max-conns-per-peer"},
		{[]string{"obj", "create", "--cont", ""}, ""},
		{[]string{"obj", "info", ""}, ""},
		{[]string{"put", "x", ""}, ""},
		{[]string{"nosuch", ""}, ""},
	} {
		if got := strings.Join(complete(context.Background(), e, tc.words), " "); got != tc.want {
			t.Errorf("complete %q: %q, want %q", tc.words, got, tc.want)
		}
	}
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"completion", "bash"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		checkBashCompletion(t, bash, out.String())
	}
}

// checkBashCompletion runs the bash script's function against a pdc that
// offers a name with a space: it must come back as one word, escaped.
func checkBashCompletion(t *testing.T, bash, script string) {
	t.Helper()
	cmd := exec.Command(bash, "-c", script+`
pdc() { printf 'with space\nplain\n'; }
COMP_WORDS=(pdc obj info ""); COMP_CWORD=3
_pdc
printf '%s|' "${COMPREPLY[@]}"`)
	b, err := cmd.CombinedOutput()
	if err != nil || string(b) != `with\ space|plain|` {
		t.Errorf("bash completion of a name with a space: %v, %q; want %q", err, b, `with\ space|plain|`)
	}
}
