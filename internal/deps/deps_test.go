package deps

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

type listed struct {
	ImportPath string
	Imports    []string
}

// list returns every package of the module with its non-test imports.
func list(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", Module+"/...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs[p.ImportPath] = p.Imports
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages of %s; want the whole module", len(pkgs), Module)
	}
	return pkgs
}

// rel returns an import path relative to the module ("." for its root),
// or the path itself for a package of another module or the standard
// library, and whether it is the module's.
func rel(path string) (string, bool) {
	if path == Module {
		return ".", true
	}
	if r, ok := strings.CutPrefix(path, Module+"/"); ok {
		return r, true
	}
	return path, false
}

// matches reports whether p (as rel returns it) is named by pattern.
func matches(pattern, p string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchesAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return matches(pat, p) })
}

func (r Rule) applies(p string) bool { return matchesAny(r.Packages, p) && !matchesAny(r.Except, p) }

// chain returns a chain of imports from pkg to a package that forbidden
// names, through the module's packages, or nil.
func chain(pkgs map[string][]string, pkg string, forbidden func(string) bool) []string {
	prev := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for _, n := range pkgs[q] {
			if _, seen := prev[n]; seen {
				continue
			}
			prev[n] = q
			if r, _ := rel(n); forbidden(r) {
				var path []string
				for c := n; c != ""; c = prev[c] {
					r, _ := rel(c)
					path = append([]string{r}, path...)
				}
				return path
			}
			queue = append(queue, n)
		}
	}
	return nil
}

func TestImports(t *testing.T) {
	pkgs := list(t)
	for pkg, imports := range pkgs {
		from, _ := rel(pkg)
		for _, r := range Rules {
			if !r.applies(from) {
				continue
			}
			// A package may import its own subpackages.
			never := func(p string) bool {
				return matchesAny(r.Never, p) && p != from && !strings.HasPrefix(p, from+"/")
			}
			if r.Transitive {
				if c := chain(pkgs, pkg, never); c != nil {
					t.Errorf("%s: %s", strings.Join(c, " -> "), r.Why)
				}
			}
			for _, imp := range imports {
				to, own := rel(imp)
				switch {
				case own && r.Only != nil && !matchesAny(r.Only, to):
					t.Errorf("%s imports %s: %s (it may import only %v)", from, to, r.Why, r.Only)
				case !r.Transitive && never(to):
					t.Errorf("%s imports %s: %s", from, to, r.Why)
				case !own && slices.Contains(r.NoStd, imp):
					t.Errorf("%s imports %s: %s", from, imp, r.Why)
				}
			}
		}
		for _, imp := range imports {
			to, own := rel(imp)
			if allowed, ok := ImportedOnlyBy[to]; own && ok && !slices.Contains(allowed, from) {
				t.Errorf("%s imports %s, which only %v may import", from, to, allowed)
			}
		}
	}
}

// TestRulesName checks that every package of the module a rule names
// exists, so that a move or a rename cannot leave a rule guarding nothing.
func TestRulesName(t *testing.T) {
	var have []string
	for p := range list(t) {
		r, _ := rel(p)
		have = append(have, r)
	}
	check := func(what, pattern string) {
		if first, _, _ := strings.Cut(pattern, "/"); strings.Contains(first, ".") && first != "." {
			return // another module's
		}
		if !slices.ContainsFunc(have, func(p string) bool { return matches(pattern, p) }) {
			t.Errorf("%s names %s, which is no package of the module", what, pattern)
		}
	}
	for _, r := range Rules {
		for _, lists := range [][]string{r.Packages, r.Except, r.Only, r.Never} {
			for _, p := range lists {
				check("rule "+r.Why, p)
			}
		}
	}
	for p, by := range ImportedOnlyBy {
		for _, q := range append([]string{p}, by...) {
			check("ImportedOnlyBy", q)
		}
	}
}

// The checker finds what it must: a forbidden import through a chain,
// and a pattern's reach.
func TestChecker(t *testing.T) {
	for _, c := range []struct {
		pattern, p string
		want       bool
	}{
		{"...", "client", true},
		{"client/...", "client", true},
		{"client/...", "client/clienttest", true},
		{"client/...", "clientx", false},
		{"client", "client/clienttest", false},
		{".", ".", true},
		{"github.com/cockroachdb/pebble/...", "github.com/cockroachdb/pebble/v2", true},
	} {
		if got := matches(c.pattern, c.p); got != c.want {
			t.Errorf("matches(%q, %q) = %v, want %v", c.pattern, c.p, got, c.want)
		}
	}
	pkgs := map[string][]string{
		Module + "/a": {Module + "/b", "fmt"},
		Module + "/b": {Module + "/c"},
		Module + "/c": {"github.com/cockroachdb/pebble/v2"},
	}
	got := chain(pkgs, Module+"/a", func(p string) bool { return matches("github.com/cockroachdb/pebble/...", p) })
	if want := []string{"a", "b", "c", "github.com/cockroachdb/pebble/v2"}; !slices.Equal(got, want) {
		t.Errorf("chain = %v, want %v", got, want)
	}
	if got := chain(pkgs, Module+"/b", func(p string) bool { return p == "a" }); got != nil {
		t.Errorf("chain upward = %v, want none", got)
	}
}

// TestArchitectureNamesEveryPackage keeps docs/ARCHITECTURE.md's package
// table whole: every package of the module is named in it, in backquotes,
// or falls under an entry "`dir/*`".
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `") {
			table.WriteString(line + "\n")
		}
	}
	named := table.String()
	for path := range list(t) {
		p, _ := rel(path)
		if strings.Contains(named, "`"+p+"`") || strings.Contains(named, "`"+strings.TrimSuffix(p, "/"+pathBase(p))+"/*`") {
			continue
		}
		t.Errorf("docs/ARCHITECTURE.md's package table does not name %s", p)
	}
}

func pathBase(p string) string { return p[strings.LastIndex(p, "/")+1:] }
