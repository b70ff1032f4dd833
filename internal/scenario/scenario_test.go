package scenario

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func echo(t *testing.T, c *Case) string {
	switch c.Cmd {
	case "upper":
		return strings.ToUpper(c.Input)
	case "args":
		var kv []string
		for k, v := range c.Args {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		return strings.Join(kv, " ")
	}
	t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	return ""
}

func TestRun(t *testing.T) { Run(t, "testdata/echo.txt", echo) }

// A wrong output fails the case, naming its place; -rewrite writes the
// outputs got, keeping the comments and the commands as written.
func TestMismatchAndRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cases.txt")
	src := "# c\n\nupper x=1\nab\n----\nwrong\n\n# tail\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cases, _, err := parse(path)
	if err != nil || len(cases) != 1 || cases[0].Want != "wrong" || cases[0].Pos != path+":3" || cases[0].Arg("x", "") != "1" {
		t.Fatalf("parse: %+v, %v", cases, err)
	}
	*rewrite = true
	defer func() { *rewrite = false }()
	Run(t, path, echo)
	got, err := os.ReadFile(path)
	if want := "# c\n\nupper x=1\nab\n----\nAB\n\n# tail\n"; err != nil || string(got) != want {
		t.Fatalf("rewritten:\n%s\nwant:\n%s", got, want)
	}
}

func TestNoSeparator(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cases.txt")
	if err := os.WriteFile(path, []byte("upper\nab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := parse(path); err == nil || !strings.Contains(err.Error(), "no ---- line") {
		t.Fatalf("parse: %v", err)
	}
}
