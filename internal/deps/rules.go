package deps

// Module is the module path every rule is relative to.
const Module = "github.com/pdcgo/pdc"

// A Rule constrains the imports of the packages it names. Paths are
// relative to Module; "." is the module root, a trailing "/..." names a
// package and everything under it. A path whose first element has a dot
// (github.com/cockroachdb/pebble/...) is another module's.
type Rule struct {
	// Packages the rule applies to, and Except those it does not.
	Packages, Except []string
	// Only, when set, lists every package of this module the packages
	// may import directly; anything else of the module is a crossing.
	Only []string
	// Never lists packages they must not import: directly, or through
	// any chain of imports when Transitive is set.
	Never      []string
	Transitive bool
	// NoStd lists standard-library packages they must not import (the
	// pure packages do no I/O).
	NoStd []string
	// Why is printed with a violation.
	Why string
}

// pure packages do no I/O and keep no clock.
var pure = []string{"region", "internal/placement", "internal/tagindex", "internal/limits", "internal/dataquery", "internal/overlay"}

// Rules is the layering of the repository (docs/ARCHITECTURE.md).
var Rules = []Rule{
	{
		Packages: []string{"..."},
		Except:   []string{"cmd/pdc"},
		Never:    []string{"internal/cli/..."},
		Why:      "the command line is a leaf: only cmd/pdc runs it",
	},
	{
		Packages: []string{
			"internal/server", "internal/metaserver/...", "internal/metastore/...", "internal/outbox/...",
			"internal/dataserver", "internal/regionstore", "internal/slots", "internal/staging", "internal/postings",
		},
		Never:      []string{"client/...", "capi/...", "internal/transfer", "internal/bench", "internal/crashloop", "internal/e2e"},
		Transitive: true,
		Why:        "servers never import the client side",
	},
	{
		Packages: []string{"capi/..."},
		Only:     []string{".", "capi", "client", "region", "internal/limits"},
		Why:      "the C ABI is a binding of the public Go client: what it needs, client exports",
	},
	{
		Packages:   []string{"client/...", "internal/transfer", "internal/batch"},
		Except:     []string{"client/clienttest"},
		Never:      []string{"internal/server", "internal/metaserver/...", "internal/metastore/...", "internal/outbox/...", "internal/dataserver", "internal/regionstore", "internal/slots"},
		Transitive: true,
		Why:        "the client speaks to servers over the wire, never through their code",
	},
	{
		Packages:   []string{"internal/metaserver/...", "internal/metastore/...", "internal/outbox/..."},
		Never:      []string{"internal/dataserver", "internal/regionstore", "internal/slots"},
		Transitive: true,
		Why:        "the metadata side does not reach into the data side (they share internal/overlay)",
	},
	{
		Packages:   []string{"internal/dataserver", "internal/regionstore"},
		Never:      []string{"internal/metaserver/...", "internal/metastore/...", "internal/outbox/...", "internal/staging"},
		Transitive: true,
		Why:        "the data side does not reach into the metadata side",
	},
	{
		Packages: []string{"internal/metaserver/...", "internal/metastore/...", "internal/outbox/...", "internal/dataserver", "internal/regionstore", "internal/slots", "internal/staging"},
		Never:    []string{"internal/server"},
		Why:      "internal/server composes the services; they do not know it",
	},
	{
		Packages: pure,
		Only:     append([]string{".", "internal/wire"}, pure...),
		NoStd:    []string{"os", "os/exec", "net", "net/http", "syscall", "io/fs", "path/filepath", "time", "log", "log/slog", "sync/atomic"},
		Why:      "pure packages do no I/O, keep no clock and depend only on other pure packages",
	},
	{
		Packages:   pure,
		Never:      []string{"internal/vfs", "github.com/cockroachdb/pebble/..."},
		Transitive: true,
		Why:        "pure packages reach no store: the tag index's posting store is internal/postings",
	},
}

// ImportedOnlyBy lists, per package, every package allowed to import it:
// the services are composed in one place.
var ImportedOnlyBy = map[string][]string{
	"internal/metaserver": {"internal/server"},
	"internal/dataserver": {"internal/server"},
	"internal/slots":      {"internal/server"},
	"internal/server":     {"internal/cli", "client/clienttest"},
	"internal/transfer":   {"client"},
	"internal/batch":      {"client", "internal/transfer"},
}
