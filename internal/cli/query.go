package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/internal/tagindex"
)

func init() {
	register(command{name: "query", summary: "find objects by tag: KEY, KEY=VALUE, ab*=12*, *cd=*34, *bc*=*23*, n=10..20", usage: "[flags] QUERY",
		examples: []string{"pdc query units=kelvin", "pdc query 'run*=4*'", "pdc query --ids step=10..20"}, run: runQuery})
}

func runQuery(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "query", "[flags] QUERY")
	cf := addClientFlags(e, fs)
	idsOnly := fs.Bool("ids", false, "print only the ids, one a line")
	index := fs.Bool("index", false, "use only the DART index (fail if it cannot answer)")
	scan := fs.Bool("scan", false, "scan every metadata server's tags, without the index")
	asJSON := jsonFlag(fs)
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("query: want one query (quote it: pdc query '*bc*=*23*'): %w", errUsage)
	}
	if *index && *scan {
		return fmt.Errorf("query: --index and --scan exclude each other: %w", errUsage)
	}
	var opts []client.QueryOption
	if *index {
		opts = append(opts, client.IndexOnly())
	}
	if *scan {
		opts = append(opts, client.ScanOnly())
	}
	if *idsOnly && *asJSON {
		return fmt.Errorf("query: --ids and --json exclude each other: %w", errUsage)
	}
	if !*idsOnly {
		opts = append(opts, client.WithNames())
	}
	// The query is the user's expression: one that does not parse is
	// a usage error, told before any cluster is asked (Query parses it
	// too, and its error was exit 1, as if the cluster had failed).
	if _, err := tagindex.Parse(fs.Arg(0)); err != nil {
		return fmt.Errorf("%w: %w", err, errUsage)
	}
	c, ctx, done, err := cf.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	ms, err := c.Query(ctx, fs.Arg(0), opts...)
	if err != nil {
		return err
	}
	if *asJSON {
		out := newJSONLines(e.stdout)
		for _, m := range ms {
			if err := out.put(matchJSON{ID: m.ID, IDStr: strconv.FormatUint(m.ID, 10), Name: m.Name}); err != nil {
				return err
			}
		}
		return nil
	}
	if *idsOnly {
		for _, m := range ms {
			fmt.Fprintln(e.stdout, m.ID)
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME")
	for _, m := range ms {
		fmt.Fprintf(tw, "%d\t%s\n", m.ID, m.Name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	noun := "objects"
	if len(ms) == 1 {
		noun = "object"
	}
	fmt.Fprintf(e.stdout, "%d %s\n", len(ms), noun)
	return nil
}
