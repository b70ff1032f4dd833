package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/pdcgo/pdc/client"
)

// envNamespace is the staging namespace of the environment: ours, else
// DYAD's, as libpdc reads them.
func envNamespace(e *env) string {
	if ns := e.getenv(client.EnvNamespace); ns != "" {
		return ns
	}
	return e.getenv("DYAD_KVS_NAMESPACE")
}

// stagedJSON is a line of pdc stage ls --json and stage lookup --json; its
// field names are stable.
type stagedJSON struct {
	Path      string `json:"path"`
	Namespace string `json:"namespace"`
	Version   uint64 `json:"version"`
	Size      int64  `json:"size"`
	Owner     int    `json:"owner"` // the rank of the server that serves it
	Host      string `json:"host"`
	CRC32C    string `json:"crc32c"`
	Produced  string `json:"produced"` // RFC 3339, nanoseconds
}

func newStagedJSON(r client.StagedFile) stagedJSON {
	return stagedJSON{Path: r.Path, Namespace: r.Namespace, Version: r.Version, Size: r.Size, Owner: r.Owner.Rank,
		Host: r.Host, CRC32C: fmt.Sprintf("%08x", r.CRC), Produced: r.Produced.UTC().Format(time.RFC3339Nano)}
}

func runStageList(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "stage ls", "[flags] [PREFIX]")
	sf := addStageFlags(e, fs)
	asJSON := fs.Bool("json", false, "print one JSON object per file and line: path, namespace, version, size, owner, host, crc32c, produced")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("stage ls: at most one PREFIX: %w", errUsage)
	}
	c, ctx, done, err := sf.connect(ctx)
	if err != nil {
		return fmt.Errorf("stage ls: %w", err)
	}
	defer done()
	enc := json.NewEncoder(e.stdout)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "PATH\tVERSION\tSIZE\tOWNER\tHOST\tPRODUCED")
	}
	for r, err := range c.AllStaged(ctx, fs.Arg(0)) {
		if err != nil {
			tw.Flush()
			return fmt.Errorf("stage ls: %w", err)
		}
		if *asJSON {
			if err := enc.Encode(newStagedJSON(r)); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", r.Path, r.Version, r.Size, r.Owner.Label(), r.Host, r.Produced.Format(time.RFC3339Nano))
	}
	return tw.Flush()
}

func runStageRemove(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "stage rm", "[flags] PATH... | --prefix PREFIX | --all")
	sf := addStageFlags(e, fs)
	prefix := fs.String("prefix", "", "remove every file whose path starts with this `prefix` (a plain string: end it with / for a directory)")
	all := fs.Bool("all", false, "remove every file of the namespace")
	if help, err := parse(fs, args); help || err != nil {
		return err
	}
	n := 0
	for _, set := range []bool{fs.NArg() > 0, *prefix != "", *all} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("stage rm: name the files, or give --prefix or --all (one of them): %w", errUsage)
	}
	c, ctx, done, err := sf.connect(ctx)
	if err != nil {
		return fmt.Errorf("stage rm: %w", err)
	}
	defer done()
	removed := 0
	if fs.NArg() > 0 {
		for _, p := range fs.Args() {
			var k int
			k, err = c.RemoveStaged(ctx, p)
			removed += k
			if err != nil {
				break
			}
		}
	} else {
		removed, err = c.RemoveStagedPrefix(ctx, *prefix)
	}
	ns := "the default namespace"
	if c.Namespace() != "" {
		ns = fmt.Sprintf("namespace %q", c.Namespace())
	}
	fmt.Fprintf(e.stdout, "removed %s from %s\n", count(removed, "staged record", "staged records"), ns)
	if err != nil {
		return fmt.Errorf("stage rm: %w", err)
	}
	return nil
}
