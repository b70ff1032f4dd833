package scenario

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "write the outputs tests get into their scenario files")

// Case is one case of a file.
type Case struct {
	Pos   string            // file:line of its command, for messages
	Cmd   string            // the command's first word
	Args  map[string]string // its key=value words (a bare word maps to "")
	Input string            // the lines between the command and "----"
	Want  string            // the lines after "----"
	order []string          // the argument keys as written
}

// Arg returns the value of argument key, or def if the case has none.
func (c *Case) Arg(key, def string) string {
	if v, ok := c.Args[key]; ok {
		return v
	}
	return def
}

// Run runs every case of path through f and checks its output. With
// -rewrite it writes the outputs into path instead.
func Run(t *testing.T, path string, f func(t *testing.T, c *Case) string) {
	t.Helper()
	cases, comments, err := parse(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for i, c := range cases {
		got := strings.TrimRight(f(t, c), "\n")
		if *rewrite {
			out.WriteString(comments[i])
			fmt.Fprintf(&out, "%s\n%s----\n%s\n\n", c.command(), withNewline(c.Input), got)
			continue
		}
		if got != c.Want {
			t.Errorf("%s: %s %q:\ngot:\n%s\nwant:\n%s", c.Pos, c.Cmd, c.Input, got, c.Want)
		}
	}
	if *rewrite {
		out.WriteString(comments[len(cases)])
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func withNewline(s string) string {
	if s == "" {
		return ""
	}
	return s + "\n"
}

// command is the case's command line as written.
func (c *Case) command() string {
	words := []string{c.Cmd}
	for _, k := range c.order {
		if v := c.Args[k]; v != "" {
			words = append(words, k+"="+v)
		} else {
			words = append(words, k)
		}
	}
	return strings.Join(words, " ")
}

// parse reads path's cases, and the comments before each case and after
// the last (len(cases)+1 of them).
func parse(path string) ([]*Case, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var (
		cases    []*Case
		comments []string
		comment  strings.Builder
		cur      *Case
		in, want []string
		inWant   bool
	)
	end := func() {
		if cur != nil {
			cur.Input, cur.Want = strings.Join(in, "\n"), strings.Join(want, "\n")
			cases = append(cases, cur)
			comments = append(comments, comment.String())
			comment.Reset()
		}
		cur, in, want, inWant = nil, nil, nil, false
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && (line == "" || strings.HasPrefix(line, "#")):
			comment.WriteString(line + "\n")
		case cur == nil:
			cur = newCase(fmt.Sprintf("%s:%d", path, n), line)
		case line == "" && inWant:
			end()
		case line == "----" && !inWant:
			inWant = true
		case inWant:
			want = append(want, line)
		default:
			in = append(in, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	if cur != nil && !inWant {
		return nil, nil, fmt.Errorf("%s: case has no ---- line", cur.Pos)
	}
	end()
	comments = append(comments, comment.String())
	return cases, comments, nil
}

func newCase(pos, line string) *Case {
	words := strings.Fields(line)
	c := &Case{Pos: pos, Cmd: words[0], Args: map[string]string{}}
	for _, w := range words[1:] {
		k, v, _ := strings.Cut(w, "=")
		c.Args[k] = v
		c.order = append(c.order, k)
	}
	return c
}
