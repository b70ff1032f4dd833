package pdc_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// importRule forbids package from to import package to: directly when
// direct is set, else by any path through the module's packages.
type importRule struct {
	from, to string
	direct   bool
	why      string
}

const module = "github.com/pdcgo/pdc/"

// importRules are the boundaries kept by this test rather than by habit
// (issue 27). Add a rule when a boundary is drawn; never allow-list a
// crossing, remove it.
var importRules = []importRule{
	{from: "internal/metaserver", to: "internal/regionstore",
		why: "the metadata and data servers share region overlap math through internal/overlay"},
	{from: "internal/cli", to: "internal/metaserver", direct: true,
		why: "durability settings live in internal/metastore; cli starts servers through internal/server"},
	{from: "internal/tagindex", to: "github.com/cockroachdb/pebble/v2",
		why: "tagindex is the pure core of search; the posting store is internal/postings"},
	{from: "internal/overlay", to: "github.com/pdcgo/pdc/internal/vfs",
		why: "overlay is pure"},
	{from: "github.com/pdcgo/pdc/client", to: "internal/metaserver", direct: true,
		why: "the limits a client checks first live in internal/limits; it reaches servers only by the wire"},
	{from: "internal/placement", to: "internal/rpc",
		why: "placement is pure: the client and the servers call it, it asks no one"},
}

// TestImportRules fails when a package imports what a rule forbids.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	full := func(p string) string {
		if strings.HasPrefix(p, "internal/") {
			return module + p
		}
		return p
	}
	for _, r := range importRules {
		from, to := full(r.from), full(r.to)
		// Every package under from, as under "internal/tagindex/...".
		for p := range imports {
			if p != from && !strings.HasPrefix(p, from+"/") {
				continue
			}
			if path := importPath(imports, p, to, r.direct); path != nil {
				t.Errorf("%s imports %s (%s): %s", p, to, strings.Join(path, " -> "), r.why)
			}
		}
	}
}

// importPath returns a chain of imports from p to target, or nil.
func importPath(imports map[string][]string, p, target string, direct bool) []string {
	if direct {
		if slices.Contains(imports[p], target) {
			return []string{p, target}
		}
		return nil
	}
	prev := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for _, n := range imports[q] {
			if _, seen := prev[n]; seen {
				continue
			}
			prev[n] = q
			if n == target {
				var path []string
				for c := n; c != ""; c = prev[c] {
					path = append([]string{c}, path...)
				}
				return path
			}
			queue = append(queue, n)
		}
	}
	return nil
}
